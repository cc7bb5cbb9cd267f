#!/usr/bin/env bash
# Runs every check and test of fireonce: gofmt, go vet, and go test -race on
# the real Firestore emulator, which this script starts on free loopback ports
# (unless FIRESTORE_EMULATOR_HOST points at one already) and always stops, and
# on a real redis-server (installed from the Debian packages when missing,
# started the same way unless FIREONCE_REDIS_ADDR or REDIS_URL is set).
#
#   ./scripts/test.sh            everything
#   ./scripts/test.sh ./shared/... -run TestGuard   extra args go to go test
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/emulator.sh
. scripts/lib/emulator.sh
# shellcheck source=lib/redis.sh
. scripts/lib/redis.sh

fireonce_require_go

cleanup() {
  local rc=$?
  fireonce_stop_emulator
  fireonce_stop_redis
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${FIRESTORE_EMULATOR_HOST:-}" ]; then
  fireonce_start_emulator
else
  printf 'fireonce: using the Firestore emulator at FIRESTORE_EMULATOR_HOST=%s\n' "$FIRESTORE_EMULATOR_HOST" >&2
fi
# The Redis store's restart test runs its own redis-server even when a shared
# one is given, so the binary is always required.
fireonce_require_redis
if [ -z "${FIREONCE_REDIS_ADDR:-}" ] && [ -z "${REDIS_URL:-}" ]; then
  fireonce_start_redis
fi

echo "--- gofmt" >&2
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  fireonce_die "gofmt would change: $unformatted"
fi

echo "--- go vet" >&2
go vet ./...

echo "--- go test" >&2
if [ $# -gt 0 ]; then
  go test -race -count=1 "$@"
  exit 0
fi
go test -race -count=1 ./...

# Each fuzz target runs briefly on top of its seed corpus (which go test above
# already ran as plain tests).
echo "--- go test -fuzz" >&2
for target in ./shared/firestoreevent:FuzzDecode; do
  go test -run='^$' -fuzz="^${target#*:}\$" -fuzztime="${FIREONCE_FUZZTIME:-10s}" "${target%%:*}"
done

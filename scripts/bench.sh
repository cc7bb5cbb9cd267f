#!/usr/bin/env bash
# Runs fireonce's benchmarks (package ./functions/internal/bench) on a Firestore emulator and a
# redis-server that this script starts on free loopback ports and always
# stops. Prints one Markdown table and writes the same figures as JSON.
#
#   ./scripts/bench.sh                           defaults, JSON to .bench/latest.json
#   ./scripts/bench.sh -out /tmp/run.json -samples 800   flags go to ./functions/cmd/bench
#
# Every case runs in one process and one run, interleaved with its baseline,
# so the ratios hold within the run. The figures come from the emulator on
# loopback and say nothing about production.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/emulator.sh
. scripts/lib/emulator.sh
# shellcheck source=lib/redis.sh
. scripts/lib/redis.sh

fireonce_require_go

bindir=$(mktemp -d)
cleanup() {
  local rc=$?
  fireonce_stop_emulator
  fireonce_stop_redis
  rm -rf "$bindir"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Build first, so compiling does not compete with the emulator's start-up
# or with the measurements.
bin=$bindir/bench
go build -o "$bin" ./functions/cmd/bench

# This script's own servers, never ones from the environment: the figures
# must not depend on someone else's load or data.
unset FIRESTORE_EMULATOR_HOST REDIS_URL FIREONCE_REDIS_ADDR FUNCTION_TARGET
fireonce_start_emulator
fireonce_start_redis

"$bin" "$@"

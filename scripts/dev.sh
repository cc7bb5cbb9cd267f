#!/usr/bin/env bash
# Runs fireonce locally: the Firestore emulator (ports and rules from
# firebase.json and firestore.rules), the functions on functions-framework,
# the event bridge with at-least-once delivery simulated, and an FCM stand-in.
# Ctrl-C stops everything. Arguments go to the dev program:
#
#   ./scripts/dev.sh                 run until Ctrl-C
#   ./scripts/dev.sh --demo          write a demo world, check every effect, exit
#   ./scripts/dev.sh --help          every flag (--duplicates, --redeliver-after, --retry, ...)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/emulator.sh
. scripts/lib/emulator.sh

fireonce_require_go
fireonce_require_java
fireonce_emulator_launcher >/dev/null

bin=${FIREONCE_BIN_DIR:-$PWD/bin}
mkdir -p "$bin"
echo "dev.sh: building the functions server and the dev program" >&2
go build -o "$bin/serve" ./functions/cmd/serve
go build -o "$bin/dev" ./functions/cmd/dev
# exec: the dev program receives Ctrl-C itself and stops what it started.
exec "$bin/dev" --serve-bin "$bin/serve" "$@"

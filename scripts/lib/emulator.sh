# shellcheck shell=bash
# Helpers to check for and run the Firestore emulator that ships with the
# Google Cloud CLI. Sourced by test.sh and bench.sh; not meant to run alone.

# fireonce_die prints its arguments to stderr and exits non-zero.
fireonce_die() {
  printf 'fireonce: %s\n' "$*" >&2
  exit 1
}

# fireonce_require_go checks the Go toolchain.
fireonce_require_go() {
  command -v go >/dev/null 2>&1 ||
    fireonce_die "Go is not installed: install Go 1.26 or newer from https://go.dev/dl/ and put it on PATH."
}

# fireonce_require_java checks for the Java runtime the emulator needs.
fireonce_require_java() {
  if ! command -v java >/dev/null 2>&1; then
    fireonce_die "Java is not installed; the Firestore emulator needs a Java 11+ runtime.
  Debian/Ubuntu: apt-get update && apt-get install -y default-jre-headless
  macOS:         brew install openjdk"
  fi
}

# fireonce_emulator_launcher prints the path of the emulator launcher script,
# or exits with instructions when the Google Cloud CLI or the component is
# missing. FIRESTORE_EMULATOR_LAUNCHER overrides the lookup.
fireonce_emulator_launcher() {
  if [ -n "${FIRESTORE_EMULATOR_LAUNCHER:-}" ]; then
    [ -x "$FIRESTORE_EMULATOR_LAUNCHER" ] ||
      fireonce_die "FIRESTORE_EMULATOR_LAUNCHER=$FIRESTORE_EMULATOR_LAUNCHER is not executable."
    printf '%s\n' "$FIRESTORE_EMULATOR_LAUNCHER"
    return
  fi
  if ! command -v gcloud >/dev/null 2>&1; then
    fireonce_die "the Google Cloud CLI (gcloud) is not installed; it ships the Firestore emulator.
  Install it from https://cloud.google.com/sdk/docs/install (Debian: apt-get install google-cloud-cli google-cloud-cli-firestore-emulator),
  or set FIRESTORE_EMULATOR_HOST to an emulator you already run."
  fi
  local root
  root=$(gcloud info --format='value(installation.sdk_root)' 2>/dev/null) ||
    fireonce_die "gcloud info failed; is the Google Cloud CLI installed correctly?"
  local launcher="$root/platform/cloud-firestore-emulator/cloud_firestore_emulator"
  if [ ! -x "$launcher" ]; then
    fireonce_die "the Firestore emulator is not installed in $root.
  Install it with: gcloud components install cloud-firestore-emulator
  (or, for a Debian package install: apt-get install google-cloud-cli-firestore-emulator)."
  fi
  printf '%s\n' "$launcher"
}

# fireonce_free_port prints a TCP port on 127.0.0.1 that nothing listens on.
fireonce_free_port() {
  local port i
  for i in $(seq 1 200); do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      printf '%s\n' "$port"
      return
    fi
  done
  fireonce_die "no free loopback port found"
}

# fireonce_wait_http waits until URL answers (any HTTP status), up to $2 seconds.
fireonce_wait_http() {
  local url=$1 limit=${2:-60} start=$SECONDS
  until curl -s -o /dev/null "$url"; do
    if [ $((SECONDS - start)) -ge "$limit" ]; then
      return 1
    fi
    if [ -n "${FIREONCE_EMULATOR_PID:-}" ] && ! kill -0 "$FIREONCE_EMULATOR_PID" 2>/dev/null; then
      return 1
    fi
    sleep 0.2
  done
}

# fireonce_start_emulator starts the emulator on free loopback ports in its own
# process group and exports FIRESTORE_EMULATOR_HOST. Extra arguments are passed
# to the launcher (for example --functions_emulator HOST:PORT).
fireonce_start_emulator() {
  fireonce_require_java
  local launcher port ws logdir
  launcher=$(fireonce_emulator_launcher)
  port=$(fireonce_free_port)
  ws=$(fireonce_free_port)
  logdir=${FIREONCE_LOG_DIR:-$(mktemp -d)}
  FIREONCE_EMULATOR_LOG="$logdir/firestore-emulator.log"
  # setsid gives the launcher its own process group, so stopping the group
  # also stops the java child the launcher starts.
  setsid "$launcher" start --host 127.0.0.1 --port "$port" --websocket_port "$ws" "$@" \
    >"$FIREONCE_EMULATOR_LOG" 2>&1 &
  FIREONCE_EMULATOR_PID=$!
  export FIRESTORE_EMULATOR_HOST="127.0.0.1:$port"
  if ! fireonce_wait_http "http://$FIRESTORE_EMULATOR_HOST/" 90; then
    tail -n 30 "$FIREONCE_EMULATOR_LOG" >&2 || true
    fireonce_stop_emulator
    fireonce_die "the Firestore emulator did not answer on $FIRESTORE_EMULATOR_HOST (log above: $FIREONCE_EMULATOR_LOG)."
  fi
  printf 'fireonce: Firestore emulator on %s (pid %s, log %s)\n' \
    "$FIRESTORE_EMULATOR_HOST" "$FIREONCE_EMULATOR_PID" "$FIREONCE_EMULATOR_LOG" >&2
}

# fireonce_stop_emulator stops the emulator's whole process group. Safe to call
# more than once and when nothing was started.
fireonce_stop_emulator() {
  local pid=${FIREONCE_EMULATOR_PID:-}
  [ -n "$pid" ] || return 0
  FIREONCE_EMULATOR_PID=
  kill -TERM -- "-$pid" 2>/dev/null || true
  local i
  for i in $(seq 1 50); do
    kill -0 -- "-$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
}

# shellcheck shell=bash
# Helpers to install and run the redis-server the Redis store's tests use.
# Sourced by test.sh after emulator.sh (it uses fireonce_die and
# fireonce_free_port from there); not meant to run alone.

# fireonce_redis_server prints the redis-server to run: $REDIS_SERVER when set,
# else the one on PATH (or in /usr/bin, where the Debian package puts it).
fireonce_redis_server() {
  if [ -n "${REDIS_SERVER:-}" ]; then
    printf '%s\n' "$REDIS_SERVER"
  elif command -v redis-server >/dev/null 2>&1; then
    command -v redis-server
  elif [ -x /usr/bin/redis-server ]; then
    printf '%s\n' /usr/bin/redis-server
  else
    return 1
  fi
}

# fireonce_require_redis makes sure redis-server is installed: as root with
# apt-get it installs the Debian package (a fresh CI machine gets it this
# way); otherwise it exits with instructions. It exports REDIS_SERVER so the
# Go tests find the same binary.
fireonce_require_redis() {
  local server
  if server=$(fireonce_redis_server); then
    [ -x "$server" ] || fireonce_die "REDIS_SERVER=$server is not executable."
    export REDIS_SERVER="$server"
    return
  fi
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    printf 'fireonce: redis-server is missing; installing the Debian package\n' >&2
    # DEBIAN_FRONTEND keeps apt quiet on a machine without a terminal (CI).
    DEBIAN_FRONTEND=noninteractive apt-get update >&2 ||
      fireonce_die "apt-get update failed; install redis-server by hand (apt-get install -y redis-server)."
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server >&2 ||
      fireonce_die "apt-get install redis-server failed."
    server=$(fireonce_redis_server) ||
      fireonce_die "redis-server is still not on PATH after apt-get install redis-server."
    export REDIS_SERVER="$server"
    return
  fi
  fireonce_die "redis-server is not installed; the Redis store's tests need a real one.
  Debian/Ubuntu: sudo apt-get update && sudo apt-get install -y redis-server
  macOS:         brew install redis
  or set REDIS_SERVER to its path, or FIREONCE_REDIS_ADDR=host:port to a server you already run."
}

# fireonce_start_redis starts a throwaway redis-server on a free loopback port
# in a temporary directory (no persistence: the tests that restart Redis start
# their own) and exports FIREONCE_REDIS_ADDR for the Go tests.
fireonce_start_redis() {
  fireonce_require_redis
  local port dir i
  port=$(fireonce_free_port)
  dir=$(mktemp -d)
  FIREONCE_REDIS_LOG="$dir/redis.log"
  "$REDIS_SERVER" --bind 127.0.0.1 --port "$port" --dir "$dir" \
    --save '' --appendonly no --daemonize no --logfile "$FIREONCE_REDIS_LOG" \
    >/dev/null 2>&1 &
  FIREONCE_REDIS_PID=$!
  for i in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      export FIREONCE_REDIS_ADDR="127.0.0.1:$port"
      printf 'fireonce: redis-server on %s (pid %s, log %s)\n' \
        "$FIREONCE_REDIS_ADDR" "$FIREONCE_REDIS_PID" "$FIREONCE_REDIS_LOG" >&2
      return
    fi
    kill -0 "$FIREONCE_REDIS_PID" 2>/dev/null || break
    sleep 0.1
  done
  tail -n 20 "$FIREONCE_REDIS_LOG" >&2 || true
  fireonce_stop_redis
  fireonce_die "redis-server did not listen on 127.0.0.1:$port (log above: $FIREONCE_REDIS_LOG)."
}

# fireonce_stop_redis stops the server fireonce_start_redis started. Safe to
# call more than once and when nothing was started.
fireonce_stop_redis() {
  local pid=${FIREONCE_REDIS_PID:-}
  [ -n "$pid" ] || return 0
  FIREONCE_REDIS_PID=
  kill -TERM "$pid" 2>/dev/null || true
  local i
  for i in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

#!/usr/bin/env bash
# One command from a fresh machine to a running local stack: installs what is missing, builds,
# starts a Redis of its own with AOF in .data/redis (unless REDIS_URL names one), then the
# scheduler, a gpu-worker with the bundled model, and the api on http://127.0.0.1:${TASKLINE_PORT:-8080}.
# Ctrl-C stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh

pids=()
redis_pid=''
# The services first, Redis once they are gone: a stopping worker and scheduler still write to it
# (running tasks' on_restart policies, the leader stepping down).
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  [ ${#pids[@]} -eq 0 ] || wait "${pids[@]}" 2>/dev/null || true
  if [ -n "$redis_pid" ]; then
    kill -TERM "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT INT TERM

if [ -z "${REDIS_URL:-}" ]; then
  port=6390
  mkdir -p .data/redis
  # A session of its own, so that Ctrl-C (sent to the terminal's whole process group) leaves it
  # to cleanup, after the services.
  setsid redis-server --port "$port" --bind 127.0.0.1 --dir "$PWD/.data/redis" \
    --appendonly yes --appendfsync always --save '' --daemonize no --loglevel warning &
  redis_pid=$!
  export REDIS_URL="redis://127.0.0.1:$port"
  until redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; do sleep 0.1; done
fi

# A local key so the API answers out of the box; set TASKLINE_API_KEYS or JWT settings for anything else.
export TASKLINE_API_KEYS="${TASKLINE_API_KEYS:-local:local-dev-key}"
# The operator console's key: made once per checkout, kept in .data (git-ignored), never a tenant's.
if [ -z "${TASKLINE_ADMIN_KEYS:-}" ]; then
  mkdir -p .data
  [ -s .data/admin-key ] || node -e "console.log('tla_' + require('crypto').randomBytes(24).toString('base64url'))" > .data/admin-key
  TASKLINE_ADMIN_KEYS="$(cat .data/admin-key)"
  admin_key_note="Console admin key: $TASKLINE_ADMIN_KEYS (in .data/admin-key)"
else
  admin_key_note="Console admin keys: TASKLINE_ADMIN_KEYS"
fi
export TASKLINE_ADMIN_KEYS

TASKLINE_METRICS_PORT=9464 node services/scheduler/dist/main.js & pids+=($!)
TASKLINE_METRICS_PORT=9465 node services/gpu-worker/dist/main.js & pids+=($!)
TASKLINE_METRICS_PORT=9466 node services/api/dist/main.js & pids+=($!)

echo "Taskline is starting on http://${TASKLINE_HOST:-127.0.0.1}:${TASKLINE_PORT:-8080} (Redis: $REDIS_URL)."
echo "Operator console: http://${TASKLINE_HOST:-127.0.0.1}:${TASKLINE_PORT:-8080}/console — $admin_key_note"
echo "Try: curl -H 'Authorization: Bearer local-dev-key' http://127.0.0.1:${TASKLINE_PORT:-8080}/lmsp/v1/models"
wait -n

#!/usr/bin/env bash
# One command from a fresh machine to a running local stack: installs what is missing, builds,
# starts a Redis of its own with AOF in .data/redis on 127.0.0.1:${TASKLINE_START_REDIS_PORT:-6390}
# (unless REDIS_URL names one), then the scheduler, a gpu-worker with the bundled model, and the api
# on http://127.0.0.1:${TASKLINE_PORT:-8080}.
# Ctrl-C stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh

source scripts/local-stack.sh

if [ -z "${REDIS_URL:-}" ]; then
  redis_port=${TASKLINE_START_REDIS_PORT:-6390}
  mkdir -p .data/redis
  start_redis "$redis_port" "$PWD/.data/redis" \
    "set TASKLINE_START_REDIS_PORT to a free port (or REDIS_URL to use a Redis of yours)"
  export REDIS_URL="redis://127.0.0.1:$redis_port"
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
# The scheduler admits only workers with the control-plane credential (scripts/local-stack.sh).
control_credential

TASKLINE_METRICS_PORT=9464 node services/scheduler/dist/main.js & pids+=($!)
# The worker dials the scheduler where it listens, on the control port the user may have moved.
TASKLINE_SCHEDULER_ADDR="${TASKLINE_SCHEDULER_ADDR:-127.0.0.1:${TASKLINE_CONTROL_PORT:-7070}}" \
  TASKLINE_METRICS_PORT=9465 node services/gpu-worker/dist/main.js & pids+=($!)
TASKLINE_METRICS_PORT=9466 node services/api/dist/main.js & pids+=($!)

echo "Taskline is starting on http://${TASKLINE_HOST:-127.0.0.1}:${TASKLINE_PORT:-8080} (Redis: $REDIS_URL)."
echo "Operator console: http://${TASKLINE_HOST:-127.0.0.1}:${TASKLINE_PORT:-8080}/console — $admin_key_note"
echo "Try: curl -H 'Authorization: Bearer local-dev-key' http://127.0.0.1:${TASKLINE_PORT:-8080}/lmsp/v1/models"
wait -n

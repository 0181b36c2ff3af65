#!/usr/bin/env bash
# The production shape on one machine (`pnpm cluster`): Redis with AOF, two api replicas behind
# HAProxy, two schedulers (one leader, one standby), two workers, all local processes.
# The load balancer listens on http://127.0.0.1:${TASKLINE_LB_PORT:-8080}; Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
for bin in redis-server redis-cli haproxy node; do
  command -v "$bin" >/dev/null || { echo "cluster: $bin is required (apt-get install -y redis-server haproxy)" >&2; exit 1; }
done
pnpm build # incremental: cheap when nothing changed, and never runs stale code

data=.data/cluster
mkdir -p "$data/redis"
source scripts/local-stack.sh

redis_port=${TASKLINE_CLUSTER_REDIS_PORT:-6391}
start_redis "$redis_port" "$PWD/$data/redis" "set TASKLINE_CLUSTER_REDIS_PORT to a free port"

export REDIS_URL="redis://127.0.0.1:$redis_port"
export TASKLINE_HOST=127.0.0.1
export TASKLINE_API_KEYS="${TASKLINE_API_KEYS:-local:local-dev-key}"
# The scheduler admits only workers with the control-plane credential (scripts/local-stack.sh).
control_credential

# Schedulers: each serves the worker control plane; the standby redirects workers to the leader.
for i in 1 2; do
  TASKLINE_CONTROL_PORT=$((7070 + i)) TASKLINE_CONTROL_ADVERTISE="127.0.0.1:$((7070 + i))" \
    TASKLINE_METRICS_PORT=$((9470 + i)) node services/scheduler/dist/main.js &
  pids+=($!)
done
# Each worker knows both schedulers (its own first), so it finds whichever one leads after a failover.
for i in 1 2; do
  TASKLINE_WORKER_ID="worker-$i" TASKLINE_SCHEDULER_ADDR="127.0.0.1:$((7070 + i)),127.0.0.1:$((7073 - i))" \
    TASKLINE_METRICS_PORT=$((9480 + i)) node services/gpu-worker/dist/main.js &
  pids+=($!)
done
export TASKLINE_API1_PORT=8081 TASKLINE_API2_PORT=8082
# Each api replica serves its metrics on a port of its own (9491, 9492), never on its api port.
for i in 1 2; do
  port_var="TASKLINE_API${i}_PORT"
  TASKLINE_PORT=${!port_var} TASKLINE_METRICS_PORT=$((9490 + i)) node services/api/dist/main.js &
  pids+=($!)
done

export TASKLINE_LB_HOST=127.0.0.1 TASKLINE_LB_PORT=${TASKLINE_LB_PORT:-8080}
haproxy -W -db -f deploy/haproxy/haproxy.cfg &
pids+=($!)

echo "Taskline cluster: http://$TASKLINE_LB_HOST:$TASKLINE_LB_PORT (api :8081 :8082, schedulers :7071 :7072, metrics :9471-9472 :9481-9482 :9491-9492, Redis $REDIS_URL)"
wait -n

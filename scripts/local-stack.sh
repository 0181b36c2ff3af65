# Sourced by start.sh and cluster.sh: the local processes they start, and stopping them in order.
pids=()
redis_pid=''

# The services first, Redis once they are gone: stopping workers and schedulers still write to it
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

# start_redis PORT DIR: a Redis on 127.0.0.1:PORT with AOF fsynced before every reply, kept in DIR,
# in a session of its own so that Ctrl-C (sent to the terminal's whole process group) leaves it to
# cleanup, after the services.
start_redis() {
  setsid redis-server --port "$1" --bind 127.0.0.1 --dir "$2" \
    --appendonly yes --appendfsync always --save '' --daemonize no --loglevel warning &
  redis_pid=$!
  until redis-cli -p "$1" ping 2>/dev/null | grep -q PONG; do sleep 0.1; done
}

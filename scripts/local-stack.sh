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

# start_redis PORT DIR HINT: a Redis on 127.0.0.1:PORT with AOF fsynced before every reply, kept in
# DIR, in a session of its own so that Ctrl-C (sent to the terminal's whole process group) leaves it
# to cleanup, after the services. A port something already listens on is refused (HINT says how to
# choose another): whatever answers there would pass for this stack's Redis. Gives up when the server
# exits, or answers nothing for 10 s (LOADING a large AOF is an answer).
start_redis() {
  if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
    echo "Redis: port $1 is taken by another program on 127.0.0.1; stop it, or $3." >&2
    exit 1
  fi
  setsid redis-server --port "$1" --bind 127.0.0.1 --dir "$2" \
    --appendonly yes --appendfsync always --save '' --daemonize no --loglevel warning &
  redis_pid=$!
  local reply='' silent=0 status=0
  until reply=$(redis-cli -p "$1" ping 2>/dev/null) && [ "$reply" = PONG ]; do
    if ! kill -0 "$redis_pid" 2>/dev/null; then
      wait "$redis_pid" || status=$?
      redis_pid=''
      echo "Redis: redis-server on port $1 exited (status $status) before answering; see its messages above." >&2
      exit 1
    fi
    case "$reply" in LOADING*) silent=0 ;; *) silent=$((silent + 1)) ;; esac
    if [ "$silent" -ge 100 ]; then
      echo "Redis: redis-server on port $1 did not answer within 10 s (last reply: ${reply:-none})." >&2
      exit 1
    fi
    sleep 0.1
  done
}

# control_credential: the scheduler and workers of a local stack share a control-plane token, made
# once per checkout and kept in .data/control-token (git-ignored), over plaintext gRPC: every
# process listens on 127.0.0.1 only. TASKLINE_CONTROL_TOKEN or TLS settings of the user's win.
control_credential() {
  [ -z "${TASKLINE_CONTROL_TLS_CA:-}${TASKLINE_CONTROL_TLS_CERT:-}" ] || return 0
  if [ -z "${TASKLINE_CONTROL_TOKEN:-}" ]; then
    mkdir -p .data
    [ -s .data/control-token ] ||
      node -e "console.log(require('crypto').randomBytes(32).toString('base64url'))" > .data/control-token
    TASKLINE_CONTROL_TOKEN="$(cat .data/control-token)"
  fi
  export TASKLINE_CONTROL_TOKEN TASKLINE_CONTROL_PLAINTEXT="${TASKLINE_CONTROL_PLAINTEXT:-true}"
}

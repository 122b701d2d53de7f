# Shared helpers of the real-cluster tier: messages, processes started and
# stopped by PID, waits. Sourced by tests/e2e/cluster.sh and tests/e2e/run.sh.
#
# Every process the tier starts is recorded as $E2E_STATE/pids/NAME.pid (and
# its name appended to $E2E_STATE/pids/order), so whoever stops the cluster,
# in this shell or a later one, stops exactly those.

say() { printf '\033[1me2e:\033[0m %s\n' "$*" >&2; }
die() { printf 'e2e: error: %s\n' "$*" >&2; exit 1; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# start NAME COMMAND...: in the background, in a session of its own (so it
# outlives the shell that started it), logged to $E2E_STATE/logs/NAME.log.
start() {
  local name=$1
  shift
  setsid "$@" >>"$E2E_STATE/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$E2E_STATE/pids/$name.pid"
  disown $!  # stopped by PID; the shell need not report it
  echo "$name" >>"$E2E_STATE/pids/order"
}

pid_of() { cat "$E2E_STATE/pids/$1.pid" 2>/dev/null; }
alive() { local p; p=$(pid_of "$1") && [[ -n $p ]] && kill -0 "$p" 2>/dev/null; }

# stop NAME [SECONDS]: TERM, then KILL after SECONDS (default 20).
stop() {
  local name=$1 limit=${2:-20} pid i
  pid=$(pid_of "$name") || return 0
  [[ -n $pid ]] || return 0
  if kill -TERM "$pid" 2>/dev/null; then
    for ((i = 0; i < limit * 10; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      say "$name (pid $pid) ignored SIGTERM for $limit s: killing it"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
  fi
  rm -f "$E2E_STATE/pids/$name.pid"
}

# wait_until SECONDS DESCRIPTION COMMAND...: poll until COMMAND succeeds, or die.
# (run.sh's scenarios use wait_for, which fails the scenario instead.)
wait_until() {
  local limit=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "timed out after ${limit}s waiting for $what"
    sleep 0.2
  done
}

# benches/load_common.sh — shell helpers shared by wrk.sh, duel.sh and bulk_duel.sh
# (sourced, not run).

# Median of the numeric arguments; of an even count, the mean of the middle
# two (trailing zeros cut), so that RUNS=2 reports neither run's value as
# the middle one.
median() {
    printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END {
        if (NR % 2) { print a[(NR + 1) / 2]; exit }
        m = sprintf("%.4f", (a[NR / 2] + a[NR / 2 + 1]) / 2)
        sub(/0+$/, "", m); sub(/\.$/, "", m); print m }'
}

# wrk latency "17.00ms" / "850.00us" / "1.20s" -> milliseconds
to_ms() {
    awk -v v="$1" 'BEGIN {
        n = v + 0; u = v; sub(/^[0-9.]+/, "", u);
        if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000;
        printf "%.2f", n }'
}

# User + system CPU time of process $1, in clock ticks (/proc/PID/stat).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# User CPU time of process $1, in clock ticks (/proc/PID/stat).
user_ticks() { awk '{ print $14 }' "/proc/$1/stat"; }

# Runs the command string $1 when the script exits, also on Ctrl-C or
# SIGTERM, which end the script at once: by default bash lets a foreground
# wrk finish first, or goes on after it if wrk caught the Ctrl-C itself.
on_exit() {
    trap "$1" EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# Set-up of the scripts that hold CONNS connections to one server at a
# time (idle_rss.sh, slow_rss.sh): an open-file limit for $1 connections,
# a scratch directory in $work, and `stop_run`, which ends the server
# ($pid) and the client ($client) they started, also when the script exits.
conns_setup() {
    ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
    [[ $(ulimit -n) -gt $(($1 + 100)) ]] || die "RLIMIT_NOFILE $(ulimit -n) is too low for CONNS=$1"
    work=$(mktemp -d)
    pid=''
    client=''
    # shellcheck disable=SC2016 # expanded when the trap runs
    on_exit 'stop_run; rm -rf "$work"'
}

stop_run() {
    for p in $client $pid; do kill -TERM "$p" 2>/dev/null || true; done
    for p in $client $pid; do wait "$p" 2>/dev/null || true; done
    client='' pid=''
}

# The resident memory of process $1, in KiB.
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }

# Waits up to $2 seconds until the client ($client) has written a line
# starting with $1 to $work/client.out; fails if it exits without one.
await_client() {
    local deadline=$((SECONDS + $2))
    until grep -q "^$1" "$work/client.out"; do
        if ! kill -0 "$client" 2>/dev/null; then
            grep -q "^$1" "$work/client.out"
            return
        fi
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

# Fails (the caller's `die`) unless each variable named is a positive integer.
require_counts() {
    for v in "$@"; do
        [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not '${!v}'"
    done
}

# Fails (the caller's `die`) if something already listens on one of the
# 127.0.0.1 ports given: the load would go to it rather than to our server.
require_free_ports() {
    for p in "$@"; do
        if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            die "port $p is in use on 127.0.0.1 (another server?); choose others with PORT=N"
        fi
    done
}

# Waits until process $1 listens on 127.0.0.1 port $2; fails if it exits
# or five seconds pass.
wait_listening() {
    for _ in $(seq 100); do
        kill -0 "$1" 2>/dev/null || return 1
        if (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    return 1
}

# The two servers of a duel (duel.sh, bulk_duel.sh), from the arguments
# "LABEL_A:COMMAND_A" "LABEL_B:COMMAND_B": duel_setup parses them into
# `labels` and `commands`, makes the scratch folder `tmp` and, on exit,
# stops the servers and the clients the caller put in `clients`, and
# removes `tmp`; duel_start starts both servers pinned to CPU 0 on ports
# PORT and PORT+1 (the caller's `die`, with the server's output, on
# failure); duel_stop stops them.
duel_setup() {
    labels=("${1%%:*}" "${2%%:*}")
    commands=("${1#*:}" "${2#*:}")
    pids=()
    clients=()
    tmp=$(mktemp -d)
    on_exit 'duel_stop; rm -rf "$tmp"'
}
duel_start() {
    require_free_ports "$PORT" $((PORT + 1))
    for i in 0 1; do
        # shellcheck disable=SC2086 # the command's own arguments split on purpose
        taskset -c 0 ${commands[$i]} --port $((PORT + i)) --cores 0 >"$tmp/server.$i" 2>&1 &
        pids+=($!)
        wait_listening "${pids[$i]}" $((PORT + i)) || die "${labels[$i]} did not start listening on 127.0.0.1:$((PORT + i)); its output:
$(tail -n 20 "$tmp/server.$i")"
    done
}
duel_stop() {
    for pid in "${clients[@]}" "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${clients[@]}" "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    clients=()
    pids=()
}

# Stops the server whose PID is in `server_pid` (TERM, up to five seconds,
# then KILL), reaps it, and clears `server_pid`.
server_pid=
stop_server() {
    if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$server_pid" 2>/dev/null || true
    fi
    [[ -n $server_pid ]] && wait "$server_pid" 2>/dev/null || true
    server_pid=
}

# Installs, with apt-get, the package of each command missing from PATH
# (COMMAND or COMMAND:PACKAGE), as the CI scripts do.
need_commands() {
    # shellcheck source=.ci/tools.sh
    . "$root/.ci/tools.sh"
    need_tools "$@"
}

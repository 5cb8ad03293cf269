#!/usr/bin/env bash
# benches/ws.sh — WebSocket servers side by side: percore-handlers' WebSocket
# on io_uring and on epoll, and tokio-tungstenite on a tokio current-thread
# runtime (`ws_echo`), one at a time, alternated run by run.
#
# What it measures, with the server pinned to CPU 0 and the load (`ws_load`,
# one tokio current-thread client with raw framing) on CPU 1:
#   echo64, echo4k  CONNS connections, each sending a 64-byte or 4-KiB binary
#                   message and waiting for its echo before the next: echoes
#                   per server CPU-second (CPU from /proc/PID/stat, so other
#                   load on the machine moves the rate, not this figure).
#   deflate64, deflate4k
#                   the same with permessage-deflate (the server's default,
#                   no context takeover: each message inflated and deflated
#                   anew), percore only: tokio-tungstenite has no deflate.
#                   Its rows are divided by percore's plain echo of the same
#                   size and backend (when MODES ran it first): what
#                   compressing costs.
#   broadcast       SUBS subscribers and one publisher that sends a 64-byte
#                   message, waits until every subscriber has it, and sends
#                   the next: deliveries per server CPU-second.
#   idle            RSS growth of the server while SUBS WebSockets (each
#                   having echoed one message) sit open, per connection.
# "÷ tokio" divides each row by tokio-tungstenite's of the same mode (above 1:
# cheaper than tokio-tungstenite; for idle, above 1: smaller); the deflate
# rows, by the plain echo's (see above).
# What it does not: run on more than one server core, use TLS, or measure
# latency.
#
# Usage: benches/ws.sh          (from anywhere in the repository)
# Environment: DURATION=5 RUNS=3 CONNS=100 SUBS=10000 PORT=18460 (and the 19
#              ports after it, one server start each in turn)
#              SERVERS="uring epoll tokio"
#              MODES="echo64 echo4k deflate64 deflate4k broadcast idle"
set -euo pipefail

DURATION=${DURATION:-5}
RUNS=${RUNS:-3}
CONNS=${CONNS:-100}
SUBS=${SUBS:-10000}
PORT=${PORT:-18460}
SERVERS=${SERVERS:-"uring epoll tokio"}
MODES=${MODES:-"echo64 echo4k deflate64 deflate4k broadcast idle"}

die() { echo "ws.sh: $*" >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/load_common.sh
. "$root/benches/load_common.sh"
require_counts DURATION RUNS CONNS SUBS PORT
for s in $SERVERS; do
    case $s in uring | epoll | tokio) ;; *) die "SERVERS: unknown server $s (uring, epoll, tokio)" ;; esac
done
for m in $MODES; do
    case $m in echo64 | echo4k | deflate64 | deflate4k | broadcast | idle) ;;
        *) die "MODES: unknown mode $m (echo64, echo4k, deflate64, deflate4k, broadcast, idle)" ;;
    esac
done
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac
command -v taskset >/dev/null 2>&1 || die "taskset (util-linux) is required"

echo "ws.sh: building ws_echo and ws_load (release)" >&2
(cd "$root" && cargo build -q --release -p percore-benches --features ws-deflate \
    --bin ws_echo --bin ws_load) || die "the build failed"

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
[[ $(ulimit -n) -gt $((SUBS + 100)) ]] || die "RLIMIT_NOFILE $(ulimit -n) is too low for SUBS=$SUBS"
clk=$(getconf CLK_TCK)
work=$(mktemp -d)
server_pid=
client=
# Stops the load client, if one runs, then the server.
stop_all() {
    if [[ -n $client ]]; then
        kill -TERM "$client" 2>/dev/null || true
        wait "$client" 2>/dev/null || true
        client=
    fi
    stop_server
}
on_exit 'stop_all; rm -rf "$work"'

# Each server started gets the next of PORTS ports: the loads of 10,000
# connections leave as many client ports in TIME_WAIT toward the port
# they used, which would run a few runs to the same port out of them.
PORTS=20
starts=0
start_server() {
    port=$((PORT + starts % PORTS))
    starts=$((starts + 1))
    taskset -c 0 "$target/release/ws_echo" --server "$1" --port "$port" --cores 0 >"$work/server.log" 2>&1 &
    server_pid=$!
    wait_listening "$server_pid" "$port" || die "$1 did not start listening on 127.0.0.1:$port; its output:
$(tail -n 20 "$work/server.log")"
}

# The load of mode $1: prints the count it completed.
load() {
    local args=(--connect "127.0.0.1:$port" --duration "$DURATION")
    local out
    case $1 in
        echo64) args=(echo "${args[@]}" --conns "$CONNS" --size 64) ;;
        echo4k) args=(echo "${args[@]}" --conns "$CONNS" --size 4096) ;;
        deflate64) args=(echo "${args[@]}" --conns "$CONNS" --size 64 --deflate) ;;
        deflate4k) args=(echo "${args[@]}" --conns "$CONNS" --size 4096 --deflate) ;;
        broadcast) args=(broadcast "${args[@]}" --conns "$SUBS" --size 64) ;;
    esac
    out=$(taskset -c 1 "$target/release/ws_load" "${args[@]}" 2>&1) || die "ws_load $1 failed: $out"
    sed -n 's/^[a-z]*=\([0-9]*\)$/\1/p' <<<"$out"
}

# Bytes of RSS per idle WebSocket of the server running, into `bytes` (not
# printed: the client it starts must stay this shell's, for stop_all).
idle_bytes() {
    local before idle
    before=$(rss_kb "$server_pid")
    : >"$work/client.out"
    taskset -c 1 "$target/release/ws_load" idle --connect "127.0.0.1:$port" --conns "$SUBS" \
        --size 64 >"$work/client.out" 2>&1 &
    client=$!
    await_client open 120 || die "$SUBS WebSockets were not open in 2 minutes: $(cat "$work/client.out")"
    sleep 1
    idle=$(rss_kb "$server_pid")
    bytes=$(((idle - before) * 1024 / SUBS))
}

echo "ws.sh: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, Linux $(uname -r)"
echo "ws.sh: server on CPU 0, load on CPU 1; ${DURATION}s runs, median of $RUNS, servers alternated run by run"
# shellcheck disable=SC2046 # one argument per port
require_free_ports $(seq "$PORT" $((PORT + PORTS - 1)))
results=()
declare -A kept=()
for mode in $MODES; do
    declare -A per_cpu=() rate=()
    servers=$SERVERS
    [[ $mode == deflate* ]] && servers=$(tr ' ' '\n' <<<"$SERVERS" | grep -v tokio | tr '\n' ' ')
    runs=$RUNS
    [[ $mode == idle ]] && runs=1
    for run in $(seq "$runs"); do
        for s in $servers; do
            start_server "$s"
            if [[ $mode == idle ]]; then
                idle_bytes
                per_cpu[$s]=$bytes
                rate[$s]=-
                stop_all
                echo "  idle $s: ${per_cpu[$s]} bytes per WebSocket" >&2
                continue
            fi
            # Warm-up, not measured.
            taskset -c 1 "$target/release/ws_load" echo --connect "127.0.0.1:$port" --conns "$CONNS" \
                --size 64 --duration 1 >/dev/null 2>&1 || true
            t0=$(cpu_ticks "$server_pid")
            count=$(load "$mode")
            t1=$(cpu_ticks "$server_pid")
            stop_all
            [[ -n $count ]] || die "no count from the $mode load against $s"
            cpu_s=$(awk -v a="$t0" -v b="$t1" -v h="$clk" 'BEGIN { printf "%.3f", (b - a) / h }')
            per_cpu[$s]+="$(awk -v n="$count" -v c="$cpu_s" 'BEGIN { if (c > 0) printf "%.0f", n / c; else print "nan" }') "
            rate[$s]+="$(awk -v n="$count" -v d="$DURATION" 'BEGIN { printf "%.0f", n / d }') "
            echo "  $mode $s run $run: $count in ${DURATION}s, server CPU ${cpu_s} s" >&2
        done
    done
    base=
    # shellcheck disable=SC2086 # word splitting of the collected values is intended
    [[ -n ${per_cpu[tokio]:-} ]] && base=$(median ${per_cpu[tokio]})
    for s in $servers; do
        # shellcheck disable=SC2086 # word splitting of the collected values is intended
        m=$(median ${per_cpu[$s]})
        if [[ $mode == idle ]]; then
            ratio=$(awk -v a="$m" -v b="$base" 'BEGIN { if (b + 0 > 0 && a + 0 > 0) printf "%.3f", b / a; else print "-" }')
            results+=("$(printf '%-10s %-6s %10s %22s %8s' "$mode" "$s" - "$m B/conn" "$ratio")")
            continue
        fi
        kept[$mode:$s]=$m
        # A deflate row is divided by the plain echo of its size and backend.
        [[ $mode == deflate* ]] && base=${kept[echo${mode#deflate}:$s]:-}
        ratio=$(awk -v a="$m" -v b="$base" 'BEGIN { if (b + 0 > 0 && a == a + 0) printf "%.3f", a / b; else print "-" }')
        # shellcheck disable=SC2086 # word splitting of the collected values is intended
        results+=("$(printf '%-10s %-6s %10s %22s %8s' "$mode" "$s" "$(median ${rate[$s]})" "$m" "$ratio")")
    done
    unset per_cpu rate
done

echo
printf '%-10s %-6s %10s %22s %8s\n' mode server "per second" "per server CPU-second" "÷ tokio"
for line in "${results[@]}"; do echo "$line"; done

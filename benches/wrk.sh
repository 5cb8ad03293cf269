#!/usr/bin/env bash
# benches/wrk.sh — external load on the example HTTP servers: by default
# wrk -t2 -c1000 for 10 s, 3 runs per server (median).
#
# What it measures: for each server (percore on uring and on epoll, and
# `tokio_baseline`, the tokio current-thread server of the bench harness)
# and each server CPU set (one core: CPU 0; two cores: CPUs 0,1), wrk's
# requests/s and p99 latency (median of RUNS runs, the servers alternated
# run by run so drift hits them alike), plus server CPU time from
# /proc/PID/stat during each run, requests per server CPU-second, and the
# share of that CPU time spent in user space (the rest is the kernel's: TCP,
# syscalls, wake-ups; no user-space change can save more than the user
# share), requests per kernel CPU-second (the ceiling of requests per
# server CPU-second for that server's kernel path, were its user space
# free), and "÷ tokio": requests per server CPU-second divided by the tokio
# row's of the same cores and width (above 1: cheaper than tokio; "-" when
# tokio is not in BACKENDS).
# wrk is pinned to the CPU the server does not use; with two server
# cores nothing is pinned.
#
# SERVICE=http (default) loads `http_echo` (GET, the 20-byte JSON answer).
# SERVICE=fanout loads the `fanout` proxy instead, once per width in WIDTHS:
# UPSTREAMS http_echo servers (epoll backend, on wrk's CPU) answer its
# sub-requests, and the tokio server runs the harness's tokio fan-out to the
# same upstreams with the same width. What it does not: run any runtime
# but percore and tokio, or run anywhere but 127.0.0.1.
#
# Usage: benches/wrk.sh            (from anywhere inside the repository;
#                                   installs wrk with apt-get if it is missing)
# Environment: DURATION=10 RUNS=3 CONNS=1000 THREADS=2
#              BACKENDS="uring epoll tokio" CORESETS="0 0,1" PORT=18080
#              SERVICE=http|fanout WIDTHS="1 4 16" UPSTREAMS=3
#              HTTP_ECHO=path/to/http_echo FANOUT=path/to/fanout
#              TOKIO_BASELINE=path/to/tokio_baseline
#              PERCORE_ARGS="..." (more options for the percore servers, e.g.
#              "--keepalive-requests 0": the tokio servers have no request cap)
set -euo pipefail

DURATION=${DURATION:-10}
RUNS=${RUNS:-3}
CONNS=${CONNS:-1000}
THREADS=${THREADS:-2}
BACKENDS=${BACKENDS:-"uring epoll tokio"}
CORESETS=${CORESETS:-"0 0,1"}
PORT=${PORT:-18080}
SERVICE=${SERVICE:-http}
WIDTHS=${WIDTHS:-"1 4 16"}
UPSTREAMS=${UPSTREAMS:-3}
read -r -a percore_args <<<"${PERCORE_ARGS:-}"
case $SERVICE in
    http) WIDTHS=- ;;
    fanout) ;;
    *) echo "wrk.sh: SERVICE must be http or fanout, not $SERVICE" >&2; exit 1 ;;
esac

die() { echo "wrk.sh: $*" >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/load_common.sh
. "$root/benches/load_common.sh"
require_counts DURATION RUNS CONNS THREADS PORT UPSTREAMS
for backend in $BACKENDS; do
    case $backend in uring | epoll | tokio) ;; *) die "BACKENDS: unknown server $backend (uring, epoll, tokio)" ;; esac
done
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac
bin=${HTTP_ECHO:-$target/release/http_echo}
fanout_bin=${FANOUT:-$target/release/fanout}

tokio_bin=${TOKIO_BASELINE:-$target/release/tokio_baseline}
if [[ " $BACKENDS " == *" tokio "* && ! -x $tokio_bin ]]; then
    die "no tokio baseline server at $tokio_bin.
  Build it first:  cargo build --release -p percore-benches --bin tokio_baseline"
fi

if [[ ! -x $bin ]]; then
    die "no HTTP example server at $bin.
  Build it first:  cargo build --release --bin http_echo   (in $root)
  or point HTTP_ECHO at the binary. The example takes
  --port P --cores LIST --backend uring|epoll."
fi
if [[ $SERVICE == fanout && ! -x $fanout_bin ]]; then
    die "no fan-out example server at $fanout_bin.
  Build it first:  cargo build --release --bin fanout   (in $root)"
fi

if ! command -v wrk >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || die "wrk is not installed and apt-get is unavailable"
    echo "wrk.sh: installing wrk with apt-get" >&2
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk >/dev/null 2>&1; then
        # The package lists may be missing or stale: refresh once, then retry.
        apt-get update -q >/dev/null || die "apt-get update failed"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk >/dev/null || die "apt-get install wrk failed"
    fi
fi
command -v taskset >/dev/null 2>&1 || die "taskset (util-linux) is required"

# 1000 connections need ~1000 descriptors on each side.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
ncpu=$(nproc)
clk=$(getconf CLK_TCK)


server_pid=
upstream_pids=()
# The servers' output, shown when one does not start.
logs=$(mktemp -d)
stop_upstreams() {
    for pid in "${upstream_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${upstream_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    upstream_pids=()
}
cleanup() {
    if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
        # SIGTERM: a background job of a non-interactive shell ignores SIGINT.
        kill -TERM "$server_pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    server_pid=
}
on_exit 'cleanup; stop_upstreams; rm -rf "$logs"'

# Starts the server for one backend: the percore example on uring or epoll,
# or the tokio current-thread baseline ("tokio"). Fan-out servers get the
# upstreams and width $3. (`exec`: the backgrounded `case` is a subshell,
# and $server_pid must be the server itself.)
start_server() {
    local up=()
    for p in "${upstream_ports[@]}"; do up+=(--upstream "127.0.0.1:$p"); done
    case $SERVICE:$1 in
        http:tokio) exec "$tokio_bin" --service http --port "$PORT" --cores "$2" ;;
        http:*) exec "$bin" --port "$PORT" --cores "$2" --backend "$1" "${percore_args[@]}" ;;
        fanout:tokio) exec "$tokio_bin" --service fanout --port "$PORT" --cores "$2" "${up[@]}" --width "$3" ;;
        fanout:*) exec "$fanout_bin" --port "$PORT" --cores "$2" --backend "$1" "${up[@]}" --width "$3" "${percore_args[@]}" ;;
    esac >"$logs/server" 2>&1 &
    server_pid=$!
}

echo "wrk.sh: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $ncpu CPUs, Linux $(uname -r)"
echo "wrk.sh: $SERVICE, wrk -t$THREADS -c$CONNS -d${DURATION}s --latency, median of $RUNS, servers alternated run by run"
upstream_ports=()
require_free_ports "$PORT"
if [[ $SERVICE == fanout ]]; then
    # The upstreams share the client's CPU (the last one), away from the proxy.
    for i in $(seq "$UPSTREAMS"); do
        port=$((PORT + i))
        require_free_ports "$port"
        taskset -c "$((ncpu - 1))" "$bin" --port "$port" --cores "$((ncpu - 1))" --backend epoll >"$logs/upstream.$i" 2>&1 &
        upstream_pids+=($!)
        upstream_ports+=("$port")
        wait_listening "$!" "$port" || die "upstream http_echo did not start listening on 127.0.0.1:$port; its output:
$(tail -n 20 "$logs/upstream.$i")"
    done
    echo "wrk.sh: $UPSTREAMS upstream http_echo servers on CPU $((ncpu - 1)), ports ${upstream_ports[*]}"
fi
results=()
for cores in $CORESETS; do
    ncores=$(tr ',' '\n' <<<"$cores" | wc -l)
    # Pin wrk to a CPU the server does not use, if there is one.
    free_cpu=
    for c in $(seq 0 $((ncpu - 1))); do
        if ! tr ',' '\n' <<<"$cores" | grep -qx "$c"; then free_cpu=$c; break; fi
    done
    if [[ -n $free_cpu ]]; then wrk_cmd=(taskset -c "$free_cpu" wrk); pin="wrk on CPU $free_cpu";
    else wrk_cmd=(wrk); pin="nothing pinned"; fi
    for width in $WIDTHS; do
        declare -A rps=() p99=() kcpu=() util=() ushare=() kern=()
        for run in $(seq "$RUNS"); do
            for backend in $BACKENDS; do
                start_server "$backend" "$cores" "$width"
                wait_listening "$server_pid" "$PORT" || die "$backend server (cores $cores) did not start listening on 127.0.0.1:$PORT; its output:
$(tail -n 20 "$logs/server")"
                # Warm-up, not measured.
                "${wrk_cmd[@]}" -t"$THREADS" -c"$CONNS" -d2s http://127.0.0.1:"$PORT"/ >/dev/null 2>&1 || true
                t0=$(cpu_ticks "$server_pid"); u0=$(user_ticks "$server_pid"); s0=$(date +%s.%N)
                out=$("${wrk_cmd[@]}" -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --latency "http://127.0.0.1:$PORT/") \
                    || die "wrk failed against $backend (cores $cores)"
                t1=$(cpu_ticks "$server_pid"); u1=$(user_ticks "$server_pid"); s1=$(date +%s.%N)
                cleanup
                r=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
                l=$(awk '$1 == "99%" { print $2 }' <<<"$out")
                [[ -n $r && -n $l ]] || die "could not parse wrk output:
$out"
                grep -q "Non-2xx" <<<"$out" && echo "wrk.sh: warning: non-2xx responses ($backend, cores $cores)" >&2
                grep -q "Socket errors" <<<"$out" && echo "wrk.sh: warning: $(grep 'Socket errors' <<<"$out") ($backend, cores $cores)" >&2
                cpu_s=$(awk -v a="$t0" -v b="$t1" -v h="$clk" 'BEGIN { printf "%.3f", (b - a) / h }')
                rps[$backend]+="$r "; p99[$backend]+="$(to_ms "$l") "
                kcpu[$backend]+="$(awk -v r="$r" -v d="$DURATION" -v c="$cpu_s" 'BEGIN { if (c > 0) printf "%.0f", r * d / c; else print "nan" }') "
                ushare[$backend]+="$(awk -v u=$((u1 - u0)) -v t=$((t1 - t0)) 'BEGIN { if (t > 0) printf "%.0f", 100 * u / t; else print "nan" }') "
                kern[$backend]+="$(awk -v r="$r" -v d="$DURATION" -v k=$((t1 - t0 - u1 + u0)) -v h="$clk" 'BEGIN { if (k > 0) printf "%.0f", r * d * h / k; else print "nan" }') "
                util[$backend]+="$(awk -v c="$cpu_s" -v a="$s0" -v b="$s1" -v n="$ncores" 'BEGIN { printf "%.0f", 100 * c / (b - a) / n }') "
                echo "  $backend cores=$cores width=$width run $run: ${r} req/s, p99 $(to_ms "$l") ms, server CPU ${cpu_s} s" >&2
            done
        done
        # The tokio row of the same cores and width, if it ran, is what
        # each server's requests per CPU-second are divided by.
        tokio_kcpu=
        # shellcheck disable=SC2086 # word splitting of the collected values is intended
        [[ -n ${kcpu[tokio]:-} ]] && tokio_kcpu=$(median ${kcpu[tokio]})
        for backend in $BACKENDS; do
            # shellcheck disable=SC2086 # word splitting of the collected values is intended
            per_cpu=$(median ${kcpu[$backend]})
            vs_tokio=$(awk -v a="$per_cpu" -v b="$tokio_kcpu" 'BEGIN { if (b + 0 > 0 && a == a + 0) printf "%.3f", a / b; else print "-" }')
            # shellcheck disable=SC2086 # word splitting of the collected values is intended
            results+=("$(printf '%-6s %-6s %-5s %8.0f %7s %10s %20s %5s %20s %7s   %s' "$backend" "$cores" "$width" \
                "$(median ${rps[$backend]})" "$(median ${p99[$backend]})" "$(median ${util[$backend]})%" \
                "$per_cpu" "$(median ${ushare[$backend]})%" "$(median ${kern[$backend]})" "$vs_tokio" "$pin")")
        done
        unset rps p99 kcpu util ushare kern
    done
done

echo
printf '%-6s %-6s %-5s %8s %7s %10s %20s %5s %20s %7s   %s\n' server cores width "req/s" "p99 ms" "server CPU" \
    "req per server CPU-s" user "req per kernel CPU-s" "÷ tokio" placement
for line in "${results[@]}"; do echo "$line"; done

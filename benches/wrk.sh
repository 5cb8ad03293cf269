#!/usr/bin/env bash
# benches/wrk.sh — external load on the example HTTP server, the method of
# BASELINES.md ("HTTP echo, wrk -t2, 10 s x 3 (median)").
#
# What it measures: for each backend (uring, epoll) and each server CPU set
# (one core: CPU 0; two cores: CPUs 0,1), wrk's requests/s and p99 latency
# (median of RUNS runs) against `target/release/http_echo`, plus server CPU
# time from /proc/PID/stat during the runs and requests per server CPU-second.
# wrk is pinned to the CPU the server does not use; with two server cores
# nothing is pinned (as in BASELINES.md). What it does not: compare with the
# peer runtimes (BASELINES.md has those numbers; re-measure side by side before
# claiming a ratio), or run anywhere but 127.0.0.1.
#
# Usage: benches/wrk.sh            (from anywhere inside the repository)
# Environment: DURATION=10 RUNS=3 CONNS=1000 THREADS=2 BACKENDS="uring epoll"
#              CORESETS="0 0,1" PORT=18080 HTTP_ECHO=path/to/http_echo
set -euo pipefail

DURATION=${DURATION:-10}
RUNS=${RUNS:-3}
CONNS=${CONNS:-1000}
THREADS=${THREADS:-2}
BACKENDS=${BACKENDS:-"uring epoll"}
CORESETS=${CORESETS:-"0 0,1"}
PORT=${PORT:-18080}

die() { echo "wrk.sh: $*" >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac
bin=${HTTP_ECHO:-$target/release/http_echo}

if [[ ! -x $bin ]]; then
    die "no HTTP example server at $bin.
  Build it first:  cargo build --release --bin http_echo   (in $root)
  or point HTTP_ECHO at the binary. The example takes
  --port P --cores LIST --backend uring|epoll."
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

# wrk latency "17.00ms" / "850.00us" / "1.20s" -> milliseconds
to_ms() {
    awk -v v="$1" 'BEGIN {
        n = v + 0; u = v; sub(/^[0-9.]+/, "", u);
        if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000;
        printf "%.2f", n }'
}

median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

server_pid=
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
trap cleanup EXIT

wait_listening() {
    for _ in $(seq 100); do
        kill -0 "$server_pid" 2>/dev/null || return 1
        if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    return 1
}

echo "wrk.sh: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $ncpu CPUs, Linux $(uname -r)"
echo "wrk.sh: wrk -t$THREADS -c$CONNS -d${DURATION}s --latency, median of $RUNS; server $bin"
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
    for backend in $BACKENDS; do
        "$bin" --port "$PORT" --cores "$cores" --backend "$backend" >/dev/null 2>&1 &
        server_pid=$!
        wait_listening || die "http_echo --backend $backend --cores $cores did not start listening on 127.0.0.1:$PORT"
        # Warm-up, not measured.
        "${wrk_cmd[@]}" -t"$THREADS" -c"$CONNS" -d2s http://127.0.0.1:"$PORT"/ >/dev/null 2>&1 || true
        rps=() p99=() kcpu=() util=()
        for run in $(seq "$RUNS"); do
            t0=$(cpu_ticks "$server_pid"); s0=$(date +%s.%N)
            out=$("${wrk_cmd[@]}" -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --latency "http://127.0.0.1:$PORT/") \
                || die "wrk failed against $backend (cores $cores)"
            t1=$(cpu_ticks "$server_pid"); s1=$(date +%s.%N)
            r=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
            l=$(awk '$1 == "99%" { print $2 }' <<<"$out")
            [[ -n $r && -n $l ]] || die "could not parse wrk output:
$out"
            grep -q "Non-2xx" <<<"$out" && echo "wrk.sh: warning: non-2xx responses ($backend, cores $cores)" >&2
            cpu_s=$(awk -v a="$t0" -v b="$t1" -v h="$clk" 'BEGIN { printf "%.3f", (b - a) / h }')
            rps+=("$r"); p99+=("$(to_ms "$l")")
            kcpu+=("$(awk -v r="$r" -v d="$DURATION" -v c="$cpu_s" 'BEGIN { if (c > 0) printf "%.1f", r * d / c / 1000; else print "nan" }')")
            util+=("$(awk -v c="$cpu_s" -v a="$s0" -v b="$s1" -v n="$ncores" 'BEGIN { printf "%.0f", 100 * c / (b - a) / n }')")
            echo "  $backend cores=$cores run $run: ${r} req/s, p99 $(to_ms "$l") ms, server CPU ${cpu_s} s" >&2
        done
        cleanup
        results+=("$(printf '%-6s %-6s %10.1f %9s %9s %11s   %s' "$backend" "$cores" \
            "$(awk -v r="$(median "${rps[@]}")" 'BEGIN { print r / 1000 }')" \
            "$(median "${p99[@]}")" "$(median "${util[@]}")%" "$(median "${kcpu[@]}")" "$pin")")
    done
done

echo
printf '%-6s %-6s %10s %9s %9s %11s   %s\n' backend cores kRPS "p99 ms" "srv CPU" "kreq/CPU-s" placement
for line in "${results[@]}"; do echo "$line"; done

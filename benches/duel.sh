#!/usr/bin/env bash
# benches/duel.sh — two HTTP servers measured at the same time, on the same
# CPU, so that the machine's drift hits both alike.
#
# Why: on a shared 2-vCPU VM the same server's requests per CPU-second move
# by 10–30 % between runs minutes apart, more than most differences worth
# measuring. Here both servers are pinned to CPU 0 and loaded at once, each
# by its own `wrk -t1 -cCONNS` on CPU 1, and each one's requests per
# CPU-second (CPU time from /proc/PID/stat) is divided by the other's; each
# run also splits each server's CPU time per request into user space and
# kernel, which shows whether a difference is the server's own code. The
# ratio of one run repeats within about 1 % where sequential runs scatter by
# 10 %. Each run also reports each server's median and p99 latency: both
# servers wait behind the same CPU 0 and the same client CPU, so their tails
# compare side by side where sequential runs (whose p99 at c=1000 follows
# that run's request rate) do not; the absolute values are those of a
# shared CPU, not of a server alone. What it does not measure: either server
# alone at full load (each gets about half of the client's capacity, and
# they share CPU 0's caches). Use benches/wrk.sh for that.
#
# Usage: benches/duel.sh "LABEL_A:COMMAND_A" "LABEL_B:COMMAND_B"
#   Each command is a server binary with its arguments, without --port and
#   --cores (added here: ports PORT and PORT+1, CPU 0), e.g.
#   benches/duel.sh "uring:target/release/http_echo --backend uring" \
#                   "tokio:target/release/tokio_baseline --service http"
# Environment: CONNS=1000 RUNS=3 DURATION=10 PORT=18090 URL_PATH=/
set -euo pipefail

CONNS=${CONNS:-1000}
RUNS=${RUNS:-3}
DURATION=${DURATION:-10}
PORT=${PORT:-18090}
# The path wrk asks for, on both servers.
URL_PATH=${URL_PATH:-/}

die() { echo "duel.sh: $*" >&2; exit 1; }
# shellcheck source=benches/load_common.sh
. "$(dirname "$0")/load_common.sh"
[[ $# -eq 2 && $1 == *:* && $2 == *:* ]] || die 'usage: duel.sh "LABEL_A:COMMAND_A" "LABEL_B:COMMAND_B"'
require_counts CONNS RUNS DURATION PORT
command -v wrk >/dev/null 2>&1 || die "wrk is not installed (apt-get install -y wrk)"
command -v taskset >/dev/null 2>&1 || die "taskset (util-linux) is required"
[[ $(nproc) -ge 2 ]] || die "needs two CPUs: the servers share CPU 0, the clients use CPU 1"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

duel_setup "$1" "$2"

echo "duel.sh: ${labels[0]} vs ${labels[1]}, both on CPU 0, wrk -t1 -c$CONNS -d${DURATION}s each on CPU 1, $RUNS runs"
ratios=()
p99s_a=()
p99s_b=()
for run in $(seq "$RUNS"); do
    duel_start
    # Warm-up, not measured.
    for i in 0 1; do
        taskset -c 1 wrk -t1 -c"$CONNS" -d2s "http://127.0.0.1:$((PORT + i))$URL_PATH" >/dev/null 2>&1 &
        clients+=($!)
    done
    wait "${clients[@]}" || true
    clients=()
    t0=("$(cpu_ticks "${pids[0]}")" "$(cpu_ticks "${pids[1]}")")
    u0=("$(user_ticks "${pids[0]}")" "$(user_ticks "${pids[1]}")")
    for i in 0 1; do
        taskset -c 1 wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "http://127.0.0.1:$((PORT + i))$URL_PATH" >"$tmp/wrk.$i" 2>&1 &
        clients+=($!)
    done
    for pid in "${clients[@]}"; do wait "$pid" || die "wrk failed"; done
    clients=()
    t1=("$(cpu_ticks "${pids[0]}")" "$(cpu_ticks "${pids[1]}")")
    u1=("$(user_ticks "${pids[0]}")" "$(user_ticks "${pids[1]}")")
    duel_stop
    per_cpu=()
    for i in 0 1; do
        out=$(cat "$tmp/wrk.$i")
        r=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
        [[ -n $r ]] || die "could not parse wrk output:
$out"
        grep -qE "Non-2xx|Socket errors" <<<"$out" && echo "duel.sh: warning: ${labels[$i]}: $(grep -E 'Non-2xx|Socket errors' <<<"$out")" >&2
        per_cpu+=("$(awk -v r="$r" -v d="$DURATION" -v a="${t0[$i]}" -v b="${t1[$i]}" -v h="$(getconf CLK_TCK)" \
            'BEGIN { printf "%.0f", r * d / ((b - a) / h) }')")
        # Where the CPU time went, in microseconds per request: user space
        # (the server's own code) and kernel (mostly TCP, alike for all).
        split=$(awk -v r="$r" -v d="$DURATION" -v a="${t0[$i]}" -v b="${t1[$i]}" -v ua="${u0[$i]}" -v ub="${u1[$i]}" \
            -v h="$(getconf CLK_TCK)" 'BEGIN { n = r * d; printf "user %.2f + kernel %.2f us/req", (ub - ua) / h * 1e6 / n, ((b - a) - (ub - ua)) / h * 1e6 / n }')
        p50=$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")")
        p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
        if [[ $i -eq 0 ]]; then p99s_a+=("$p99"); else p99s_b+=("$p99"); fi
        printf '  run %d: %-8s %9.0f req/s %9s req per CPU-s (%s; p50 %s ms, p99 %s ms)\n' \
            "$run" "${labels[$i]}" "$r" "${per_cpu[$i]}" "$split" "$p50" "$p99" >&2
    done
    ratios+=("$(awk -v a="${per_cpu[0]}" -v b="${per_cpu[1]}" 'BEGIN { printf "%.3f", a / b }')")
done
median=$(median "${ratios[@]}")
echo "${labels[0]} ÷ ${labels[1]} (requests per server CPU-second; above 1: ${labels[0]} cheaper): runs ${ratios[*]}, median $median"
p99_ratios=()
for k in "${!p99s_a[@]}"; do
    p99_ratios+=("$(awk -v a="${p99s_a[$k]}" -v b="${p99s_b[$k]}" 'BEGIN { printf "%.3f", a / b }')")
done
echo "${labels[0]} ÷ ${labels[1]} (p99 latency; below 1: ${labels[0]}'s tail shorter): runs ${p99_ratios[*]}, median $(median "${p99_ratios[@]}");" \
    "p99 medians ${labels[0]} $(median "${p99s_a[@]}") ms, ${labels[1]} $(median "${p99s_b[@]}") ms"

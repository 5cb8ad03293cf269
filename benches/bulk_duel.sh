#!/usr/bin/env bash
# benches/bulk_duel.sh — two echo servers streaming bulk data at the same
# time, on the same CPU: duel.sh for throughput instead of requests.
#
# Why: a bulk transfer's cost per byte is mostly the kernel's copies, and
# how warm the buffers they touch are; sequential runs on a shared VM
# scatter by 10–20 %, more than the differences worth measuring. Here both
# servers are pinned to CPU 0 and each streams through one connection from
# its own `bulk_client` on CPU 1 (writing CHUNK-byte buffers without
# waiting, reading the echo concurrently) for DURATION seconds; each one's
# bytes per CPU-second (CPU time from /proc/PID/stat) is divided by the
# other's.
#
# Usage: benches/bulk_duel.sh "LABEL_A:COMMAND_A" "LABEL_B:COMMAND_B"
#   Each command is an echo server with its arguments, without --port and
#   --cores (added here: ports PORT and PORT+1, CPU 0), e.g.
#   benches/bulk_duel.sh "uring:target/release/echo --backend uring" \
#                        "tokio:target/release/tokio_baseline --service echo"
# Environment: CHUNK=1048576 RUNS=3 DURATION=5 PORT=18070
#   LOCKSTEP=1: each client writes one CHUNK and reads its echo before the
#   next (the pattern of `cargo bench`'s unidirectional cells)
#   BULK_CLIENT=path/to/bulk_client (default: the workspace's
#   target/release/bulk_client, or $CARGO_TARGET_DIR/release/bulk_client;
#   cargo build --release -p percore-benches)
set -euo pipefail

CHUNK=${CHUNK:-1048576}
RUNS=${RUNS:-3}
DURATION=${DURATION:-5}
PORT=${PORT:-18070}
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac
BULK_CLIENT=${BULK_CLIENT:-$target/release/bulk_client}
LOCKSTEP=${LOCKSTEP:-0}
mode=()
[[ $LOCKSTEP == 1 ]] && mode=(--lockstep)

die() { echo "bulk_duel.sh: $*" >&2; exit 1; }
# shellcheck source=benches/load_common.sh
. "$(dirname "$0")/load_common.sh"
[[ $# -eq 2 && $1 == *:* && $2 == *:* ]] || die 'usage: bulk_duel.sh "LABEL_A:COMMAND_A" "LABEL_B:COMMAND_B"'
require_counts CHUNK RUNS DURATION PORT
[[ -x $BULK_CLIENT ]] || die "$BULK_CLIENT not found (cargo build --release -p percore-benches)"
command -v taskset >/dev/null 2>&1 || die "taskset (util-linux) is required"
[[ $(nproc) -ge 2 ]] || die "needs two CPUs: the servers share CPU 0, the clients use CPU 1"

duel_setup "$1" "$2"

echo "bulk_duel.sh: ${labels[0]} vs ${labels[1]}, both on CPU 0, ${CHUNK}-byte writes${mode:+ in lockstep} for ${DURATION}s each from CPU 1, $RUNS runs"
ratios=()
for run in $(seq "$RUNS"); do
    duel_start
    t0=("$(cpu_ticks "${pids[0]}")" "$(cpu_ticks "${pids[1]}")")
    for i in 0 1; do
        taskset -c 1 "$BULK_CLIENT" $((PORT + i)) "$DURATION" "$CHUNK" "${mode[@]}" >"$tmp/bytes.$i" &
        clients+=($!)
    done
    for pid in "${clients[@]}"; do wait "$pid" || die "bulk_client failed"; done
    clients=()
    t1=("$(cpu_ticks "${pids[0]}")" "$(cpu_ticks "${pids[1]}")")
    duel_stop
    per_cpu=()
    for i in 0 1; do
        bytes=$(cat "$tmp/bytes.$i")
        per_cpu+=("$(awk -v n="$bytes" -v a="${t0[$i]}" -v b="${t1[$i]}" -v h="$(getconf CLK_TCK)" \
            'BEGIN { printf "%.0f", n / 1e6 / ((b - a) / h) }')")
        printf '  run %d: %-8s %6.0f MB echoed %7s MB per CPU-s\n' "$run" "${labels[$i]}" \
            "$(awk -v n="$bytes" 'BEGIN { print n / 1e6 }')" "${per_cpu[$i]}" >&2
    done
    ratios+=("$(awk -v a="${per_cpu[0]}" -v b="${per_cpu[1]}" 'BEGIN { printf "%.3f", a / b }')")
done
median=$(median "${ratios[@]}")
echo "${labels[0]} ÷ ${labels[1]} (bytes echoed per server CPU-second; above 1: ${labels[0]} cheaper): runs ${ratios[*]}, median $median"

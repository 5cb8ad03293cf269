#!/usr/bin/env bash
# Duel smoke test: `percore_baseline` answers curl (GET, POST echo), one
# short `benches/duel.sh` run against `tokio_baseline` completes with a ratio
# and no socket error or non-2xx answer, and one short `benches/bulk_duel.sh`
# run of the echo server against tokio's echoes every byte (bulk_client
# fails otherwise) and prints a ratio. Ratios are printed, not judged (a few
# seconds on a shared machine decide nothing).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "duel_smoke: FAIL: $*" >&2; exit 1; }

cargo build --release -p percore-benches --bin percore_baseline --bin tokio_baseline --bin bulk_client
cargo build --release -p percore-examples --bin echo

port=18195
target/release/percore_baseline --port "$port" --cores 0 >/dev/null 2>&1 &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" && break
    sleep 0.05
done
got=$(curl -s "http://127.0.0.1:$port/")
[ "$got" = '{"message":"Hello!"}' ] || fail "GET answered '$got'"
got=$(curl -s -X POST -H 'Content-Type: text/plain' --data-binary 'ping body' "http://127.0.0.1:$port/")
[ "$got" = 'ping body' ] || fail "POST answered '$got'"
kill -TERM "$pid"
wait "$pid" || fail "percore_baseline exited with status $? on SIGTERM"
trap - EXIT
echo "duel_smoke: percore_baseline answers GET and POST, stops on SIGTERM"

log=$(mktemp)
CONNS=32 RUNS=1 DURATION=2 benches/duel.sh \
    "percore:target/release/percore_baseline --backend auto" \
    "tokio:target/release/tokio_baseline --service http" 2>"$log" | tee "$log.out"
cat "$log"
grep -q "warning" "$log" && fail "wrk reported errors (see above)"
grep -q "median" "$log.out" || fail "duel.sh printed no ratio"
grep -q "(p99 latency; below 1: [^)]*): runs [0-9.]" "$log.out" || fail "duel.sh printed no latency ratio"
rm -f "$log" "$log.out"

RUNS=1 DURATION=1 benches/bulk_duel.sh \
    "percore:target/release/echo --backend auto" \
    "tokio:target/release/tokio_baseline --service echo" | tee "$log.out"
grep -q "median" "$log.out" || fail "bulk_duel.sh printed no ratio"
rm -f "$log.out"
echo "duel_smoke: ok"

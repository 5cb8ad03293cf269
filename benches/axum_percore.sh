#!/usr/bin/env bash
# benches/axum_percore.sh — tokio-based code on percore against tokio, in
# one run:
#
# 1. The same axum app (benches/src/bin/axum_api.rs) served by percore
#    (percore-tokio's HyperHandler; io_uring, then epoll) and by tokio
#    (one current-thread runtime per core, as axum::serve runs it), each
#    pair measured at once by benches/duel.sh: both servers on CPU 0, each
#    loaded by its own wrk on CPU 1; requests per server CPU-second,
#    percore's ÷ tokio's (above 1: percore cheaper).
# 2. One tokio-postgres `SELECT 1` round trip from a task on a percore
#    core against the same from a tokio task (pg_roundtrip), against a
#    PostgreSQL this script starts in a temporary directory (as the
#    postgres user when root) and stops at the end.
#
# What it does not measure: the app's other routes (wrk asks for
# GET /users/42), tokio's multi-thread runtime, or queries under load.
#
# Usage: benches/axum_percore.sh
# Environment: CONNS=100 RUNS=3 DURATION=5 PORT=18090 QUERIES=2000 ROUNDS=3
#   AXUM_API and PG_ROUNDTRIP name the binaries (default: built here, in
#   release, under ${CARGO_TARGET_DIR:-target}).
set -euo pipefail
cd "$(dirname "$0")/.."

CONNS=${CONNS:-100}
RUNS=${RUNS:-3}
DURATION=${DURATION:-5}
PORT=${PORT:-18090}
QUERIES=${QUERIES:-2000}
ROUNDS=${ROUNDS:-3}
die() { echo "axum_percore.sh: $*" >&2; exit 1; }

target=${CARGO_TARGET_DIR:-target}/release
if [[ -z ${AXUM_API:-} || -z ${PG_ROUNDTRIP:-} ]]; then
    cargo build --release -q -p percore-benches --bin axum_api --bin pg_roundtrip
fi
axum=${AXUM_API:-$target/axum_api}
pg_roundtrip=${PG_ROUNDTRIP:-$target/pg_roundtrip}

echo "== axum app: percore vs tokio current-thread (GET /users/42)"
for backend in uring epoll; do
    CONNS=$CONNS RUNS=$RUNS DURATION=$DURATION PORT=$PORT URL_PATH=/users/42 benches/duel.sh \
        "axum-on-$backend:$axum --on-percore $backend" "axum-on-tokio-ct:$axum"
done

echo "== SELECT 1 round trip: from a percore core vs from a tokio task"
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[[ -x $bin/initdb ]] || die "PostgreSQL is not installed (apt-get install -y postgresql)"
dir=$(mktemp -d /tmp/percore-pg-bench.XXXXXX)
as_pg=()
if [[ $(id -u) -eq 0 ]]; then
    chown postgres: "$dir"
    as_pg=(runuser -u postgres --)
fi
pg_port=$((PORT + 7))
trap '"${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
"${as_pg[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync >/dev/null
"${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
    -o "-p $pg_port -c listen_addresses=127.0.0.1 -k $dir -c fsync=off" start >/dev/null
"$pg_roundtrip" --config "host=127.0.0.1 port=$pg_port user=postgres dbname=postgres" \
    --queries "$QUERIES" --rounds "$ROUNDS"

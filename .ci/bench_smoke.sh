#!/usr/bin/env bash
# Runs `cargo bench -- --quick` from the workspace root (as a user would) and
# checks that the report was written with a row for every executor (the
# api cells' json_api included); then a short benches/tls.sh, which must
# print a row for every server, and api_parity.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/percore-bench
rm -rf "$out"
# The api cells run the json_api example, which cargo bench cannot build.
cargo build --release -p percore-examples --bin json_api
cargo bench -- --quick
for f in results.csv report.md; do
    test -s "$out/$f" || { echo "bench smoke: $out/$f missing or empty" >&2; exit 1; }
done
ls "$out"/*.svg >/dev/null || { echo "bench smoke: no SVG chart written" >&2; exit 1; }
for exec in uring epoll tokio-ct tokio-mt; do
    rows=$(awk -F, -v e="$exec" 'NR > 1 && $3 == e' "$out/results.csv" | wc -l)
    if [ "$rows" -eq 0 ]; then
        echo "bench smoke: no result row for executor $exec" >&2
        exit 1
    fi
    echo "bench smoke: $exec has $rows rows"
done
for exec in uring epoll tokio-ct; do
    awk -F, -v e="$exec" 'NR > 1 && $3 == e && $1 ~ /^api/' "$out/results.csv" | grep -q . ||
        { echo "bench smoke: no api row for executor $exec" >&2; exit 1; }
done
for exec in uring epoll tokio-ct tokio-mt; do
    awk -F, -v e="$exec" 'NR > 1 && $3 == e && $1 ~ /^h2_server/' "$out/results.csv" | grep -q . ||
        { echo "bench smoke: no h2_server row for executor $exec" >&2; exit 1; }
done
grep -q '^## io_uring against epoll' "$out/report.md" \
    || { echo "bench smoke: report.md has no io_uring against epoll section" >&2; exit 1; }

# The HTTPS comparison, briefly: every server and both modes give a row.
tls_out=$(RUNS=1 DURATION=2 TLS_API=1 benches/tls.sh)
echo "$tls_out"
for mode in keepalive handshake; do
    for server in uring epoll hyper nginx; do
        grep -qE "^$mode +$server +[0-9]+ +[0-9]+ " <<<"$tls_out" ||
            { echo "bench smoke: tls.sh has no $mode row for $server" >&2; exit 1; }
    done
done
grep -q '^ring buffered ' <<<"$tls_out" || { echo "bench smoke: tls_api printed no result" >&2; exit 1; }

# The JSON API servers answer alike (percore's json_api and axum_api).
benches/api_parity.sh

#!/usr/bin/env bash
# wrk smoke through the fan-out proxy: release build, two http_echo
# upstreams and the proxy (width 4) on free ports, wrk -t1 -c16 -d3s; fails
# on any socket error or non-2xx answer, then stops everything with SIGTERM
# and checks that each server exits with status 0.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=.ci/tools.sh
. .ci/tools.sh
need_tools wrk curl

cargo build --release -p percore-examples --bin http_echo --bin fanout
bin=target/release
log=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]+"${pids[@]}"}"; do kill -KILL "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# Starts "$@" (with --port 0), waits for its "listening on ADDR" line and
# sets PORT. Runs in this shell (not a $(...) subshell) so that the pid
# lands in `pids`. The log is created first: the background child opens
# it for writing only once it runs, which may be after the first read.
start() {
    local name=$1; shift
    : >"$log/$name.err"
    "$@" --port 0 --host 127.0.0.1 >"$log/$name.out" 2>"$log/$name.err" &
    pids+=("$!")
    local pid=$!
    for _ in $(seq 1 200); do
        local addr
        addr=$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$log/$name.err" | head -1)
        if [ -n "$addr" ]; then PORT=${addr##*:}; return 0; fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    echo "fanout smoke: $name did not start" >&2; cat "$log/$name.err" >&2; return 1
}

export NO_COLOR=1 RUST_LOG=info
start up1 "$bin/http_echo"; up1=$PORT
start up2 "$bin/http_echo"; up2=$PORT
start proxy "$bin/fanout" --upstream "127.0.0.1:$up1" --upstream "127.0.0.1:$up2" --width 4; px=$PORT
url="http://127.0.0.1:$px/"

body=$(curl -sf "$url")
echo "fanout smoke: one answer: $body"
[ "$(grep -o '"status":200' <<<"$body" | wc -l)" -eq 4 ] || { echo "fanout smoke: expected 4 entries" >&2; exit 1; }

out=$(wrk -t1 -c16 -d3s "$url")
echo "$out"
if grep -q "Socket errors" <<<"$out"; then echo "fanout smoke: socket errors" >&2; exit 1; fi
if grep -q "Non-2xx" <<<"$out"; then echo "fanout smoke: non-2xx responses" >&2; exit 1; fi
reqs=$(awk '/requests in/ {print $1}' <<<"$out")
[ "${reqs:-0}" -gt 0 ] || { echo "fanout smoke: no requests completed" >&2; exit 1; }

# Graceful stop: proxy first, then the upstreams; each must exit 0.
status=0
for i in 2 0 1; do
    p=${pids[$i]}
    kill -TERM "$p"
    if wait "$p"; then :; else
        rc=$?; echo "fanout smoke: process $p exited with $rc" >&2; status=1
    fi
done
pids=()
grep -h "fanout requests=" "$log/proxy.err" || true
[ "$status" -eq 0 ] && echo "fanout smoke: ok ($reqs requests)"
exit "$status"

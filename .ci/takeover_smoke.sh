#!/usr/bin/env bash
# Restart smoke test: on each backend, the release http_echo is replaced
# under wrk load by a second one started with --take-over, and the first
# is stopped with SIGTERM. wrk must see no socket error and no non-2xx
# answer, and both servers must exit with status 0. Runs in a network
# namespace of its own (root), where net.ipv4.tcp_migrate_req is set to 1
# without touching the machine's setting.
#
# Usage: .ci/takeover_smoke.sh        (from anywhere in the repository)
set -euo pipefail
cd "$(dirname "$0")/.."

bin=target/release/http_echo
port=8080

if [ "${1:-}" != "--inside" ]; then
    # shellcheck source=.ci/tools.sh
    . .ci/tools.sh
    need_tools wrk ip:iproute2
    echo "takeover_smoke: building http_echo (release)"
    cargo build --release -p percore-examples --bin http_echo
    exec unshare --net "$0" --inside
fi

work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill -KILL "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

fail() {
    echo "takeover_smoke: FAIL: $*" >&2
    for log in "$work"/*.log; do
        echo "--- $log ---" >&2
        tail -n 20 "$log" >&2
    done
    exit 1
}

# Waits for a server's "listening on" line.
wait_listening() {
    for _ in $(seq 100); do
        grep -q "listening on" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    fail "no 'listening on' line in $1"
}

ip link set lo up
sysctl -qw net.ipv4.tcp_migrate_req=1

for backend in uring epoll; do
    rm -f "$work"/*.log
    "$bin" --backend "$backend" --port "$port" --host 127.0.0.1 >"$work/old.log" 2>&1 &
    old=$!
    pids+=("$old")
    wait_listening "$work/old.log"
    wrk -t2 -c50 -d5s "http://127.0.0.1:$port/" >"$work/wrk.txt" 2>&1 &
    load=$!
    pids+=("$load")
    sleep 1.5
    "$bin" --backend "$backend" --port "$port" --host 127.0.0.1 --take-over >"$work/new.log" 2>&1 &
    new=$!
    pids+=("$new")
    wait_listening "$work/new.log"
    grep -q "take-over: sharing the port" "$work/new.log" || fail "$backend: the new server did not say it shares the port"
    sleep 1
    kill -TERM "$old"
    wait "$old" || fail "$backend: the old server exited with status $?"
    wait "$load" || fail "$backend: wrk failed"
    kill -TERM "$new"
    wait "$new" || fail "$backend: the new server exited with status $?"
    requests=$(awk '/ requests in / {print $1}' "$work/wrk.txt")
    [ -n "$requests" ] && [ "$requests" -gt 0 ] || fail "$backend: wrk completed no request: $(cat "$work/wrk.txt")"
    if grep -qE "Socket errors|Non-2xx" "$work/wrk.txt"; then
        fail "$backend: errors during the hand-over: $(grep -E 'Socket errors|Non-2xx' "$work/wrk.txt")"
    fi
    echo "takeover_smoke: $backend: $requests requests through the hand-over, no socket error, no non-2xx"
done

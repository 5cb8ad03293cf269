#!/usr/bin/env bash
# UDP smoke test: the release stats_collector on each backend takes statsd
# lines sent by bash's /dev/udp (counters, a sampled counter, a gauge, a
# timing and a bad line), paced by its own received count, answers curl
# on /metrics with the exact totals, and stops on SIGTERM with exit
# status 0.
#
# Usage: .ci/udp_smoke.sh            (from anywhere in the repository)
# Env:   SMOKE_BACKENDS="uring epoll"
set -euo pipefail
cd "$(dirname "$0")/.."

backends="${SMOKE_BACKENDS:-uring epoll}"
bin=target/release/stats_collector
work="$(mktemp -d)"
server_pid=""

cleanup() {
    [ -n "$server_pid" ] && kill -KILL "$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

fail() {
    echo "udp_smoke: FAIL: $*" >&2
    [ -f "$work/server.log" ] && { echo "--- server.log ---" >&2; tail -n 30 "$work/server.log" >&2; }
    exit 1
}

# shellcheck source=.ci/tools.sh
. .ci/tools.sh
need_tools curl

echo "udp_smoke: building stats_collector (release)"
cargo build --release -p percore-examples --bin stats_collector

# The value of one metric line in /metrics ("" when absent).
metric() {
    curl -fsS "http://127.0.0.1:$http_port/metrics" | awk -v k="$1" '$1 == k { print $2 }'
}

# Waits (a minute at most) until the collector has counted $1 datagrams.
wait_counted() {
    local want="$1" got
    for _ in $(seq 1 600); do
        got="$(metric statsd_datagrams_received_total)"
        [ "$got" = "$want" ] && return 0
        sleep 0.1
    done
    fail "$backend: $got of $want datagrams counted after a minute"
}

rounds=50
for backend in $backends; do
    : >"$work/server.log"
    "$bin" --backend "$backend" --host 127.0.0.1 --port 0 --udp-port 0 >"$work/server.log" 2>&1 &
    server_pid=$!
    line=""
    for _ in $(seq 1 100); do
        line="$(grep -m1 'listening on' "$work/server.log" || true)"
        [ -n "$line" ] && break
        sleep 0.1
    done
    [ -n "$line" ] || fail "$backend: no start line"
    http_port="$(sed -E 's/.*listening on [0-9.]+:([0-9]+).*/\1/' <<<"$line")"
    udp_port="$(sed -E 's/.*statsd on udp [0-9.]+:([0-9]+).*/\1/' <<<"$line")"
    echo "udp_smoke: $backend: http $http_port, udp $udp_port"
    for i in $(seq 1 "$rounds"); do
        msg="$(printf 'smoke.hits:1|c\nsmoke.sampled:1|c|@0.5\nsmoke.gauge:%d|g\nsmoke.ms:%d|ms\nbad line' "$i" "$i")"
        # One write, so one datagram: bash's printf may write line by line.
        cat <<<"$msg" >"/dev/udp/127.0.0.1/$udp_port"
        # Each datagram comes from a new socket, so any core may take it:
        # waiting for each to be counted keeps the gauge's sets in order
        # (and loopback UDP from dropping what a full socket cannot take).
        wait_counted "$i"
    done
    wait_counted "$rounds"
    check() {
        local got
        got="$(metric "$1")"
        [ "$got" = "$2" ] || fail "$backend: $1 is '$got', not $2"
    }
    check 'statsd_counter_total{name="smoke.hits"}' "$rounds"
    check 'statsd_counter_total{name="smoke.sampled"}' "$((rounds * 2))"
    check 'statsd_gauge{name="smoke.gauge"}' "$rounds"
    check 'statsd_timing_ms_count{name="smoke.ms"}' "$rounds"
    check 'statsd_timing_ms_sum{name="smoke.ms"}' "$((rounds * (rounds + 1) / 2))"
    check 'statsd_timing_ms_max{name="smoke.ms"}' "$rounds"
    check statsd_bad_lines_total "$rounds"
    kill -TERM "$server_pid"
    status=0
    wait "$server_pid" || status=$?
    server_pid=""
    [ "$status" = 0 ] || fail "$backend: exit status $status after SIGTERM"
    echo "udp_smoke: $backend: ok ($rounds datagrams, totals exact, clean stop)"
done
echo "udp_smoke: PASS"

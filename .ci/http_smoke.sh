#!/usr/bin/env bash
# HTTP smoke test: the release http_echo on each backend answers curl (GET,
# POST) and survives a short wrk run with no socket error and no non-2xx
# answer, then stops on SIGTERM with exit status 0. Prints requests/s, p99
# and requests per server CPU-second (less sensitive to a busy machine than
# requests/s) per backend side by side at the end.
#
# Usage: .ci/http_smoke.sh            (from anywhere in the repository)
# Env:   SMOKE_DURATION=3s SMOKE_CONNECTIONS=32 SMOKE_BACKENDS="uring epoll"
set -euo pipefail
cd "$(dirname "$0")/.."

duration="${SMOKE_DURATION:-3s}"
connections="${SMOKE_CONNECTIONS:-32}"
backends="${SMOKE_BACKENDS:-uring epoll}"
bin=target/release/http_echo
work="$(mktemp -d)"
server_pid=""

cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -KILL "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# User + system CPU time of a process, in clock ticks (/proc/PID/stat
# fields 14 and 15; the command name in field 2 has no spaces here).
cpu_ticks() {
    awk '{print $14 + $15}' "/proc/$1/stat"
}

fail() {
    echo "http_smoke: FAIL: $*" >&2
    if [ -f "$work/server.log" ]; then
        echo "--- server log ---" >&2
        tail -n 40 "$work/server.log" >&2
    fi
    exit 1
}

# shellcheck source=.ci/tools.sh
. .ci/tools.sh
need_tools curl wrk

echo "http_smoke: building http_echo (release)"
cargo build --release -p percore-examples --bin http_echo

# The server runs on the first CPU and wrk on the second, when there is one.
cpus="$(nproc)"
server_cpu=0
client=()
if [ "$cpus" -ge 2 ] && command -v taskset >/dev/null 2>&1; then
    client=(taskset -c 1)
fi

results=()
for backend in $backends; do
    echo
    echo "=== http_smoke: $backend"
    : >"$work/server.log"
    NO_COLOR=1 RUST_LOG=info "$bin" --host 127.0.0.1 --port 0 --cores "$server_cpu" \
        --backend "$backend" >/dev/null 2>"$work/server.log" &
    server_pid=$!

    # The port is in the "listening on ADDR" log line (port 0 picks a free one).
    addr=""
    for _ in $(seq 1 100); do
        addr="$(sed 's/\x1b\[[0-9;]*m//g' "$work/server.log" |
            sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' | head -n 1)"
        [ -n "$addr" ] && break
        kill -0 "$server_pid" 2>/dev/null || fail "$backend: http_echo exited during start-up"
        sleep 0.05
    done
    [ -n "$addr" ] || fail "$backend: no 'listening on' line within 5 s"
    sed 's/\x1b\[[0-9;]*m//g' "$work/server.log" | grep -q "($backend backend" || fail "$backend: the server runs another backend"
    url="http://$addr"
    echo "http_smoke: $backend server at $url (pid $server_pid)"

    # --- curl: GET and POST.
    got="$(curl --silent --show-error --max-time 5 --include "$url/")" || fail "$backend: curl GET"
    case "$got" in
        "HTTP/1.1 200 OK"*'{"message":"Hello!"}') ;;
        *) fail "$backend: unexpected GET answer: $got" ;;
    esac
    grep -qi '^content-type: application/json' <<<"$got" || fail "$backend: GET lacks the JSON content type"
    got="$(curl --silent --show-error --max-time 5 -H 'Content-Type: text/plain' \
        --data-binary 'smoke test body' "$url/echo")" || fail "$backend: curl POST"
    [ "$got" = "smoke test body" ] || fail "$backend: POST echoed '$got'"
    echo "http_smoke: curl GET and POST ok"

    # --- wrk: keep-alive load; any socket error or non-2xx answer fails.
    cpu_before="$(cpu_ticks "$server_pid")"
    "${client[@]}" wrk -t1 -c"$connections" -d"$duration" --latency "$url/" >"$work/wrk.txt" 2>&1 ||
        { cat "$work/wrk.txt"; fail "$backend: wrk failed"; }
    cat "$work/wrk.txt"
    if grep -q "Socket errors" "$work/wrk.txt"; then
        fail "$backend: wrk saw socket errors"
    fi
    if grep -q "Non-2xx or 3xx" "$work/wrk.txt"; then
        fail "$backend: wrk saw non-2xx answers"
    fi
    cpu_after="$(cpu_ticks "$server_pid")"
    rps="$(awk '/^Requests\/sec:/ {print $2}' "$work/wrk.txt")"
    total="$(awk '/requests in/ {print $1}' "$work/wrk.txt")"
    ticks=$((cpu_after - cpu_before))
    hz="$(getconf CLK_TCK)"
    per_cpu_s="n/a"
    if [ "$ticks" -gt 0 ] && [ -n "$total" ]; then
        per_cpu_s=$((total * hz / ticks))
    fi
    p99="$(awk '$1 == "99%" {print $2}' "$work/wrk.txt")"
    [ -n "$rps" ] || fail "$backend: no Requests/sec in the wrk output"

    # --- SIGTERM: a graceful stop with exit status 0, within 15 s.
    kill -TERM "$server_pid"
    for _ in $(seq 1 150); do
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$server_pid" 2>/dev/null; then
        fail "$backend: http_echo still running 15 s after SIGTERM"
    fi
    status=0
    wait "$server_pid" || status=$?
    server_pid=""
    [ "$status" -eq 0 ] || fail "$backend: http_echo exited with status $status after SIGTERM"
    echo "http_smoke: $backend stopped cleanly on SIGTERM"
    results+=("$(printf '%-8s %14s %10s %16s' "$backend" "$rps" "$p99" "$per_cpu_s")")
done

echo
echo "http_smoke: wrk -t1 -c$connections -d$duration, server on CPU $server_cpu"
printf '%-8s %14s %10s %16s\n' backend requests/s p99 req/server-cpu-s
printf '%s\n' "${results[@]}"
echo "http_smoke: ok"

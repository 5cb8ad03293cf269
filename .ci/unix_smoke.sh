#!/usr/bin/env bash
# Unix-socket smoke test: the release http_echo with --unix PATH on each
# backend answers curl on the socket itself (--unix-socket), then nginx in
# front of it (proxy_pass http://unix:PATH:) answers curl and a short wrk
# run with no socket error and no non-2xx answer; the server stops on
# SIGTERM with exit status 0 and removes its socket file.
#
# Usage: .ci/unix_smoke.sh            (from anywhere in the repository)
# Env:   SMOKE_DURATION=3s SMOKE_BACKENDS="uring epoll"
set -euo pipefail
cd "$(dirname "$0")/.."

duration="${SMOKE_DURATION:-3s}"
backends="${SMOKE_BACKENDS:-uring epoll}"
bin=target/release/http_echo
work="$(mktemp -d)"
server_pid=""
nginx_pid=""

cleanup() {
    for pid in "$server_pid" "$nginx_pid"; do
        [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

fail() {
    echo "unix_smoke: FAIL: $*" >&2
    for log in server.log error.log; do
        [ -f "$work/$log" ] && { echo "--- $log ---" >&2; tail -n 30 "$work/$log" >&2; }
    done
    exit 1
}

# shellcheck source=.ci/tools.sh
. .ci/tools.sh
need_tools curl wrk nginx

echo "unix_smoke: building http_echo (release)"
cargo build --release -p percore-examples --bin http_echo

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
sock="$work/http.sock"
cat >"$work/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path $work;
    proxy_temp_path $work;
    fastcgi_temp_path $work;
    uwsgi_temp_path $work;
    scgi_temp_path $work;
    server {
        listen 127.0.0.1:$port;
        location / {
            proxy_pass http://unix:$sock:;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
CONF
nginx -p "$work" -c "$work/nginx.conf" 2>/dev/null &
nginx_pid=$!
disown "$nginx_pid"
for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    kill -0 "$nginx_pid" 2>/dev/null || fail "nginx exited during start-up"
    sleep 0.05
done

for backend in $backends; do
    echo
    echo "=== unix_smoke: $backend"
    : >"$work/server.log"
    NO_COLOR=1 RUST_LOG=info "$bin" --port 0 --cores 0 --backend "$backend" --unix "$sock" \
        >/dev/null 2>"$work/server.log" &
    server_pid=$!
    for _ in $(seq 1 100); do
        grep -q "and unix:$sock" "$work/server.log" && break
        kill -0 "$server_pid" 2>/dev/null || fail "$backend: http_echo exited during start-up"
        sleep 0.05
    done
    grep -q "and unix:$sock" "$work/server.log" || fail "$backend: not listening on $sock"
    grep -q "($backend backend" "$work/server.log" || fail "$backend: the server runs another backend"

    got="$(curl --silent --show-error --max-time 5 --unix-socket "$sock" http://localhost/)" ||
        fail "$backend: curl --unix-socket"
    [ "$got" = '{"message":"Hello!"}' ] || fail "$backend: curl --unix-socket got '$got'"
    got="$(curl --silent --show-error --max-time 5 --include "http://127.0.0.1:$port/")" ||
        fail "$backend: curl through nginx"
    case "$got" in
        "HTTP/1.1 200 OK"*'{"message":"Hello!"}') ;;
        *) fail "$backend: unexpected answer through nginx: $got" ;;
    esac
    echo "unix_smoke: curl on the socket and through nginx ok"

    wrk -t1 -c16 -d"$duration" "http://127.0.0.1:$port/" >"$work/wrk.txt" 2>&1 ||
        { cat "$work/wrk.txt"; fail "$backend: wrk failed"; }
    cat "$work/wrk.txt"
    grep -q "Socket errors" "$work/wrk.txt" && fail "$backend: wrk saw socket errors"
    grep -q "Non-2xx or 3xx" "$work/wrk.txt" && fail "$backend: wrk saw non-2xx answers"

    kill -TERM "$server_pid"
    status=0
    wait "$server_pid" || status=$?
    server_pid=""
    [ "$status" -eq 0 ] || fail "$backend: http_echo exited with status $status after SIGTERM"
    [ -e "$sock" ] && fail "$backend: the socket file outlived the server"
    echo "unix_smoke: $backend stopped cleanly; socket file removed"
done
echo "unix_smoke: ok"

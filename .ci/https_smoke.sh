#!/usr/bin/env bash
# HTTPS smoke test: the release http_echo with --tls-cert/--tls-key (a CA
# and a certificate made here by openssl) on each backend answers curl
# (verifying the certificate), openssl s_client (TLS 1.3 and 1.2, ALPN),
# and a short wrk run over https with no socket error and no non-2xx
# answer, then stops on SIGTERM with exit status 0.
#
# Usage: .ci/https_smoke.sh            (from anywhere in the repository)
# Env:   SMOKE_DURATION=3s SMOKE_BACKENDS="uring epoll"
set -euo pipefail
cd "$(dirname "$0")/.."

duration="${SMOKE_DURATION:-3s}"
backends="${SMOKE_BACKENDS:-uring epoll}"
bin=target/release/http_echo
work="$(mktemp -d)"
server_pid=""

cleanup() {
    [ -n "$server_pid" ] && kill -KILL "$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

fail() {
    echo "https_smoke: FAIL: $*" >&2
    [ -f "$work/server.log" ] && { echo "--- server log ---" >&2; tail -n 30 "$work/server.log" >&2; }
    exit 1
}

# shellcheck source=.ci/tools.sh
. .ci/tools.sh
need_tools curl wrk openssl

echo "https_smoke: building http_echo (release)"
cargo build --release -p percore-examples --bin http_echo

benches/make_certs.sh "$work"

for backend in $backends; do
    echo
    echo "=== https_smoke: $backend"
    : >"$work/server.log"
    NO_COLOR=1 RUST_LOG=info "$bin" --port 0 --cores 0 --backend "$backend" \
        --tls-cert "$work/cert.pem" --tls-key "$work/key.pem" >/dev/null 2>"$work/server.log" &
    server_pid=$!
    port=""
    for _ in $(seq 1 100); do
        port="$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\) with TLS.*/\1/p' "$work/server.log" | head -n 1)"
        [ -n "$port" ] && break
        kill -0 "$server_pid" 2>/dev/null || fail "$backend: http_echo exited during start-up"
        sleep 0.05
    done
    [ -n "$port" ] || fail "$backend: no 'listening on ... with TLS' line"

    got="$(curl --silent --show-error --max-time 5 --cacert "$work/ca.pem" \
        --resolve "localhost:$port:127.0.0.1" "https://localhost:$port/")" || fail "$backend: curl"
    [ "$got" = '{"message":"Hello!"}' ] || fail "$backend: curl got '$got'"
    for version in -tls1_3 -tls1_2; do
        out="$(printf 'GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' |
            openssl s_client -connect "127.0.0.1:$port" -servername localhost -alpn http/1.1 \
                -CAfile "$work/ca.pem" -verify_return_error -ign_eof "$version" 2>&1)" ||
            fail "$backend: openssl s_client $version: $out"
        grep -q 'ALPN protocol: http/1.1' <<<"$out" || fail "$backend: $version: no ALPN"
        grep -q '{"message":"Hello!"}' <<<"$out" || fail "$backend: $version: no answer"
    done
    echo "https_smoke: curl and openssl s_client (TLS 1.3, 1.2) ok"

    wrk -t1 -c16 -d"$duration" "https://127.0.0.1:$port/" >"$work/wrk.txt" 2>&1 ||
        { cat "$work/wrk.txt"; fail "$backend: wrk failed"; }
    cat "$work/wrk.txt"
    grep -q "Socket errors" "$work/wrk.txt" && fail "$backend: wrk saw socket errors"
    grep -q "Non-2xx or 3xx" "$work/wrk.txt" && fail "$backend: wrk saw non-2xx answers"

    kill -TERM "$server_pid"
    status=0
    wait "$server_pid" || status=$?
    server_pid=""
    [ "$status" -eq 0 ] || fail "$backend: http_echo exited with status $status after SIGTERM"
    echo "https_smoke: $backend stopped cleanly"
done
echo "https_smoke: ok"

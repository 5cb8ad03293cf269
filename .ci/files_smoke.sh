#!/usr/bin/env bash
# Static-file smoke test: the release file_server on each backend serves a
# file curl reads back byte for byte, survives a short wrk run with no
# socket error and no non-2xx answer, and stops on SIGTERM with exit
# status 0.
#
# Usage: .ci/files_smoke.sh           (from anywhere in the repository)
# Env:   SMOKE_BACKENDS="uring epoll"
#        FILES_SMOKE_BIN=path         (a file_server already built; no build)
set -euo pipefail
cd "$(dirname "$0")/.."

backends="${SMOKE_BACKENDS:-uring epoll}"
bin="${FILES_SMOKE_BIN:-target/release/file_server}"
work="$(mktemp -d)"
server_pid=""

cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -KILL "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

fail() {
    echo "files_smoke: FAIL: $*" >&2
    if [ -f "$work/server.log" ]; then
        echo "--- server log ---" >&2
        tail -n 40 "$work/server.log" >&2
    fi
    exit 1
}

# shellcheck source=.ci/tools.sh
. .ci/tools.sh
need_tools curl wrk

if [ -z "${FILES_SMOKE_BIN:-}" ]; then
    echo "files_smoke: building file_server (release)"
    cargo build --release -p percore-examples --bin file_server
fi

# A root with a 300 KiB file (several 64 KiB pieces) and a small page.
mkdir -p "$work/root"
head -c 307200 /dev/urandom >"$work/root/data.bin"
echo '<p>hello</p>' >"$work/root/index.html"

for backend in $backends; do
    echo
    echo "=== files_smoke: $backend"
    : >"$work/server.log"
    NO_COLOR=1 RUST_LOG=info "$bin" --root "$work/root" --host 127.0.0.1 --port 0 \
        --cores 0 --backend "$backend" >/dev/null 2>"$work/server.log" &
    server_pid=$!

    # The port is in the "listening on ADDR" log line (port 0 picks a free one).
    addr=""
    for _ in $(seq 1 100); do
        addr="$(sed 's/\x1b\[[0-9;]*m//g' "$work/server.log" |
            sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' | head -n 1)"
        [ -n "$addr" ] && break
        kill -0 "$server_pid" 2>/dev/null || fail "$backend: file_server exited during start-up"
        sleep 0.05
    done
    [ -n "$addr" ] || fail "$backend: no 'listening on' line within 5 s"
    url="http://$addr"
    echo "files_smoke: $backend server at $url (pid $server_pid)"

    # --- curl: the bytes of the file, and the index of the root.
    curl --silent --show-error --fail --max-time 10 -o "$work/got.bin" "$url/data.bin" ||
        fail "$backend: curl GET /data.bin"
    cmp -s "$work/got.bin" "$work/root/data.bin" || fail "$backend: /data.bin differs from the file"
    got="$(curl --silent --show-error --fail --max-time 5 "$url/")" || fail "$backend: curl GET /"
    [ "$got" = '<p>hello</p>' ] || fail "$backend: GET / answered '$got'"
    echo "files_smoke: curl ok"

    # --- wrk: keep-alive load; any socket error or non-2xx answer fails.
    wrk -t1 -c16 -d2s "$url/data.bin" >"$work/wrk.txt" 2>&1 ||
        { cat "$work/wrk.txt"; fail "$backend: wrk failed"; }
    cat "$work/wrk.txt"
    grep -q "Socket errors" "$work/wrk.txt" && fail "$backend: wrk saw socket errors"
    grep -q "Non-2xx or 3xx" "$work/wrk.txt" && fail "$backend: wrk saw non-2xx answers"

    # --- SIGTERM: a graceful stop with exit status 0, within 15 s.
    kill -TERM "$server_pid"
    for _ in $(seq 1 150); do
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$server_pid" 2>/dev/null && fail "$backend: file_server still running 15 s after SIGTERM"
    status=0
    wait "$server_pid" || status=$?
    server_pid=""
    [ "$status" -eq 0 ] || fail "$backend: file_server exited with status $status after SIGTERM"
    echo "files_smoke: $backend stopped cleanly on SIGTERM"
done

echo "files_smoke: ok"

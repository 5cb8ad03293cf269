#!/usr/bin/env bash
# benches/idle_rss.sh — memory per idle keep-alive HTTP connection: the
# growth of a server's RSS while CONNS connections, each of which made one
# request and read its answer, sit idle, divided by CONNS.
#
# What it measures: what an idle client costs the server (its task and
# future, socket bookkeeping in user space, buffers it kept), for each
# server command given, one at a time on CPU 0, the clients (one Python
# process) on CPU 1. What it does not: count the kernel's socket memory
# (not in RSS), or run more connections than RLIMIT_NOFILE allows.
#
# With PROTO=h2 each client speaks HTTP/2 by prior knowledge (h2c): the
# preface, its SETTINGS (and the ACK of the server's), one GET on stream 1
# whose whole answer it reads; the connection then stays open and silent.
#
# Usage: benches/idle_rss.sh "LABEL:COMMAND" ...   e.g.
#   benches/idle_rss.sh "uring:target/release/http_echo --backend uring --idle-timeout-ms 600000" \
#                       "epoll:target/release/http_echo --backend epoll --idle-timeout-ms 600000"
#   (--port and --cores are added; the server must answer GET / with a 200.)
# Environment: CONNS=10000 PORT=18300 PROTO=http1 (or h2)
set -euo pipefail

CONNS=${CONNS:-10000}
PORT=${PORT:-18300}
PROTO=${PROTO:-http1}
die() { echo "idle_rss.sh: $*" >&2; exit 1; }
# shellcheck source=benches/load_common.sh
. "$(dirname "$0")/load_common.sh"
require_counts CONNS PORT
[[ $# -ge 1 ]] || die "usage: idle_rss.sh \"LABEL:COMMAND\" ..."
command -v python3 >/dev/null 2>&1 || die "python3 is required"
conns_setup "$CONNS"

case $PROTO in
http1)
    cat >"$work/idle.py" <<'PY'
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
socks = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    socks.append(s)
for s in socks:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            sys.exit("a connection closed before its answer")
        data += chunk
    if not data.startswith(b"HTTP/1.1 200"):
        sys.exit("not a 200: %r" % data[:40])
print("answered", n, flush=True)
time.sleep(600)
PY
    ;;
h2)
    cat >"$work/idle.py" <<'PY'
import socket, struct, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload
# HPACK, static table only: :method GET, :scheme http, :path /, and
# :authority "t" as a literal.
GET = frame(1, 0x5, 1, bytes([0x82, 0x86, 0x84, 0x41, 0x01, ord("t")]))
socks = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(PREFACE + frame(4, 0, 0) + GET)
    socks.append(s)
def read_exact(s, k):
    data = b""
    while len(data) < k:
        chunk = s.recv(k - len(data))
        if not chunk:
            sys.exit("a connection closed before its answer")
        data += chunk
    return data
for s in socks:
    status = None
    while True:
        head = read_exact(s, 9)
        length = int.from_bytes(head[:3], "big")
        kind, flags = head[3], head[4]
        stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
        payload = read_exact(s, length)
        if kind == 4 and not flags & 0x1:
            s.sendall(frame(4, 0x1, 0))
        elif kind == 7:
            sys.exit("GOAWAY: %r" % payload)
        elif kind == 1 and stream == 1:
            # Without padding or priority, ":status: 200" from the static
            # table is the first byte, 0x88.
            status = payload[:1]
        if stream == 1 and kind in (0, 1) and flags & 0x1:
            break
    if status != b"\x88":
        sys.exit("not a 200: header block starts %r" % status)
print("answered", n, flush=True)
time.sleep(600)
PY
    ;;
*) die "PROTO: $PROTO is neither http1 nor h2" ;;
esac

require_free_ports "$PORT"
printf '%-10s %12s %12s %16s\n' server "RSS before" "RSS idle" "bytes per conn"
for spec in "$@"; do
    label=${spec%%:*}
    # shellcheck disable=SC2086 # the command's own arguments split on purpose
    taskset -c 0 ${spec#*:} --port "$PORT" --cores 0 >"$work/server.log" 2>&1 &
    pid=$!
    wait_listening "$pid" "$PORT" || die "$label did not start listening; its output:
$(tail -n 20 "$work/server.log")"
    before=$(rss_kb "$pid")
    taskset -c 1 python3 "$work/idle.py" "$PORT" "$CONNS" >"$work/client.out" 2>&1 &
    client=$!
    await_client answered 120 ||
        die "$label did not answer $CONNS connections in 2 minutes: $(cat "$work/client.out")"
    sleep 2
    idle=$(rss_kb "$pid")
    stop_run
    printf '%-10s %9s KB %9s KB %16s\n' "$label" "$before" "$idle" "$(( (idle - before) * 1024 / CONNS ))"
done

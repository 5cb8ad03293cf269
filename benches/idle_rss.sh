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
# Usage: benches/idle_rss.sh "LABEL:COMMAND" ...   e.g.
#   benches/idle_rss.sh "uring:target/release/http_echo --backend uring --idle-timeout-ms 600000" \
#                       "epoll:target/release/http_echo --backend epoll --idle-timeout-ms 600000"
#   (--port and --cores are added; the server must answer GET / with a 200.)
# Environment: CONNS=10000 PORT=18300
set -euo pipefail

CONNS=${CONNS:-10000}
PORT=${PORT:-18300}
die() { echo "idle_rss.sh: $*" >&2; exit 1; }
# shellcheck source=benches/load_common.sh
. "$(dirname "$0")/load_common.sh"
require_counts CONNS PORT
[[ $# -ge 1 ]] || die "usage: idle_rss.sh \"LABEL:COMMAND\" ..."
command -v python3 >/dev/null 2>&1 || die "python3 is required"
conns_setup "$CONNS"

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

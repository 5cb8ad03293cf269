#!/usr/bin/env bash
# benches/slow_rss.sh — memory a slow-body flood costs a server, and how
# much of it comes back: CONNS clients each send a POST head and the first
# 100 bytes of an 8 KiB body, then stall (as `slowhttptest -B` does);
# then each sends the rest, every answer is checked, and they leave.
#
# Printed per server: RSS before, while the clients stall (and its growth
# per client), and AFTER seconds after they left. Each server in turn on
# CPU 0, the clients (one Python process) on CPU 1. What it does not:
# count the kernel's socket memory (not in RSS).
#
# Usage: benches/slow_rss.sh "LABEL:COMMAND" ...   e.g.
#   benches/slow_rss.sh "epoll:target/release/http_echo --backend epoll" \
#                       "uring:target/release/http_echo --backend uring" \
#                       "tokio:target/release/tokio_baseline --service http"
#   (--port and --cores are added; the server must echo a POST body.)
# Environment: CONNS=1000 PORT=18330 AFTER=60
set -euo pipefail
CONNS=${CONNS:-1000}
PORT=${PORT:-18330}
AFTER=${AFTER:-60}
die() { echo "slow_rss.sh: $*" >&2; exit 1; }
# shellcheck source=benches/load_common.sh
. "$(dirname "$0")/load_common.sh"
require_counts CONNS PORT AFTER
[[ $# -ge 1 ]] || die "usage: slow_rss.sh \"LABEL:COMMAND\" ..."
command -v python3 >/dev/null 2>&1 || die "python3 is required"
conns_setup "$CONNS"
cat >"$work/slow.py" <<'PY'
import os, socket, sys, time
port, n, go = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
size, first = 8192, 100
head = b"POST / HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % size
bodies = [bytes((i * 31 + k * 7) % 256 for k in range(size)) for i in range(n)]
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(head + bodies[i][:first])
    socks.append(s)
print("stalled", n, flush=True)
while not os.path.exists(go):
    time.sleep(0.1)
for i, s in enumerate(socks):
    s.sendall(bodies[i][first:])
for i, s in enumerate(socks):
    data = b""
    while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + size:
        chunk = s.recv(65536)
        if not chunk:
            sys.exit("connection %d closed before its answer" % i)
        data += chunk
    if not data.startswith(b"HTTP/1.1 200") or not data.endswith(bodies[i]):
        sys.exit("connection %d: not its body back: %r" % (i, data[:40]))
    s.close()
print("answered", n, flush=True)
PY
require_free_ports "$PORT"
printf '%-8s %12s %12s %16s %12s\n' server "RSS before" "RSS stalled" "bytes per client" "RSS after"
for spec in "$@"; do
    label=${spec%%:*}
    rm -f "$work/go" "$work/client.out"
    # shellcheck disable=SC2086 # the command's own arguments split on purpose
    taskset -c 0 ${spec#*:} --port "$PORT" --cores 0 >"$work/server.log" 2>&1 &
    pid=$!
    wait_listening "$pid" "$PORT" || die "$label did not start listening; its output:
$(tail -n 20 "$work/server.log")"
    before=$(rss_kb "$pid")
    taskset -c 1 python3 "$work/slow.py" "$PORT" "$CONNS" "$work/go" >"$work/client.out" 2>&1 &
    client=$!
    await_client stalled 120 || die "the clients did not stall against $label: $(cat "$work/client.out")"
    sleep 2
    stalled=$(rss_kb "$pid")
    touch "$work/go"
    await_client answered 120 || die "$label did not answer the clients: $(cat "$work/client.out")"
    wait "$client" || die "the client failed against $label: $(cat "$work/client.out")"
    client=
    sleep "$AFTER"
    after=$(rss_kb "$pid")
    stop_run
    printf '%-8s %9s KB %9s KB %16s %9s KB\n' "$label" "$before" "$stalled" \
        "$(( (stalled - before) * 1024 / CONNS ))" "$after"
done

#!/usr/bin/env bash
# benches/give_back.sh — memory a burst leaves behind once it is over: a
# server's RSS before a burst, at its peak, and AFTER seconds after it
# ended, with the burst's clients still connected (so a core that gives
# memory back only when its connections fall does not).
#
# Two bursts, chosen by the first argument:
#   headers  CONNS keep-alive clients each send ROUNDS requests with about
#            27 KB of header fields, all connections at once per round,
#            and check every answer (an HTTP echo server: `http_echo`).
#   proxy    CONNS clients at once ask a fan-out proxy, whose upstream (a
#            Python server on CPU 1) answers every request with a body
#            that never ends: chunked, close-delimited, or a
#            `Content-Length` it never reaches, in turn; every answer
#            must be a 502 (`fanout`; `--upstream` is added).
#
# Printed per server: RSS before, the highest seen during the burst
# (sampled every 50 ms), and AFTER seconds after it. Each server in turn
# on CPU 0, the clients (one Python process) on CPU 1. What it does not:
# count the kernel's socket memory (not in RSS).
#
# Usage: benches/give_back.sh headers|proxy "LABEL:COMMAND" ...   e.g.
#   benches/give_back.sh headers "epoll:target/release/http_echo --backend epoll --idle-timeout-ms 600000" \
#                                "uring:target/release/http_echo --backend uring --idle-timeout-ms 600000"
#   benches/give_back.sh proxy "epoll:target/release/fanout --backend epoll --eject-after 0" \
#                              "uring:target/release/fanout --backend uring --eject-after 0"
#   (--port and --cores are added; the idle timeout must outlast AFTER,
#   and ejection must be off, or the proxy answers 503 once its upstream
#   is ejected.)
# Environment: CONNS=50 ROUNDS=20 PORT=18340 (the upstream: PORT+1) AFTER=35
set -euo pipefail
CONNS=${CONNS:-50}
ROUNDS=${ROUNDS:-20}
PORT=${PORT:-18340}
AFTER=${AFTER:-35}
die() { echo "give_back.sh: $*" >&2; exit 1; }
# shellcheck source=benches/load_common.sh
. "$(dirname "$0")/load_common.sh"
require_counts CONNS ROUNDS PORT AFTER
[[ $# -ge 2 ]] || die "usage: give_back.sh headers|proxy \"LABEL:COMMAND\" ..."
burst=$1
shift
[[ $burst == headers || $burst == proxy ]] || die "the burst is headers or proxy, not '$burst'"
command -v python3 >/dev/null 2>&1 || die "python3 is required"
conns_setup "$CONNS"
upstream=''
# shellcheck disable=SC2016 # expanded when the trap runs
on_exit 'stop_run; [[ -n $upstream ]] && kill "$upstream" 2>/dev/null; rm -rf "$work"'

cat >"$work/headers.py" <<'PY'
import os, socket, sys
port, n, rounds, go = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
fields = b"".join(b"X-Field-%02d: %s\r\n" % (k, bytes(97 + (k + j) % 26 for j in range(440))) for k in range(60))
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
for r in range(rounds):
    bodies = [b"%d-%d" % (r, i) for i in range(n)]
    for i, s in enumerate(socks):
        s.sendall(b"POST / HTTP/1.1\r\nHost: t\r\n" + fields + b"Content-Length: %d\r\n\r\n" % len(bodies[i]) + bodies[i])
    for i, s in enumerate(socks):
        data = b""
        while b"\r\n\r\n" not in data or not data.endswith(bodies[i]):
            chunk = s.recv(65536)
            if not chunk:
                sys.exit("connection %d closed before its answer" % i)
            data += chunk
        if not data.startswith(b"HTTP/1.1 200"):
            sys.exit("connection %d: %r" % (i, data[:40]))
print("burst", n * rounds, flush=True)
while not os.path.exists(go):
    socks[0].settimeout(0.2)
    try:
        if socks[0].recv(1) == b"":
            sys.exit("the server closed an idle connection")
    except socket.timeout:
        pass
PY

cat >"$work/proxy.py" <<'PY'
import os, socket, sys, threading
port, n, go = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
socks, failures = [None] * n, []
def ask(i):
    s = socket.create_connection(("127.0.0.1", port))
    socks[i] = s
    s.sendall(b"GET /%d HTTP/1.1\r\nHost: t\r\n\r\n" % i)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            failures.append("connection %d closed before its answer" % i)
            return
        data += chunk
    if not data.startswith(b"HTTP/1.1 502"):
        failures.append("connection %d: %r" % (i, data[:40]))
threads = [threading.Thread(target=ask, args=(i,)) for i in range(n)]
for t in threads: t.start()
for t in threads: t.join()
if failures:
    sys.exit("; ".join(failures[:5]))
print("burst", n, flush=True)
while not os.path.exists(go):
    threading.Event().wait(0.2)
PY

cat >"$work/upstream.py" <<'PY'
import itertools, socket, socketserver, sys
turn = itertools.count()
chunk = bytes(range(256)) * 256
class Endless(socketserver.BaseRequestHandler):
    def handle(self):
        data = b""
        while b"\r\n\r\n" not in data:
            got = self.request.recv(65536)
            if not got:
                return
            data += got
        kind = next(turn) % 3
        head = [b"Transfer-Encoding: chunked", b"Connection: close", b"Content-Length: 1000000000000"][kind]
        try:
            self.request.sendall(b"HTTP/1.1 200 OK\r\n" + head + b"\r\n\r\n")
            while True:
                self.request.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk) if kind == 0 else chunk)
        except OSError:
            pass
class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024
Server(("127.0.0.1", int(sys.argv[1])), Endless).serve_forever()
PY

# The highest RSS of process $1 until file $2 exists, written to $3.
sample_peak() {
    local peak=0 now
    while [[ ! -e $2 ]] && now=$(rss_kb "$1" 2>/dev/null); do
        ((now > peak)) && peak=$now && echo "$peak" >"$3"
        sleep 0.05
    done
}

extra=''
if [[ $burst == proxy ]]; then
    require_free_ports "$PORT" $((PORT + 1))
    taskset -c 1 python3 "$work/upstream.py" $((PORT + 1)) >"$work/upstream.log" 2>&1 &
    upstream=$!
    wait_listening "$upstream" $((PORT + 1)) || die "the upstream did not start: $(cat "$work/upstream.log")"
    extra="--upstream 127.0.0.1:$((PORT + 1))"
else
    require_free_ports "$PORT"
fi
printf '%-8s %-8s %12s %12s %12s\n' server burst "RSS before" "RSS peak" "RSS after"
for spec in "$@"; do
    label=${spec%%:*}
    rm -f "$work/go" "$work/ended" "$work/peak"
    : >"$work/client.out"
    # shellcheck disable=SC2086 # the command's own arguments split on purpose
    taskset -c 0 ${spec#*:} $extra --port "$PORT" --cores 0 >"$work/server.log" 2>&1 &
    pid=$!
    wait_listening "$pid" "$PORT" || die "$label did not start listening; its output:
$(tail -n 20 "$work/server.log")"
    sleep 1
    before=$(rss_kb "$pid")
    sample_peak "$pid" "$work/ended" "$work/peak" &
    sampler=$!
    if [[ $burst == headers ]]; then
        taskset -c 1 python3 "$work/headers.py" "$PORT" "$CONNS" "$ROUNDS" "$work/go" >"$work/client.out" 2>&1 &
    else
        taskset -c 1 python3 "$work/proxy.py" "$PORT" "$CONNS" "$work/go" >"$work/client.out" 2>&1 &
    fi
    client=$!
    await_client burst 300 || die "the burst against $label failed: $(cat "$work/client.out")"
    sleep 0.2
    touch "$work/ended"
    wait "$sampler" || true
    peak=$(cat "$work/peak")
    sleep "$AFTER"
    after=$(rss_kb "$pid")
    kill -0 "$client" 2>/dev/null || die "the client ended early against $label: $(cat "$work/client.out")"
    touch "$work/go"
    wait "$client" || die "the client failed against $label: $(cat "$work/client.out")"
    client=
    stop_run
    printf '%-8s %-8s %9s KB %9s KB %9s KB\n' "$label" "$burst" "$before" "$peak" "$after"
done

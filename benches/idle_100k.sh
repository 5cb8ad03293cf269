#!/usr/bin/env bash
# benches/idle_100k.sh — what CONNS (100,000) idle keep-alive HTTP
# connections cost a server on one core, and whether it still serves all
# of them afterwards.
#
# For each server command given, one at a time on CPU 0: one Python
# process on CPU 1 opens CONNS connections from the source addresses
# 127.0.0.2 to 127.0.0.9 (8 × the ephemeral ports), sends a GET on each
# and reads its whole 200 (by Content-Length), at most WINDOW connections
# in progress at once. Once all are answered and idle for 2 s the server's
# RSS is read: its growth divided by CONNS is what an idle connection
# costs in user space (the kernel's socket memory is not in RSS). Then
# every connection sends a second GET; the script fails unless all CONNS
# are answered with a 200.
#
# Each side holds CONNS sockets, so the open-file limit (RLIMIT_NOFILE) is
# raised for both: the hard limit as root (and fs.nr_open with sysctl if
# it is below, restored at the end), the soft one to the hard one. If the
# hard limit cannot be raised the script says so and stops.
#
# Usage: benches/idle_100k.sh "LABEL:COMMAND" ...   e.g.
#   benches/idle_100k.sh "uring:target/release/http_echo --backend uring --idle-timeout-ms 600000 --max-connections 200000" \
#                        "tokio:target/release/tokio_baseline --service http"
#   (--port and --cores 0 are added; the server must answer GET / with a 200.)
# Environment: CONNS=100000 PORT=18310 WINDOW=512 LIMIT=300 (seconds each
# round may take; a round without progress for 60 s fails sooner).
set -euo pipefail

CONNS=${CONNS:-100000}
PORT=${PORT:-18310}
WINDOW=${WINDOW:-512}
LIMIT=${LIMIT:-300}
STALL=60
# Open files each process needs besides its connections.
FD_MARGIN=16
SOURCES=8
die() { echo "idle_100k.sh: $*" >&2; exit 1; }
say() { echo "idle_100k.sh: $*" >&2; }
# shellcheck source=benches/load_common.sh
. "$(dirname "$0")/load_common.sh"
require_counts CONNS PORT WINDOW LIMIT
[[ $# -ge 1 ]] || die "usage: idle_100k.sh \"LABEL:COMMAND\" ..."
command -v python3 >/dev/null 2>&1 || die "python3 is required"
command -v taskset >/dev/null 2>&1 || die "taskset is required (util-linux)"

read -r port_lo port_hi </proc/sys/net/ipv4/ip_local_port_range
((SOURCES * (port_hi - port_lo + 1) >= CONNS)) ||
    die "$SOURCES source addresses × ports $port_lo-$port_hi are fewer than CONNS=$CONNS"

# The open-file limit: CONNS sockets and FD_MARGIN more in the server and
# in the client, which inherit this shell's limits.
need=$((CONNS + FD_MARGIN))
want=$((CONNS + 1024))
nr_open_was=
hard=$(ulimit -Hn)
if [[ $hard != unlimited ]] && ((hard < need)); then
    nr_open=$(cat /proc/sys/fs/nr_open)
    if ((nr_open < want)); then
        sysctl -qw fs.nr_open="$want" 2>/dev/null ||
            die "fs.nr_open is $nr_open, below the $need open files CONNS=$CONNS needs, and sysctl -w fs.nr_open=$want failed (not root?)"
        nr_open_was=$nr_open
        say "raised fs.nr_open from $nr_open to $want (sysctl -w fs.nr_open; restored at exit)"
    fi
    if ! ulimit -Hn "$want" 2>/dev/null; then
        why=$( (ulimit -Hn "$want") 2>&1 | sed 's/.*ulimit: //' || true)
        die "RLIMIT_NOFILE: the hard limit is $hard open files and cannot be raised to $want ($why);
CONNS=$CONNS needs at least $need in the server and in the client. Raising the hard limit needs
CAP_SYS_RESOURCE (in a container, its nofile limit is set when it starts); here, CONNS=$((hard - FD_MARGIN)) at most."
    fi
    say "raised the open-file limit (ulimit -Hn) from $hard to $want"
fi
ulimit -n "$(ulimit -Hn)" || die "cannot raise the soft open-file limit (ulimit -n) to $(ulimit -Hn)"

work=$(mktemp -d)
pid=
client=
# Waits up to $2 seconds for process $1 to exit.
await_exit() {
    for _ in $(seq $(($2 * 10))); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.1
    done
    return 1
}
# Stops the client and the server: SIGTERM, then SIGKILL after 30 s.
stop() {
    for p in $client $pid; do kill -TERM "$p" 2>/dev/null || true; done
    for p in $client $pid; do
        await_exit "$p" 30 || kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    client='' pid=''
}
cleanup() {
    stop
    rm -rf "$work"
    [[ -z $nr_open_was ]] || sysctl -qw fs.nr_open="$nr_open_was" || true
}
on_exit cleanup

cat >"$work/client.py" <<'PY'
import errno, os, selectors, signal, socket, struct, sys, time

port, n, window, stall = (int(a) for a in sys.argv[1:5])
REQUEST = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"
SOURCES = ["127.0.0.%d" % i for i in range(2, 10)]
# The port is then chosen at connect(), per destination, not at bind().
NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
socks = [None] * n
sel = selectors.DefaultSelector()


def connect(i):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    socks[i] = s
    s.setblocking(False)
    s.setsockopt(socket.IPPROTO_IP, NO_PORT, 1)
    s.bind((SOURCES[i % len(SOURCES)], 0))
    err = s.connect_ex(("127.0.0.1", port))
    if err not in (0, errno.EINPROGRESS):
        raise OSError(err, os.strerror(err))
    return s


def exchange(first):
    """One GET on every connection (opening it first if `first`), at most
    `window` in progress; returns (answered with a 200, {reason: count})."""
    ok, failed, nxt, bufs = 0, {}, 0, {}

    def finish(i, why):
        nonlocal ok
        sel.unregister(socks[i])
        del bufs[i]
        if why is None:
            ok += 1
        else:
            failed[why] = failed.get(why, 0) + 1

    last = time.monotonic()
    while ok + sum(failed.values()) < n:
        while len(bufs) < window and nxt < n:
            i, nxt = nxt, nxt + 1
            try:
                if first:
                    sel.register(connect(i), selectors.EVENT_WRITE, i)
                else:
                    socks[i].send(REQUEST)
                    sel.register(socks[i], selectors.EVENT_READ, i)
            except OSError as e:
                if first:  # out of files or ports: no point going on
                    print("connection %d of %d: %s" % (i + 1, n, e), flush=True)
                    sys.exit(1)
                failed[e.strerror] = failed.get(e.strerror, 0) + 1
                continue
            bufs[i] = b""
        events = sel.select(1.0)
        if not events:
            if time.monotonic() - last > stall:
                failed["no answer in %d s" % stall] = len(bufs) + n - nxt
                break
            continue
        last = time.monotonic()
        for key, mask in events:
            s, i = key.fileobj, key.data
            if mask & selectors.EVENT_WRITE:  # connected, or refused
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    finish(i, "connect: " + os.strerror(err))
                    continue
                try:
                    s.send(REQUEST)
                except OSError as e:
                    finish(i, e.strerror)
                    continue
                sel.modify(s, selectors.EVENT_READ, i)
                continue
            try:
                chunk = s.recv(4096)
            except BlockingIOError:
                continue
            except OSError as e:
                finish(i, e.strerror)
                continue
            if not chunk:
                finish(i, "closed by the server")
                continue
            buf = bufs[i] = bufs[i] + chunk
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                continue
            lines = buf[:end].split(b"\r\n")
            length = [int(v) for k, _, v in (h.partition(b":") for h in lines[1:])
                      if k.strip().lower() == b"content-length"]
            if not length:
                finish(i, "no Content-Length")
            elif len(buf) >= end + 4 + length[0]:
                finish(i, None if lines[0].startswith(b"HTTP/1.1 200") else
                       "answered %r" % lines[0][:40].decode("latin-1"))
    return ok, failed


def why(failed):
    return "; ".join("%d %s" % (c, r) for r, c in failed.items())


t = time.monotonic()
ok, failed = exchange(True)
if ok < n:
    print("first round: %d of %d answered: %s" % (ok, n, why(failed)), flush=True)
    sys.exit(1)
print("answered %d in %.1f s" % (n, time.monotonic() - t), flush=True)
signal.sigwait({signal.SIGUSR1})
t = time.monotonic()
ok, failed = exchange(False)
print("second %d of %d answered in %.1f s%s" % (ok, n, time.monotonic() - t,
      "; not answered: " + why(failed) if failed else ""), flush=True)
# Reset rather than close: no TIME_WAIT left on the next server's ports.
for s in socks:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
sys.exit(0 if ok == n else 1)
PY

server_gone() {
    die "$1 exited; its output:
$(tail -n 20 "$work/server.log")"
}

require_free_ports "$PORT"
say "CONNS=$CONNS, open-file limit $(ulimit -n); $(date -u '+%Y-%m-%d %H:%M UTC')"
printf '%-10s %12s %12s %20s %16s\n' server "RSS before" "RSS idle" "bytes per idle conn" "second round"
failed=()
for spec in "$@"; do
    label=${spec%%:*}
    # shellcheck disable=SC2086 # the command's own arguments split on purpose
    taskset -c 0 ${spec#*:} --port "$PORT" --cores 0 >"$work/server.log" 2>&1 &
    pid=$!
    wait_listening "$pid" "$PORT" || die "$label did not start listening; its output:
$(tail -n 20 "$work/server.log")"
    files=$(awk '/^Max open files/ { print $4 }' "/proc/$pid/limits")
    open=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 | wc -l)
    ((open + CONNS <= files)) ||
        die "$label may open $files files and has $open open: no room for CONNS=$CONNS connections"
    before=$(rss_kb "$pid")
    say "$label: opening $CONNS connections"
    : >"$work/client.out"
    taskset -c 1 python3 "$work/client.py" "$PORT" "$CONNS" "$WINDOW" "$STALL" >"$work/client.out" 2>&1 &
    client=$!
    await_client answered "$LIMIT" || die "the client failed against $label (server: $open files open, at most $files): $(cat "$work/client.out")"
    kill -0 "$pid" 2>/dev/null || server_gone "$label"
    say "$label: $(cat "$work/client.out")"
    sleep 2
    idle=$(rss_kb "$pid")
    kill -USR1 "$client"
    await_client second "$LIMIT" || die "no second round from the client against $label: $(cat "$work/client.out")"
    say "$label: $(grep '^second' "$work/client.out")"
    answered=$(awk '/^second/ { print $2 }' "$work/client.out")
    kill -0 "$pid" 2>/dev/null || server_gone "$label"
    await_exit "$client" 30 || true # it resets its connections, then exits
    stop
    ((answered == CONNS)) || failed+=("$label")
    printf '%-10s %9s KB %9s KB %20s %16s\n' "$label" "$before" "$idle" \
        "$(((idle - before) * 1024 / CONNS))" "$answered/$CONNS"
done
[[ ${#failed[@]} -eq 0 ]] || die "not every connection was answered a second time by: ${failed[*]}"

#!/usr/bin/env bash
# benches/instructions.sh — user-space instructions per request of one
# server, counted by valgrind's callgrind under a short wrk (or h2load) load.
#
# Why: the CPU-time ratios of duel.sh need several runs and still carry
# about 1 % of noise; an instruction count is exact and repeats run to run,
# so it shows what a change to per-request code saves (or adds) before a
# duel says whether that shows in CPU time. It counts user space only (the
# kernel's TCP work, most of a server's CPU here, is invisible to it) and
# says nothing about cache misses: a lower count is a hint, a duel is the
# measurement.
#
# Usage: benches/instructions.sh COMMAND [ARGS...]
#   COMMAND is a server binary with its arguments, without --port and
#   --cores (added here), e.g.
#   benches/instructions.sh target/release/http_echo --backend epoll
# Environment: DURATION=5 CONNS=10 PORT=18190 TOP=25 (functions listed)
#   URL_PATH=/ (the path every request asks for, e.g. /users/42)
#   KEEP=DIR keeps callgrind's dump there as DIR/callgrind.out, for
#   `callgrind_annotate --inclusive=yes DIR/callgrind.out`
#   CLIENT=wrk (HTTP/1.1) or h2load (HTTP/2 in the clear by prior
#   knowledge, STREAMS=10 streams in flight per connection: a server built
#   with HTTP/2, e.g. `http_echo` of `--features percore-examples/h2`)
set -euo pipefail

DURATION=${DURATION:-5}
CONNS=${CONNS:-10}
PORT=${PORT:-18190}
TOP=${TOP:-25}
URL_PATH=${URL_PATH:-/}
CLIENT=${CLIENT:-wrk}
STREAMS=${STREAMS:-10}

die() { echo "instructions.sh: $*" >&2; exit 1; }
# shellcheck source=benches/load_common.sh
. "$(dirname "$0")/load_common.sh"
[[ $# -ge 1 ]] || die "usage: instructions.sh COMMAND [ARGS...]"
require_counts DURATION CONNS PORT TOP STREAMS
case $CLIENT in wrk | h2load) ;; *) die "CLIENT: $CLIENT is neither wrk nor h2load" ;; esac
for tool in valgrind callgrind_annotate callgrind_control "$CLIENT"; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is not installed (apt-get install -y valgrind wrk nghttp2-client)"
done

require_free_ports "$PORT"

out=$(mktemp -d)
# Under valgrind a core runs tens of times slower: its turns would pass the
# stall detector's threshold and the counts would be the reports' (their
# backtraces, symbolized). Servers that have the option run without it.
stall_off=()
if "$1" --help 2>/dev/null | grep -q -- '--stall-ms'; then
    stall_off=(--stall-ms 0)
fi
valgrind --tool=callgrind --callgrind-out-file="$out/cg" "$@" "${stall_off[@]}" --port "$PORT" --cores 0 \
    >"$out/server.log" 2>&1 &
server=$!
on_exit 'kill -KILL "$server" 2>/dev/null || true; rm -rf "$out"'
# Under valgrind a server starts in seconds, not milliseconds.
for _ in $(seq 300); do
    wait_listening "$server" "$PORT" && break
    kill -0 "$server" 2>/dev/null || die "the server exited; its log: $(cat "$out/server.log")"
done
if [[ $CLIENT == h2load ]]; then
    h2load -t1 -c"$CONNS" -m"$STREAMS" -D"$DURATION" "http://127.0.0.1:$PORT$URL_PATH" >"$out/load.txt" 2>&1 ||
        die "h2load failed: $(cat "$out/load.txt")"
else
    wrk -t1 -c"$CONNS" -d"${DURATION}s" "http://127.0.0.1:$PORT$URL_PATH" >"$out/load.txt"
fi
# Dump the counts now rather than at exit: a server under valgrind may not
# get through its graceful stop (io_uring is not fully emulated).
callgrind_control --dump "$server" >/dev/null 2>&1
sleep 1
kill -KILL "$server" 2>/dev/null || true
wait "$server" 2>/dev/null || true
dump=$(ls "$out"/cg.* 2>/dev/null | head -1)
[[ -n $dump ]] || die "callgrind wrote no dump"
if [[ -n ${KEEP:-} ]]; then
    mkdir -p "$KEEP" && cp "$dump" "$KEEP/callgrind.out"
fi

if [[ $CLIENT == h2load ]]; then
    # "requests: N total, N started, N done, N succeeded, N failed, N errored, N timeout"
    # "status codes: N 2xx, N 3xx, N 4xx, N 5xx"
    other=$(awk '/^status codes:/ { print $5 + $7 + $9 }' "$out/load.txt")
    [[ ${other:-x} == 0 ]] || die "$URL_PATH was not answered 2xx: $(cat "$out/load.txt")"
    requests=$(awk '/^requests:/ { print $8 }' "$out/load.txt")
else
    ! grep -q "Non-2xx" "$out/load.txt" || die "$URL_PATH was not answered 2xx: $(cat "$out/load.txt")"
    requests=$(awk '/ requests in / { print $1 }' "$out/load.txt")
fi
[[ -n $requests && $requests -gt 0 ]] || die "$CLIENT completed no request: $(cat "$out/load.txt")"
callgrind_annotate --auto=no --threshold=100 "$dump" >"$out/annotated.txt"
total=$(awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }' "$out/annotated.txt")
echo "$requests requests, $(awk -v t="$total" -v r="$requests" 'BEGIN { printf "%.0f", t / r }') instructions per request (whole process, user space)"
echo "top functions, instructions per request (inlined code counts where it was inlined):"
# Lines look like "12,345 (1.23%)  file:function [object]"; sum by function.
# sed, not head: head's early exit can kill sort with SIGPIPE, which
# pipefail turns into a failure after the output was printed.
awk -v r="$requests" '
    /^ *[0-9,]+ \( *[0-9.]+%\) / && !/PROGRAM TOTALS/ {
        n = $1; gsub(",", "", n)
        line = $0; sub(/^ *[0-9,]+ \( *[0-9.]+%\) +/, "", line)
        sub(/ \[[^]]*\]$/, "", line)
        fn = line; sub(/^[^:]*:/, "", fn)
        sum[fn] += n
    }
    END { for (f in sum) printf "%9.1f  %s\n", sum[f] / r, f }
' "$out/annotated.txt" | sort -rn | sed -n "1,${TOP}p"

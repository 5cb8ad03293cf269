#!/usr/bin/env bash
# benches/static_files.sh — the example `file_server` against nginx serving
# the same directory of 1 KiB, 64 KiB and 1 MiB files.
#
# What it measures: for each file size and each server (file_server on
# io_uring, on epoll, and nginx), wrk -c100 asking for that one file again
# and again: requests/s, the server's CPU time during the run (user +
# system from /proc/PID/stat: every thread of file_server, its blocking
# pool and io_uring workers included; nginx's master and worker),
# requests per server CPU-second, wrk's p99 latency and its errors
# (non-2xx answers and socket errors, summed over the rounds). The
# servers are alternated run by run within each round (median of ROUNDS),
# so drift hits them alike; "÷ nginx" is requests per server CPU-second
# divided by nginx's for the same size.
#
# Placement: the server on CPU 0 (taskset; file_server with --cores 0,
# nginx with one worker), wrk on CPU 1. Both servers use their default
# open-file caches as configured below: file_server 1,000 entries per core
# for 1 s (its defaults), nginx `open_file_cache max=1000 inactive=20s;
# open_file_cache_valid 1s` with `sendfile on`. Both cap a connection at
# 1,000 requests (their defaults). What it does not: measure a cold page
# cache, many distinct files, TLS, or anything but 127.0.0.1.
#
# Usage: benches/static_files.sh [--quick]
#        (--quick: one round of 2 s, for a smoke test; installs wrk and
#        nginx with apt-get if they are missing)
# Build first: cargo build --release -p percore-examples --bin file_server
# Environment: ROUNDS=3 DURATION=10 CONNS=100 THREADS=1 PORT=18090
#              SIZES="1k 64k 1m" SERVERS="uring epoll nginx"
#              BIN=path/to/file_server (default: $CARGO_TARGET_DIR or
#              target, then release/file_server)
#              FILE_SERVER_ARGS="..." (more options for file_server, e.g.
#              "--cache-entries 0" to measure it without its cache)
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
WARMUP=2
if [[ ${1:-} == --quick ]]; then
    ROUNDS=1 DURATION=2 WARMUP=1
    shift
fi
[[ $# -eq 0 ]] || { echo "usage: benches/static_files.sh [--quick]" >&2; exit 1; }
CONNS=${CONNS:-100}
THREADS=${THREADS:-1}
PORT=${PORT:-18090}
SIZES=${SIZES:-"1k 64k 1m"}
SERVERS=${SERVERS:-"uring epoll nginx"}
read -r -a fs_args <<<"${FILE_SERVER_ARGS:-}"

die() { echo "static_files.sh: $*" >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/load_common.sh
. "$root/benches/load_common.sh"
require_counts ROUNDS DURATION CONNS THREADS PORT
for s in $SERVERS; do
    case $s in uring | epoll | nginx) ;; *) die "SERVERS: unknown server $s (uring, epoll, nginx)" ;; esac
done
declare -A kib=([1k]=1 [64k]=64 [1m]=1024)
for size in $SIZES; do
    [[ -n ${kib[$size]:-} ]] || die "SIZES: unknown size $size (1k, 64k, 1m)"
done
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac
bin=${BIN:-$target/release/file_server}
[[ -x $bin ]] || die "no file_server at $bin.
  Build it first:  cargo build --release -p percore-examples --bin file_server
  or point BIN at the binary."

for tool in wrk nginx; do
    command -v "$tool" >/dev/null 2>&1 && continue
    command -v apt-get >/dev/null 2>&1 || die "$tool is not installed and apt-get is unavailable"
    echo "static_files.sh: installing $tool with apt-get" >&2
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$tool" >/dev/null 2>&1; then
        apt-get update -q >/dev/null || die "apt-get update failed"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$tool" >/dev/null || die "apt-get install $tool failed"
    fi
done
command -v taskset >/dev/null 2>&1 || die "taskset (util-linux) is required"

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
clk=$(getconf CLK_TCK)
work=$(mktemp -d)
# nginx's worker drops to `nobody` when started as root: it must be able
# to read the tree.
chmod 755 "$work"
server_pid=
stop_server() {
    if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
        # SIGTERM: file_server drains and exits, nginx's master stops its
        # worker first (fast shutdown).
        kill -TERM "$server_pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$server_pid" 2>/dev/null || true
    fi
    if [[ -n $server_pid ]]; then wait "$server_pid" 2>/dev/null || true; fi
    server_pid=
}
# shellcheck disable=SC2016 # expanded when the trap runs
on_exit 'stop_server; rm -rf "$work"'

# The tree: one file per size, random bytes.
mkdir -p "$work/www"
for size in $SIZES; do
    head -c $((kib[$size] * 1024)) /dev/urandom >"$work/www/$size.bin"
done
chmod -R a+rX "$work/www"

mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<EOF
daemon off;
worker_processes 1;
error_log $work/nginx/error.log error;
pid $work/nginx/nginx.pid;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    open_file_cache max=1000 inactive=20s;
    open_file_cache_valid 1s;
    default_type application/octet-stream;
    client_body_temp_path $work/nginx/body;
    proxy_temp_path $work/nginx/proxy;
    fastcgi_temp_path $work/nginx/fastcgi;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    server {
        listen 127.0.0.1:$PORT;
        root $work/www;
    }
}
EOF

# Starts server $1 on CPU 0 and waits until it listens. (`exec`: the
# backgrounded `case` is a subshell, and $server_pid must be the server.)
start_server() {
    case $1 in
        uring | epoll) exec taskset -c 0 "$bin" --root "$work/www" --port "$PORT" --cores 0 --backend "$1" "${fs_args[@]}" ;;
        nginx) exec taskset -c 0 nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log" ;;
    esac >"$work/server.log" 2>&1 &
    server_pid=$!
    wait_listening "$server_pid" "$PORT" || die "$1 did not start listening on 127.0.0.1:$PORT; its output:
$(tail -n 20 "$work/server.log" "$work/nginx/error.log" 2>/dev/null)"
}

# User + system CPU ticks of process $1 and its children (nginx's worker;
# file_server has none, its threads are in its own count).
tree_ticks() {
    local total pid
    total=$(cpu_ticks "$1")
    for pid in $(ps -o pid= --ppid "$1"); do
        total=$((total + $(cpu_ticks "$pid" 2>/dev/null || echo 0)))
    done
    echo "$total"
}

# wrk's errors: non-2xx answers plus socket errors of every kind.
errors_of() {
    awk '/Non-2xx or 3xx responses:/ { n += $NF }
         /Socket errors:/ { for (i = 3; i <= NF; i += 2) { v = $(i + 1); sub(/,/, "", v); n += v } }
         END { print n + 0 }' <<<"$1"
}

echo "static_files.sh: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, Linux $(uname -r), $(nginx -v 2>&1 | sed 's/.*: //')"
echo "static_files.sh: server on CPU 0, wrk -t$THREADS -c$CONNS on CPU 1; ${DURATION}s runs, median of $ROUNDS, servers alternated run by run"
require_free_ports "$PORT"
declare -A rps=() cpu=() per_cpu=() p99=() errs=()
for round in $(seq "$ROUNDS"); do
    for size in $SIZES; do
        url="http://127.0.0.1:$PORT/$size.bin"
        for s in $SERVERS; do
            start_server "$s"
            check=$(curl -s -o /dev/null -w '%{http_code} %{size_download}' "$url" 2>/dev/null || true)
            [[ $check == "200 $((kib[$size] * 1024))" ]] || die "$s answered '$check' for $url (status, bytes)"
            # Warm-up, not measured.
            taskset -c 1 wrk -t"$THREADS" -c"$CONNS" -d"${WARMUP}s" "$url" >/dev/null 2>&1 || true
            t0=$(tree_ticks "$server_pid")
            out=$(taskset -c 1 wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --latency "$url") \
                || die "wrk failed against $s ($size)"
            t1=$(tree_ticks "$server_pid")
            stop_server
            r=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
            l=$(awk '$1 == "99%" { print $2 }' <<<"$out")
            [[ -n $r && -n $l ]] || die "could not parse wrk output:
$out"
            e=$(errors_of "$out")
            c=$(awk -v a="$t0" -v b="$t1" -v h="$clk" 'BEGIN { printf "%.2f", (b - a) / h }')
            k=$(awk -v r="$r" -v d="$DURATION" -v c="$c" 'BEGIN { if (c > 0) printf "%.0f", r * d / c; else print "nan" }')
            key="$size:$s"
            rps[$key]+="$r " cpu[$key]+="$c " per_cpu[$key]+="$k " p99[$key]+="$(to_ms "$l") "
            errs[$key]=$((${errs[$key]:-0} + e))
            echo "  round $round $size $s: $r req/s, server CPU $c s, $k req per CPU-s, p99 $(to_ms "$l") ms, $e errors" >&2
        done
    done
done

echo
printf '%-5s %-6s %10s %12s %16s %8s %7s %8s\n' size server "req/s" "server CPU s" "req per CPU-s" "p99 ms" errors "÷ nginx"
for size in $SIZES; do
    nginx_k=
    # shellcheck disable=SC2086 # word splitting of the collected values is intended
    [[ -n ${per_cpu[$size:nginx]:-} ]] && nginx_k=$(median ${per_cpu[$size:nginx]})
    for s in $SERVERS; do
        key="$size:$s"
        # shellcheck disable=SC2086 # word splitting of the collected values is intended
        k=$(median ${per_cpu[$key]})
        ratio=$(awk -v a="$k" -v b="$nginx_k" 'BEGIN { if (b + 0 > 0 && a == a + 0) printf "%.3f", a / b; else print "-" }')
        # shellcheck disable=SC2086 # word splitting of the collected values is intended
        printf '%-5s %-6s %10.0f %12s %16s %8s %7s %8s\n' "$size" "$s" "$(median ${rps[$key]})" \
            "$(median ${cpu[$key]})" "$k" "$(median ${p99[$key]})" "${errs[$key]}" "$ratio"
    done
done

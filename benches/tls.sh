#!/usr/bin/env bash
# benches/tls.sh — HTTPS side by side: percore's `http_echo` on io_uring and
# on epoll, hyper on tokio with tokio-rustls (`hyper_tls`: the same rustls
# and provider), and nginx with OpenSSL, each serving the same 20-byte JSON
# answer over TLS, one at a time, alternated run by run.
#
# What it measures, with the server pinned to CPU 0 and the load on CPU 1:
#   keepalive  wrk -t1 -cCONNS over https (connections kept alive): requests
#              per server CPU-second (CPU from /proc/PID/stat).
#   handshake  `tls_handshakes` with THREADS blocking clients: a new
#              connection per request, a full TLS 1.3 handshake each (no
#              resumption): handshakes per server CPU-second.
# "÷ hyper" divides each row by hyper's of the same mode (above 1: cheaper
# than hyper). The certificate is ECDSA P-256, made by openssl for this run.
# With TLS_API=1 it then runs `tls_api` on CPU 0 (rustls's buffered and
# unbuffered server APIs, and its crypto providers, in memory; see
# benches/src/bin/tls_api.rs); AWS_LC=1 builds the benches with aws-lc-rs
# beside *ring* for that comparison.
# What it does not: run on more than one server core, or measure TLS 1.2.
#
# Usage: benches/tls.sh           (from anywhere in the repository; installs
#                                  wrk, nginx and openssl with apt-get if missing)
# Environment: DURATION=10 RUNS=3 CONNS=100 THREADS=8 PORT=18443
#              SERVERS="uring epoll hyper nginx" MODES="keepalive handshake"
#              TLS_API=0 AWS_LC=0
set -euo pipefail

DURATION=${DURATION:-10}
RUNS=${RUNS:-3}
CONNS=${CONNS:-100}
THREADS=${THREADS:-8}
PORT=${PORT:-18443}
SERVERS=${SERVERS:-"uring epoll hyper nginx"}
MODES=${MODES:-"keepalive handshake"}

die() { echo "tls.sh: $*" >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/load_common.sh
. "$root/benches/load_common.sh"
require_counts DURATION RUNS CONNS THREADS PORT
for s in $SERVERS; do
    case $s in uring | epoll | hyper | nginx) ;; *) die "SERVERS: unknown server $s (uring, epoll, hyper, nginx)" ;; esac
done
for m in $MODES; do
    case $m in keepalive | handshake) ;; *) die "MODES: unknown mode $m (keepalive, handshake)" ;; esac
done
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac

for tool in wrk nginx openssl; do
    command -v "$tool" >/dev/null 2>&1 && continue
    command -v apt-get >/dev/null 2>&1 || die "$tool is not installed and apt-get is unavailable"
    echo "tls.sh: installing $tool with apt-get" >&2
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$tool" >/dev/null 2>&1; then
        apt-get update -q >/dev/null || die "apt-get update failed"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$tool" >/dev/null || die "apt-get install $tool failed"
    fi
done
command -v taskset >/dev/null 2>&1 || die "taskset (util-linux) is required"

echo "tls.sh: building http_echo, hyper_tls, tls_handshakes and tls_api (release)" >&2
features=()
[[ ${AWS_LC:-0} == 1 ]] && features=(--features percore-benches/aws-lc-rs)
(cd "$root" && cargo build -q --release -p percore-examples --bin http_echo \
    -p percore-benches --bin hyper_tls --bin tls_handshakes --bin tls_api "${features[@]}") ||
    die "the build failed"

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
clk=$(getconf CLK_TCK)
work=$(mktemp -d)
on_exit 'stop_server; rm -rf "$work"'

"$root/benches/make_certs.sh" "$work" || die "openssl could not make the certificate"

# nginx as one process (no master) on CPU 0, so its PID is the one worker;
# no request cap per connection, as the others have none.
cat >"$work/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
error_log $work/nginx.error.log error;
pid $work/nginx.pid;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 100000000;
    client_body_temp_path $work/nginx-body;
    server {
        listen 127.0.0.1:$PORT ssl reuseport;
        ssl_certificate $work/cert.pem;
        ssl_certificate_key $work/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / {
            default_type application/json;
            return 200 '{"message":"Hello!"}';
        }
    }
}
EOF

start_server() {
    local tls=(--tls-cert "$work/cert.pem" --tls-key "$work/key.pem")
    case $1 in
        uring | epoll) exec taskset -c 0 "$target/release/http_echo" --port "$PORT" --cores 0 --backend "$1" \
            --keepalive-requests 0 "${tls[@]}" ;;
        hyper) exec taskset -c 0 "$target/release/hyper_tls" --port "$PORT" --cores 0 "${tls[@]}" ;;
        nginx) exec taskset -c 0 nginx -c "$work/nginx.conf" -e "$work/nginx.error.log" ;;
    esac >"$work/server.log" 2>&1 &
    server_pid=$!
    wait_listening "$server_pid" "$PORT" || die "$1 did not start listening on 127.0.0.1:$PORT; its output:
$(tail -n 20 "$work/server.log" "$work/nginx.error.log" 2>/dev/null)"
}

# Runs one measured load of mode $1; prints the count it completed.
load() {
    case $1 in
        keepalive)
            local out
            out=$(taskset -c 1 wrk -t1 -c"$CONNS" -d"${DURATION}s" "https://127.0.0.1:$PORT/") || die "wrk failed"
            grep -q "Non-2xx\|Socket errors" <<<"$out" && die "wrk saw errors:
$out"
            awk '/requests in/ { print $1 }' <<<"$out"
            ;;
        handshake)
            local out
            out=$(taskset -c 1 "$target/release/tls_handshakes" --connect "127.0.0.1:$PORT" --ca "$work/ca.pem" \
                --threads "$THREADS" --duration "$DURATION") || die "the handshake client failed: $out"
            sed -n 's/^handshakes=\([0-9]*\) .*/\1/p' <<<"$out"
            ;;
    esac
}

echo "tls.sh: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, Linux $(uname -r)"
echo "tls.sh: server on CPU 0, load on CPU 1; ${DURATION}s runs, median of $RUNS, servers alternated run by run"
require_free_ports "$PORT"
results=()
for mode in $MODES; do
    declare -A per_cpu=() rate=()
    for run in $(seq "$RUNS"); do
        for s in $SERVERS; do
            start_server "$s"
            # Warm-up, not measured.
            taskset -c 1 wrk -t1 -c"$CONNS" -d2s "https://127.0.0.1:$PORT/" >/dev/null 2>&1 || true
            t0=$(cpu_ticks "$server_pid")
            count=$(load "$mode")
            t1=$(cpu_ticks "$server_pid")
            stop_server
            [[ -n $count ]] || die "no count from the $mode load against $s"
            cpu_s=$(awk -v a="$t0" -v b="$t1" -v h="$clk" 'BEGIN { printf "%.3f", (b - a) / h }')
            per_cpu[$s]+="$(awk -v n="$count" -v c="$cpu_s" 'BEGIN { if (c > 0) printf "%.0f", n / c; else print "nan" }') "
            rate[$s]+="$(awk -v n="$count" -v d="$DURATION" 'BEGIN { printf "%.0f", n / d }') "
            echo "  $mode $s run $run: $count in ${DURATION}s, server CPU ${cpu_s} s" >&2
        done
    done
    hyper=
    # shellcheck disable=SC2086 # word splitting of the collected values is intended
    [[ -n ${per_cpu[hyper]:-} ]] && hyper=$(median ${per_cpu[hyper]})
    for s in $SERVERS; do
        # shellcheck disable=SC2086 # word splitting of the collected values is intended
        m=$(median ${per_cpu[$s]})
        ratio=$(awk -v a="$m" -v b="$hyper" 'BEGIN { if (b + 0 > 0 && a == a + 0) printf "%.3f", a / b; else print "-" }')
        # shellcheck disable=SC2086 # word splitting of the collected values is intended
        results+=("$(printf '%-10s %-6s %10s %22s %8s' "$mode" "$s" "$(median ${rate[$s]})" "$m" "$ratio")")
    done
    unset per_cpu rate
done

echo
printf '%-10s %-6s %10s %22s %8s\n' mode server "per second" "per server CPU-second" "÷ hyper"
for line in "${results[@]}"; do echo "$line"; done

if [[ ${TLS_API:-0} == 1 ]]; then
    echo
    taskset -c 0 "$target/release/tls_api" --cert "$work/cert.pem" --key "$work/key.pem" --ca "$work/ca.pem" ||
        die "tls_api failed"
fi

#!/usr/bin/env bash
# benches/h2.sh — HTTP/2 side by side: percore's `http_echo` (built with
# `--features h2`) on io_uring and on epoll, hyper's HTTP/2 server on a
# tokio current-thread runtime (`hyper_h2`), and nginx, each answering the
# same 20-byte JSON GET, one at a time, alternated run by run.
#
# What it measures, with the server pinned to CPU 0 and h2load on CPU 1:
#   h2c  HTTP/2 in the clear by prior knowledge (no upgrade).
#   tls  HTTP/2 over TLS, chosen by ALPN (percore and hyper on rustls with
#        *ring*, nginx on OpenSSL; an ECDSA P-256 certificate made for the run).
#   grpc unary gRPC calls in the clear: `grpc_echo` (tonic's generated
#        service on percore through percore-tokio's hyper bridge) on io_uring
#        and on epoll, against `tonic_tokio` (the same service on tonic's own
#        server on a tokio current-thread runtime); h2load POSTs a prepared
#        EchoRequest{message:"hi"} to /echo.v1.Echo/Unary. nginx is not in it.
# Each with `h2load -cCONNS -mM` for every M of STREAMS (streams in flight
# per connection): requests per server CPU-second (CPU from /proc/PID/stat).
# "÷ base" divides each row by the baseline's of the same mode and M: hyper
# for h2c and tls, tonic for grpc (above 1: cheaper than the baseline). The connections are made before the count starts
# (h2load's warm-up), so handshakes are not in it.
# What it does not: run on more than one server core, upgrade from
# HTTP/1.1 (h2c by `Upgrade:`), or measure request bodies.
#
# Usage: benches/h2.sh      (from anywhere in the repository; installs
#                            nginx, nghttp2-client (h2load) and openssl with
#                            apt-get if missing)
# Environment: DURATION=10 RUNS=3 CONNS=100 STREAMS="10 100" PORT=18444
#              SERVERS="uring epoll hyper nginx" MODES="h2c tls grpc"
#              (in grpc mode hyper stands for tonic_tokio, and nginx is left out)
set -euo pipefail

DURATION=${DURATION:-10}
RUNS=${RUNS:-3}
CONNS=${CONNS:-100}
STREAMS=${STREAMS:-"10 100"}
PORT=${PORT:-18444}
SERVERS=${SERVERS:-"uring epoll hyper nginx"}
MODES=${MODES:-"h2c tls grpc"}

die() { echo "h2.sh: $*" >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/load_common.sh
. "$root/benches/load_common.sh"
require_counts DURATION RUNS CONNS PORT
for m in $STREAMS; do
    [[ $m =~ ^[1-9][0-9]*$ ]] || die "STREAMS: $m is not a positive integer"
    # nginx 1.22 allows 128 concurrent streams per connection by default.
    ((m <= 128)) || die "STREAMS: $m is above 128, nginx's limit of streams per connection"
done
for s in $SERVERS; do
    case $s in uring | epoll | hyper | nginx) ;; *) die "SERVERS: unknown server $s (uring, epoll, hyper, nginx)" ;; esac
done
for m in $MODES; do
    case $m in h2c | tls | grpc) ;; *) die "MODES: unknown mode $m (h2c, tls, grpc)" ;; esac
done
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac

need_commands nginx h2load:nghttp2-client openssl
command -v taskset >/dev/null 2>&1 || die "taskset (util-linux) is required"

builds=(--bin http_echo --bin hyper_h2)
features=percore-examples/h2
if [[ " $MODES " == *" grpc "* ]]; then
    builds+=(--bin grpc_echo --bin tonic_tokio)
    features=percore-examples/h2,percore-examples/grpc,percore-benches/grpc
    command -v curl >/dev/null 2>&1 || die "curl is required to check a gRPC answer"
fi
echo "h2.sh: building ${builds[*]//--bin /} (release)" >&2
(cd "$root" && cargo build -q --release --features "$features" -p percore-examples -p percore-benches "${builds[@]}") ||
    die "the build failed"

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
clk=$(getconf CLK_TCK)
work=$(mktemp -d)
on_exit 'stop_server; rm -rf "$work"'

"$root/benches/make_certs.sh" "$work" || die "openssl could not make the certificate"

# The gRPC request: the 5-byte prefix (not compressed, length 4) and the
# protobuf EchoRequest{message:"hi"} (field 1, length-delimited, "hi").
printf '\x00\x00\x00\x00\x04\x0a\x02hi' >"$work/unary.bin"
grpc_headers=(-H "content-type: application/grpc" -H "te: trailers")

# nginx as one process (no master) on CPU 0, so its PID is the one worker;
# no request cap per connection (nginx 1.22 counts HTTP/2 requests against
# keepalive_requests), as the others have none. One file per mode.
for mode in h2c tls; do
    listen="listen 127.0.0.1:$PORT http2 reuseport;"
    tls_conf=
    if [[ $mode == tls ]]; then
        listen="listen 127.0.0.1:$PORT ssl http2 reuseport;"
        tls_conf="ssl_certificate $work/cert.pem; ssl_certificate_key $work/key.pem; ssl_protocols TLSv1.2 TLSv1.3;"
    fi
    cat >"$work/nginx-$mode.conf" <<NGINX
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
        $listen
        $tls_conf
        location / {
            default_type application/json;
            return 200 '{"message":"Hello!"}';
        }
    }
}
NGINX
done

# Starts server $1 for mode $2.
start_server() {
    local tls=()
    [[ $2 == tls ]] && tls=(--tls-cert "$work/cert.pem" --tls-key "$work/key.pem")
    case $1 in
        uring | epoll) if [[ $2 == grpc ]]; then
            exec taskset -c 0 "$target/release/grpc_echo" --port "$PORT" --cores 0 --backend "$1"
        else
            exec taskset -c 0 "$target/release/http_echo" --port "$PORT" --cores 0 --backend "$1" \
                --keepalive-requests 0 "${tls[@]}"
        fi ;;
        hyper) if [[ $2 == grpc ]]; then
            exec taskset -c 0 "$target/release/tonic_tokio" --port "$PORT" --cores 0
        else
            exec taskset -c 0 "$target/release/hyper_h2" --port "$PORT" --cores 0 "${tls[@]}"
        fi ;;
        nginx) exec taskset -c 0 nginx -c "$work/nginx-$2.conf" -e "$work/nginx.error.log" ;;
    esac >"$work/server.log" 2>&1 &
    server_pid=$!
    wait_listening "$server_pid" "$PORT" || die "$1 did not start listening on 127.0.0.1:$PORT; its output:
$(tail -n 20 "$work/server.log" "$work/nginx.error.log" 2>/dev/null)"
}

url() {
    case $1 in
        tls) echo "https://127.0.0.1:$PORT/" ;;
        grpc) echo "http://127.0.0.1:$PORT/echo.v1.Echo/Unary" ;;
        *) echo "http://127.0.0.1:$PORT/" ;;
    esac
}

# One gRPC call by curl (a client other than h2load, which sees neither the
# trailers nor the body): fails unless the answer is 200, application/grpc,
# grpc-status 0 in the trailers, and an EchoReply holding "hi".
check_grpc() {
    local head body
    head=$(curl -sS --http2-prior-knowledge "${grpc_headers[@]}" --data-binary "@$work/unary.bin" \
        -D - -o "$work/reply.bin" "$(url grpc)") || die "curl's gRPC call to $1 failed"
    body=$(od -An -tx1 "$work/reply.bin" | tr -d ' \n')
    grep -q '^HTTP/2 200' <<<"$head" && grep -qi '^content-type: application/grpc' <<<"$head" &&
        grep -qi '^grpc-status: 0' <<<"$head" && [[ $body == 00000000??0a026869* ]] ||
        die "$1 gave an unexpected gRPC answer (want 200, grpc-status 0, EchoReply \"hi\"):
$head
body: $body"
}

# Runs h2load for mode $1 with $2 streams per connection for $3 seconds;
# prints the requests that succeeded. Fails on any failed, errored or timed
# out request, any answer but 2xx, or, over TLS, a protocol other than h2 on
# TLS 1.3 (every server here offers 1.2 and 1.3; h2load takes 1.3 if offered).
load() {
    local out ok bad other proto version
    local post=()
    [[ $1 == grpc ]] && post=(-d "$work/unary.bin" "${grpc_headers[@]}")
    out=$(taskset -c 1 h2load -t1 -c"$CONNS" -m"$2" -D"$3" "${post[@]}" "$(url "$1")" 2>&1) || die "h2load failed:
$out"
    if [[ $1 == tls ]]; then
        proto=$(awk '/^Application protocol:/ { print $3 }' <<<"$out")
        version=$(awk '/^TLS Protocol:/ { print $3 }' <<<"$out")
        [[ $proto == h2 && $version == TLSv1.3 ]] || die "TLS gave '${proto:-no ALPN}' on '${version:-?}', not h2 on TLSv1.3:
$out"
    fi
    # "requests: N total, N started, N done, N succeeded, N failed, N errored, N timeout"
    read -r ok bad < <(awk '/^requests:/ { print $8, $10 + $12 + $14 }' <<<"$out")
    [[ ${bad:-x} == 0 ]] || die "h2load saw failed, errored or timed-out requests:
$out"
    # "status codes: N 2xx, N 3xx, N 4xx, N 5xx"
    other=$(awk '/^status codes:/ { print $5 + $7 + $9 }' <<<"$out")
    [[ ${other:-x} == 0 ]] || die "h2load saw answers other than 2xx:
$out"
    echo "$ok"
}

echo "h2.sh: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, Linux $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "h2.sh: server on CPU 0, h2load on CPU 1; -c$CONNS, ${DURATION}s runs, median of $RUNS, servers alternated run by run"
require_free_ports "$PORT"
results=()
for mode in $MODES; do
    for m in $STREAMS; do
        declare -A per_cpu=() rate=()
        for run in $(seq "$RUNS"); do
            for s in $SERVERS; do
                [[ $mode == grpc && $s == nginx ]] && continue
                start_server "$s" "$mode"
                [[ $mode == grpc ]] && check_grpc "$s"
                # Warm-up, not measured (also checks the server answers).
                load "$mode" "$m" 2 >/dev/null
                t0=$(cpu_ticks "$server_pid")
                count=$(load "$mode" "$m" "$DURATION")
                t1=$(cpu_ticks "$server_pid")
                stop_server
                [[ -n $count ]] || die "no count from h2load against $s"
                cpu_s=$(awk -v a="$t0" -v b="$t1" -v h="$clk" 'BEGIN { printf "%.3f", (b - a) / h }')
                per_cpu[$s]+="$(awk -v n="$count" -v c="$cpu_s" 'BEGIN { if (c > 0) printf "%.0f", n / c; else print "nan" }') "
                rate[$s]+="$(awk -v n="$count" -v d="$DURATION" 'BEGIN { printf "%.0f", n / d }') "
                echo "  $mode -m$m $s run $run: $count in ${DURATION}s, server CPU ${cpu_s} s" >&2
            done
        done
        hyper=
        # shellcheck disable=SC2086 # word splitting of the collected values is intended
        [[ -n ${per_cpu[hyper]:-} ]] && hyper=$(median ${per_cpu[hyper]})
        for s in $SERVERS; do
            [[ -n ${per_cpu[$s]:-} ]] || continue
            label=$s
            [[ $mode == grpc && $s == hyper ]] && label=tonic
            # shellcheck disable=SC2086 # word splitting of the collected values is intended
            med=$(median ${per_cpu[$s]})
            ratio=$(awk -v a="$med" -v b="$hyper" 'BEGIN { if (b + 0 > 0 && a == a + 0) printf "%.3f", a / b; else print "-" }')
            # shellcheck disable=SC2086 # word splitting of the collected values is intended
            results+=("$(printf '%-5s %5s %-6s %10s %22s %8s' "$mode" "-m$m" "$label" "$(median ${rate[$s]})" "$med" "$ratio")")
        done
        unset per_cpu rate
    done
done

echo
printf '%-5s %5s %-6s %10s %22s %8s\n' mode load server "per second" "per server CPU-second" "÷ base"
for line in "${results[@]}"; do echo "$line"; done

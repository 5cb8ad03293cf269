#!/usr/bin/env bash
# benches/api_parity.sh — checks that the JSON API servers of the `api`
# cells answer alike: `axum_api` and, where it is built, percore's
# `json_api` on each backend.
#
# What it checks: a fixed list of requests (every route, and every error
# the API names), each sent by curl on a new connection, against what the
# API says (status; for 2xx answers the body byte for byte and
# Content-Type application/json; for 405 an Allow header), and then each
# json_api transcript against axum_api's. Every server runs on one core
# (--cores 0), so its per-core counters (POST ids, /stats) are the same
# from one run to the next. /weather goes to a live upstream
# (tokio_baseline --service http, which answers any GET with a 20-byte
# body), then to a port nobody listens on (502).
# What it does not: compare error bodies (free text) or headers other than
# Content-Type and Allow, or load the servers (the `api` cells of
# `cargo bench` do).
#
# Usage: benches/api_parity.sh      (from anywhere inside the repository)
#   build first: cargo build --release -p percore-benches   (axum_api, tokio_baseline)
#                cargo build --release -p percore-examples --bin json_api
# Environment: AXUM_API, JSON_API, TOKIO_BASELINE (other binaries),
#              BACKENDS="uring epoll" PORT=18500 (the servers use PORT to PORT+2)
# Exit status: 0 when every server passed, 1 otherwise.
set -euo pipefail

BACKENDS=${BACKENDS:-"uring epoll"}
PORT=${PORT:-18500}

die() { echo "api_parity.sh: $*" >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=benches/load_common.sh
. "$root/benches/load_common.sh"
require_counts PORT
command -v curl >/dev/null 2>&1 || die "curl is required"
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac
axum_bin=${AXUM_API:-$target/release/axum_api}
json_bin=${JSON_API:-$target/release/json_api}
upstream_bin=${TOKIO_BASELINE:-$target/release/tokio_baseline}
for b in "$axum_bin" "$upstream_bin"; do
    [[ -x $b ]] || die "no $b. Build it first:  cargo build --release -p percore-benches"
done
servers=(axum_api)
if [[ -x $json_bin ]]; then
    for b in $BACKENDS; do servers+=("json_api-$b"); done
else
    echo "skipped: json_api: no binary at $json_bin (cargo build --release -p percore-examples --bin json_api)"
fi

api_port=$PORT
upstream_port=$((PORT + 1))
dead_port=$((PORT + 2))
require_free_ports "$api_port" "$upstream_port" "$dead_port"
base=http://127.0.0.1:$api_port

tmp=$(mktemp -d)
pids=()
stop_all() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    pids=()
}
on_exit 'stop_all; rm -rf "$tmp"'

"$upstream_bin" --service http --port "$upstream_port" >"$tmp/upstream.log" 2>&1 &
upstream_pid=$!
wait_listening "$upstream_pid" "$upstream_port" || die "the upstream did not start: $(cat "$tmp/upstream.log")"

# Starts server $1 with the upstream arguments in the rest, on one core.
start() {
    local name=$1
    shift
    case $name in
        axum_api) exec "$axum_bin" --port "$api_port" --cores 0 "$@" ;;
        json_api-*) exec "$json_bin" --port "$api_port" --cores 0 --backend "${name#json_api-}" "$@" ;;
    esac >"$tmp/server.log" 2>&1 &
    server_pid=$!
    pids+=("$server_pid")
    wait_listening "$server_pid" "$api_port" || die "$name did not start: $(tail -n 20 "$tmp/server.log")"
}
stop() {
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    pids=("$upstream_pid")
}

# ask STATUS BODY CURL-ARGS...: one request. Writes the answer's line to
# the transcript ($transcript) and counts a failure against the API.
# BODY is checked for 2xx answers only ("-" for none).
ask() {
    local want_status=$1 want_body=$2
    shift 2
    local label="${*: -1}" got ct allow body line
    got=$(curl -s -o "$tmp/body" -D "$tmp/head" -w '%{http_code} %{content_type}' "$@" || echo "000 -")
    ct=${got#* }
    got=${got%% *}
    body=$(cat "$tmp/body")
    allow=$(grep -i '^allow:' "$tmp/head" | tr -d '\r' | cut -d' ' -f2- || true)
    case $got in
        2??) line="$got $ct $body" ;;
        405) line="$got allow=${allow:+yes}" ;;
        *) line="$got" ;;
    esac
    local opts="${*:1:$#-1}"
    echo "${opts:+$opts }${label#"$base"} -> $line" >>"$transcript"
    local why=
    if [[ $got != "$want_status" ]]; then
        why="status $got, want $want_status"
    elif [[ $got == 2?? && $ct != application/json ]]; then
        why="Content-Type '$ct', want application/json"
    elif [[ $got == 2?? && $body != "$want_body" ]]; then
        why="body '$body', want '$want_body'"
    elif [[ $got == 405 && -z $allow ]]; then
        why="405 without Allow"
    fi
    if [[ -n $why ]]; then
        echo "  FAIL $name: $* : $why"
        failures=$((failures + 1))
    fi
}

json=(-H 'Content-Type: application/json')
# The requests to a server with a live upstream, in order: the counters
# (ids from 1, /stats counting every request) depend on it.
requests() {
    ask 200 '{"requests":1}' "$base/stats"
    ask 200 '{"id":42,"name":"user-42"}' "$base/users/42"
    ask 200 '{"id":18446744073709551615,"name":"user-18446744073709551615"}' "$base/users/18446744073709551615"
    ask 400 - "$base/users/18446744073709551616"
    ask 400 - "$base/users/abc"
    ask 400 - "$base/users/-1"
    ask 201 '{"id":1,"name":"ann"}' -X POST "${json[@]}" -d '{"name":"ann"}' "$base/users"
    ask 201 '{"id":2,"name":"bob"}' -X POST "${json[@]}" -d '{"name":"bob"}' "$base/users"
    ask 400 - -X POST "${json[@]}" -d '{"name":' "$base/users"
    ask 400 - -X POST "${json[@]}" -d '{"nick":"x"}' "$base/users"
    ask 415 - -X POST -H 'Content-Type: text/plain' -d '{"name":"ann"}' "$base/users"
    ask 201 '{"id":3,"name":"carl"}' -X POST "${json[@]}" -d '{"name":"carl"}' "$base/users"
    ask 200 '{"limit":5,"q":"hello world!"}' "$base/search?q=hello+world%21&limit=5"
    ask 200 '{"limit":10,"q":"café"}' "$base/search?q=caf%C3%A9"
    ask 200 '{"limit":10,"q":"say \"hi\""}' "$base/search?q=say+%22hi%22"
    ask 400 - "$base/search?q=x&limit=abc"
    ask 400 - "$base/search?q=x&limit=4294967296"
    ask 200 '{"city":"paris","upstream_bytes":20,"upstream_status":200}' "$base/weather/paris"
    ask 404 - "$base/nope"
    ask 404 - "$base/"
    ask 405 - -X DELETE "$base/users/42"
    ask 405 - "$base/users"
    ask 405 - -X POST "$base/stats"
    ask 200 '{"requests":24}' "$base/stats"
}

failures=0
for name in "${servers[@]}"; do
    echo "$name"
    transcript=$tmp/$name.txt
    start "$name" --upstream "127.0.0.1:$upstream_port"
    requests
    stop
    start "$name" --upstream "127.0.0.1:$dead_port"
    ask 502 - "$base/weather/paris"
    stop
done
for name in "${servers[@]:1}"; do
    if ! diff -u "$tmp/axum_api.txt" "$tmp/$name.txt" >"$tmp/diff"; then
        echo "  FAIL $name answers otherwise than axum_api:"
        sed 's/^/    /' "$tmp/diff"
        failures=$((failures + 1))
    fi
done
if ((failures > 0)); then
    echo "api_parity.sh: $failures failure(s)"
    exit 1
fi
count=$(wc -l <"$tmp/axum_api.txt")
if ((${#servers[@]} == 1)); then
    echo "api_parity.sh: axum_api answers as the API says ($count requests); nothing to compare it with"
else
    echo "api_parity.sh: ${servers[*]} answer as the API says, and alike ($count requests each)"
fi

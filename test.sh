#!/usr/bin/env bash
# Runs every test of the workspace, as CI does. As root it first installs
# what the tests use (curl, h2load, nginx, wrk, strace, iproute2, openssl,
# python3, prometheus with promtool, haproxy, postgresql, chromium; from PyPI
# websockets, h2, grpcio and grpcio-tools), and a test that
# finds one of those missing then fails instead of skipping; as another
# user it says what is missing, and those tests skip with the reason.
#
# Usage: ./test.sh                  every test binary, three at a time
#        ./test.sh ARGS...          `cargo test --workspace ARGS...` as asked
# Env:   PERCORE_TEST_JOBS=3        test binaries run at once
set -euo pipefail
cd "$(dirname "$0")"
# shellcheck source=.ci/tools.sh
. .ci/tools.sh

# PostgreSQL's binaries are not on PATH: its package's pg_ctlcluster is.
tools=(curl h2load:nghttp2-client nghttp:nghttp2-client nginx:nginx wrk strace ip:iproute2 openssl python3 prometheus promtool:prometheus haproxy pg_ctlcluster:postgresql chromium)
if [ "$(id -u)" -eq 0 ]; then
    need_tools "${tools[@]}"
    # The WebSocket tests' clients (over HTTP/1.1, and over HTTP/2 with
    # TLS); gRPC's Python client and its protoc.
    need_pip websockets h2 grpc:grpcio grpc_tools:grpcio-tools
    export PERCORE_TEST_TOOLS=curl,h2load,nghttp,nginx,wrk,openssl,python3,prometheus,promtool,haproxy,postgresql,chromium,python3-websockets,python3-h2,python3-grpc,python3-grpc_tools
else
    for spec in "${tools[@]}"; do
        command -v "${spec%%:*}" >/dev/null 2>&1 ||
            echo "test.sh: ${spec%%:*} is not installed (not root: not installing it); the tests that need it skip"
    done
fi
# The HTTP layer's optional parts (JSON, the `http` crate, HTTP/2), hyper on
# percore, WebSocket compression, gRPC and the cookbook's PostgreSQL recipe
# are tested too.
features=percore-handlers/json,percore-handlers/http,percore-handlers/h2,percore-handlers/ws-deflate,percore-tokio/hyper,percore-examples/axum,percore-examples/postgres,percore-examples/h2,percore-examples/grpc

# With arguments (a test name, `-p` a package...), cargo runs them as asked.
if [ "$#" -gt 0 ]; then
    exec cargo test --workspace --features "$features" "$@"
fi

# Without: every test binary, built once, then run three at a time (and
# the doc tests beside them). Each binary keeps its own tests in order
# (the test kit's lock serializes those that need the process to
# themselves); across binaries nothing is shared but the machine, and the
# tests' verdicts never depend on its speed. Each binary's output is
# printed whole when it ends.
jobs="${PERCORE_TEST_JOBS:-3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cargo test --workspace --features "$features" --no-run --message-format=json-render-diagnostics > "$work/build.json"
python3 - "$work/build.json" > "$work/binaries" <<'PY'
import json, os, sys
# Test binaries with their package's directory, the biggest suites first so
# that the long ones start at once.
found = []
for line in open(sys.argv[1]):
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
        continue
    if not msg.get("profile", {}).get("test"):
        continue
    exe = msg["executable"]
    found.append((os.path.getsize(exe), exe, os.path.dirname(msg["manifest_path"])))
for _, exe, pkg in sorted(found, reverse=True):
    print(f"{exe}\t{pkg}")
PY
printf 'doc\t%s\n' "$PWD" >> "$work/binaries"

run_one() {
    local exe="$1" dir="$2" log
    log="$work/$(basename "$exe").log"
    if [ "$exe" = doc ]; then
        (cargo test --workspace --features "$features" --doc) > "$log" 2>&1
    else
        (cd "$dir" && CARGO_MANIFEST_DIR="$dir" "$exe") > "$log" 2>&1
    fi
    local rc=$?
    cat "$log"
    [ "$rc" -eq 0 ] || echo "test.sh: FAILED: $exe (exit $rc)" | tee -a "$work/failed"
    return 0
}
export -f run_one
export work features
tr '\t' '\n' < "$work/binaries" | xargs -d '\n' -n 2 -P "$jobs" bash -c 'run_one "$0" "$1"'
if [ -s "$work/failed" ]; then
    echo
    echo "test.sh: failed:"
    cat "$work/failed"
    exit 1
fi
echo "test.sh: every test binary passed"

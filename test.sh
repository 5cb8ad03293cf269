#!/usr/bin/env bash
# Runs every test of the workspace, as CI does. As root it first installs
# what the tests use (curl, h2load, nginx, wrk, strace, iproute2, openssl,
# python3, prometheus with promtool, haproxy, postgresql, chromium; from PyPI
# websockets, grpcio and grpcio-tools), and a test that
# finds one of those missing then fails instead of skipping; as another
# user it says what is missing, and those tests skip with the reason.
#
# Usage: ./test.sh [cargo test arguments...]
set -euo pipefail
cd "$(dirname "$0")"
# shellcheck source=.ci/tools.sh
. .ci/tools.sh

# PostgreSQL's binaries are not on PATH: its package's pg_ctlcluster is.
tools=(curl h2load:nghttp2-client nghttp:nghttp2-client nginx:nginx wrk strace ip:iproute2 openssl python3 prometheus promtool:prometheus haproxy pg_ctlcluster:postgresql chromium)
if [ "$(id -u)" -eq 0 ]; then
    need_tools "${tools[@]}"
    # The WebSocket tests' client; gRPC's Python client and its protoc.
    need_pip websockets grpc:grpcio grpc_tools:grpcio-tools
    export PERCORE_TEST_TOOLS=curl,h2load,nghttp,nginx,wrk,openssl,python3,prometheus,promtool,haproxy,postgresql,chromium,python3-websockets,python3-grpc,python3-grpc_tools
else
    for spec in "${tools[@]}"; do
        command -v "${spec%%:*}" >/dev/null 2>&1 ||
            echo "test.sh: ${spec%%:*} is not installed (not root: not installing it); the tests that need it skip"
    done
fi
# The HTTP layer's optional parts (JSON, the `http` crate, HTTP/2), hyper on
# percore and the cookbook's PostgreSQL recipe are tested too.
exec cargo test --workspace --features percore-handlers/json,percore-handlers/http,percore-handlers/h2,percore-handlers/ws-deflate,percore-tokio/hyper,percore-examples/axum,percore-examples/postgres,percore-examples/h2,percore-examples/grpc "$@"

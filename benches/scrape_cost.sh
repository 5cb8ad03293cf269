#!/usr/bin/env bash
# What scraping /metrics costs a loaded server: http_echo on one core
# under wrk, with and without a scrape of its --admin port every 100 ms,
# in alternating runs. Prints each run's requests per second of the
# server's CPU time (utime + stime from /proc), so that a scrape's cost
# shows as fewer requests per CPU-second, whatever the machine's speed.
#
# Usage: benches/scrape_cost.sh [BIN_DIR] [RUNS] [SECONDS]
set -euo pipefail
bin=${1:-target/release}
runs=${2:-3}
secs=${3:-5}
port=18611
admin=18612
hz=$(getconf CLK_TCK)

"$bin/http_echo" --port $port --admin $admin --cores 0 2>/dev/null &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$admin/readyz" >/dev/null && break; sleep 0.05; done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$server/stat"; }

one_run() {
    local scrape=$1 scraper=
    if [ "$scrape" = yes ]; then
        taskset -c 1 bash -c "while :; do curl -s -o /dev/null http://127.0.0.1:$admin/metrics; sleep 0.1; done" &
        scraper=$!
    fi
    local before after out requests
    before=$(cpu_ticks)
    out=$(taskset -c 1 wrk -t1 -c32 -d"${secs}s" "http://127.0.0.1:$port/hello")
    after=$(cpu_ticks)
    [ -n "$scraper" ] && kill "$scraper" && wait "$scraper" 2>/dev/null || true
    requests=$(awk '/requests in/ {print $1}' <<<"$out")
    awk -v r="$requests" -v t=$((after - before)) -v hz="$hz" -v s="$scrape" \
        'BEGIN { printf "scrape=%-3s requests=%d cpu_s=%.2f requests_per_cpu_s=%.0f\n", s, r, t / hz, r / (t / hz) }'
}

for _ in $(seq "$runs"); do
    one_run no
    one_run yes
done
echo "scrapes served: $(curl -s "http://127.0.0.1:$admin/metrics" | awk '/^percore_listener_connections_accepted_total/ && /'$admin'/ {print $2}') connections to the admin port"

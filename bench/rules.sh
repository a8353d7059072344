#!/usr/bin/env bash
# What a link's rules cost, whatever the client sends: 1000 links with six rules each (os, device,
# lang and country conditions: bench/helpers.py country-rules) against 1000 plain links, on one
# couchlink with a GeoIP database (bench-geoip's, 300k networks) behind a trusted proxy, in
# interleaved rounds, as two clients:
#   browsers  five real browsers from random addresses (bench/visitors.lua, BENCH_FORWARDED=1): target <= 1.2x;
#   hostile   a User-Agent of 400 random bytes never sent before, on every request, from random
#             addresses (bench/hostile_ua.lua): target <= 2x.
# Ratios are CPU per request of the rule links over the plain ones, for the same client.
#
#   bench/rules.sh                          # 5 interleaved rounds of 10 s per row
#   BENCH_ROUNDS=3 BENCH_SECONDS=5 bench/rules.sh
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${BENCH_SECONDS:-10}
rounds=${BENCH_ROUNDS:-5}
workers=${BENCH_WORKERS:-$(nproc)}
. bench/lib.sh
bench_start rules
cargo build --release --locked -q --example bench-geoip
target/release/examples/bench-geoip "$work/country.mmdb" 2>/dev/null
couchdb_with_links "$(free_port)" 1000
couch_port=${couch##*:}
python3 bench/helpers.py country-rules "$couch_port" links admin admin "$work/rules.txt" 1000
cp "$BENCH_IDS" "$work/plain.txt"
port=$(free_port); admin=$(free_port)
COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader \
  COUCHLINK_LISTEN=127.0.0.1:$port COUCHLINK_ADMIN_LISTEN=127.0.0.1:$admin COUCHLINK_LOG_DIR=$work/logs \
  COUCHLINK_WORKERS=$workers COUCHLINK_TRUSTED_PROXIES=127.0.0.1 COUCHLINK_GEOIP=$work/country.mmdb \
  target/release/couchlink serve 2>"$work/serve.err" &
pids+=($!); pid=$!
wait_http "http://127.0.0.1:$admin/metrics"
wait_cache_full "$admin" 2000
for set in plain rules; do
  BENCH_IDS=$work/$set.txt wrk -t1 -c64 -d3s -s bench/visitors.lua "http://127.0.0.1:$port" >/dev/null
done
round() {
  BENCH_IDS=$work/$2.txt with_cpu "$pid" wrk -t1 -c64 -d"${seconds}s" -s "bench/$1.lua" "http://127.0.0.1:$port"
}
export BENCH_FORWARDED=1
for client in visitors hostile_ua; do
  echo "== $(date -u +%H:%M:%S) $client: $rounds rounds of ${seconds}s each, links with six rules against plain links"
  interleaved "$client" plain rules round "$client"
done
grep -q "country rules use" "$work/serve.err" || { echo "the GeoIP database was not read" >&2; exit 1; }
echo
echo "couchlink $(git rev-parse --short HEAD)$(git diff --quiet || echo "+changes"): links with os, device, lang and country rules against plain links ($(date -u +%Y-%m-%d), $(nproc) cores, $workers workers, wrk -t1 -c64, median (min-max) of $rounds interleaved rounds x ${seconds}s)"
for client in visitors hostile_ua; do
  target=$([ "$client" = hostile_ua ] && echo 2 || echo 1.2)
  printf '%-13s req/s  plain %-24s rules %-24s %s\n' "$client" "$(stat $client plain rps)" "$(stat $client rules rps)" "$(ratio "$(med $client rules rps)" "$(med $client plain rps)")"
  printf '%-13s CPU us plain %-24s rules %-24s %s   (target <= %s)\n' "$client" "$(stat2 $client plain cpu_us)" "$(stat2 $client rules cpu_us)" "$(ratio "$(med $client rules cpu_us)" "$(med $client plain cpu_us)")" "$target"
done
echo "errors (wrk)  $(cat "$work"/visitors.* "$work"/hostile_ua.* | tr ' ' '\n' | sed -n 's/^errors=//p' | awk '{s += $1} END {print s + 0}') (all rows)"

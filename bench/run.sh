#!/usr/bin/env bash
# couchlink against nginx on this machine, in one run, on loopback only. Prints ratios against
# references measured in the same run (never bare times: these machines are shared and noisy).
#
#   bench/run.sh                     # 100k links, 5 interleaved rounds of 10 s per server and row
#   BENCH_LINKS=20000 BENCH_SECONDS=5 BENCH_ROUNDS=1 bench/run.sh   # quicker
#
# Measures: throughput and latency of cached redirects over random IDs (couchlink vs an nginx
# `return 302` with a Set-Cookie and an access log) with 64 connections, with 1000, and with 16
# requests pipelined per connection, in interleaved rounds (couchlink, nginx, nginx, couchlink,
# ...), each row's median and spread, with CPU, context switches and epoll_wait calls per
# request; the CPU per request of links with five rules each against plain links (both asked for
# as real browsers); cold-miss throughput (couchlink vs CouchDB's
# own doc GETs, interleaved rounds on fresh IDs), the cost of COUCHLINK_LOG_SYNC=true (the same couchlink with
# and without it, interleaved), edit-to-served latency over 200 edits, RSS per cached link, and whether the
# access log holds exactly one line per response.
set -euo pipefail
cd "$(dirname "$0")/.."
links=${BENCH_LINKS:-100000}
seconds=${BENCH_SECONDS:-10}
rounds=${BENCH_ROUNDS:-5}
connections=${BENCH_CONNECTIONS:-64}
threads=${BENCH_THREADS:-1}
# Serving processes/threads, the same for both servers.
workers=${BENCH_WORKERS:-$(nproc)}
export BENCH_THREADS=$threads

if ! command -v wrk >/dev/null || ! command -v nginx >/dev/null; then
  apt-get update -qq && apt-get install -y -qq wrk nginx-light >/dev/null
fi
cargo build --release --locked -q
couchdb/install.sh

. bench/lib.sh
bench_work bench
# pouchdb-server warns about its own piled-up change listeners; nothing to act on here.
export NODE_NO_WARNINGS=1

couch_port=$(free_port); proxy_port=$(free_port); admin_port=$(free_port); nginx_port=$(free_port)
couchdb_with_links "$couch_port" "$links"

echo "== $(date -u +%H:%M:%S) starting couchlink and nginx"
# No warm start: the cold-miss figure below needs IDs couchlink has not read yet.
COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader \
  COUCHLINK_LISTEN=127.0.0.1:$proxy_port COUCHLINK_ADMIN_LISTEN=127.0.0.1:$admin_port \
  COUCHLINK_LOG_DIR=$work/logs COUCHLINK_CACHE_CAPACITY=$((links * 2)) COUCHLINK_WORKERS=$workers \
  COUCHLINK_WARM_START=false \
  target/release/couchlink serve 2>"$work/couchlink.err" &
couchlink_pid=$!
pids+=($couchlink_pid)
wait_http "http://127.0.0.1:$admin_port/metrics"
for _ in $(seq 1 100); do curl -fsS -o /dev/null "http://127.0.0.1:$admin_port/healthz" 2>/dev/null && break; sleep 0.1; done
rss_start=$(python3 bench/helpers.py rss "$couchlink_pid")

start_nginx "$work" "$nginx_port" "$workers" "worker_connections 4096;"
wait_http "http://127.0.0.1:$nginx_port/abcde" || true


# Cold misses: each round gives couchlink and CouchDB each a slice of the list nobody has asked
# for, so neither reads IDs the other just brought into CouchDB's caches, and who goes first
# alternates (the first reads after the load are the slowest). sequential.lua wraps round to the
# slice's start when it runs out, so a round that asked for more than its slice counts hits too:
# the report says so. A round lasts as long as its slice takes at 1500 reads a second (at most
# `seconds`), so with fewer links it is shorter than the other rows' rounds.
slice=$((links / (2 * rounds)))
cold_seconds=$((slice / 1500)); [ "$cold_seconds" -gt "$seconds" ] && cold_seconds=$seconds
[ "$cold_seconds" -lt 1 ] && cold_seconds=1
split -l "$slice" -d -a 3 "$BENCH_IDS" "$work/slice."
echo "== $(date -u +%H:%M:%S) cold misses: $rounds rounds of ${cold_seconds}s each, a fresh slice of $slice IDs for each side"
couch_auth=$(python3 bench/helpers.py auth couchlink-reader reader)
: >"$work/cold.couchlink"; : >"$work/cold.couchdb"
for round in $(seq 1 "$rounds"); do
  order="couchdb couchlink"; [ $((round % 2)) -eq 0 ] && order="couchlink couchdb"
  for who in $order; do
    if [ "$who" = couchlink ]; then
      BENCH_IDS=$(printf '%s/slice.%03d' "$work" $((2 * round - 2))) \
        wrk -t"$threads" -c"$connections" -d"${cold_seconds}s" -s bench/sequential.lua "http://127.0.0.1:$proxy_port"
    else
      BENCH_IDS=$(printf '%s/slice.%03d' "$work" $((2 * round - 1))) BENCH_PREFIX=/links BENCH_AUTH=$couch_auth \
        wrk -t"$threads" -c"$connections" -d"${cold_seconds}s" -s bench/sequential.lua "$couch"
    fi | grep RESULT >>"$work/cold.$who"
  done
done
cold=$(med cold couchlink rps)
direct=$(med cold couchdb rps)
wrapped=$(cat "$work"/cold.* | tr ' ' '\n' | sed -n 's/^requests=//p' | awk -v n="$slice" '$1 > n { w++ } END { print w + 0 }')

echo "== $(date -u +%H:%M:%S) warming the cache with every link"
# Walks the list (links already held are quick hits) for as long as the cold rate says it
# takes, and again until the cache holds `want` entries. Half the links first, then all: RSS is
# read at both points, and the difference per link is what each further link costs.
cache_entries() { curl -fsS "http://127.0.0.1:$admin_port/metrics" | awk '/^couchlink_cache_entries /{print $2}'; }
warm() {
  local want=$1 ids=$2
  for _ in 1 2 3 4 5; do
    [ "$(cache_entries)" -ge "$want" ] && return 0
    BENCH_IDS=$ids wrk -t"$threads" -c"$connections" -d"$(python3 -c "print(int($want / max($cold, 50.0) * 1.2) + 5)")s" \
      -s bench/sequential.lua "http://127.0.0.1:$proxy_port" >/dev/null
  done
}
head -n $((links / 2)) "$BENCH_IDS" >"$work/half.txt"
warm $((links / 2)) "$work/half.txt"
# The live counts' documents waiting for the local CouchDB API (pouchdb-server takes a few a
# second while it also takes the history's first pass): in RSS too, and said beside it.
pending_kib() { curl -fsS "http://127.0.0.1:$admin_port/metrics" | awk '/^couchlink_clicks_pending_bytes /{print int($2 / 1024)}'; }
cached_half=$(cache_entries)
rss_half=$(python3 bench/helpers.py rss "$couchlink_pid")
pending_half=$(pending_kib)
warm "$links" "$BENCH_IDS"
cached=$(cache_entries)
rss_warm=$(python3 bench/helpers.py rss "$couchlink_pid")
pending_warm=$(pending_kib)

# server_round CONNECTIONS SCRIPT WHO: one round of nginx or couchlink.
server_round() {
  local conns=$1 script=$2 who=$3 port server_pids
  # Not `pids`: that array is what bench_cleanup stops at exit.
  port=$nginx_port; server_pids="$(cat "$work/nginx.pid") $(pgrep -P "$(cat "$work/nginx.pid")" | tr '\n' ' ')"
  [ "$who" = couchlink ] && port=$proxy_port && server_pids=$couchlink_pid
  with_cpu "$server_pids" wrk -t"$threads" -c"$conns" -d"${seconds}s" -s "bench/$script" "http://127.0.0.1:$port"
}
# rows NAME CONNECTIONS SCRIPT: interleaved rounds of couchlink and nginx; results in $work/NAME.WHO.
rows() {
  echo "== $(date -u +%H:%M:%S) $1: $rounds rounds of ${seconds}s each, $2 connections ($3)"
  interleaved "$1" nginx couchlink server_round "$2" "$3"
}
ulimit -n 65536 2>/dev/null || true
rows c64 "$connections" random.lua
rows c1000 1000 random.lua
rows pipelined "$connections" pipelined.lua
# The cost of COUCHLINK_LOG_SYNC=true (each line written before its response): a second couchlink
# with it, warmed from CouchDB, against the first in interleaved c64 rounds.
sync_port=$(free_port); sync_admin=$(free_port)
COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader \
  COUCHLINK_LISTEN=127.0.0.1:$sync_port COUCHLINK_ADMIN_LISTEN=127.0.0.1:$sync_admin \
  COUCHLINK_LOG_DIR=$work/sync-logs COUCHLINK_CACHE_CAPACITY=$((links * 2)) COUCHLINK_WORKERS=$workers \
  COUCHLINK_LOG_SYNC=true target/release/couchlink serve 2>"$work/sync.err" &
sync_pid=$!
pids+=($sync_pid)
wait_http "http://127.0.0.1:$sync_admin/metrics"
for _ in $(seq 1 600); do
  curl -fsS "http://127.0.0.1:$sync_admin/healthz" 2>/dev/null | grep -q '"cache":"ready"' && break; sleep 0.1
done
echo "== $(date -u +%H:%M:%S) log-sync: $rounds rounds of ${seconds}s each, couchlink with and without COUCHLINK_LOG_SYNC"
sync_round() {
  local port=$proxy_port server_pids=$couchlink_pid
  [ "$1" = synced ] && port=$sync_port && server_pids=$sync_pid
  with_cpu "$server_pids" wrk -t"$threads" -c"$connections" -d"${seconds}s" -s bench/random.lua "http://127.0.0.1:$port"
}
interleaved sync synced couchlink sync_round
sync_served=$(curl -fsS "http://127.0.0.1:$sync_admin/metrics" | awk '/^couchlink_responses_total/{s += $2} END {print s}')
kill -TERM "$sync_pid"; wait "$sync_pid" || true
sync_logged=$(cat "$work"/sync-logs/access.*.log | wc -l)

# The cost of targets: 1000 links with five rules each against 1000 plain ones, both asked for as
# a few real browsers (bench/visitors.lua), interleaved, on the same couchlink. IDs of links that
# exist only in the rules set are disjoint from the plain ones (another seed).
python3 bench/helpers.py rules "$couch_port" links admin admin "$work/rules.txt" 1000
head -n 1000 "$BENCH_IDS" >"$work/plain.txt"
for set in plain rules; do
  BENCH_IDS=$work/$set.txt wrk -t"$threads" -c"$connections" -d3s -s bench/sequential.lua "http://127.0.0.1:$proxy_port" >/dev/null
done
echo "== $(date -u +%H:%M:%S) targets: $rounds rounds of ${seconds}s each, links with five rules against plain links"
targets_round() {
  BENCH_IDS=$work/$1.txt with_cpu "$couchlink_pid" wrk -t"$threads" -c"$connections" -d"${seconds}s" \
    -s bench/visitors.lua "http://127.0.0.1:$proxy_port"
}
interleaved targets plain rules targets_round

# The row the targets are stated for, as before.
for who in nginx couchlink; do
  for f in rps p50_us p99_us errors; do
    printf -v "${who}_$f" '%s' "$(med c64 "$who" "$f")"
  done
done

echo "== $(date -u +%H:%M:%S) edit-to-served latency"
edits=$(python3 bench/helpers.py edits "$couch_port" links admin admin "$proxy_port" 200)

metrics=$(curl -fsS "http://127.0.0.1:$admin_port/metrics")
served=$(echo "$metrics" | awk '/^couchlink_responses_total/{s += $2} END {print s}')
reconnects=$(echo "$metrics" | awk '/^couchlink_feed_reconnects_total/{print $2}')
kill -TERM "$couchlink_pid"
couchlink_exit=0; wait "$couchlink_pid" || couchlink_exit=$?
logged=$(cat "$work"/logs/access.*.log | wc -l)

# wrk and the server share the same cores: at full load the rate is about the cores over what a
# request costs both, so the throughput ratio these costs allow is (wrk + nginx) / (wrk + couchlink).
cpu_split=$(python3 -c '
import sys
server, nginx, wrk_c, wrk_n = map(float, sys.argv[1:])
print(f"CPU split, c64       (wrk + nginx) / (wrk + couchlink) per request = {(wrk_n + nginx) / (wrk_c + server):.2f},"
      f" the ratio these costs allow on shared cores; 1.2x needs couchlink at <= {(wrk_n + nginx) / 1.2 - wrk_c:.2f} us")
' "$(med c64 couchlink cpu_us)" "$(med c64 nginx cpu_us)" "$(med c64 couchlink wrk_us)" "$(med c64 nginx wrk_us)")

cat <<REPORT

couchlink benchmark ($(date -u +%Y-%m-%d), $(nproc) cores, $workers workers each, wrk -t$threads -c$connections, $links links, median (min-max) of $rounds interleaved rounds x ${seconds}s per row)
                      couchlink      reference        ratio
cached redirects/s    ${couchlink_rps}    nginx ${nginx_rps}    $(ratio "$couchlink_rps" "$nginx_rps")   (target >= 1.2)
p50 latency (us)      ${couchlink_p50_us}    nginx ${nginx_p50_us}    $(ratio "$couchlink_p50_us" "$nginx_p50_us")
p99 latency (us)      ${couchlink_p99_us}    nginx ${nginx_p99_us}    $(ratio "$couchlink_p99_us" "$nginx_p99_us")   (target <= 1.0)
$(for row in c64 c1000 pipelined; do
  printf '%-10s req/s  couchlink %-24s nginx %-24s %s\n' "$row" "$(stat $row couchlink rps)" "$(stat $row nginx rps)" "$(ratio "$(med $row couchlink rps)" "$(med $row nginx rps)")"
  printf '%-10s p99 us couchlink %-24s nginx %-24s %s\n' "$row" "$(stat $row couchlink p99_us)" "$(stat $row nginx p99_us)" "$(ratio "$(med $row couchlink p99_us)" "$(med $row nginx p99_us)")"
  printf '%-10s CPU us couchlink %-24s nginx %-24s %s\n' "$row" "$(stat2 $row couchlink cpu_us)" "$(stat2 $row nginx cpu_us)" "$(ratio "$(med $row couchlink cpu_us)" "$(med $row nginx cpu_us)")"
  printf '%-10s kernel us couchlink %-20s nginx %-24s %s\n' "$row" "$(stat2 $row couchlink sys_us)" "$(stat2 $row nginx sys_us)" "$(ratio "$(med $row couchlink sys_us)" "$(med $row nginx sys_us)")"
  printf '%-10s wrk us vs couchlink %-21s nginx %-24s %s\n' "$row" "$(stat2 $row couchlink wrk_us)" "$(stat2 $row nginx wrk_us)" "$(ratio "$(med $row couchlink wrk_us)" "$(med $row nginx wrk_us)")"
  printf '%-10s switches couchlink %-22s nginx %-24s %s\n' "$row" "$(stat $row couchlink cs 3)" "$(stat $row nginx cs 3)" "$(ratio "$(med $row couchlink cs)" "$(med $row nginx cs)")"
  grep -q epoll= "$work/$row.nginx" &&
    printf '%-10s epoll_wait couchlink %-20s nginx %-24s %s\n' "$row" "$(stat $row couchlink epoll 3)" "$(stat $row nginx epoll 3)" "$(ratio "$(med $row couchlink epoll)" "$(med $row nginx epoll)")"
done)
${cpu_split}
log sync   req/s  batched   $(stat sync couchlink rps)    COUCHLINK_LOG_SYNC $(stat sync synced rps)    $(ratio "$(med sync synced rps)" "$(med sync couchlink rps)")
log sync   CPU us batched   $(stat2 sync couchlink cpu_us)    COUCHLINK_LOG_SYNC $(stat2 sync synced cpu_us)    $(ratio "$(med sync synced cpu_us)" "$(med sync couchlink cpu_us)")   (its log: ${sync_logged} lines for ${sync_served} responses)
targets    req/s  plain     $(stat targets plain rps)    five rules $(stat targets rules rps)    $(ratio "$(med targets rules rps)" "$(med targets plain rps)")
targets    CPU us plain     $(stat2 targets plain cpu_us)    five rules $(stat2 targets rules cpu_us)    $(ratio "$(med targets rules cpu_us)" "$(med targets plain cpu_us)")   (target <= 1.2; as five browsers, bench/visitors.lua)
cold misses/s    couchlink $(stat cold couchlink rps)    CouchDB GETs $(stat cold couchdb rps)    $(ratio "$cold" "$direct")   ($rounds interleaved rounds x ${cold_seconds}s; $([ "$wrapped" -eq 0 ] && echo "every request a miss" || echo "$wrapped rounds ran past their slice and counted cache hits: raise BENCH_LINKS"))
edit-to-served p50   $(echo "$edits" | field p50_ms) ms    CouchDB feed $(echo "$edits" | field ref_p50_ms) ms
edit-to-served p99   $(echo "$edits" | field p99_ms) ms    CouchDB feed $(echo "$edits" | field ref_p99_ms) ms   (target <= 50 ms; 200 edits; feed reconnects during the run: ${reconnects})
RSS per cached link   $(( (rss_warm - rss_half) * 1024 / (cached - cached_half) )) bytes for each link past the first $cached_half (RSS ${rss_start} KiB empty, ${rss_half} at $cached_half links, ${rss_warm} at $cached)
                      $(( (rss_warm - pending_warm - rss_half + pending_half) * 1024 / (cached - cached_half) )) bytes less the live counts waiting for CouchDB (${pending_half} and ${pending_warm} KiB at those readings; bench/memory.sh measures the cache alone)
RSS at 1M links       ~$(( (rss_warm * 1024 + (1000000 - cached) * ((rss_warm - rss_half) * 1024 / (cached - cached_half))) / 1048576 )) MiB extrapolated from that slope (target <= 300)
errors (wrk)          couchlink $(cat "$work"/*.couchlink | tr ' ' '\n' | sed -n 's/^errors=//p' | awk '{s += $1} END {print s + 0}'), nginx $(cat "$work"/*.nginx | tr ' ' '\n' | sed -n 's/^errors=//p' | awk '{s += $1} END {print s + 0}') (all rows)
feed                  $(grep -c "feed is down" "$work/couchlink.err" || true) outages reported on stderr$(grep -m1 "feed is down" "$work/couchlink.err" | sed 's/^couchlink: CouchDB _changes feed is down/, first:/' || true)
access log            ${logged} lines for ${served} responses: $([ "$logged" -eq "$served" ] && echo "none lost" || echo "MISMATCH"); exit code on SIGTERM: ${couchlink_exit}
REPORT
[ "$logged" -eq "$served" ] && [ "$couchlink_exit" -eq 0 ]

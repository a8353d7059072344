#!/usr/bin/env bash
# A million links on Apache CouchDB 3.5 (../shared/couchdb/couchdb.sh, single node), in one run
# on loopback: how long the warm start takes, and the restart from a cache snapshot against it
# (time until every link is in memory, CouchDB requests meanwhile, 1,000 edits made while the
# proxy was down served how soon after start), memory measured at 1M cached links (not
# extrapolated), memory with a capacity below the link count while 1M random IDs churn the
# cache, redirect throughput over 1M random IDs against nginx, and CouchDB's request rate while
# couchlink restarts under load, from a snapshot and with a warm start.
#
#   bench/scale.sh                                   # 1M links
#   BENCH_LINKS=200000 BENCH_SECONDS=5 bench/scale.sh
set -euo pipefail
cd "$(dirname "$0")/.."
links=${BENCH_LINKS:-1000000}
seconds=${BENCH_SECONDS:-10}
rounds=${BENCH_ROUNDS:-3}
connections=${BENCH_CONNECTIONS:-64}
workers=${BENCH_WORKERS:-$(nproc)}
export BENCH_THREADS=1
. bench/lib.sh
# Besides what bench_work stops: couchlink (restarted during the run) and the CouchDB node.
couchdb35_work scale
command -v wrk >/dev/null && command -v nginx >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk nginx-light >/dev/null; }
cargo build --release --locked -q
rss() { python3 bench/helpers.py rss "$1"; }
metric() { curl -fsS "http://127.0.0.1:$admin_port/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
couch_port=$(free_port); proxy_port=$(free_port); admin_port=$(free_port); nginx_port=$(free_port)
couch=http://127.0.0.1:$couch_port

echo "== $(date -u +%H:%M:%S) CouchDB 3.5 and $links links"
"$couchdb_sh" start "$work/couchdb" --port "$couch_port" --admin admin:password >/dev/null
# Loaded before `setup` installs the validation function: with it, CouchDB 3.5 runs every
# document through couchjs and loads about 1,400 a second (1M took 741 s).
curl -fsS -u admin:password -X PUT "$couch/links" >/dev/null
started=$(date +%s.%N)
python3 bench/helpers.py load "$couch_port" links admin password "$work/ids.txt" "$links"
load_secs=$(python3 -c "import time; print(f'{time.time() - $started:.0f}')")
COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=admin COUCHLINK_COUCHDB_PASSWORD=password \
  COUCHLINK_READER_PASSWORD=reader target/release/couchlink setup >/dev/null
export BENCH_IDS=$work/ids.txt

# start_couchlink VAR=VALUE...: couchlink serve in the background (pid in $pid), healthy.
start_couchlink() {
  env COUCHLINK_COUCHDB_URL="$couch" COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader \
    COUCHLINK_LISTEN="127.0.0.1:$proxy_port" COUCHLINK_ADMIN_LISTEN="127.0.0.1:$admin_port" \
    COUCHLINK_LOG_DIR="$work/logs" COUCHLINK_STATE_DIR="$work/state" COUCHLINK_WORKERS="$workers" "$@" \
    target/release/couchlink serve 2>>"$work/couchlink.err" &
  pid=$!
  for _ in $(seq 1 600); do curl -fsS -o /dev/null "http://127.0.0.1:$admin_port/healthz" 2>/dev/null && return 0; sleep 0.1; done
  echo "couchlink never became healthy" >&2; tail "$work/couchlink.err" >&2; exit 1
}
stop_couchlink() { kill -TERM "$pid"; wait "$pid" || true; pid=; }
# Seconds until /healthz says the cache is warm.
wait_warm() {
  local began; began=$(date +%s.%N)
  until curl -fsS "http://127.0.0.1:$admin_port/healthz" 2>/dev/null | grep -q '"cache":"ready"'; do sleep 0.2; done
  python3 -c "import time; print(f'{time.time() - $began:.1f}')"
}

couch_requests() { curl -fsS -u admin:password "$couch/_node/_local/_stats/couchdb/httpd/requests" | python3 -c 'import json, sys; print(json.load(sys.stdin)["value"])'; }
now() { python3 -c 'import time; print(time.time())'; }
since() { python3 -c "import time; print(f'{time.time() - $1:.2f}')"; }

echo "== $(date -u +%H:%M:%S) memory: empty, then warm with every link (a warm start: no snapshot)"
start_couchlink COUCHLINK_WARM_START=false COUCHLINK_SNAPSHOT_SECS=0
sleep 1
rss_empty=$(rss "$pid")
stop_couchlink
rm -rf "$work/state"
requests_before=$(couch_requests)
began=$(now)
start_couchlink COUCHLINK_CACHE_CAPACITY=$((links * 2))
warm_secs=$(wait_warm)
warm_total=$(since "$began")
# Less the two stats reads of this script.
warm_requests=$(( $(couch_requests) - requests_before - 2 ))
entries=$(metric couchlink_cache_entries)
rss_full=$(rss "$pid")

echo "== $(date -u +%H:%M:%S) restart from the snapshot, with 1000 edits made while down"
began=$(now)
stop_couchlink
stop_secs=$(since "$began")
snapshot_mib=$(python3 -c "import os; print(f'{os.path.getsize(\"$work/state/links.snapshot\") / 2**20:.1f}')")
python3 bench/helpers.py edit "$couch_port" links admin password "$work/ids.txt" 1000 "$work/edits.txt"
requests_before=$(couch_requests)
began=$(now)
python3 bench/helpers.py served "$proxy_port" "$work/edits.txt" "$began" 120 >"$work/served.txt" &
served_pid=$!
start_couchlink COUCHLINK_CACHE_CAPACITY=$((links * 2))
# /healthz answers once the snapshot is in memory: nothing is served before.
ready_total=$(since "$began")
until curl -fsS "http://127.0.0.1:$admin_port/healthz" | grep -q '"catching_up":false'; do sleep 0.05; done
caught_up_secs=$(since "$began")
wait "$served_pid"
edits_secs=$(cat "$work/served.txt")
restore_requests=$(( $(couch_requests) - requests_before - 2 ))
restore_entries=$(metric couchlink_cache_entries)
restore_origin=$(metric couchlink_cache_from_snapshot)
restore_misses=$(metric couchlink_cache_misses_total)
rss_restored=$(rss "$pid")
hwm_restored=$(awk '/VmHWM/ { print $2 }' "/proc/$pid/status")
ready_secs=$(sed -n 's/.*read in \([0-9.]*\) s.*/\1/p' "$work/couchlink.err" | tail -1)

start_nginx "$work" "$nginx_port" "$workers" "worker_connections 4096;"

echo "== $(date -u +%H:%M:%S) redirects over $links random IDs: $rounds interleaved rounds of ${seconds}s"
misses_before=$(metric couchlink_cache_misses_total)
: >"$work/nginx.results"; : >"$work/couchlink.results"
for round in $(seq 1 "$rounds"); do
  order="nginx couchlink"; [ $((round % 2)) -eq 0 ] && order="couchlink nginx"
  for who in $order; do
    port=$nginx_port; [ "$who" = couchlink ] && port=$proxy_port
    wrk -t1 -c"$connections" -d"${seconds}s" -s bench/random.lua "http://127.0.0.1:$port" | grep RESULT >>"$work/$who.results"
  done
done
misses_after=$(metric couchlink_cache_misses_total)
couchlink_rps=$(sed -n 's/.* rps=\([^ ]*\).*/\1/p' "$work/couchlink.results" | median)
nginx_rps=$(sed -n 's/.* rps=\([^ ]*\).*/\1/p' "$work/nginx.results" | median)
couchlink_p99=$(sed -n 's/.* p99_us=\([^ ]*\).*/\1/p' "$work/couchlink.results" | median)
nginx_p99=$(sed -n 's/.* p99_us=\([^ ]*\).*/\1/p' "$work/nginx.results" | median)

# restart_under_load NAME VAR=VALUE...: CouchDB's request rate second by second while wrk runs
# and couchlink restarts (with those variables) at second 5; sets ${NAME}_max, ${NAME}_steady,
# ${NAME}_refused, ${NAME}_errors, and leaves the rates in $work/NAME.rates.
restart_under_load() {
  local name=$1 rates=$work/$1.rates previous current restarted_at=5; shift
  wrk -t1 -c"$connections" -d30s -s bench/random.lua "http://127.0.0.1:$proxy_port" >"$work/$name.wrk" &
  local wrk_pid=$!
  : >"$rates"
  previous=$(couch_requests)
  for second in $(seq 1 28); do
    sleep 1
    current=$(couch_requests); echo "$second $((current - previous))" >>"$rates"; previous=$current
    if [ "$second" = "$restarted_at" ]; then
      stop_couchlink
      start_couchlink COUCHLINK_CACHE_CAPACITY=$((links * 2)) "$@"
    fi
  done
  wait "$wrk_pid" || true
  printf -v "${name}_max" %s "$(awk -v r="$restarted_at" '$1 > r { if ($2 > m) m = $2 } END { print m + 0 }' "$rates")"
  printf -v "${name}_steady" %s "$(awk '$1 <= 4 { s += $2; n++ } END { print (n ? int(s / n) : 0) }' "$rates")"
  printf -v "${name}_refused" %s "$(metric couchlink_cold_reads_refused_total)"
  printf -v "${name}_errors" %s "$(field errors <"$work/$name.wrk")"
}
echo "== $(date -u +%H:%M:%S) restart under load from the snapshot: CouchDB's request rate, second by second"
restart_under_load snapshot
echo "== $(date -u +%H:%M:%S) restart under load with a warm start (no snapshot)"
restart_under_load warm COUCHLINK_SNAPSHOT_SECS=0
stop_couchlink

echo "== $(date -u +%H:%M:%S) capacity $((links / 4)) below $links links, churned by random IDs for 20 s"
start_couchlink COUCHLINK_CACHE_CAPACITY=$((links / 4)) COUCHLINK_SNAPSHOT_SECS=0
wait_warm >/dev/null
rss_small=$(rss "$pid")
wrk -t1 -c"$connections" -d20s -s bench/random.lua "http://127.0.0.1:$proxy_port" >/dev/null
rss_churned=$(rss "$pid")
entries_small=$(metric couchlink_cache_entries)
stop_couchlink

python3 - <<PY
links, empty, full = $links, $rss_empty, $rss_full
print(f"links loaded         {links} in ${load_secs} s (_bulk_docs, 5000 a request)")
print(f"warm start           {$entries:.0f} entries ready {${warm_total}} s after start (warm-up itself {${warm_secs}} s); CouchDB requests meanwhile {${warm_requests}}")
print(f"snapshot             {${snapshot_mib}} MiB, written at shutdown (stop took {${stop_secs}} s)")
print(f"restart, snapshot    {$restore_entries:.0f} entries in memory {${ready_total}} s after start (the snapshot read and checked in {${ready_secs}} s), from snapshot: {$restore_origin:.0f}; "
      f"{${warm_total} / ${ready_total}:.0f}x sooner than the warm start")
print(f"                     1000 edits made while down all served {${edits_secs}} s after start; caught up {${caught_up_secs}} s after start; "
      f"CouchDB requests meanwhile {${restore_requests}} (start checks, identity, _changes), link reads {$restore_misses:.0f}")
print(f"                     RSS {$rss_restored / 1024:.1f} MiB after, peak {$hwm_restored / 1024:.1f} MiB while restoring")
print(f"RSS                  {empty / 1024:.1f} MiB empty, {full / 1024:.1f} MiB with {links} links cached")
print(f"bytes per link       {(full - empty) * 1024 / links:.0f} above empty, {full * 1024 / links:.0f} in all (target <= 150 on average)")
print(f"redirects/s, random  couchlink {$couchlink_rps:.0f}, nginx {$nginx_rps:.0f}: {$couchlink_rps / $nginx_rps:.2f}x; p99 {$couchlink_p99} vs {$nginx_p99} us; CouchDB reads meanwhile {$misses_after - $misses_before:.0f}")
print(f"restart under load   from the snapshot: CouchDB {${snapshot_steady}} req/s before (the feed only), at most {${snapshot_max}} req/s after the restart; cold reads refused {${snapshot_refused:-0}:.0f}; wrk errors (non-3xx included) ${snapshot_errors:-0}")
print(f"                     warm start:        CouchDB {${warm_steady}} req/s before, at most {${warm_max}} req/s after the restart; cold reads refused {${warm_refused:-0}:.0f}; wrk errors ${warm_errors:-0}")
print(f"capacity {links // 4}       {$entries_small:.0f} entries; RSS {$rss_small / 1024:.1f} MiB warm, {$rss_churned / 1024:.1f} MiB after 20 s of misses over {links} IDs ({$rss_churned / $rss_small:.2f}x)")
PY
for name in snapshot warm; do
  echo "per-second CouchDB requests around the restart, $name (second, requests):"; tr '\n' ' ' <"$work/$name.rates"; echo
done

#!/usr/bin/env bash
# The link cache's memory per link, by cause, on Apache CouchDB 3.5 (../shared/couchdb/couchdb.sh,
# single node): RSS grown per cached link after a warm start of BENCH_LINKS links (200,000 by
# default), read once the cache is full and everything a start does has settled (the history's
# first pass included), for the proxy as it runs and with one cause taken away at a time:
#
#   as it runs          the default start
#   no history          COUCHLINK_HISTORY=false: the recorder's first pass not run beside it
#   memory returned     MIMALLOC_PURGE_DELAY=0: mimalloc gives freed pages back at once, so RSS
#                       is close to what is live (the warm-up's pages of JSON, freed, are not)
#   snapshot start      the same links from the cache snapshot a warm start wrote (no JSON),
#                       and with memory returned at once too
#
# and, beside them, what the cache's own structures hold per link, reckoned from their sizes (the
# link, its URL, the map's slot, the eviction order). Each variant is started BENCH_ROUNDS times
# (3); the median is printed.
#
#   bench/memory.sh
#   BENCH_LINKS=1000000 BENCH_ROUNDS=1 BENCH_VARIANTS="runs snapshot" bench/memory.sh
set -euo pipefail
cd "$(dirname "$0")/.."
links=${BENCH_LINKS:-200000}
rounds=${BENCH_ROUNDS:-3}
# Which of: runs (as it runs), history (none), returned (memory), both, snapshot,
# snapshot-returned.
variants=" ${BENCH_VARIANTS:-runs history returned both snapshot snapshot-returned} "
workers=${BENCH_WORKERS:-$(nproc)}
. bench/lib.sh
couchdb35_work memory
cargo build --release --locked -q
rss() { python3 bench/helpers.py rss "$1"; }
couch_port=$(free_port); proxy_port=$(free_port); admin_port=$(free_port)
couch=http://127.0.0.1:$couch_port

echo "== $(date -u +%H:%M:%S) CouchDB 3.5 and $links links"
"$couchdb_sh" start "$work/couchdb" --port "$couch_port" --admin admin:password >/dev/null
curl -fsS -u admin:password -X PUT "$couch/links" >/dev/null
python3 bench/helpers.py load "$couch_port" links admin password "$work/ids.txt" "$links"
COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=admin COUCHLINK_COUCHDB_PASSWORD=password \
  COUCHLINK_READER_PASSWORD=reader target/release/couchlink setup >/dev/null

# start VAR=VALUE...: couchlink serve in the background (pid in $pid), healthy.
start() {
  env COUCHLINK_COUCHDB_URL="$couch" COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader \
    COUCHLINK_LISTEN="127.0.0.1:$proxy_port" COUCHLINK_ADMIN_LISTEN="127.0.0.1:$admin_port" \
    COUCHLINK_LOG_DIR="$work/logs" COUCHLINK_STATE_DIR="$work/state" COUCHLINK_WORKERS="$workers" \
    COUCHLINK_CACHE_CAPACITY=$((links * 2)) "$@" target/release/couchlink serve 2>>"$work/couchlink.err" &
  pid=$!
  wait_http "http://127.0.0.1:$admin_port/healthz"
}
stop() { kill -TERM "$pid"; wait "$pid" || true; pid=; }
# settled: the cache full, the history caught up, then RSS steady (two readings a second apart
# within 1%, at most 30 s).
settled() {
  wait_cache_full "$admin_port" "$links"
  local a b
  a=$(rss "$pid")
  for _ in $(seq 1 30); do
    sleep 1
    b=$(rss "$pid")
    python3 -c "import sys; sys.exit(abs($b - $a) > 0.01 * $a)" && break
    a=$b
  done
  rss "$pid"
}

# RSS of a proxy holding nothing, each variant's own.
empty() {
  rm -rf "$work/state"
  start COUCHLINK_WARM_START=false COUCHLINK_SNAPSHOT_SECS=0 "$@"
  sleep 2
  rss "$pid"
  stop
}

# measure NAME VAR=VALUE...: bytes per cached link, the median of $rounds starts.
measure() {
  local name=$1; shift
  local base full per=()
  base=$(empty "$@")
  for _ in $(seq 1 "$rounds"); do
    rm -rf "$work/state"
    start "$@"
    full=$(settled)
    stop
    per+=("$(( (full - base) * 1024 / links ))")
  done
  printf '%-18s %4s bytes a link (rounds: %s; RSS %s KiB empty)\n' "$name" \
    "$(printf '%s\n' "${per[@]}" | median)" "${per[*]}" "$base" >>"$work/report"
}

: >"$work/report"
echo "== $(date -u +%H:%M:%S) warm starts, $rounds of each variant"
wanted() { [[ $variants == *" $1 "* ]]; }
if wanted runs; then measure "as it runs"; fi
if wanted history; then measure "no history" COUCHLINK_HISTORY=false; fi
if wanted returned; then measure "memory returned" MIMALLOC_PURGE_DELAY=0; fi
if wanted both; then measure "both" COUCHLINK_HISTORY=false MIMALLOC_PURGE_DELAY=0; fi

# snapshot NAME VAR=VALUE...: bytes per cached link after starts from the cache snapshot (which
# a warm start's stop writes first), the median of $rounds; the history off (its first pass is
# the warm start's business, measured above).
snapshot() {
  local name=$1; shift
  local base full per=()
  echo "== $(date -u +%H:%M:%S) starts from the snapshot: $name"
  base=$(empty COUCHLINK_HISTORY=false "$@")
  rm -rf "$work/state"; start COUCHLINK_HISTORY=false; wait_cache "$admin_port" "$links"; stop
  for _ in $(seq 1 "$rounds"); do
    start COUCHLINK_HISTORY=false "$@"
    full=$(settled)
    stop
    per+=("$(( (full - base) * 1024 / links ))")
  done
  printf '%-18s %4s bytes a link (rounds: %s)\n' "$name" "$(printf '%s\n' "${per[@]}" | median)" "${per[*]}" >>"$work/report"
}
if wanted snapshot; then snapshot "snapshot start"; fi
if wanted snapshot-returned; then snapshot "snapshot, returned" MIMALLOC_PURGE_DELAY=0; fi

# What the cache's structures hold per link (src/store.rs, src/domain/link.rs): the Arc'd Link
# (64-byte block), its URL (the loaded URLs are 47 bytes: mimalloc's 48-byte class), the ready
# map's slot (5-byte ID + 8-byte Arc, 16 bytes with padding, and a control byte) at hashbrown's
# load factor after growth (between 7/16 and 7/8 full: the mean of a doubling's range), the
# eviction order's 5 bytes (a VecDeque grows by doubling too).
reckoned=$(python3 -c '
slot = 17 / ((7 / 16 + 7 / 8) / 2)
order = 5 / 0.75
print(f"{64 + 48 + slot + order:.0f} (link 64, URL 48, map slot {slot:.0f}, eviction order {order:.0f})")')

cat <<REPORT

couchlink memory per cached link ($(date -u +%Y-%m-%d), Apache CouchDB 3.5, $links links, $workers serving threads, median of $rounds starts)
$(cat "$work/report")
reckoned           $reckoned
REPORT

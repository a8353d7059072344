#!/usr/bin/env bash
# Instructions per request of whole `couchlink serve` processes, counted by Valgrind's callgrind
# (the same count on every run, whatever else the machine does), for this checkout and other
# builds of it (git revisions): what `bench/versus.sh` measures in CPU time, without the noise,
# so that a step of 2% shows. For bisecting a drift between revisions; the CI budget itself is
# `bench/budget.sh` (the connection code alone, in-process).
#
#   bench/instructions.sh [REV...]        # this checkout, then each REV; 2000 requests per mix
#   BENCH_REQUESTS=5000 bench/instructions.sh f6cf9a3 HEAD~3
#
# Each build serves on one thread, warm-started from the local CouchDB API with every link;
# once it holds them all, instrumentation is turned on, 200 requests warm it up, the counters
# are zeroed, exactly BENCH_REQUESTS requests are sent one at a time on one keep-alive
# connection (bench/instructions.py: `plain` as wrk sends them, `browser` with a phone's
# headers and the tracking cookie), and the counters are dumped. Every thread counts (the
# access log's writer too); an idle window of the same length, measured the same way, says
# how much of that is background (timers, the feed's heartbeats) and is subtracted.
set -euo pipefail
cd "$(dirname "$0")/.."
links=${BENCH_LINKS:-5000}
requests=${BENCH_REQUESTS:-2048}
mixes=${BENCH_MIXES:-plain browser pipelined}
command -v valgrind >/dev/null || { echo "bench/instructions.sh needs valgrind (apt-get install valgrind)" >&2; exit 1; }

. bench/lib.sh
bench_start instructions
bench_stop() { for tree in "$work"/tree-*; do [ -d "$tree" ] && git worktree remove --force "$tree" 2>/dev/null; done; true; }

# Builds: this checkout first, then each revision in its own target folder (as versus.sh keeps it).
names=(this); bins=(target/release/couchlink)
for rev in "$@"; do
  short=$(git rev-parse --short "$rev")
  target_dir="$PWD/target/versus-$short"
  if [ ! -x "$target_dir/release/couchlink" ]; then
    echo "== $(date -u +%H:%M:%S) building $rev ($short)"
    git worktree add -q --detach "$work/tree-$short" "$rev"
    (cd "$work/tree-$short" && CARGO_TARGET_DIR="$target_dir" cargo build --release --locked -q)
  fi
  names+=("$short"); bins+=("$target_dir/release/couchlink")
done

couchdb_with_links "$(free_port)" "$links"

# dump PID FILE: zeroes nothing, writes the counters since the last zero to FILE's prefix; the
# total instructions of that dump on stdout.
dump() {
  local pid=$1 out=$2
  rm -f "$out".[0-9]*
  callgrind_control -d "$pid" >/dev/null
  # The dump is written by the process; wait for it.
  for _ in $(seq 1 100); do
    local file
    file=$(ls "$out".[0-9]* 2>/dev/null | tail -1 || true)
    if [ -n "$file" ] && grep -q '^totals:' "$file"; then
      awk '/^totals:/ { print $2 }' "$file"
      cp "$file" "$out.last"
      return 0
    fi
    sleep 0.1
  done
  echo "no callgrind dump from $pid" >&2
  exit 1
}

: >"$work/results"
for i in "${!names[@]}"; do
  name=${names[$i]} bin=${bins[$i]}
  for mix in $mixes; do
    port=$(free_port); admin=$(free_port)
    out="$work/cg-$name-$mix"
    COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader \
      COUCHLINK_LISTEN=127.0.0.1:$port COUCHLINK_ADMIN_LISTEN=127.0.0.1:$admin \
      COUCHLINK_LOG_DIR=$work/logs-$name-$mix COUCHLINK_SNAPSHOT_SECS=0 COUCHLINK_WORKERS=1 \
      COUCHLINK_CACHE_CAPACITY=$((links * 2)) \
      valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out.%p" \
      "$bin" serve 2>"$work/$name-$mix.err" &
    pid=$!
    pids+=($pid)
    for _ in $(seq 1 1200); do
      entries=$(curl -fsS "http://127.0.0.1:$admin/metrics" 2>/dev/null | awk '/^couchlink_cache_entries /{print $2}' || true)
      [ "${entries:-0}" -ge "$links" ] && break
      sleep 0.5
    done
    [ "${entries:-0}" -ge "$links" ] || { echo "$name: the cache never held every link" >&2; cat "$work/$name-$mix.err" >&2; exit 1; }
    callgrind_control -i on "$pid" >/dev/null
    python3 bench/instructions.py "$port" "$BENCH_IDS" 208 "$mix"
    callgrind_control -z "$pid" >/dev/null
    started=$(date +%s.%N)
    python3 bench/instructions.py "$port" "$BENCH_IDS" "$requests" "$mix"
    busy=$(dump "$pid" "$out")
    # Kept for callgrind_annotate (the function-by-function view of where they went).
    mkdir -p target/instructions && cp "$out.last" "target/instructions/$name-$mix.callgrind"
    elapsed=$(python3 -c "import time; print(time.time() - $started)")
    callgrind_control -z "$pid" >/dev/null
    sleep "$elapsed"
    idle=$(dump "$pid" "$out")
    kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
    python3 -c "print(f'$name $mix {($busy - $idle) / $requests:.0f} {$idle / $requests:.0f}')" | tee -a "$work/results"
  done
done

echo
echo "(each build's counts by function: callgrind_annotate target/instructions/BUILD-MIX.callgrind)"
echo "couchlink instructions per request (callgrind, one serving thread, $links links, $requests requests per mix, one at a time on one keep-alive connection; background subtracted)"
for mix in $mixes; do
  this=$(awk -v m="$mix" '$1 == "this" && $2 == m { print $3 }' "$work/results")
  for name in "${names[@]}"; do
    awk -v n="$name" -v m="$mix" -v this="$this" '$1 == n && $2 == m {
      printf "%-8s %-10s %8d instructions/request   background %6d   this/%s %.3f\n", m, n, $3, $4, n, this / $3 }' "$work/results"
  done
done

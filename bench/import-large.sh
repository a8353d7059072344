#!/usr/bin/env bash
# `couchlink import` of a small file into a large database: 300 rows (half with a code kept as
# the ID, half needing a fresh one) into Apache CouchDB 3.5 holding 1,000,000 links, by this
# build against another (REV, by default the one before the import's index), both `--dry-run`
# on the same database (all the reading and checking, no writing), through a relay that counts
# the CouchDB requests made and the bytes CouchDB answered. Rounds interleaved; prints medians
# and ratios (this build over REV), and how long CouchDB took to build the import's index that
# `couchlink setup` adds.
#
#   bench/import-large.sh [REV]                       # 1,000,000 links, 300 rows, 3 rounds
#   BENCH_EXISTING=100000 BENCH_ROUNDS=1 bench/import-large.sh
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-2ddc93a}
existing=${BENCH_EXISTING:-1000000}
rows=${BENCH_ROWS:-300}
rounds=${BENCH_ROUNDS:-3}
couchdb_sh=${COUCHLINK_COUCHDB_SH:-$(cd .. && pwd)/shared/couchdb/couchdb.sh}
[ -x "$couchdb_sh" ] || { echo "needs Apache CouchDB 3.5: set COUCHLINK_COUCHDB_SH to couchdb.sh" >&2; exit 1; }
cargo build --release --locked -q

. bench/lib.sh
bench_stop() {
  "$couchdb_sh" stop "$work/couchdb" >/dev/null 2>&1 || true
  git worktree remove --force "$work/tree" 2>/dev/null || true
}
bench_work import-large
git worktree add -q --detach "$work/tree" "$rev"
baseline_target="$PWD/target/versus-$(git rev-parse --short "$rev")"
(cd "$work/tree" && CARGO_TARGET_DIR="$baseline_target" cargo build --release --locked -q)
declare -A bin=([before]="$baseline_target/release/couchlink" [this]="$PWD/target/release/couchlink")

couch_port=$(free_port)
couch=http://127.0.0.1:$couch_port
"$couchdb_sh" start "$work/couchdb" --port "$couch_port" --admin admin:password >/dev/null
curl -fsS -u admin:password -X PUT "$couch/_users/org.couchdb.user:editor" \
  -d '{"name": "editor", "password": "editor", "roles": ["bench:editor"], "type": "user"}' >/dev/null
curl -fsS -u admin:password -X PUT "$couch/big" >/dev/null
echo "== $(date -u +%H:%M:%S) loading $existing links"
python3 bench/helpers.py load "$couch_port" big admin password "$work/ids.txt" "$existing"
# This build's setup: the validation function and the import's index, which CouchDB builds in
# the background; the first query waits for it.
COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=admin COUCHLINK_COUCHDB_PASSWORD=password COUCHLINK_DB=big \
  COUCHLINK_EDITOR_ROLE=bench:editor COUCHLINK_READER_PASSWORD=reader COUCHLINK_CLICKS_DB=off \
  target/release/couchlink setup >/dev/null
started=$(date +%s.%N)
# CouchDB answers `500 timeout` after 60 s while the indexer goes on: asked again until built.
until curl -fsS -u admin:password "$couch/big/_design/import/_view/by_source?limit=0" >/dev/null 2>&1; do
  python3 -c "import sys, time; sys.exit(time.time() - $started > 3600)" || { echo "the index took over an hour" >&2; exit 1; }
done
index_seconds=$(python3 -c "import time; print(f'{time.time() - $started:.1f}')")
python3 bench/helpers.py import-csv "$work/rows.csv" "$rows"

relay_port=$(free_port)
python3 bench/helpers.py relay "$relay_port" "$couch_port" "$work/relay" &
pids+=($!)
wait_http "http://admin:password@127.0.0.1:$relay_port/"
counts() { sleep 0.3; cat "$work/relay"; }
for round in $(seq 1 "$rounds"); do
  for who in before this; do
    read -r requests bytes < <(counts)
    began=$(date +%s.%N)
    COUCHLINK_COUCHDB_URL=http://127.0.0.1:$relay_port COUCHLINK_COUCHDB_USER=editor COUCHLINK_COUCHDB_PASSWORD=editor \
      COUCHLINK_DB=big "${bin[$who]}" import "$work/rows.csv" --from csv --dry-run >"$work/$who.out" 2>"$work/$who.err" \
      || { cat "$work/$who.err" >&2; exit 1; }
    seconds=$(python3 -c "import time; print(f'{time.time() - $began:.3f}')")
    read -r requests2 bytes2 < <(counts)
    echo "$who $seconds $((requests2 - requests)) $((bytes2 - bytes))" >>"$work/results"
    grep -q "^dry run, nothing written: $rows of $rows rows" "$work/$who.out" || { cat "$work/$who.out" >&2; exit 1; }
  done
  echo "round $round of $rounds done" >&2
done

echo "couchlink $(git rev-parse --short HEAD)$(git diff --quiet || echo "+changes") against $rev: $rows rows into $existing links, CouchDB 3.5, median of $rounds rounds"
echo "the import's index built by CouchDB after setup in $index_seconds s"
python3 - "$work/results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    who, seconds, requests, nbytes = line.split()
    runs.setdefault(who, []).append((float(seconds), int(requests), int(nbytes)))
med = {who: [statistics.median(r[i] for r in rs) for i in range(3)] for who, rs in runs.items()}
for who in ("before", "this"):
    s, r, b = med[who]
    print(f"{who:6}  {s:8.2f} s  {r:6.0f} requests  {b / 1e6:9.2f} MB read")
(sb, rb, bb), (st, rt, bt) = med["before"], med["this"]
print(f"ratio   {st / sb:8.3f}    {rt / rb:6.3f}           {bt / bb:9.4f}")
PY

#!/usr/bin/env bash
# `couchlink import` of 100,000 links into Apache CouchDB 3.5 (../shared/couchdb/couchdb.sh,
# single node, couchlink's validation function installed) against posting the same documents
# with plain `_bulk_docs`, 1,000 at a time, in the same run, rounds interleaved; prints the
# ratio of the medians (never a bare time alone: the ratio is what holds on a shared machine).
#
#   bench/import.sh                                   # 100k links, 3 rounds
#   BENCH_LINKS=20000 BENCH_ROUNDS=1 bench/import.sh
#
# The file: a CSV as another shortener exports it, half the codes kept as IDs, half given fresh
# ones. The plain side posts the very documents the import stored (exported from its database),
# so both make CouchDB run the validation function once per document; the import also reads
# the file, asks CouchDB which IDs are free, and runs the validation function itself first.
set -euo pipefail
cd "$(dirname "$0")/.."
links=${BENCH_LINKS:-100000}
rounds=${BENCH_ROUNDS:-3}
couchdb_sh=${COUCHLINK_COUCHDB_SH:-$(cd .. && pwd)/shared/couchdb/couchdb.sh}
[ -x "$couchdb_sh" ] || { echo "needs Apache CouchDB 3.5: set COUCHLINK_COUCHDB_SH to couchdb.sh" >&2; exit 1; }
cargo build --release --locked -q

. bench/lib.sh
bench_stop() { "$couchdb_sh" stop "$work/couchdb" >/dev/null 2>&1 || true; }
bench_work import
couch_port=$(free_port)
couch=http://127.0.0.1:$couch_port
"$couchdb_sh" start "$work/couchdb" --port "$couch_port" --admin admin:password >/dev/null
# One editor account for every database of the run.
curl -fsS -u admin:password -X PUT "$couch/_users/org.couchdb.user:editor" \
  -d '{"name": "editor", "password": "editor", "roles": ["bench:editor"], "type": "user"}' >/dev/null
python3 bench/helpers.py import-csv "$work/links.csv" "$links"
echo "file: $links links, $(du -k "$work/links.csv" | cut -f1) KiB; $(nproc) cores; CouchDB 3.5 single node"

# fresh_db NAME: a database set up by couchlink, writable by the editor account.
fresh_db() {
  COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=admin COUCHLINK_COUCHDB_PASSWORD=password \
    COUCHLINK_DB=$1 COUCHLINK_EDITOR_ROLE=bench:editor COUCHLINK_READER_PASSWORD=reader \
    target/release/couchlink setup >/dev/null
}
as_editor() {
  env COUCHLINK_COUCHDB_URL="$couch" COUCHLINK_COUCHDB_USER=editor COUCHLINK_COUCHDB_PASSWORD=editor "$@"
}

for round in $(seq 1 "$rounds"); do
  fresh_db "import_$round"
  started=$(date +%s.%N)
  as_editor COUCHLINK_DB="import_$round" target/release/couchlink import "$work/links.csv" --from csv \
    --mapping "$work/mapping.csv" >"$work/import.out"
  echo "import $(python3 -c "import time; print(f'{time.time() - $started:.3f}')")" >> "$work/results"
  grep -q "^imported $links of $links rows" "$work/import.out" || { cat "$work/import.out" >&2; exit 1; }
  as_editor COUCHLINK_DB="import_$round" target/release/couchlink export --out "$work/docs.jsonl" 2>/dev/null
  fresh_db "plain_$round"
  echo "plain $(python3 bench/helpers.py bulk-post "$couch_port" "plain_$round" editor editor "$work/docs.jsonl" 1000)" >> "$work/results"
  echo "round $round of $rounds done" >&2
done

python3 - "$work/results" "$links" <<'PY'
import statistics, sys
runs = {}
for row in open(sys.argv[1]):
    name, seconds = row.split()
    runs.setdefault(name, []).append(float(seconds))
links = int(sys.argv[2])
for name, times in runs.items():
    print(f"{name:8} median {statistics.median(times):7.2f} s  ({links / statistics.median(times):8.0f} links/s; runs {' '.join(f'{t:.2f}' for t in times)})")
ratio = statistics.median(runs["import"]) / statistics.median(runs["plain"])
print(f"import / plain _bulk_docs: {ratio:.2f}x (floor <= 1.3x)")
PY

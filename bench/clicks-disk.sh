#!/usr/bin/env bash
# What live counts cost on disk in Apache CouchDB 3.5: a day of a busy database's count
# documents (BENCH_PROXIES proxies, one-minute intervals, BENCH_LINKS links served each minute
# by each, a fifth of them with a second target version) written through `_bulk_docs`, the
# database compacted and its views built, then the files' sizes, per day and per year; and the
# same after `couchlink clicks --roll-up-until` made it one daily document. Each link's minute
# carries breakdowns (countries, devices, systems, browsers, referrers, campaign, variant) of
# the shape a printed tag's traffic gives.
#
#   bench/clicks-disk.sh          # 3 proxies, 200 links a minute each: 4320 documents a day
#   BENCH_LINKS=1000 bench/clicks-disk.sh
#   BENCH_BY=0 bench/clicks-disk.sh   # without the breakdowns (#66), as documents were before
#
# Needs CouchDB 3.5's couchdb.sh: COUCHLINK_COUCHDB_SH, or ../shared/couchdb/couchdb.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
couchdb_sh=${COUCHLINK_COUCHDB_SH:-$(cd .. && pwd)/shared/couchdb/couchdb.sh}
[ -x "$couchdb_sh" ] || { echo "bench/clicks-disk.sh needs CouchDB 3.5's couchdb.sh (COUCHLINK_COUCHDB_SH)" >&2; exit 1; }
. bench/lib.sh
bench_work clicks-disk
bench_stop() { "$couchdb_sh" stop "$work/couchdb" >/dev/null 2>&1 || true; }
port=$(free_port)
"$couchdb_sh" start "$work/couchdb" --port "$port" --admin admin:password >/dev/null
cargo build --release --locked -q
COUCHLINK_COUCHDB_URL=http://127.0.0.1:$port COUCHLINK_COUCHDB_USER=admin COUCHLINK_COUCHDB_PASSWORD=password \
  target/release/couchlink setup >/dev/null
python3 - "$port" "${BENCH_PROXIES:-3}" "${BENCH_LINKS:-200}" <<'PY'
import json, os, random, sys, time
sys.path.insert(0, "bench")
from helpers import breakdowns, compact_and_wait, couch_caller
port, proxies, links = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
caller = couch_caller(port, "admin", "password")
def call(method, path, body=None):
    status, answer = caller(method, path, body)
    if status >= 300:
        sys.exit(f"{method} {path}: {status} {str(answer)[:200]}")
    return answer
rng = random.Random(7)
alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
pool = ["".join(rng.choice(alphabet) for _ in range(5)) for _ in range(links * 5)]
def by(total):
    # BENCH_BY=0: none, as before #66.
    return breakdowns(rng, total) if with_by else {}
with_by = os.environ.get("BENCH_BY", "1") != "0"
docs = []
for minute in range(1440):
    start = time.strftime("%Y-%m-%dT%H:%M:00Z", time.gmtime(1795651200 + minute * 60))
    for p in range(proxies):
        counts = {}
        for link in rng.sample(pool, links):
            r = rng.randint(1, 40)
            versions = {f"https://example.com/landing/{link}?utm_source=qr&utm_medium=print": r}
            if rng.random() < 0.2:
                versions[f"https://example.com/landing/{link}/v2?utm_source=qr"] = rng.randint(1, 5)
            total = sum(versions.values())
            counts[link] = {"redirects": total, "bot_redirects": rng.randint(0, 3),
                            "new_visitors": rng.randint(0, r), "not_found": 0, "versions": versions,
                            "by": by(total)}
        run = f"{p:016x}"
        docs.append({"_id": f"{start}/proxy-{p}/{run}/0", "type": "clicks", "proxy": f"proxy-{p}", "run": run,
                     "start": start, "seconds": 60, "part": 0, "links": counts, "unknown_not_found": rng.randint(0, 9)})
doc_bytes = sum(len(json.dumps(d)) for d in docs)
for i in range(0, len(docs), 500):
    rows = call("POST", "/links_clicks/_bulk_docs", {"docs": docs[i:i + 500]})
    if any("error" in row for row in rows):
        sys.exit(f"refused: {[row for row in rows if 'error' in row][:2]}")
# The views are built by the first query, which CouchDB answers with a timeout after 60 s while
# it builds: asked again until it answers.
built = time.time()
for _ in range(240):
    status, answer = caller("GET", "/links_clicks/_design/clicks/_view/by_link?limit=1")
    if status < 300:
        break
    if not (isinstance(answer, dict) and answer.get("error") == "timeout"):
        sys.exit(f"the views: {status} {str(answer)[:200]}")
else:
    sys.exit("the views were not built within four hours")
built = time.time() - built
info, views = compact_and_wait(caller, "links_clicks", "clicks")
db_file, db_active, ix_file = info["sizes"]["file"], info["sizes"]["active"], views["sizes"]["file"]
mib = 1 << 20
print(f"live counts on disk (Apache CouchDB 3.5, {proxies} proxies x {links} links a minute, one-minute intervals, compacted)")
print(f"a day             {len(docs)} documents, {doc_bytes / mib:.1f} MiB of JSON")
print(f"  database file   {db_file / mib:.1f} MiB ({db_active / mib:.1f} MiB active)")
print(f"  views' index    {ix_file / mib:.1f} MiB (built in {built:.0f} s)")
print(f"a year            {len(docs) * 365 / 1e6:.2f} M documents, about {(db_file + ix_file) * 365 / (1 << 30):.1f} GiB with the views")
PY
start=$(date +%s.%N)
COUCHLINK_COUCHDB_URL=http://127.0.0.1:$port COUCHLINK_COUCHDB_USER=admin COUCHLINK_COUCHDB_PASSWORD=password \
  target/release/couchlink clicks --roll-up-until 2026-11-27
took=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
python3 - "$port" "$took" <<'PY'
import sys
sys.path.insert(0, "bench")
from helpers import compact_and_wait, couch_caller
port, took = int(sys.argv[1]), sys.argv[2]
call = couch_caller(port, "admin", "password")
# The views brought up to date: after many deletions that can take CouchDB longer than its 60 s
# request timeout, so the query is asked again until it answers.
for _ in range(60):
    if "rows" in call("GET", "/links_clicks/_design/clicks/_view/by_link?limit=1")[1]:
        break
else:
    sys.exit("the views were not up to date within an hour")
info, views = compact_and_wait(call, "links_clicks", "clicks")
mib = 1 << 20
db_file, ix_file, ix_active = info["sizes"]["file"], views["sizes"]["file"], views["sizes"]["active"]
print(f"rolled up         in {took} s: {info['doc_count'] - 1} documents (a deleted one keeps a small tombstone)")
print(f"  database file   {db_file / mib:.1f} MiB, views' index {ix_file / mib:.2f} MiB ({ix_active / mib:.2f} MiB active)")
print(f"a year of rolled-up days  about {(db_file + ix_file) * 365 / (1 << 30):.2f} GiB")
PY

#!/usr/bin/env bash
# What live counts cost on disk in Apache CouchDB 3.5: a day of a busy database's count
# documents (BENCH_PROXIES proxies, one-minute intervals, BENCH_LINKS links served each minute
# by each, a fifth of them with a second target version) written through `_bulk_docs`, the
# database compacted and its views built, then the files' sizes, per day and per year; and the
# same after `couchlink clicks --roll-up-until` made it one daily document, and what the roll-up
# costs CouchDB's indexer. Each link's minute
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
# What the roll-up makes of the day, measured on a copy: the same documents replicated into a
# second database whose design document holds only the view the roll-up paces itself by, rolled
# up there (so the roll-up's time is not the measure here: see the deletion sample below), then
# the full design document put back by setup and its views built over what is left.
export COUCHLINK_COUCHDB_URL=http://127.0.0.1:$port COUCHLINK_COUCHDB_USER=admin COUCHLINK_COUCHDB_PASSWORD=password
COUCHLINK_DB=sized target/release/couchlink setup >/dev/null
python3 - "$port" <<'PY'
import sys
sys.path.insert(0, "bench")
from helpers import couch_caller
call = couch_caller(int(sys.argv[1]), "admin", "password")
status, design = call("GET", "/sized_clicks/_design/clicks")
design["views"] = {"by_day": design["views"]["by_day"]}
call("PUT", "/sized_clicks/_design/clicks", design)
status, answer = call("POST", "/_replicate", {"source": "http://admin:password@127.0.0.1:%s/links_clicks" % sys.argv[1],
    "target": "http://admin:password@127.0.0.1:%s/sized_clicks" % sys.argv[1], "selector": {"type": "clicks"}})
if status >= 300 or not answer.get("ok"):
    sys.exit(f"replication: {status} {answer}")
PY
start=$(date +%s.%N)
COUCHLINK_DB=sized target/release/couchlink clicks --roll-up-until 2026-11-27
took=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
COUCHLINK_DB=sized target/release/couchlink setup >/dev/null
python3 - "$port" "$took" <<'PY'
import sys
sys.path.insert(0, "bench")
from helpers import compact_and_wait, couch_caller
port, took = int(sys.argv[1]), sys.argv[2]
call = couch_caller(port, "admin", "password")
for _ in range(240):
    if "rows" in call("GET", "/sized_clicks/_design/clicks/_view/by_link?limit=1")[1]:
        break
else:
    sys.exit("the views were not up to date within four hours")
info, views = compact_and_wait(call, "sized_clicks", "clicks")
mib = 1 << 20
db_file, ix_file = info["sizes"]["file"], views["sizes"]["file"]
docs = call("GET", "/sized_clicks/_all_docs?include_docs=true&startkey=%222026%22&endkey=%222027%22")[1]["rows"]
json_bytes = sum(len(__import__("json").dumps(r["doc"])) for r in docs)
print(f"rolled up         {len(docs)} documents ({json_bytes / 1024:.0f} KiB of JSON; a deleted one keeps a small tombstone)")
print(f"  database file   {db_file / mib:.1f} MiB, views' index {ix_file / mib:.2f} MiB")
print(f"a year of rolled-up days  about {(db_file + ix_file) * 365 / (1 << 30):.2f} GiB (an upper bound: the file keeps the day's tombstones)")
PY
# What rolling the day up costs CouchDB's indexer: a sample of the deletions the roll-up makes
# (pages of at most 2,000 links' counts, each waited for until the views have removed it, as
# src/clicks/rollup.rs paces them), on the database whose views hold the whole day.
python3 - "$port" "${BENCH_DELETE_PAGES:-3}" <<'PY'
import sys, time
sys.path.insert(0, "bench")
from helpers import couch_caller
port, pages = int(sys.argv[1]), int(sys.argv[2])
call = couch_caller(port, "admin", "password")
rows = call("GET", "/links_clicks/_all_docs?include_docs=true&limit=400&startkey=%222026%22")[1]["rows"]
total = call("GET", "/links_clicks")[1]["doc_count"] - 1
began, done, links = time.time(), 0, 0
for _ in range(pages):
    page, n = [], 0
    while rows and n < 2000:
        doc = rows.pop(0)["doc"]
        page.append({"_id": doc["_id"], "_rev": doc["_rev"], "_deleted": True})
        n += len(doc["links"])
    call("POST", "/links_clicks/_bulk_docs", {"docs": page})
    while "rows" not in call("GET", "/links_clicks/_design/clicks/_view/by_day?group_level=0")[1]:
        pass
    done, links = done + len(page), links + n
took = time.time() - began
print(f"rolling up        {done} of the day's {total} interval documents ({links} links' counts) deleted in {took:.0f} s, paced: "
      f"the whole day about {took * total / done / 60:.0f} minutes of CouchDB's indexer")
PY

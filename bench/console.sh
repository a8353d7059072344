#!/usr/bin/env bash
# The console against a large database on Apache CouchDB 3.5: BENCH_LINKS links (100,000 by
# default, each with a title, two tags and a creation time), the time CouchDB takes to build
# the console's views once, then the first page of the list (newest first) and a search, as the
# page asks them, through `couchlink console` and straight to CouchDB (the reference): median
# and worst of 20 each. Then a year of rolled-up live counts (BENCH_ACTIVE links counted each
# day, 1,000 by default, with every breakdown, one daily document per 200 links, as the daily
# roll-up leaves them): the overview's top links (today, 7 days, this month) and a link's page
# (30 days per day, a year per month, its breakdowns over both), as the page asks them. And what
# the page weighs: its files, plain and gzipped.
#
#   bench/console.sh
#   BENCH_LINKS=20000 BENCH_ACTIVE=200 bench/console.sh
#
# Needs CouchDB 3.5's couchdb.sh: COUCHLINK_COUCHDB_SH, or ../shared/couchdb/couchdb.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
links=${BENCH_LINKS:-100000}
active=${BENCH_ACTIVE:-1000}
couchdb_sh=${COUCHLINK_COUCHDB_SH:-$(cd .. && pwd)/shared/couchdb/couchdb.sh}
[ -x "$couchdb_sh" ] || { echo "bench/console.sh needs CouchDB 3.5's couchdb.sh (COUCHLINK_COUCHDB_SH)" >&2; exit 1; }
. bench/lib.sh
bench_work console
bench_stop() { "$couchdb_sh" stop "$work/couchdb" >/dev/null 2>&1 || true; }
cargo build --release --locked -q
couch_port=$(free_port); console_port=$(free_port)
couch=http://127.0.0.1:$couch_port
"$couchdb_sh" start "$work/couchdb" --port "$couch_port" --admin admin:password >/dev/null
curl -fsS -u admin:password -X PUT "$couch/links" >/dev/null
echo "== $(date -u +%H:%M:%S) $links links"
python3 - "$couch_port" "$links" <<'PY'
import base64, http.client, json, random, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
auth = {"Authorization": "Basic " + base64.b64encode(b"admin:password").decode(), "Content-Type": "application/json"}
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
rng = random.Random(3)
alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
words = ["spring", "summer", "autumn", "winter", "flyer", "poster", "menu", "table", "store", "event", "launch",
         "offer", "coupon", "catalog", "brochure", "sticker", "banner", "receipt", "package", "invoice"]
ids = set()
while len(ids) < n:
    ids.add("".join(rng.choice(alphabet) for _ in range(5)))
ids = sorted(ids)
for start in range(0, n, 5000):
    docs = []
    for i, link in enumerate(ids[start:start + 5000]):
        a, b, c = rng.sample(words, 3)
        docs.append({"_id": link, "url": f"https://example.com/{a}/{b}/{link}?utm_source=qr", "inactive": False,
                     "title": f"{a.title()} {b} {c} {start + i}", "tags": [a, c],
                     "created": f"2026-{1 + (start + i) * 11 // n:02d}-{1 + (start + i) % 28:02d}T10:00:00Z"})
    conn.request("POST", "/links/_bulk_docs", json.dumps({"docs": docs}), auth)
    r = conn.getresponse()
    body = json.loads(r.read())
    if r.status >= 300 or any("error" in row for row in body):
        sys.exit(f"bulk load failed: {r.status} {body[:2]}")
PY
COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=admin COUCHLINK_COUCHDB_PASSWORD=password \
  COUCHLINK_READER_PASSWORD=reader target/release/couchlink setup >/dev/null
echo "== $(date -u +%H:%M:%S) a year of rolled-up counts, $active links a day"
python3 - "$couch_port" "$active" "$work/busy-id" <<'PY'
import base64, datetime, http.client, json, random, sys
sys.path.insert(0, "bench")
from helpers import breakdowns
port, active = int(sys.argv[1]), int(sys.argv[2])
auth = {"Authorization": "Basic " + base64.b64encode(b"admin:password").decode(), "Content-Type": "application/json"}
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
conn.request("GET", "/links/_all_docs?limit=%d" % (active * 3), headers=auth)
ids = [row["id"] for row in json.loads(conn.getresponse().read())["rows"] if not row["id"].startswith("_")]
rng = random.Random(5)
today = datetime.datetime.now(datetime.timezone.utc).date()
docs = []
for back in range(365):
    day = (today - datetime.timedelta(days=back)).isoformat()
    counted = rng.sample(ids, active)
    for part in range(0, active, 200):
        links = {}
        for link in counted[part:part + 200]:
            r = rng.randint(1, 400)
            links[link] = {"redirects": r, "bot_redirects": r // 10, "new_visitors": r // 2, "not_found": 0,
                           "versions": {f"https://example.com/{link}?utm_source=qr": r},
                           "by": breakdowns(rng, r)}
        n = part // 200
        docs.append({"_id": f"{day}T00:00:00Z/rollup/0000000000000000/{n}", "type": "clicks", "proxy": "rollup",
                     "run": "0000000000000000", "start": f"{day}T00:00:00Z", "seconds": 86400, "part": n,
                     "links": links, "unknown_not_found": 0})
for start in range(0, len(docs), 100):
    conn.request("POST", "/links_clicks/_bulk_docs", json.dumps({"docs": docs[start:start + 100]}), auth)
    r = conn.getresponse()
    body = json.loads(r.read())
    if r.status >= 300 or any("error" in row for row in body):
        sys.exit(f"counts load failed: {r.status} {body[:2]}")
print(f"counts           {len(docs)} rolled-up documents, {sum(len(d['links']) for d in docs)} link-days")
# A link counted today, for its page.
open(sys.argv[3], "w").write(next(iter(docs[0]["links"])))
PY
curl -fsS -o /dev/null -u admin:password -X PUT "$couch/_users/org.couchdb.user:editor" -H 'Content-Type: application/json' \
  -d '{"name":"editor","password":"editor","roles":["links:editor"],"type":"user"}'
COUCHLINK_COUCHDB_URL=$couch COUCHLINK_CONSOLE_LISTEN=127.0.0.1:$console_port target/release/couchlink console >/dev/null &
pids+=($!)
wait_http "http://127.0.0.1:$console_port/"
python3 - "$couch_port" "$console_port" "$links" "$(cat "$work/busy-id")" <<'PY'
import base64, gzip, http.client, json, statistics, sys, time, urllib.parse
couch_port, console_port, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
auth = {"Authorization": "Basic " + base64.b64encode(b"editor:editor").decode(), "Accept": "application/json"}
q = lambda v: urllib.parse.quote(json.dumps(v))
def get(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    began = time.perf_counter()
    conn.request("GET", path, headers=auth)
    r = conn.getresponse()
    body = r.read()
    took = time.perf_counter() - began
    if r.status != 200:
        sys.exit(f"GET {path}: {r.status} {body[:200]}")
    return took, json.loads(body)
took, _ = get(couch_port, "/links/_design/console/_view/recent?limit=1")
print(f"views built      {took:.0f} s for {n} links (once; then kept current as links change)")
# Built by the first query, which CouchDB answers with a timeout after 60 s meanwhile.
began = time.perf_counter()
while True:
    conn = http.client.HTTPConnection("127.0.0.1", couch_port, timeout=3600)
    conn.request("GET", "/links_clicks/_design/clicks/_view/by_dimension?limit=1", headers=auth)
    r = conn.getresponse()
    body = r.read()
    if r.status == 200:
        break
    if b"timeout" not in body or time.perf_counter() - began > 4 * 3600:
        sys.exit(f"the clicks' views: {r.status} {body[:200]}")
print(f"clicks' views    {time.perf_counter() - began:.0f} s for a year of rolled-up counts (once)")
link = sys.argv[4]
import datetime
today = datetime.datetime.now(datetime.timezone.utc).date()
ymd = lambda d: [f"{d.year:04d}", f"{d.month:02d}", f"{d.day:02d}"]
ago = lambda days: today - datetime.timedelta(days=days)
clicks = "/links_clicks/_design/clicks/_view/"
asks = {
    "first page": ("/links/_design/console/_view/recent?descending=true&include_docs=true&limit=51", 51),
    "search": (f"/links/_design/console/_view/search?include_docs=true&limit=51&startkey={q('fly')}&endkey={q('fly' + chr(0xfff0))}", 51),
    "top today": (f"{clicks}by_day_link?group_level=4&startkey={q(ymd(today))}&endkey={q(ymd(today) + [{}])}", None),
    "top 7 days": (f"{clicks}by_day_link?group_level=4&startkey={q(ymd(ago(6)))}&endkey={q(ymd(today) + [{}])}", None),
    "top month": (f"{clicks}by_month_link?group_level=3&startkey={q(ymd(today)[:2])}&endkey={q(ymd(today)[:2] + [{}])}", None),
    "link 30 days": (f"{clicks}by_link?group_level=4&startkey={q([link] + ymd(ago(29)))}&endkey={q([link] + ymd(today) + [{}])}", None),
    "link by, 30 d": (f"{clicks}by_dimension?group_level=4&startkey={q([link, 'd' + ago(29).isoformat()])}&endkey={q([link, 'd' + today.isoformat(), {}])}", None),
    "link a year": (f"{clicks}by_link?group_level=3&startkey={q([link] + ymd(ago(364))[:2])}&endkey={q([link] + ymd(today)[:2] + [{}])}", None),
    "link by, year": (f"{clicks}by_dimension?group_level=4&startkey={q([link, 'm' + ago(364).isoformat()[:7]])}&endkey={q([link, 'm' + today.isoformat()[:7], {}])}", None),
    "link versions": (f"{clicks}by_version?group=true&startkey={q([link])}&endkey={q([link, {}])}", None),
}
print(f"console, {n} links, median (worst) of 20, ms   through the console   CouchDB direct   ratio")
for name, path in asks.items():
    # Interleaved, so that both meet the same moments of a shared machine.
    rows = {console_port: [], couch_port: []}
    path, expected = path
    for _ in range(20):
        for port, prefix in ((console_port, "/couch"), (couch_port, "")):
            took, body = get(port, prefix + path)
            assert len(body["rows"]) == expected if expected else body["rows"], (name, body)
            rows[port].append(took * 1000)
    via, direct = statistics.median(rows[console_port]), statistics.median(rows[couch_port])
    print(f"  {name:<12} {via:8.1f} ({max(rows[console_port]):.1f}){'':>10}{direct:8.1f} ({max(rows[couch_port]):.1f})   {via / direct:.2f}"
          f"   {'within' if via <= 300 else 'OVER'} 300 ms")
total = zipped = 0
import glob
files = [f for f in glob.glob("console/**/*", recursive=True) if f.endswith((".html", ".js", ".mjs", ".css")) and "/test/" not in f]
for name in files:
    data = open(name, "rb").read()
    total, zipped = total + len(data), zipped + len(gzip.compress(data, 9))
print(f"page weight      {total / 1024:.1f} KB in {len(files)} files, {zipped / 1024:.1f} KB gzipped (target under 150 KB compressed)")
PY

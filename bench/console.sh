#!/usr/bin/env bash
# The console against a large database on Apache CouchDB 3.5: BENCH_LINKS links (100,000 by
# default, each with a title, two tags and a creation time), the time CouchDB takes to build
# the console's views once, then the first page of the list (newest first) and a search, as the
# page asks them, through `couchlink console` and straight to CouchDB (the reference): median
# and worst of 20 each. And what the page weighs: its four files, plain and gzipped.
#
#   bench/console.sh
#   BENCH_LINKS=20000 bench/console.sh
#
# Needs CouchDB 3.5's couchdb.sh: COUCHLINK_COUCHDB_SH, or ../shared/couchdb/couchdb.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
links=${BENCH_LINKS:-100000}
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
curl -fsS -o /dev/null -u admin:password -X PUT "$couch/_users/org.couchdb.user:editor" -H 'Content-Type: application/json' \
  -d '{"name":"editor","password":"editor","roles":["links:editor"],"type":"user"}'
COUCHLINK_COUCHDB_URL=$couch COUCHLINK_CONSOLE_LISTEN=127.0.0.1:$console_port target/release/couchlink console >/dev/null &
pids+=($!)
wait_http "http://127.0.0.1:$console_port/"
python3 - "$couch_port" "$console_port" "$links" <<'PY'
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
asks = {
    "first page": "/links/_design/console/_view/recent?descending=true&include_docs=true&limit=51",
    "search": f"/links/_design/console/_view/search?include_docs=true&limit=51&startkey={q('fly')}&endkey={q('fly' + chr(0xfff0))}",
}
print(f"console, {n} links, median (worst) of 20, ms   through the console   CouchDB direct   ratio")
for name, path in asks.items():
    # Interleaved, so that both meet the same moments of a shared machine.
    rows = {console_port: [], couch_port: []}
    for _ in range(20):
        for port, prefix in ((console_port, "/couch"), (couch_port, "")):
            took, body = get(port, prefix + path)
            assert len(body["rows"]) == 51, body
            rows[port].append(took * 1000)
    via, direct = statistics.median(rows[console_port]), statistics.median(rows[couch_port])
    print(f"  {name:<12} {via:8.1f} ({max(rows[console_port]):.1f}){'':>10}{direct:8.1f} ({max(rows[couch_port]):.1f})   {via / direct:.2f}"
          f"   {'within' if via <= 300 else 'OVER'} 300 ms")
total = zipped = 0
for name in ("index.html", "app.js", "app.css", "vendor/htm-preact-standalone.mjs"):
    data = open(f"console/{name}", "rb").read()
    total, zipped = total + len(data), zipped + len(gzip.compress(data, 9))
print(f"page weight      {total / 1024:.1f} KB in 4 files, {zipped / 1024:.1f} KB gzipped (target under 150 KB compressed)")
PY

#!/usr/bin/env bash
# History and bulk changes at scale on Apache CouchDB 3.5 (#67), in one run on loopback:
# - a bulk re-point of BENCH_LINKS links (10,000) picked by their tag, while two proxies serve
#   and record: how long `couchlink bulk` takes, CouchDB's requests meanwhile, the time until
#   both proxies serve every new target, and until the history holds every link's entry;
# - a history of BENCH_REVISIONS entries (1,000,000), shaped as the recorder writes them: its
#   size on disk (compacted), and a proxy's warm start beside it, recording and not (the
#   follower reads no history).
#
#   bench/history.sh
#   BENCH_LINKS=2000 BENCH_REVISIONS=100000 bench/history.sh
#
# Needs CouchDB 3.5's couchdb.sh: COUCHLINK_COUCHDB_SH, or ../shared/couchdb/couchdb.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
links=${BENCH_LINKS:-10000}
revisions=${BENCH_REVISIONS:-1000000}
couchdb_sh=${COUCHLINK_COUCHDB_SH:-$(cd .. && pwd)/shared/couchdb/couchdb.sh}
[ -x "$couchdb_sh" ] || { echo "bench/history.sh needs CouchDB 3.5's couchdb.sh (COUCHLINK_COUCHDB_SH)" >&2; exit 1; }
cargo build --release --locked -q
. bench/lib.sh
bench_work history
bench_stop() { "$couchdb_sh" stop "$work/couchdb" >/dev/null 2>&1 || true; }
couch_port=$(free_port)
couch=http://127.0.0.1:$couch_port
"$couchdb_sh" start "$work/couchdb" --port "$couch_port" --admin admin:password >/dev/null
export COUCHLINK_COUCHDB_URL=$couch
admin_env=(COUCHLINK_COUCHDB_USER=admin COUCHLINK_COUCHDB_PASSWORD=password)
env "${admin_env[@]}" COUCHLINK_READER_PASSWORD=reader target/release/couchlink setup >/dev/null
# The links, each tagged with the print run a bulk change re-points.
python3 - "$couch_port" "$links" "$work/ids.txt" <<'PY'
import sys
sys.path.insert(0, "bench")
from helpers import couch_caller, ids
port, n, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
call = couch_caller(port, "admin", "password")
all_ids = ids(n)
open(out, "w").write("\n".join(all_ids) + "\n")
for i in range(0, n, 1000):
    docs = [{"_id": x, "url": f"https://example.com/spring/{x}", "tags": ["run-7"]} for x in all_ids[i:i + 1000]]
    status, rows = call("POST", "/links/_bulk_docs", {"docs": docs})
    if status >= 300 or any("error" in r for r in rows):
        sys.exit(f"loading: {status} {str(rows)[:200]}")
PY

# Two proxies, each recording.
ports=()
for n in 1 2; do
  p=$(free_port); a=$(free_port)
  env COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader COUCHLINK_LISTEN=127.0.0.1:$p \
    COUCHLINK_ADMIN_LISTEN=127.0.0.1:$a COUCHLINK_LOG_DIR="$work/logs$n" COUCHLINK_STATE_DIR="$work/state$n" \
    COUCHLINK_PROXY_NAME=proxy-$n target/release/couchlink serve 2>>"$work/serve$n.err" &
  pids+=($!)
  wait_http "http://127.0.0.1:$a/healthz"
  wait_cache_full "$a" "$links"
  ports+=("$p")
done
# The first history: every link's baseline, recorded by the proxies' first pass.
python3 - "$couch_port" "$links" <<'PY'
import sys, time
sys.path.insert(0, "bench")
from helpers import couch_caller
call = couch_caller(int(sys.argv[1]), "admin", "password")
for _ in range(1200):
    if call("GET", "/links_history")[1].get("doc_count", 0) >= int(sys.argv[2]):
        break
    time.sleep(0.5)
else:
    sys.exit("the baseline was not recorded within 10 minutes")
PY

requests() { curl -fsS -u admin:password "$couch/_node/_local/_stats/couchdb/httpd/requests" | python3 -c 'import json, sys; print(json.load(sys.stdin)["value"])'; }
entries_before=$(curl -fsS -u admin:password "$couch/links_history" | python3 -c 'import json, sys; print(json.load(sys.stdin)["doc_count"])')
before=$(requests)
began=$(python3 -c 'import time; print(time.time())')
env "${admin_env[@]}" target/release/couchlink bulk --tag run-7 --set-url https://example.com/summer/ >"$work/bulk.out"
took=$(python3 -c "import time; print(f'{time.time() - $began:.1f}')")
made=$(( $(requests) - before ))
tail -1 "$work/bulk.out"
python3 - "$couch_port" "$work/ids.txt" "$began" "$took" "$made" "$entries_before" "${ports[@]}" <<'PY'
import http.client, sys, time
sys.path.insert(0, "bench")
from helpers import couch_caller
port, id_file, began, took, made = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]
entries_before = int(sys.argv[6])
proxies = [int(p) for p in sys.argv[7:]]
ids = open(id_file).read().split()
call = couch_caller(port, "admin", "password")
# Every proxy, every link, until each serves the new target.
served_at = []
for p in proxies:
    conn = http.client.HTTPConnection("127.0.0.1", p)
    waiting = list(ids)
    while waiting:
        left = []
        for x in waiting:
            conn.request("HEAD", f"/{x}")
            r = conn.getresponse()
            r.read()
            if r.getheader("Location") != "https://example.com/summer/":
                left.append(x)
        waiting = left
        if waiting:
            time.sleep(0.05)
    served_at.append(time.time() - began)
# Every link's entry of the batch in the history, beside the change's own record (a document
# a part of 500 links).
record = -(-len(ids) // 500)
while call("GET", "/links_history")[1]["doc_count"] < entries_before + len(ids) + record:
    time.sleep(0.1)
recorded = time.time() - began
print(f"bulk re-point     {len(ids)} links by tag: the command took {took} s and {made} CouchDB requests (all clients)")
print(f"  served          by both proxies, every link, {max(served_at):.1f} s after the command began (checked link by link after it ended)")
print(f"  recorded        every link's entry in the history {recorded:.1f} s after it began")
PY
# One write at a time, as a person edits: from CouchDB's answer to the write until its entry is
# in the history (asked every 10 ms), while both proxies run.
python3 - "$couch_port" "$work/ids.txt" <<'PY'
import statistics, sys, time, urllib.parse
sys.path.insert(0, "bench")
from helpers import couch_caller
call = couch_caller(int(sys.argv[1]), "admin", "password")
ids = open(sys.argv[2]).read().split()[:100]
waits = []
for x in ids:
    status, doc = call("GET", f"/links/{x}")
    doc["url"] = f"https://example.com/autumn/{x}"
    status, answer = call("PUT", f"/links/{x}", doc)
    if status >= 300:
        sys.exit(f"editing {x}: {status} {answer}")
    written = time.time()
    number, digest = answer["rev"].split("-", 1)
    entry = urllib.parse.quote(f"{x}/{int(number):010d}-{digest}", safe="")
    while call("GET", f"/links_history/{entry}")[0] != 200:
        if time.time() - written > 30:
            sys.exit(f"{x}: not recorded within 30 s")
        time.sleep(0.01)
    waits.append(time.time() - written)
    time.sleep(0.1)
waits.sort()
within = sum(w <= 1 for w in waits)
print(f"one edit at a time {len(waits)} edits: recorded {statistics.median(waits) * 1000:.0f} ms after CouchDB's answer (median), "
      f"{waits[int(len(waits) * 0.95) - 1] * 1000:.0f} ms (p95), {waits[-1] * 1000:.0f} ms (worst); {within} of {len(waits)} within 1 s")
PY
for pid in "${pids[@]}"; do kill -TERM "$pid"; wait "$pid" || true; done
pids=()

# A history of many revisions, shaped as the recorder writes them; loaded before the design
# document, whose validation would run each through couchjs.
env "${admin_env[@]}" curl -fsS -u admin:password -X DELETE "$couch/links_history" >/dev/null
curl -fsS -u admin:password -X PUT "$couch/links_history" >/dev/null
python3 - "$couch_port" "$revisions" "$work/ids.txt" <<'PY'
import json, sys, time
sys.path.insert(0, "bench")
from helpers import couch_caller
port, n, id_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
call = couch_caller(port, "admin", "password")
ids = open(id_file).read().split()
per_link = max(1, n // len(ids))
docs, written, json_bytes = [], 0, 0
for link in ids:
    for r in range(1, per_link + 1):
        rev = f"{r}-{r:032x}"
        before = None if r == 1 else {"url": f"https://example.com/v{r - 1}/{link}", "tags": ["run-7"],
                                      "edit": {"by": "maria", "at": "2026-11-28T09:00:00.123Z"}}
        after = {"url": f"https://example.com/v{r}/{link}", "tags": ["run-7"],
                 "edit": {"by": "maria", "at": "2026-11-28T09:00:00.123Z", "batch": "bulk-20261128T090000-a1b2c3d4"}}
        docs.append({"_id": f"{link}/{r:010d}-{r:032x}", "type": "change", "link": link, "rev": rev,
                     "parent": None if r == 1 else f"{r - 1}-{r - 1:032x}", "kind": "created" if r == 1 else "changed",
                     "before": before, "after": after, "by": "maria", "at": "2026-11-28T09:00:00.123Z",
                     "batch": "bulk-20261128T090000-a1b2c3d4", "recorded_at": "2026-11-28T09:00:00.412345678Z", "late": False})
        if len(docs) == 2000:
            json_bytes += sum(len(json.dumps(d)) for d in docs)
            call("POST", "/links_history/_bulk_docs", {"docs": docs})
            written += len(docs)
            docs = []
if docs:
    json_bytes += sum(len(json.dumps(d)) for d in docs)
    call("POST", "/links_history/_bulk_docs", {"docs": docs})
    written += len(docs)
print(f"history           {written} entries ({per_link} a link), {json_bytes / written:.0f} bytes of JSON each")
PY
env "${admin_env[@]}" target/release/couchlink setup >/dev/null
python3 - "$couch_port" <<'PY'
import sys
sys.path.insert(0, "bench")
from helpers import compact_and_wait, couch_caller
call = couch_caller(int(sys.argv[1]), "admin", "password")
for view in ("gaps",):
    while "rows" not in call("GET", f"/links_history/_design/history/_view/{view}?limit=1")[1]:
        pass
info, views = compact_and_wait(call, "links_history", "history")
mib = 1 << 20
print(f"  on disk         {info['sizes']['file'] / mib:.0f} MiB compacted, views' index {views['sizes']['file'] / mib:.0f} MiB")
PY

# Starts beside that history, recording and not, alternated: a warm start (no snapshot) and an
# instant one (from the snapshot the warm one wrote at its stop). First one proxy records until
# it has caught up, as a running installation has.
serve() {  # serve PORT ADMIN_PORT STATE HISTORY: couchlink serve in the background, its pid echoed
  # (started in the caller's $(...), so not this shell's child: stopped with stop_serve)
  env COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader COUCHLINK_LISTEN=127.0.0.1:$1 \
    COUCHLINK_ADMIN_LISTEN=127.0.0.1:$2 COUCHLINK_LOG_DIR="$work/logs-w" COUCHLINK_STATE_DIR="$3" \
    COUCHLINK_HISTORY="$4" target/release/couchlink serve >/dev/null 2>>"$work/warm.err" &
  echo $!
}
p=$(free_port); a=$(free_port)
pid=$(serve "$p" "$a" "$work/state-c" true)
wait_http "http://127.0.0.1:$a/healthz"
until curl -fsS "http://127.0.0.1:$a/healthz" | grep -q '"history":{[^}]*"status":"ok"'; do sleep 0.5; done
stop_serve() {  # stop_serve PID: SIGTERM, then until it has exited (its snapshot written)
  kill -TERM "$1"
  while kill -0 "$1" 2>/dev/null; do sleep 0.05; done
}
stop_serve "$pid"
start() {  # start HISTORY STATE: seconds until every link is in memory
  local p a began pid
  p=$(free_port); a=$(free_port)
  began=$(python3 -c 'import time; print(time.time())')
  pid=$(serve "$p" "$a" "$2" "$1")
  wait_http "http://127.0.0.1:$a/healthz"
  wait_cache "$a" "$links"
  python3 -c "import time; print(f'{time.time() - $began:.2f}')"
  stop_serve "$pid"
}
warm_on=(); warm_off=(); instant_on=(); instant_off=()
for _ in 1 2 3; do
  for h in true false; do
    rm -rf "$work/state-$h"
    w=$(start "$h" "$work/state-$h"); i=$(start "$h" "$work/state-$h")
    if [ "$h" = true ]; then warm_on+=("$w"); instant_on+=("$i"); else warm_off+=("$w"); instant_off+=("$i"); fi
  done
done
python3 - "${warm_on[*]}" "${warm_off[*]}" "${instant_on[*]}" "${instant_off[*]}" <<'PY'
import statistics, sys
m = [statistics.median(float(x) for x in a.split()) for a in sys.argv[1:]]
print(f"warm start        {m[0]:.2f} s recording, {m[1]:.2f} s not ({m[0] / m[1]:.2f}x; medians of 3)")
print(f"instant start     {m[2]:.2f} s recording, {m[3]:.2f} s not ({m[2] / m[3]:.2f}x)")
PY

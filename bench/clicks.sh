#!/usr/bin/env bash
# The live counts (docs/reference.md, "Live counts") in one run, on loopback, against the local
# CouchDB API:
#
# - CPU per request with counting on against the same build with it off (COUCHLINK_CLICKS_DB=off),
#   cached redirects at 64 connections, interleaved rounds;
# - the requests a proxy sends CouchDB for its counts, per minute, at two loads (a trickle and
#   wrk's full rate, more than 50x apart): one per interval either way;
# - agreement: every counting proxy stopped (SIGTERM writes what is pending), the view's totals
#   against `couchlink report` on the same proxies' logs (two of them served a mix of browsers,
#   bots, new and returning visitors and 404s at the same time).
#
#   bench/clicks.sh                           # 20k links, 5 rounds of 10 s
#   BENCH_ROUNDS=3 BENCH_SECONDS=5 bench/clicks.sh
set -euo pipefail
cd "$(dirname "$0")/.."
links=${BENCH_LINKS:-20000}
seconds=${BENCH_SECONDS:-10}
rounds=${BENCH_ROUNDS:-5}
threads=${BENCH_THREADS:-1}
export BENCH_THREADS=$threads

. bench/lib.sh
bench_start clicks
couchdb_with_links "$(free_port)" "$links"

# serve NAME [VAR=VALUE...]: a couchlink on ports of its own, warm; its pid in pid[NAME].
declare -A port admin pid
serve() {
  local name=$1; shift
  port[$name]=$(free_port); admin[$name]=$(free_port)
  env COUCHLINK_COUCHDB_URL="$couch" COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader \
    COUCHLINK_LISTEN=127.0.0.1:${port[$name]} COUCHLINK_ADMIN_LISTEN=127.0.0.1:${admin[$name]} \
    COUCHLINK_LOG_DIR="$work/logs-$name" COUCHLINK_CACHE_CAPACITY=$((links * 2)) COUCHLINK_PROXY_NAME="$name" \
    "$@" target/release/couchlink serve 2>"$work/$name.err" &
  pid[$name]=$!
  pids+=($!)
  wait_http "http://127.0.0.1:${admin[$name]}/metrics"
  for _ in $(seq 1 600); do
    curl -fsS "http://127.0.0.1:${admin[$name]}/healthz" 2>/dev/null | grep -q '"cache":"ready"' && break
    sleep 0.1
  done
}
metric() { curl -fsS "http://127.0.0.1:${admin[$1]}/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }

serve on
serve off COUCHLINK_CLICKS_DB=off
ulimit -n 65536 2>/dev/null || true
echo "== $(date -u +%H:%M:%S) CPU: $rounds rounds of ${seconds}s each, counting on and off, 64 connections"
round() {
  with_cpu "${pid[$1]}" wrk -t"$threads" -c64 -d"${seconds}s" -s bench/random.lua "http://127.0.0.1:${port[$1]}"
}
interleaved cpu on off round

# The rows below ask for 200 links: a document holds 200, so each interval is one document
# whatever the load (a proxy serving more distinct links an interval writes one per 200).
head -n 200 "$BENCH_IDS" >"$work/ids-200.txt"
export BENCH_IDS=$work/ids-200.txt
echo "== $(date -u +%H:%M:%S) CouchDB requests for the counts at two loads, 1 s intervals"
serve loads COUCHLINK_CLICKS_INTERVAL_SECS=1
load() {
  local before after out
  before=$(metric loads couchlink_clicks_documents_written_total)
  out=$("$@" "http://127.0.0.1:${port[loads]}" | grep RESULT)
  # The last interval's document is written at the next second.
  sleep 1.5
  after=$(metric loads couchlink_clicks_documents_written_total)
  echo "$out documents=$((after - before))"
}
trickle=$(BENCH_DELAY_MS=10 load wrk -t1 -c1 -d"${seconds}s" -s bench/trickle.lua)
full=$(load wrk -t"$threads" -c64 -d"${seconds}s" -s bench/random.lua)

echo "== $(date -u +%H:%M:%S) agreement: two proxies under a mix of visitors, ${seconds}s"
serve mix COUCHLINK_CLICKS_INTERVAL_SECS=1
wrk -t1 -c32 -d"${seconds}s" -s bench/mixed.lua "http://127.0.0.1:${port[loads]}" >"$work/mix-a.out" &
mix_a=$!
wrk -t1 -c32 -d"${seconds}s" -s bench/mixed.lua "http://127.0.0.1:${port[mix]}" >"$work/mix-b.out"
wait "$mix_a"
for name in on loads mix; do
  kill -TERM "${pid[$name]}"
  wait "${pid[$name]}" 2>/dev/null || true
done
target/release/couchlink report --format json "$work/logs-on" "$work/logs-loads" "$work/logs-mix" >"$work/report.json"
COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader \
  target/release/couchlink clicks --format json >"$work/clicks.json"

python3 - "$work" "$trickle" "$full" "$seconds" "$rounds" <<'PY'
import json, sys
work, trickle, full, seconds, rounds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
def fields(line):
    return dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
def rows(name):
    return [fields(l) for l in open(f"{work}/cpu.{name}") if "RESULT" in l]
def median(values):
    values = sorted(values)
    return values[(len(values) - 1) // 2]
on, off = rows("on"), rows("off")
cpu_on, cpu_off = median([float(r["cpu_us"]) for r in on]), median([float(r["cpu_us"]) for r in off])
rps_on, rps_off = median([float(r["rps"]) for r in on]), median([float(r["rps"]) for r in off])
print(f"\nlive counts (couchlink, local CouchDB API, wrk -c64, median of {rounds} interleaved rounds x {seconds:g}s)")
print(f"counting on/off   CPU us per request  on {cpu_on:.2f}  off {cpu_off:.2f}  {cpu_on / cpu_off:.3f}   (target <= 1.03)")
print(f"                  req/s               on {rps_on:.0f}  off {rps_off:.0f}  {rps_on / rps_off:.3f}")
t, f = fields(trickle), fields(full)
for name, r in (("trickle", t), ("full", f)):
    per_minute = int(r["documents"]) * 60 / float(r["seconds"])
    print(f"CouchDB requests  {name:<8} {float(r['rps']):>9.0f} req/s   {r['documents']:>3} documents in {float(r['seconds']):.1f} s   {per_minute:.0f} a minute (one per 1 s interval)")
print(f"                  loads {float(f['rps']) / float(t['rps']):.0f}x apart, requests to CouchDB {int(f['documents']) / max(int(t['documents']), 1):.2f}x")
report = json.load(open(f"{work}/report.json"))
clicks = json.load(open(f"{work}/clicks.json"))["clicks"]
rep = [sum(l[k] for l in report["links"]) for k in ("redirects", "bot_redirects", "new_visitors")]
live = [sum(c[k] for c in clicks) for k in ("redirects", "bot_redirects", "new_visitors")]
same = "equal" if rep == live else "DIFFERENT"
print(f"agreement         report  redirects {rep[0]}  bot redirects {rep[1]}  new visitors {rep[2]}")
print(f"                  view    redirects {live[0]}  bot redirects {live[1]}  new visitors {live[2]}   {same}")
if rep != live:
    sys.exit(1)
PY

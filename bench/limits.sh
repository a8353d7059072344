#!/usr/bin/env bash
# How far two proxies overshoot a link's visit limit: one link with max_visits, two couchlink
# proxies on one CouchDB API (live counts every BENCH_INTERVAL seconds), each under its own wrk
# until the link is used up; then the redirects both logs hold against the limit, and against
# the bound the reference states: what the other proxy serves of the link in one interval.
# One proxy alone, for comparison, must admit exactly the limit.
#
#   bench/limits.sh                                   # interval 5 s, a limit of 200,000, 3 runs
#   BENCH_INTERVAL=10 BENCH_MAX=400000 BENCH_RUNS=1 bench/limits.sh
set -euo pipefail
cd "$(dirname "$0")/.."
interval=${BENCH_INTERVAL:-5}
max=${BENCH_MAX:-200000}
runs=${BENCH_RUNS:-3}
. bench/lib.sh
bench_start limits
couchdb_with_links "$(free_port)" 10
# serve NAME: a couchlink proxy of its own (one serving thread: two proxies and two wrk share
# the two cores), its ports in port[NAME] and admin[NAME], its pid in pid[NAME].
declare -A port admin pid
serve() {
  local name=$1
  port[$name]=$(free_port); admin[$name]=$(free_port)
  COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader \
    COUCHLINK_LISTEN=127.0.0.1:${port[$name]} COUCHLINK_ADMIN_LISTEN=127.0.0.1:${admin[$name]} \
    COUCHLINK_LOG_DIR=$work/logs-$name COUCHLINK_PROXY_NAME=$name COUCHLINK_WORKERS=1 \
    COUCHLINK_CLICKS_INTERVAL_SECS=$interval target/release/couchlink serve 2>"$work/$name.err" &
  pid[$name]=$!; pids+=($!)
  wait_http "http://127.0.0.1:${admin[$name]}/metrics"
}
# admitted NAME ID: redirects NAME's log holds for link ID, and the seconds from its first to
# its last (the log's first field: yyyymmddhhmmss.f, UTC).
admitted() {
  cat "$work/logs-$1"/access* 2>/dev/null | awk -v p="/$2" '$5 == p && $6 == 302 { print $1 }' | python3 -c '
import sys, datetime
t = [datetime.datetime.strptime(l[:14], "%Y%m%d%H%M%S").timestamp() + float("0" + l[14:]) for l in sys.stdin]
print(len(t), f"{(max(t) - min(t)) if t else 0:.1f}")'
}
put_link() {
  curl -fsS -u admin:admin -X PUT "$couch/links/$1" -H 'Content-Type: application/json' \
    -d "{\"url\": \"https://shop.example/coupon\", \"max_visits\": $max}" >/dev/null
}
stop() { kill "${pid[$1]}"; wait "${pid[$1]}" 2>/dev/null || true; }
# A browser's User-Agent: a request without one is counted as a bot's, which a limit does not
# count unless the document says so.
browser='User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0'
for run in $(seq 1 "$runs"); do
  id=$(printf 'Lim%02d' "$run")
  put_link "$id"
  echo "$id" >"$work/ids-$id.txt"
  serve a; serve b
  echo "== $(date -u +%H:%M:%S) run $run: $id, max_visits $max, two proxies, interval ${interval}s"
  clients=()
  for who in a b; do
    BENCH_IDS=$work/ids-$id.txt wrk -t1 -c32 -d$((4 * interval + max / 20000))s -H "$browser" -s bench/random.lua \
      "http://127.0.0.1:${port[$who]}" >"$work/wrk-$who-$run.txt" 2>&1 &
    clients+=($!)
  done
  wait "${clients[@]}"
  stop a; stop b
  read -r a a_secs < <(admitted a "$id"); read -r b b_secs < <(admitted b "$id")
  echo "$run $a $a_secs $b $b_secs" >>"$work/runs.txt"
  rm -rf "$work/logs-a" "$work/logs-b"
done
# One proxy alone: exactly the limit.
id=Alone; put_link "$id"; echo "$id" >"$work/ids-$id.txt"
serve a
BENCH_IDS=$work/ids-$id.txt wrk -t1 -c64 -d$((2 * interval + max / 20000))s -H "$browser" -s bench/random.lua \
  "http://127.0.0.1:${port[a]}" >/dev/null 2>&1
stop a
read -r alone _ < <(admitted a "$id")
echo
echo "couchlink $(git rev-parse --short HEAD)$(git diff --quiet || echo "+changes"): visit limits with two proxies ($(date -u +%Y-%m-%d), $(nproc) cores, one serving thread each, wrk -t1 -c32 on each, interval ${interval}s, max_visits $max)"
# The bound the reference states: what the other proxy serves of the link in one interval, for
# each proxy, at the rate each admitted visits while the link lasted.
python3 - "$work/runs.txt" "$max" "$interval" <<'PY'
import sys
path, limit, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
for line in open(path):
    run, a, a_secs, b, b_secs = line.split()
    a, b, a_secs, b_secs = int(a), int(b), float(a_secs), float(b_secs)
    bound = (a / a_secs + b / b_secs) * interval if a_secs and b_secs else float("nan")
    over = a + b - limit
    print(f"run {run}: admitted {a + b} (a {a} in {a_secs:.1f} s, b {b} in {b_secs:.1f} s), overshoot {over} "
          f"({over / limit * 100:.2f}% of the limit); one interval of both proxies' rates {bound:.0f}, "
          f"overshoot {over / bound:.2f}x of it")
PY
echo "one proxy alone: admitted $alone of $max ($([ "$alone" -eq "$max" ] && echo exact || echo NOT EXACT))"

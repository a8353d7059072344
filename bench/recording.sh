#!/usr/bin/env bash
# What recording history costs (#77), on Apache CouchDB 3.5, loopback, in one run:
# - cached redirects (wrk, 64 connections, random IDs, BENCH_SECONDS each) while a proxy's
#   recorder makes its first pass over BENCH_LINKS links (20,000: a fresh history), and while
#   a bulk change re-points BENCH_BULK of them (10,000), each against the same proxy with history
#   off, BENCH_ROUNDS interleaved rounds (3): throughput, p99 and CPU as ratios on/off;
# - CouchDB requests per recorded revision with three proxies running: a bulk change of
#   BENCH_BULK links and BENCH_EDITS single edits (200), recording against not (the difference
#   is the recorders'), for this build and for BENCH_REV (the build before #77), each with its
#   own setup on fresh databases.
#
#   bench/recording.sh
#   BENCH_ROUNDS=1 BENCH_LINKS=4000 BENCH_BULK=2000 bench/recording.sh    # quicker
#
# Needs CouchDB 3.5's couchdb.sh (COUCHLINK_COUCHDB_SH, or ../shared/couchdb/couchdb.sh) and wrk.
set -euo pipefail
cd "$(dirname "$0")/.."
links=${BENCH_LINKS:-20000}
bulk=${BENCH_BULK:-10000}
edits=${BENCH_EDITS:-200}
seconds=${BENCH_SECONDS:-8}
rounds=${BENCH_ROUNDS:-3}
rev=${BENCH_REV:-fef87c5}
. bench/lib.sh
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
cargo build --release --locked -q
couchdb35_work recording
bench_stop() {
  "$couchdb_sh" stop "$work/couchdb" >/dev/null 2>&1 || true
  git worktree remove --force "$work/tree" 2>/dev/null || true
}

echo "== $(date -u +%H:%M:%S) building $rev ($(git rev-parse --short "$rev"))"
git worktree add -q --detach "$work/tree" "$rev"
baseline_target="$PWD/target/versus-$(git rev-parse --short "$rev")"
(cd "$work/tree" && CARGO_TARGET_DIR="$baseline_target" cargo build --release --locked -q)
base_bin="$baseline_target/release/couchlink"
this_bin=target/release/couchlink

couch_port=$(free_port)
couch=http://127.0.0.1:$couch_port
"$couchdb_sh" start "$work/couchdb" --port "$couch_port" --admin admin:password >/dev/null
admin=(COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=admin COUCHLINK_COUCHDB_PASSWORD=password)
export BENCH_IDS=$work/ids.txt

# fresh BINARY: the links and history databases made anew by BINARY's setup, holding $links
# links, the first $bulk of them tagged run-7.
fresh() {
  for db in links links_history links_clicks; do curl -fsS -u admin:password -X DELETE "$couch/$db" >/dev/null 2>&1 || true; done
  env "${admin[@]}" COUCHLINK_READER_PASSWORD=reader "$1" setup >/dev/null
  python3 - "$couch_port" "$links" "$bulk" "$work/ids.txt" <<'PY'
import sys
sys.path.insert(0, "bench")
from helpers import couch_caller, ids
port, n, tagged, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
call = couch_caller(port, "admin", "password")
all_ids = ids(n)
open(out, "w").write("\n".join(all_ids) + "\n")
for i in range(0, n, 1000):
    docs = [{"_id": x, "url": f"https://example.com/spring/{x}", **({"tags": ["run-7"]} if i + j < tagged else {})}
            for j, x in enumerate(all_ids[i:i + 1000])]
    status, rows = call("POST", "/links/_bulk_docs", {"docs": docs})
    if status >= 300 or any("error" in r for r in rows):
        sys.exit(f"loading: {status} {str(rows)[:200]}")
PY
}

# serve WHO BINARY HISTORY: a proxy on ports of its own (warm start from CouchDB, no snapshot,
# live counts off); its pid in proc[WHO], its admin port in adm[WHO].
declare -A proc adm port
serve() {
  local p a
  p=$(free_port); a=$(free_port)
  env COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader \
    COUCHLINK_LISTEN=127.0.0.1:$p COUCHLINK_ADMIN_LISTEN=127.0.0.1:$a COUCHLINK_LOG_DIR="$work/logs-$1" \
    COUCHLINK_STATE_DIR="$work/state-$1-$RANDOM" COUCHLINK_HISTORY="$3" COUCHLINK_CLICKS_DB=off \
    COUCHLINK_PROXY_NAME="$1" "$2" serve 2>>"$work/$1.err" &
  proc[$1]=$!; adm[$1]=$a; port[$1]=$p
  pids+=($!)
  wait_http "http://127.0.0.1:$a/healthz"
}

stop() { kill -TERM "${proc[$1]}"; while kill -0 "${proc[$1]}" 2>/dev/null; do sleep 0.05; done; }
history_ok() { curl -fsS "http://127.0.0.1:$1/healthz" | grep -qE '"history":\{[^}]*"status":"(ok|standby)"'; }
requests() { curl -fsS -u admin:password "$couch/_node/_local/_stats/couchdb/httpd/requests" | python3 -c 'import json, sys; print(json.load(sys.stdin)["value"])'; }
entries() { curl -fsS -u admin:password "$couch/links_history" | python3 -c 'import json, sys; print(json.load(sys.stdin).get("doc_count", 0))'; }
# recorded BINARY: the history's documents once every link and every link of the bulk change is
# recorded: their entries, the design document, and (this build) the checkpoint and the
# change's record, one document a part of 500 links.
recorded() { if [ "$1" = "$this_bin" ]; then echo $((links + bulk + 2 + (bulk + 499) / 500)); else echo $((links + bulk + 1)); fi; }
load() { with_cpu "${proc[$1]}" wrk -t1 -c64 -d"${seconds}s" -s bench/random.lua "http://127.0.0.1:${port[$1]}"; }

echo "== $(date -u +%H:%M:%S) redirects during a first pass over $links links and a bulk change of $bulk, recording and not"
: >"$work/pass.on"; : >"$work/pass.off"; : >"$work/bulk.on"; : >"$work/bulk.off"; : >"$work/durations"
for round in $(seq 1 "$rounds"); do
  order="on off"; [ $((round % 2)) -eq 0 ] && order="off on"
  for h in $order; do
    fresh "$this_bin"
    history=$([ "$h" = on ] && echo true || echo false)
    serve p "$this_bin" "$history"
    wait_cache "${adm[p]}" "$links"
    began=$(date +%s.%N)
    load p >>"$work/pass.$h"
    if [ "$h" = on ]; then
      until history_ok "${adm[p]}"; do sleep 0.2; done
      echo "pass $(python3 -c "print(f'{$(date +%s.%N) - $began:.1f}')")" >>"$work/durations"
    fi
    # The bulk change begins a second into the load.
    (sleep 1; env "${admin[@]}" "$this_bin" bulk --tag run-7 --set-url "https://example.com/r$round/" >"$work/bulk-$h.out") &
    bulker=$!
    began=$(date +%s.%N)
    load p >>"$work/bulk.$h"
    wait "$bulker"
    if [ "$h" = on ]; then
      until history_ok "${adm[p]}" && [ "$(entries)" -ge "$(recorded "$this_bin")" ]; do sleep 0.2; done
      echo "bulk $(python3 -c "print(f'{$(date +%s.%N) - $began:.1f}')")" >>"$work/durations"
    fi
    stop p
  done
done

# per_revision BINARY WHO: CouchDB requests while three proxies run, during a bulk change and
# until it is recorded (or as long again, not recording), and during single edits; printed as
# "bulk=N edits=N" (requests in all, all clients).
per_revision() {
  local bin=$1 history=$2 before took began n
  fresh "$bin"
  for n in 1 2 3; do serve "r$n" "$bin" "$history"; done
  for n in 1 2 3; do wait_cache_full "${adm[r$n]}" "$links"; done
  sleep 2
  before=$(requests); began=$(date +%s.%N)
  env "${admin[@]}" "$bin" bulk --tag run-7 --set-url https://example.com/summer/ >/dev/null
  if [ "$history" = true ]; then
    until [ "$(entries)" -ge "$(recorded "$bin")" ]; do sleep 0.1; done
  fi
  sleep 2
  bulk_requests=$(( $(requests) - before ))
  took=$(python3 -c "print(f'{$(date +%s.%N) - $began:.1f}')")
  before=$(requests)
  python3 - "$couch_port" "$work/ids.txt" "$edits" <<'PY'
import sys, time
sys.path.insert(0, "bench")
from helpers import couch_caller
call = couch_caller(int(sys.argv[1]), "admin", "password")
for x in open(sys.argv[2]).read().split()[-int(sys.argv[3]):]:
    status, doc = call("GET", f"/links/{x}")
    doc["url"] = f"https://example.com/autumn/{x}"
    call("PUT", f"/links/{x}", doc)
    time.sleep(0.05)
PY
  sleep 2
  echo "bulk=$bulk_requests edits=$(( $(requests) - before )) took=$took"
  for n in 1 2 3; do stop "r$n"; done
}
echo "== $(date -u +%H:%M:%S) CouchDB requests per recorded revision, three proxies, this build and $rev"
this_on=$(per_revision "$this_bin" true); this_off=$(per_revision "$this_bin" false)
base_on=$(per_revision "$base_bin" true); base_off=$(per_revision "$base_bin" false)

cat <<REPORT

couchlink $(git rev-parse --short HEAD)$(git diff --quiet || echo "+changes"), CouchDB 3.5 ($(date -u +%Y-%m-%d), $(nproc) cores), $links links, median (min-max) of $rounds interleaved rounds of ${seconds}s, wrk -c64
REPORT
for row in pass bulk; do
  printf '%-6s req/s  on %-24s off %-24s %s\n' "$row" "$(stat $row on rps)" "$(stat $row off rps)" "$(ratio "$(med $row on rps)" "$(med $row off rps)")"
  printf '%-6s p99 us on %-24s off %-24s %s\n' "$row" "$(stat $row on p99_us)" "$(stat $row off p99_us)" "$(ratio "$(med $row on p99_us)" "$(med $row off p99_us)")"
  printf '%-6s CPU us on %-24s off %-24s %s\n' "$row" "$(stat $row on cpu_us 2)" "$(stat $row off cpu_us 2)" "$(ratio "$(med $row on cpu_us)" "$(med $row off cpu_us)")"
done
echo "recorded (s from the load's start): $(awk '{ a[$1] = a[$1] " " $2 } END { for (k in a) printf "%s%s; ", k, a[k] }' "$work/durations")"
python3 - "$bulk" "$edits" "$this_on" "$this_off" "$base_on" "$base_off" "$rev" <<'PY'
import sys
bulk, edits = int(sys.argv[1]), int(sys.argv[2])
def parse(s):
    return {k: float(v) for k, v in (kv.split("=") for kv in s.split())}
this_on, this_off, base_on, base_off = (parse(s) for s in sys.argv[3:7])
for name, on, off in (("this build", this_on, this_off), (sys.argv[7], base_on, base_off)):
    print(f"{name:>10}: a bulk change of {bulk}: {(on['bulk'] - off['bulk']) / bulk:.3f} CouchDB requests per revision recorded "
          f"({on['bulk']:.0f} against {off['bulk']:.0f} not recording; recorded in {on['took']:.1f} s); "
          f"single edits: {(on['edits'] - off['edits']) / edits:.2f} per edit ({on['edits']:.0f} against {off['edits']:.0f})")
PY

#!/usr/bin/env bash
# What a SIGKILL under load costs the access log and the live counts, in one run: couchlink
# serving wrk's random redirects is killed mid-run, and the requests wrk got answers to are set
# against the lines on disk, batched (the default) and with COUCHLINK_LOG_SYNC=true, a few kills
# each; and against the redirects its live counts hold in the clicks database (one-second
# intervals: a kill loses the interval in progress).
#
#   bench/kill.sh                              # 10k links, 5 kills per mode after 2 s of load
#   BENCH_KILLS=3 BENCH_SECONDS=1 bench/kill.sh
set -euo pipefail
cd "$(dirname "$0")/.."
links=${BENCH_LINKS:-10000}
kills=${BENCH_KILLS:-5}
after=${BENCH_SECONDS:-2}
. bench/lib.sh
bench_start kill
couchdb_with_links "$(free_port)" "$links"

# Redirects the clicks database holds, every proxy's.
counted() {
  COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader \
    target/release/couchlink clicks --format json |
    python3 -c 'import json, sys; print(sum(c["redirects"] for c in json.load(sys.stdin)["clicks"]))'
}

for sync in false true; do
  for k in $(seq 1 "$kills"); do
    port=$(free_port); admin=$(free_port); logs=$work/logs-$sync-$k
    COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader \
      COUCHLINK_LISTEN=127.0.0.1:$port COUCHLINK_ADMIN_LISTEN=127.0.0.1:$admin COUCHLINK_LOG_DIR=$logs \
      COUCHLINK_LOG_SYNC=$sync COUCHLINK_CLICKS_INTERVAL_SECS=1 target/release/couchlink serve 2>>"$work/serve.err" &
    pid=$!
    # Not a job the shell reports on when it is killed; waited for by polling below.
    disown "$pid"
    wait_http "http://127.0.0.1:$admin/metrics"
    for _ in $(seq 1 600); do
      curl -fsS "http://127.0.0.1:$admin/healthz" 2>/dev/null | grep -q '"cache":"ready"' && break; sleep 0.1
    done
    counted_before=$(counted)
    wrk -t1 -c64 -d$((after + 2))s -s bench/random.lua "http://127.0.0.1:$port" >"$work/wrk.out" 2>&1 &
    wrk_pid=$!
    sleep "$after"
    kill -KILL "$pid"
    wait "$wrk_pid" || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    answered=$(field requests <"$work/wrk.out")
    lines=$(cat "$logs"/access.*.log | wc -l)
    counts=$(( $(counted) - counted_before ))
    echo "$sync $answered $lines $counts" >>"$work/results"
    echo "COUCHLINK_LOG_SYNC=$sync kill $k: $answered answered, $lines lines on disk, $counts redirects counted" >&2
  done
done

python3 - "$work/results" "$after" <<'PY'
import statistics, sys
after = float(sys.argv[2])
rows, counts = {}, []
for line in open(sys.argv[1]):
    sync, answered, lines, counted = line.split()
    rows.setdefault(sync, []).append((int(answered), int(lines)))
    counts.append((int(answered), int(counted)))
print(f"SIGKILL under load (wrk -c64, killed after {after:g} s; lost = answered - lines on disk)")
for sync, runs in rows.items():
    lost = [max(a - l, 0) for a, l in runs]
    rate = statistics.median(a for a, _ in runs) / after
    print(f"COUCHLINK_LOG_SYNC={sync:<5}  lost lines: median {statistics.median(lost):g}, max {max(lost)} of "
          f"~{statistics.median(a for a, _ in runs):,.0f} answered; at {rate:,.0f} req/s that is "
          f"{statistics.median(lost) / rate * 1000:.1f} ms (max {max(lost) / rate * 1000:.1f} ms) of traffic")
lost = [max(a - c, 0) for a, c in counts]
rate = statistics.median(a for a, _ in counts) / after
print(f"live counts (1 s intervals)  lost redirects: median {statistics.median(lost):g}, max {max(lost)}; that is "
      f"{statistics.median(lost) / rate * 1000:.0f} ms (max {max(lost) / rate * 1000:.0f} ms) of traffic "
      f"(the interval in progress, 1000 ms, and one being written when the kill came)")
PY

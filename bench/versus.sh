#!/usr/bin/env bash
# This checkout's couchlink against another build of it (a git revision, main by default), in
# one run, on loopback only: interleaved rounds of cached redirects at 64 connections, at 1000,
# and pipelined, each row's median and spread, with CPU, context switches and epoll_wait calls
# per request. Ratios are this checkout over the other build (a change must not make the
# redirect path slower or costlier).
#
#   bench/versus.sh [REV]               # 20k links, 5 interleaved rounds of 10 s per build and row
#   BENCH_ROUNDS=1 BENCH_SECONDS=5 bench/versus.sh origin/main   # quicker
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-main}
links=${BENCH_LINKS:-20000}
seconds=${BENCH_SECONDS:-10}
rounds=${BENCH_ROUNDS:-5}
threads=${BENCH_THREADS:-1}
workers=${BENCH_WORKERS:-$(nproc)}
export BENCH_THREADS=$threads

. bench/lib.sh
bench_start versus
bench_stop() { git worktree remove --force "$work/tree" 2>/dev/null || true; }

echo "== $(date -u +%H:%M:%S) building $rev ($(git rev-parse --short "$rev"))"
git worktree add -q --detach "$work/tree" "$rev"
# Its own target folder under this checkout's, kept between runs of the same revision.
baseline_target="$PWD/target/versus-$(git rev-parse --short "$rev")"
(cd "$work/tree" && CARGO_TARGET_DIR="$baseline_target" cargo build --release --locked -q)
baseline_bin="$baseline_target/release/couchlink"
[ -x "$baseline_bin" ] || { echo "no binary at $baseline_bin" >&2; exit 1; }

couchdb_with_links "$(free_port)" "$links"

# serve WHO BINARY: one couchlink on ports of its own, warm-started; its pid in ${WHO}_pid.
declare -A port admin
serve() {
  local who=$1 bin=$2
  port[$who]=$(free_port); admin[$who]=$(free_port)
  COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader \
    COUCHLINK_LISTEN=127.0.0.1:${port[$who]} COUCHLINK_ADMIN_LISTEN=127.0.0.1:${admin[$who]} \
    COUCHLINK_LOG_DIR=$work/logs-$who COUCHLINK_CACHE_CAPACITY=$((links * 2)) COUCHLINK_WORKERS=$workers \
    "$bin" serve 2>"$work/$who.err" &
  pids+=($!)
  printf -v "${who}_pid" '%s' "$!"
  wait_http "http://127.0.0.1:${admin[$who]}/metrics"
}
serve this target/release/couchlink
serve base "$baseline_bin"
echo "== $(date -u +%H:%M:%S) waiting until both hold every link"
for who in this base; do wait_cache_full "${admin[$who]}" "$links"; done

# rows NAME CONNECTIONS SCRIPT: interleaved rounds, who goes first alternating.
rows() {
  local name=$1 conns=$2 script=$3
  echo "== $(date -u +%H:%M:%S) $name: $rounds rounds of ${seconds}s each, $conns connections ($script)"
  : >"$work/$name.this"; : >"$work/$name.base"
  for round in $(seq 1 "$rounds"); do
    order="base this"; [ $((round % 2)) -eq 0 ] && order="this base"
    for who in $order; do
      local pid_var="${who}_pid"
      with_cpu "${!pid_var}" wrk -t"$threads" -c"$conns" -d"${seconds}s" -s "bench/$script" \
        "http://127.0.0.1:${port[$who]}" >>"$work/$name.$who"
    done
  done
}
ulimit -n 65536 2>/dev/null || true
rows c64 64 random.lua
rows c1000 1000 random.lua
rows pipelined 64 pipelined.lua

cat <<REPORT

couchlink $(git rev-parse --short HEAD)$(git diff --quiet || echo "+changes") against $rev ($(git rev-parse --short "$rev")) ($(date -u +%Y-%m-%d), $(nproc) cores, $workers workers each, wrk -t$threads, $links links, median (min-max) of $rounds interleaved rounds x ${seconds}s per row)
$(for row in c64 c1000 pipelined; do
  printf '%-10s req/s  this %-24s base %-24s %s\n' "$row" "$(stat $row this rps)" "$(stat $row base rps)" "$(ratio "$(med $row this rps)" "$(med $row base rps)")"
  printf '%-10s p99 us this %-24s base %-24s %s\n' "$row" "$(stat $row this p99_us)" "$(stat $row base p99_us)" "$(ratio "$(med $row this p99_us)" "$(med $row base p99_us)")"
  printf '%-10s CPU us this %-24s base %-24s %s\n' "$row" "$(stat $row this cpu_us 2)" "$(stat $row base cpu_us 2)" "$(ratio "$(med $row this cpu_us)" "$(med $row base cpu_us)")"
  printf '%-10s kernel this %-24s base %-24s %s\n' "$row" "$(stat $row this sys_us 2)" "$(stat $row base sys_us 2)" "$(ratio "$(med $row this sys_us)" "$(med $row base sys_us)")"
  printf '%-10s switch this %-24s base %-24s %s\n' "$row" "$(stat $row this cs 3)" "$(stat $row base cs 3)" "$(ratio "$(med $row this cs)" "$(med $row base cs)")"
  grep -q epoll= "$work/$row.this" &&
    printf '%-10s epoll  this %-24s base %-24s %s\n' "$row" "$(stat $row this epoll 3)" "$(stat $row base epoll 3)" "$(ratio "$(med $row this epoll)" "$(med $row base epoll)")"
done)
errors (wrk)      this $(cat "$work"/*.this | tr ' ' '\n' | sed -n 's/^errors=//p' | awk '{s += $1} END {print s + 0}'), base $(cat "$work"/*.base | tr ' ' '\n' | sed -n 's/^errors=//p' | awk '{s += $1} END {print s + 0}') (all rows)
REPORT

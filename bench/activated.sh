#!/usr/bin/env bash
# Socket activation's cost: the same build serving on its own sockets (one SO_REUSEPORT socket per
# serving thread) and on one socket systemd passes (systemd-socket-activate, as couchlink.socket
# does), which every serving thread then shares. Interleaved rounds at 64 and 1000 connections,
# each round new connections (so each shows how the threads divided them); ratios are activated
# over bound.
#
#   bench/activated.sh                     # 10k links, 5 interleaved rounds of 10 s per row
#   BENCH_ROUNDS=3 BENCH_SECONDS=5 bench/activated.sh
set -euo pipefail
cd "$(dirname "$0")/.."
links=${BENCH_LINKS:-10000}
seconds=${BENCH_SECONDS:-10}
rounds=${BENCH_ROUNDS:-5}
workers=${BENCH_WORKERS:-$(nproc)}
. bench/lib.sh
command -v systemd-socket-activate >/dev/null || { echo "bench/activated.sh needs systemd-socket-activate (apt-get install systemd)" >&2; exit 1; }
bench_start activated
couchdb_with_links "$(free_port)" "$links"

declare -A port admin
serve() {
  local who=$1
  port[$who]=$(free_port); admin[$who]=$(free_port)
  local env=(COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader
    COUCHLINK_LISTEN=127.0.0.1:${port[$who]} COUCHLINK_ADMIN_LISTEN=127.0.0.1:${admin[$who]}
    COUCHLINK_LOG_DIR=$work/logs-$who COUCHLINK_WORKERS=$workers)
  if [ "$who" = activated ]; then
    # It passes on only the variables it is given with --setenv, as a unit's Environment= does.
    systemd-socket-activate -l "127.0.0.1:${port[$who]}" --fdname=redirect "${env[@]/#/--setenv=}" \
      target/release/couchlink serve 2>"$work/$who.err" &
    # It starts the program on the first connection, as systemd does.
    sleep 0.2
    curl -s -o /dev/null --max-time 20 "http://127.0.0.1:${port[$who]}/" || true
  else
    env "${env[@]}" target/release/couchlink serve 2>"$work/$who.err" &
  fi
  pids+=($!)
  printf -v "${who}_pid" '%s' "$!"
  (wait_http "http://127.0.0.1:${admin[$who]}/metrics") || { cat "$work/$who.err" >&2; exit 1; }
}
serve bound
serve activated
grep -q "sockets from systemd" "$work/activated.err" || { echo "the activated proxy did not take systemd's socket" >&2; exit 1; }
for who in bound activated; do wait_cache_full "${admin[$who]}" "$links"; done
# one ROW CONNECTIONS WHO: a wrk round with the server's CPU per request.
one() {
  local pid_var="${3}_pid"
  with_cpu "${!pid_var}" wrk -t1 -c"$2" -d"${seconds}s" -s bench/random.lua "http://127.0.0.1:${port[$3]}"
}
ulimit -n 65536 2>/dev/null || true
for conns in 64 1000; do
  echo "== $(date -u +%H:%M:%S) c$conns: $rounds rounds of ${seconds}s each"
  interleaved "c$conns" bound activated one "c$conns" "$conns"
done
echo
echo "couchlink $(git rev-parse --short HEAD)$(git diff --quiet || echo "+changes"), bound against socket-activated ($(date -u +%Y-%m-%d), $(nproc) cores, $workers workers, $links links, median (min-max) of $rounds interleaved rounds x ${seconds}s)"
for row in c64 c1000; do
  printf '%-6s req/s  bound %-24s activated %-24s %s\n' "$row" "$(stat $row bound rps)" "$(stat $row activated rps)" "$(ratio "$(med $row activated rps)" "$(med $row bound rps)")"
  printf '%-6s CPU us bound %-24s activated %-24s %s\n' "$row" "$(stat2 $row bound cpu_us)" "$(stat2 $row activated cpu_us)" "$(ratio "$(med $row activated cpu_us)" "$(med $row bound cpu_us)")"
done

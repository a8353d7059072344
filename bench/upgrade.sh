#!/usr/bin/env bash
# Upgrades and restarts that no client notices, counted in one run (bench/upgrade.py does the
# work): this script stands in for systemd and holds the sockets; 20 in-place upgrades between
# two builds (SIGUSR2) and 5 socket-activated restarts (SIGTERM, then a new process on the same
# sockets) come while three loads run at once (wrk keep-alive at 64 connections, wrk with one
# request per connection, and connections idle for random gaps); then a new binary that exits at
# once and one that never gets ready. It fails unless every request was answered with a redirect,
# both builds answered, one process listens at the end, the kernel dropped no connection, and the
# access log and the live counts hold each redirect once.
#
#   bench/upgrade.sh                                   # 20 upgrades, 5 restarts, 10k links
#   BENCH_UPGRADES=3 BENCH_RESTARTS=1 bench/upgrade.sh
#   BENCH_BUILD_A=path BENCH_BUILD_B=path bench/upgrade.sh   # two builds made already
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
command -v ss >/dev/null || { apt-get update -qq && apt-get install -y -qq iproute2 >/dev/null; }
couchdb/install.sh
bench_work upgrade
export NODE_NO_WARNINGS=1

# Two builds told apart by name (COUCHLINK_BUILD, in their logs and /metrics): an upgrade
# alternates between them.
a=${BENCH_BUILD_A:-}
b=${BENCH_BUILD_B:-}
if [ -z "$a" ] || [ -z "$b" ]; then
  echo "== $(date -u +%H:%M:%S) building two release builds, a and b"
  for build in a b; do
    COUCHLINK_BUILD="$(git rev-parse --short HEAD)-$build" cargo build --release --locked -q
    cp target/release/couchlink "$work/couchlink-$build"
  done
  a=$work/couchlink-a b=$work/couchlink-b
fi
couchdb_with_links "$(free_port)" "${BENCH_LINKS:-10000}"
python3 bench/upgrade.py --a "$a" --b "$b" --work "$work" --couch "$couch" --ids "$work/ids.txt" \
  --upgrades "${BENCH_UPGRADES:-20}" --restarts "${BENCH_RESTARTS:-5}" --interval "${BENCH_INTERVAL:-2.5}"

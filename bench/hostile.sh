#!/usr/bin/env bash
# Hostile clients (bench/hostile.py: 3000 idle and 1000 slowloris connections) against couchlink
# and against nginx with its compiled-in defaults (worker_connections 512, client_header_timeout
# 60 s, keepalive_timeout 75 s), in one run on loopback: a well-behaved client's p99 loaded over
# unloaded, its failed requests, and the server's memory.
#
#   bench/hostile.sh            # BENCH_IDLE=3000 BENCH_SLOW=1000 BENCH_REQUESTS=2000
set -euo pipefail
cd "$(dirname "$0")/.."
idle=${BENCH_IDLE:-3000}; slow=${BENCH_SLOW:-1000}; requests=${BENCH_REQUESTS:-2000}
workers=${BENCH_WORKERS:-$(nproc)}
command -v nginx >/dev/null || { apt-get update -qq && apt-get install -y -qq nginx-light >/dev/null; }
cargo build --release --locked -q
couchdb/install.sh

. bench/lib.sh
bench_work hostile
export NODE_NO_WARNINGS=1
couch_port=$(free_port); proxy_port=$(free_port); admin_port=$(free_port); nginx_port=$(free_port)
couch=http://127.0.0.1:$couch_port
couchdb/local-couchdb.sh --port "$couch_port" --admin admin:admin >/dev/null &
pids+=($!)
wait_http "$couch/"
COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=admin COUCHLINK_COUCHDB_PASSWORD=admin \
  COUCHLINK_READER_PASSWORD=reader target/release/couchlink setup >/dev/null
curl -fsS -u admin:admin -X PUT "$couch/links/H83if" -H 'Content-Type: application/json' \
  -d '{"url": "https://example.com/landing", "inactive": false}' >/dev/null

COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader \
  COUCHLINK_LISTEN=127.0.0.1:$proxy_port COUCHLINK_ADMIN_LISTEN=127.0.0.1:$admin_port \
  COUCHLINK_LOG_DIR=$work/logs COUCHLINK_WORKERS=$workers \
  target/release/couchlink serve 2>"$work/couchlink.err" &
couchlink_pid=$!
pids+=($couchlink_pid)
wait_http "http://127.0.0.1:$admin_port/healthz"

# nginx's compiled-in connection defaults: an empty events block.
start_nginx "$work" "$nginx_port" "$workers" ""
wait_http "http://127.0.0.1:$nginx_port/H83if" || true
nginx_pid=$(pgrep -f "nginx: worker process" | head -1)

echo "couchlink: $(python3 bench/hostile.py "127.0.0.1:$proxy_port" /H83if "$couchlink_pid" "$idle" "$slow" "$requests")"
sleep 12  # couchlink's header timeout (10 s) closes what is left of the hostile connections
echo "nginx:     $(python3 bench/hostile.py "127.0.0.1:$nginx_port" /H83if "$nginx_pid" "$idle" "$slow" "$requests")"
grep -c "worker_connections are not enough" "$work/nginx/error.log" | sed 's/^/nginx "worker_connections are not enough": /' || true

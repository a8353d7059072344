#!/usr/bin/env bash
# From a fresh clone to a running couchlink against a local CouchDB API, for trying it out and
# for development (production is Apache CouchDB 3: see docs/operations.md, "Production").
#
#   couchdb/quickstart.sh [--couchdb-port 5984] [--port 8080] [--admin-port 9090] [--console-port 8092] [--data DIR]
#
# Checks that the three ports are free, builds couchlink, starts the local CouchDB stand-in
# (pouchdb-server, a real server speaking CouchDB's HTTP API) on 127.0.0.1 with admin
# admin:admin and its data in DIR (default .local-couchdb/, its output in DIR/couchdb.log), runs
# `couchlink setup`, adds an `editor` account (password "editor"), and serves redirects and the
# console (`couchlink console`, log in as editor) on 127.0.0.1 until Ctrl-C or SIGTERM, which stop everything it started. The access log goes to
# logs/ (or COUCHLINK_LOG_DIR), the link cache snapshot a restart serves from beside
# it (logs-state/, or COUCHLINK_STATE_DIR). COUCHLINK_BIN skips the build and runs that binary instead.
set -euo pipefail
cd "$(dirname "$0")/.."

couchdb_port=5984
port=8080
admin_port=9090
console_port=8092
data=.local-couchdb
usage="usage: $0 [--couchdb-port N] [--port N] [--admin-port N] [--console-port N] [--data DIR]"
while [ $# -gt 0 ]; do
  case "$1" in
    --couchdb-port) couchdb_port=${2:?$usage}; shift 2 ;;
    --port) port=${2:?$usage}; shift 2 ;;
    --admin-port) admin_port=${2:?$usage}; shift 2 ;;
    --console-port) console_port=${2:?$usage}; shift 2 ;;
    --data) data=${2:?$usage}; shift 2 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done

# Before anything slow: every port must be free (a CouchDB many users already run on 5984
# would otherwise be taken for the stand-in).
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for check in "$couchdb_port:--couchdb-port:the local CouchDB" "$port:--port:redirects" \
             "$admin_port:--admin-port:health and metrics" "$console_port:--console-port:the console"; do
  IFS=: read -r p flag what <<< "$check"
  if in_use "$p"; then
    echo "quickstart: port $p ($what) is already in use on 127.0.0.1." >&2
    if answer=$(curl -fsS --max-time 2 "http://127.0.0.1:$p/" 2>/dev/null) && [[ $answer == *'"vendor"'* ]]; then
      echo "  A CouchDB API answers there: $answer" >&2
      echo "  The quick start runs its own; couchlink can also use that one (docs/reference.md, \"Configuration\")." >&2
    fi
    echo "  Pick another port with $flag N, or stop what listens there." >&2
    exit 1
  fi
done

if [ -n "${COUCHLINK_BIN:-}" ]; then
  couchlink=$COUCHLINK_BIN
else
  cargo build --locked
  couchlink=target/debug/couchlink
fi
couchdb/install.sh

couch=http://127.0.0.1:$couchdb_port
couch_pid=""
serve_pid=""
console_pid=""
rollup_pid=""
# One Ctrl-C or SIGTERM stops everything started here: couchlink first (it drains in-flight
# requests and writes its access log), then the local CouchDB.
stop() {
  trap - EXIT INT TERM
  for pid in $rollup_pid $console_pid $serve_pid $couch_pid; do
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}
trap stop EXIT
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM

mkdir -p "$data"
couchdb/local-couchdb.sh --port "$couchdb_port" --admin admin:admin --data "$data" > "$data/couchdb.log" 2>&1 &
couch_pid=$!
for _ in $(seq 1 100); do
  curl -fsS "$couch/" >/dev/null 2>&1 && break
  if ! kill -0 "$couch_pid" 2>/dev/null; then
    echo "quickstart: the local CouchDB did not start; its output:" >&2
    cat "$data/couchdb.log" >&2
    exit 1
  fi
  sleep 0.2
done

export COUCHLINK_COUCHDB_URL=$couch
COUCHLINK_COUCHDB_USER=admin COUCHLINK_COUCHDB_PASSWORD=admin COUCHLINK_READER_PASSWORD=reader \
  "$couchlink" setup
# An editor of the links database for the examples (409 when it already exists).
curl -sS -o /dev/null -u admin:admin -X PUT "$couch/_users/org.couchdb.user:editor" \
  -H 'Content-Type: application/json' \
  -d '{"name":"editor","password":"editor","roles":["links:editor"],"type":"user"}'

cat >&2 <<EOF
quickstart: CouchDB API on $couch (admin admin:admin, editor editor:editor). Try, in another terminal:
  curl -u editor:editor -X PUT $couch/links/H83if -H 'Content-Type: application/json' -d '{"url": "https://example.com/wp/?p=14"}'
  curl -i http://127.0.0.1:$port/H83if
or open the console, http://127.0.0.1:$console_port/, and log in as editor (password editor).
Ctrl-C stops couchlink and the local CouchDB.
EOF
COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader \
  COUCHLINK_LISTEN=127.0.0.1:$port COUCHLINK_ADMIN_LISTEN=127.0.0.1:$admin_port \
  "$couchlink" serve &
serve_pid=$!
COUCHLINK_CONSOLE_LISTEN=127.0.0.1:$console_port COUCHLINK_PUBLIC_URL=http://127.0.0.1:$port \
  "$couchlink" console &
console_pid=$!
# The live counts' roll-up, as a default install runs it: days older than 7 into daily
# documents, once a day (docs/operations.md, "Live counts on disk"); quiet unless it fails.
COUCHLINK_COUCHDB_USER=admin COUCHLINK_COUCHDB_PASSWORD=admin \
  "$couchlink" clicks --roll-up-older-than 7 --every 86400 > /dev/null &
rollup_pid=$!
# Returns when couchlink exits, or at once when a signal arrives (its trap then stops both).
wait "$serve_pid"

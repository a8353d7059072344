#!/usr/bin/env bash
# From a fresh clone to a running couchlink against a local CouchDB API:
#   builds couchlink, starts the local CouchDB stand-in (pouchdb-server) on 127.0.0.1:5984 with
#   admin admin:admin and data in .local-couchdb/, runs `couchlink setup`, adds an `editor`
#   account (password "editor"), and serves redirects on http://127.0.0.1:8080 until Ctrl-C.
# For development only: production is Apache CouchDB 3 (docker-compose.yml).
set -euo pipefail
cd "$(dirname "$0")/.."
couch=http://127.0.0.1:5984

cargo build --release --locked
couchdb/install.sh
couchdb/local-couchdb.sh --port 5984 --admin admin:admin --data .local-couchdb &
couch_pid=$!
trap 'kill "$couch_pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  curl -fsS "$couch/" >/dev/null 2>&1 && break
  kill -0 "$couch_pid" 2>/dev/null || { echo "the local CouchDB did not start" >&2; exit 1; }
  sleep 0.2
done

export COUCHLINK_COUCHDB_URL=$couch
COUCHLINK_COUCHDB_USER=admin COUCHLINK_COUCHDB_PASSWORD=admin COUCHLINK_READER_PASSWORD=reader \
  target/release/couchlink setup
# An editor account for the README's examples (409 when it already exists).
curl -sS -o /dev/null -u admin:admin -X PUT "$couch/_users/org.couchdb.user:editor" \
  -H 'Content-Type: application/json' \
  -d '{"name":"editor","password":"editor","roles":["editor"],"type":"user"}'

COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader \
  COUCHLINK_LISTEN=127.0.0.1:8080 COUCHLINK_ADMIN_LISTEN=127.0.0.1:9090 \
  target/release/couchlink serve

#!/usr/bin/env bash
# Runs pouchdb-server, a real server speaking CouchDB's HTTP API, as a local stand-in for
# Apache CouchDB 3 (tests and the quick start only: production is CouchDB 3, see
# docker-compose.yml). Installs it from package-lock.json on first use.
#
#   couchdb/local-couchdb.sh [--port 5984] [--admin admin:admin] [--data DIR]
#
# Without --data the databases live in memory and vanish when it stops.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
port=5984
admin=admin:admin
data=""
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port=$2; shift 2 ;;
    --admin) admin=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    *) echo "usage: $0 [--port N] [--admin USER:PASSWORD] [--data DIR]" >&2; exit 2 ;;
  esac
done

"$here/install.sh"

# pouchdb-server rewrites its config file (it hashes the admin password), so it gets a copy:
# beside the databases with --data; else in a folder of $TMPDIR, removed once the server answers
# (it reads its config at start only), so that nothing is left there however it ends (exec below
# leaves no shell to clean up). With --data nothing goes to $TMPDIR at all: removing a folder
# there is asynchronous, and a quick start stopped at once could leave it behind.
mode=(--in-memory)
if [ -n "$data" ]; then
  mkdir -p "$data/.pouchdb-server"
  work=$data/.pouchdb-server
  mode=(--dir "$data")
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/couchlink-couchdb.XXXXXX")
  (for _ in $(seq 1 300); do
     (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
     sleep 0.1
   done
   rm -rf "$work") &
fi
node -e '
  const [user, ...rest] = process.argv[1].split(":");
  const config = { admins: { [user]: rest.join(":") }, log: { file: process.argv[2] + "/log.txt" } };
  require("fs").writeFileSync(process.argv[2] + "/config.json", JSON.stringify(config));
' "$admin" "$work"

# --unhandled-rejections=warn: pouchdb-server rejects a few requests by crashing otherwise
# (pouchdb/pouchdb-server#374). -n: no request log on stdout.
exec node --unhandled-rejections=warn "$here/node_modules/pouchdb-server/bin/pouchdb-server" \
  --host 127.0.0.1 --port "$port" --config "$work/config.json" -n "${mode[@]}"

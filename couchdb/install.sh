#!/usr/bin/env bash
# Installs pouchdb-server exactly as package-lock.json pins it, unless already installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
stamp="$here/node_modules/.couchlink-lock-stamp"
if [ -f "$stamp" ] && cmp -s "$stamp" "$here/package-lock.json"; then
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "couchlink: npm is needed to install the local CouchDB stand-in (apt-get install nodejs npm)" >&2
  exit 1
fi
# --ignore-scripts skips an sqlite3 build pouchdb-server does not need here; leveldown ships
# its prebuilt binary.
(cd "$here" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
cp "$here/package-lock.json" "$stamp"

#!/usr/bin/env bash
# Installs the console's test dependencies (linkedom, a DOM for views/ under `node --test`)
# exactly as package-lock.json pins them, unless already installed. The page itself needs none:
# it is served as it is.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
stamp="$here/node_modules/.couchlink-lock-stamp"
if [ -f "$stamp" ] && cmp -s "$stamp" "$here/package-lock.json"; then
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "couchlink: npm is needed to install the console's test DOM (apt-get install nodejs npm)" >&2
  exit 1
fi
(cd "$here" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
cp "$here/package-lock.json" "$stamp"

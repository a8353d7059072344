#!/usr/bin/env bash
# Checks the production files with their own tools, as far as a machine without a Docker engine
# or systemd as PID 1 can: the compose files' schema (docker-compose config), the Caddyfile
# (caddy validate), the systemd unit (systemd-analyze verify) and the Prometheus alerting rules
# (promtool check rules, and their unit tests). Used by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
export COUCHLINK_DOMAIN=0x1f.ie COUCHDB_DOMAIN=admin.0x1f.ie COUCHDB_PASSWORD=check \
  COUCHDB_SECRET=check COUCHDB_ERLANG_COOKIE=check COUCHLINK_READER_PASSWORD=check
for file in docker-compose.yml docker-compose.cluster.yml; do
  # Unknown keys are reported on stderr without failing, hence the check that it stays empty.
  problems=$(docker-compose -f "$file" config -q 2>&1) || true
  if [ -n "$problems" ]; then echo "$file: $problems" >&2; exit 1; fi
  echo "$file: valid"
done
caddy validate --config deploy/Caddyfile --adapter caddyfile > /dev/null 2>&1 ||
  { caddy validate --config deploy/Caddyfile --adapter caddyfile; exit 1; }
echo "deploy/Caddyfile: valid"
# The unit as installed, but starting this checkout's binary (verify checks that it exists).
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cargo build --quiet --locked
sed "s|^ExecStart=/usr/local/bin/couchlink|ExecStart=$PWD/target/debug/couchlink|" deploy/couchlink.service \
  > "$work/couchlink.service"
# Unknown or misspelt settings are only warnings to verify: any output is a failure here.
problems=$(systemd-analyze verify "$work/couchlink.service" 2>&1) || true
if [ -n "$problems" ]; then echo "deploy/couchlink.service: $problems" >&2; exit 1; fi
echo "deploy/couchlink.service: valid"
promtool check rules deploy/couchlink-alerts.yml > /dev/null || { promtool check rules deploy/couchlink-alerts.yml; exit 1; }
promtool test rules deploy/couchlink-alerts.test.yml > /dev/null || { promtool test rules deploy/couchlink-alerts.test.yml; exit 1; }
echo "deploy/couchlink-alerts.yml: valid, and its tests pass"

#!/usr/bin/env bash
# Checks the production files with their own tools, as far as a machine without a Docker engine
# or systemd as PID 1 can: the compose files' schema (docker-compose config), the Caddyfile
# (caddy validate), the systemd unit (systemd-analyze verify) and the Prometheus alerting rules
# (promtool check rules, and their unit tests). Used by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
export COUCHLINK_DOMAIN=0x1f.ie COUCHDB_DOMAIN=admin.0x1f.ie COUCHDB_PASSWORD=check \
  COUCHDB_SECRET=check COUCHDB_ERLANG_COOKIE=check COUCHLINK_READER_PASSWORD=check
for files in docker-compose.yml docker-compose.cluster.yml "docker-compose.yml -f docker-compose.rolling.yml"; do
  # Unknown keys are reported on stderr without failing, hence the check that it stays empty.
  # shellcheck disable=SC2086 # two files on purpose
  problems=$(docker-compose -f $files config -q 2>&1) || true
  if [ -n "$problems" ]; then echo "$files: $problems" >&2; exit 1; fi
  echo "$files: valid"
done
for file in deploy/Caddyfile deploy/Caddyfile.rolling; do
  caddy validate --config "$file" --adapter caddyfile > /dev/null 2>&1 ||
    { caddy validate --config "$file" --adapter caddyfile; exit 1; }
  echo "$file: valid"
done
# No Kubernetes here: the manifest is checked for YAML and the fields the docs rely on.
# Debian's python3, which has PyYAML since docker-compose needs it.
/usr/bin/python3 - deploy/kubernetes.yaml <<'PY'
import sys, yaml
deployment, service, rollup = yaml.safe_load_all(open(sys.argv[1]))
job = rollup["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
assert rollup["kind"] == "CronJob" and rollup["spec"]["concurrencyPolicy"] == "Forbid"
assert job["args"][:2] == ["clicks", "--roll-up-older-than"]
pod = deployment["spec"]["template"]["spec"]
container = pod["containers"][0]
assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
assert container["lifecycle"]["preStop"]["sleep"]["seconds"] > 0
assert pod["terminationGracePeriodSeconds"] > 5 + 10
assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
PY
echo "deploy/kubernetes.yaml: valid YAML, rolling update with a readiness probe and a preStop pause, a daily roll-up"
# The unit as installed, but starting this checkout's binary (verify checks that it exists).
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cargo build --quiet --locked
sed "s|^ExecStart=/usr/local/bin/couchlink|ExecStart=$PWD/target/debug/couchlink|" deploy/couchlink.service \
  > "$work/couchlink.service"
sed "s|^ExecStart=/usr/local/bin/couchlink|ExecStart=$PWD/target/debug/couchlink|" deploy/couchlink-console.service \
  > "$work/couchlink-console.service"
cp deploy/couchlink.socket deploy/couchlink-admin.socket deploy/couchlink-console.socket "$work/"
# Unknown or misspelt settings are only warnings to verify: any output is a failure here.
problems=$(systemd-analyze verify "$work/couchlink.service" "$work/couchlink.socket" "$work/couchlink-admin.socket" 2>&1) || true
if [ -n "$problems" ]; then echo "deploy/couchlink.service and its sockets: $problems" >&2; exit 1; fi
echo "deploy/couchlink.service, couchlink.socket, couchlink-admin.socket: valid"
problems=$(systemd-analyze verify "$work/couchlink-console.service" "$work/couchlink-console.socket" 2>&1) || true
if [ -n "$problems" ]; then echo "deploy/couchlink-console.service and its socket: $problems" >&2; exit 1; fi
# What the units must say for the console to hold no account and upgrade in place.
for line in 'ExecStart=/usr/local/bin/couchlink console' 'ExecReload=/bin/kill -USR2 $MAINPID' 'Type=notify' \
    'UnsetEnvironment=COUCHLINK_COUCHDB_USER COUCHLINK_COUCHDB_PASSWORD COUCHLINK_COUCHDB_PASSWORD_FILE'; do
  grep -qxF "$line" deploy/couchlink-console.service || { echo "deploy/couchlink-console.service lacks: $line" >&2; exit 1; }
done
grep -qx 'Service=couchlink-console.service' deploy/couchlink-console.socket ||
  { echo "deploy/couchlink-console.socket names no service" >&2; exit 1; }
echo "deploy/couchlink-console.service, couchlink-console.socket: valid"
sed "s|^ExecStart=/usr/local/bin/couchlink|ExecStart=$PWD/target/debug/couchlink|" deploy/couchlink-rollup.service \
  > "$work/couchlink-rollup.service"
cp deploy/couchlink-rollup.timer "$work/"
problems=$(systemd-analyze verify "$work/couchlink-rollup.service" "$work/couchlink-rollup.timer" 2>&1) || true
if [ -n "$problems" ]; then echo "deploy/couchlink-rollup.service and its timer: $problems" >&2; exit 1; fi
# The roll-up's command line is one couchlink accepts (its flags parsed, nothing run).
echo check > "$work/couchdb-admin-password"
rollup=$(sed -n 's|^ExecStart=/usr/local/bin/couchlink ||p' deploy/couchlink-rollup.service | sed "s|\${CREDENTIALS_DIRECTORY}|$work|")
# shellcheck disable=SC2086 # the unit's words
out=$(target/debug/couchlink $rollup --help 2>&1) || { echo "deploy/couchlink-rollup.service: $out" >&2; exit 1; }
echo "deploy/couchlink-rollup.service, couchlink-rollup.timer: valid"
promtool check rules deploy/couchlink-alerts.yml > /dev/null || { promtool check rules deploy/couchlink-alerts.yml; exit 1; }
promtool test rules deploy/couchlink-alerts.test.yml > /dev/null || { promtool test rules deploy/couchlink-alerts.test.yml; exit 1; }
echo "deploy/couchlink-alerts.yml: valid, and its tests pass"

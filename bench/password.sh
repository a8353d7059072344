#!/usr/bin/env bash
# What a link's password costs once its verdict is remembered: 1000 password-protected links
# against 1000 plain links on one couchlink, every request sending the right password (plain
# links ignore it), in interleaved rounds. Each protected link's first request costs an Argon2id
# hash (done in a warm-up, and counted); the rounds measure the requests after it. Target: CPU
# per request of the protected links at most 1.1x the plain ones'.
#
#   bench/password.sh                       # 5 interleaved rounds of 10 s
#   BENCH_ROUNDS=3 BENCH_SECONDS=5 bench/password.sh
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${BENCH_SECONDS:-10}
rounds=${BENCH_ROUNDS:-5}
workers=${BENCH_WORKERS:-$(nproc)}
links=1000
. bench/lib.sh
bench_start password
couchdb_with_links "$(free_port)" "$links"
couch_port=${couch##*:}
cp "$BENCH_IDS" "$work/plain.txt"
# One hash made by couchlink itself, then given to every protected link.
printf 'staff only\n' >"$work/password"
made=$(COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=admin COUCHLINK_COUCHDB_PASSWORD=admin \
  target/release/couchlink create https://example.com/staff --password-file "$work/password" --public-url https://0x1f.ie)
python3 bench/helpers.py protected "$couch_port" links admin admin "$work/protected.txt" "$links" "${made##*/}"
port=$(free_port); admin=$(free_port)
COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader \
  COUCHLINK_LISTEN=127.0.0.1:$port COUCHLINK_ADMIN_LISTEN=127.0.0.1:$admin COUCHLINK_LOG_DIR=$work/logs \
  COUCHLINK_WORKERS=$workers target/release/couchlink serve 2>"$work/serve.err" &
pids+=($!); pid=$!
wait_http "http://127.0.0.1:$admin/metrics"
wait_cache_full "$admin" $((2 * links + 1))
authorization="Authorization: $(python3 bench/helpers.py auth visitor 'staff only')"
metric() { curl -fsS "http://127.0.0.1:$admin/metrics" | sed -n "s/^$1 //p"; }
# Every protected link's one hash, then the same warm-up for the plain ones.
echo "== $(date -u +%H:%M:%S) warming up: one hash per protected link"
for _ in $(seq 1 60); do
  BENCH_IDS=$work/protected.txt wrk -t1 -c64 -d2s -H "$authorization" -s bench/random.lua "http://127.0.0.1:$port" >/dev/null
  [ "$(metric couchlink_password_hashes_total)" -ge "$links" ] && break
done
hashed=$(metric couchlink_password_hashes_total)
[ "$hashed" -ge "$links" ] || { echo "only $hashed of $links protected links checked after the warm-up" >&2; exit 1; }
BENCH_IDS=$work/plain.txt wrk -t1 -c64 -d3s -H "$authorization" -s bench/random.lua "http://127.0.0.1:$port" >/dev/null
round() {
  BENCH_IDS=$work/$1.txt with_cpu "$pid" wrk -t1 -c64 -d"${seconds}s" -H "$authorization" -s bench/random.lua \
    "http://127.0.0.1:$port"
}
echo "== $(date -u +%H:%M:%S) $rounds rounds of ${seconds}s each, protected links against plain links"
interleaved password plain protected round
after=$(metric couchlink_password_hashes_total)
asked=$(metric 'couchlink_responses_total{status="401"}')
echo
echo "couchlink $(git rev-parse --short HEAD)$(git diff --quiet || echo "+changes"): password-protected links (the right password on every request) against plain links ($(date -u +%Y-%m-%d), $(nproc) cores, $workers workers, wrk -t1 -c64, $links links each, median (min-max) of $rounds interleaved rounds x ${seconds}s)"
printf 'req/s  plain %-24s protected %-24s %s\n' "$(stat password plain rps)" "$(stat password protected rps)" "$(ratio "$(med password protected rps)" "$(med password plain rps)")"
printf 'CPU us plain %-24s protected %-24s %s   (target <= 1.1)\n' "$(stat2 password plain cpu_us)" "$(stat2 password protected cpu_us)" "$(ratio "$(med password protected cpu_us)" "$(med password plain cpu_us)")"
echo "hashes  $hashed in the warm-up ($links protected links), $((after - hashed)) during the rounds; 401 answers: $asked"
echo "errors (wrk)  $(cat "$work"/password.* | tr ' ' '\n' | sed -n 's/^errors=//p' | awk '{s += $1} END {print s + 0}') (all rounds)"

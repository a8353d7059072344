#!/usr/bin/env bash
# One couchlink serving one short domain against one serving ten, in the same run, rounds
# interleaved: CPU per cached redirect (the issue's floor: ten domains at most 1.05x one) and
# memory per cached link. Both hold the same number of links (ten domains: a tenth each, in ten
# databases) and are driven alike over loopback by wrk with random IDs; the ten-domain one gets
# each request's Host at random among its domains. Prints ratios, never a bare figure alone.
#
#   bench/domains.sh                               # 100k links, 5 rounds of 10 s
#   BENCH_LINKS=20000 BENCH_SECONDS=5 BENCH_ROUNDS=2 bench/domains.sh
set -euo pipefail
cd "$(dirname "$0")/.."
links=${BENCH_LINKS:-100000}
seconds=${BENCH_SECONDS:-10}
rounds=${BENCH_ROUNDS:-5}
connections=${BENCH_CONNECTIONS:-64}
threads=${BENCH_THREADS:-1}
workers=${BENCH_WORKERS:-$(nproc)}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
cargo build --release --locked -q
couchdb/install.sh

. bench/lib.sh
bench_work domains
export NODE_NO_WARNINGS=1
couch_port=$(free_port)
couch=http://127.0.0.1:$couch_port
echo "== $(date -u +%H:%M:%S) the local CouchDB API: one database of $links links, ten of $((links / 10))"
couchdb/local-couchdb.sh --port "$couch_port" --admin admin:admin >/dev/null &
pids+=($!)
wait_http "$couch/"
setup() {
  COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=admin COUCHLINK_COUCHDB_PASSWORD=admin COUCHLINK_DB=$1 \
    COUCHLINK_READER_ROLE=bench:reader COUCHLINK_EDITOR_ROLE=bench:editor COUCHLINK_READER_PASSWORD=reader \
    target/release/couchlink setup >/dev/null
}
setup one
python3 bench/helpers.py load "$couch_port" one admin admin "$work/ids-one.txt" "$links"
domains=""; hosts=""
for k in $(seq 0 9); do
  setup "ten_$k"
  python3 bench/helpers.py load "$couch_port" "ten_$k" admin admin "$work/ids-ten.txt" $((links / 10))
  domains="$domains${domains:+,}d$k.test=ten_$k"; hosts="$hosts${hosts:+,}d$k.test"
done

# start NAME PORT ADMIN_PORT VAR=VALUE...: couchlink warmed up, its pid in $started.
start() {
  local name=$1 port=$2 admin=$3; shift 3
  env COUCHLINK_COUCHDB_URL="$couch" COUCHLINK_COUCHDB_USER=couchlink-reader COUCHLINK_COUCHDB_PASSWORD=reader \
    COUCHLINK_LISTEN="127.0.0.1:$port" COUCHLINK_ADMIN_LISTEN="127.0.0.1:$admin" COUCHLINK_LOG_DIR="$work/logs-$name" \
    COUCHLINK_STATE_DIR="$work/state-$name" COUCHLINK_WORKERS="$workers" COUCHLINK_CACHE_CAPACITY=$((links * 2)) "$@" \
    target/release/couchlink serve 2>"$work/$name.err" &
  started=$!
  pids+=($started)
  # Healthy and warmed up: every link in memory before anything is counted.
  for _ in $(seq 1 600); do
    case "$(curl -fsS "http://127.0.0.1:$admin/healthz" 2>/dev/null || true)" in
      "" | *warming*) sleep 0.1 ;;
      *) return 0 ;;
    esac
  done
  echo "couchlink ($name) never warmed up" >&2; tail "$work/$name.err" >&2; exit 1
}
one_port=$(free_port); one_admin=$(free_port); ten_port=$(free_port); ten_admin=$(free_port)
start one "$one_port" "$one_admin" COUCHLINK_DB=one
one_pid=$started
start ten "$ten_port" "$ten_admin" COUCHLINK_DOMAINS="$domains"
ten_pid=$started
rss_one=$(python3 bench/helpers.py rss "$one_pid"); rss_ten=$(python3 bench/helpers.py rss "$ten_pid")

: >"$work/one"; : >"$work/ten"
for round in $(seq 1 "$rounds"); do
  order="one ten"; [ $((round % 2)) -eq 0 ] && order="ten one"
  for who in $order; do
    if [ "$who" = one ]; then
      BENCH_IDS=$work/ids-one.txt BENCH_HOSTS=d0.test with_cpu "$one_pid" \
        wrk -t"$threads" -c"$connections" -d"${seconds}s" -s bench/hosts.lua "http://127.0.0.1:$one_port"
    else
      BENCH_IDS=$work/ids-ten.txt BENCH_HOSTS=$hosts with_cpu "$ten_pid" \
        wrk -t"$threads" -c"$connections" -d"${seconds}s" -s bench/hosts.lua "http://127.0.0.1:$ten_port"
    fi | grep RESULT >>"$work/$who"
  done
  echo "round $round of $rounds done" >&2
done
cached() { curl -fsS "http://127.0.0.1:$1/metrics" | awk '$1 ~ /^couchlink_cache_entries/ { s += $2 } END { print s }'; }
misses() { curl -fsS "http://127.0.0.1:$1/metrics" | awk '$1 ~ /^couchlink_cache_misses_total/ { s += $2 } END { print s }'; }
echo "couchlink with one domain and with ten ($(date -u +%Y-%m-%d), $(nproc) cores, $workers workers each, wrk -t$threads -c$connections, $links links each, median of $rounds interleaved rounds x ${seconds}s)"
for who in one ten; do
  printf '%-4s rps %s  cpu_us/request %s  errors %s\n' "$who" \
    "$(field rps <"$work/$who" | median)" "$(grep -o 'cpu_us=[0-9.]*' "$work/$who" | cut -d= -f2 | median)" \
    "$(grep -o 'errors=[0-9]*' "$work/$who" | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }')"
done
cpu_one=$(grep -o 'cpu_us=[0-9.]*' "$work/one" | cut -d= -f2 | median)
cpu_ten=$(grep -o 'cpu_us=[0-9.]*' "$work/ten" | cut -d= -f2 | median)
echo "cached links: one $(cached "$one_admin"), ten $(cached "$ten_admin"); cache misses while measured: one $(misses "$one_admin"), ten $(misses "$ten_admin")"
echo "RSS after warming: one $((rss_one / 1024)) MiB, ten $((rss_ten / 1024)) MiB (ratio $(ratio "$rss_ten" "$rss_one"))"
echo "ten domains / one: $(ratio "$cpu_ten" "$cpu_one")x CPU per request (floor <= 1.05x)"

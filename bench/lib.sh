# Shell helpers the bench scripts share (sourced, not run).

# bench_start NAME: what a wrk bench against the local CouchDB API needs (wrk, a release build,
# pouchdb-server), then bench_work NAME.
bench_start() {
  command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
  cargo build --release --locked -q
  couchdb/install.sh
  bench_work "$1"
  # pouchdb-server warns about its own piled-up change listeners; nothing to act on here.
  export NODE_NO_WARNINGS=1
}

# bench_work NAME: a scratch folder, $work, for this run. On exit, every process in $pids, an
# nginx started there and whatever the script's own bench_stop stops (if it defines one) are
# stopped, then the folder goes.
bench_work() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/couchlink-$1.XXXXXX")
  pids=()
  trap bench_cleanup EXIT
}
bench_cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  if declare -F bench_stop >/dev/null; then bench_stop; fi
  wait 2>/dev/null || true
  rm -rf "$work"
}

# couchdb35_work NAME: bench_work NAME for a script against Apache CouchDB 3.5 ($couchdb_sh:
# COUCHLINK_COUCHDB_SH, else ../shared/couchdb/couchdb.sh beside the checkout), whose node under
# $work/couchdb and whose couchlink in $pid (when set) are stopped on exit.
couchdb35_work() {
  couchdb_sh=${COUCHLINK_COUCHDB_SH:-$(cd .. && pwd)/shared/couchdb/couchdb.sh}
  [ -x "$couchdb_sh" ] ||
    { echo "bench/$1.sh needs Apache CouchDB 3.5: set COUCHLINK_COUCHDB_SH to couchdb.sh" >&2; exit 1; }
  pid=
  bench_stop() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    "$couchdb_sh" stop "$work/couchdb" >/dev/null 2>&1 || true
  }
  bench_work "$1"
}

# couchdb_with_links PORT LINKS: the local CouchDB API on PORT (admin admin:admin), set up by
# this checkout's `couchlink setup` (reader account couchlink-reader:reader), holding LINKS links
# whose IDs are in $work/ids.txt (exported as BENCH_IDS); $couch is its URL.
couchdb_with_links() {
  local port=$1 links=$2
  couch=http://127.0.0.1:$port
  echo "== $(date -u +%H:%M:%S) starting the local CouchDB API and loading $links links"
  couchdb/local-couchdb.sh --port "$port" --admin admin:admin >/dev/null &
  pids+=($!)
  wait_http "$couch/"
  COUCHLINK_COUCHDB_URL=$couch COUCHLINK_COUCHDB_USER=admin COUCHLINK_COUCHDB_PASSWORD=admin \
    COUCHLINK_READER_PASSWORD=reader target/release/couchlink setup >/dev/null
  python3 bench/helpers.py load "$port" links admin admin "$work/ids.txt" "$links"
  export BENCH_IDS=$work/ids.txt
}

# A TCP port free on loopback now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# Waits (at most 30 s) until URL answers 2xx, else stops the script.
wait_http() { for _ in $(seq 1 300); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done; echo "no answer from $1" >&2; exit 1; }
# wait_cache ADMIN_PORT LINKS: waits (at most 5 minutes) until the couchlink whose admin listener
# is on ADMIN_PORT holds LINKS links in its cache.
wait_cache() {
  local entries
  for _ in $(seq 1 600); do
    entries=$(curl -fsS "http://127.0.0.1:$1/metrics" | awk '/^couchlink_cache_entries /{print $2}')
    [ "${entries:-0}" -ge "$2" ] && return 0
    sleep 0.5
  done
}
# wait_cache_full ADMIN_PORT LINKS: wait_cache, then (at most 10 more minutes) until its history
# has caught up, as in a running installation: a fresh start's recorder first writes an entry for
# every link, work a measured round must not share the machine with. (An older build says
# nothing of "starting"; a proxy standing by while another records is caught up.)
wait_cache_full() {
  wait_cache "$1" "$2"
  for _ in $(seq 1 1200); do
    curl -fsS "http://127.0.0.1:$1/healthz" 2>/dev/null |
      grep -qE '"history":\{[^}]*"status":"(catching up|starting)"' || return 0
    sleep 0.5
  done
}
# The value of NAME= in the last RESULT line wrk's report.lua printed (stdin).
field() { sed -n "s/.*RESULT.* $1=\([^ ]*\).*/\1/p" | tail -1; }
# The median of the numbers on stdin, one a line.
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
# cpu_ticks PID...: user + system CPU the processes have used so far, in clock ticks (all threads).
cpu_ticks() { for p in "$@"; do awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null; done | awk '{ s += $1 } END { print s + 0 }'; }
# sys_ticks PID...: the kernel's part of that (system time: the sockets' work, epoll, page faults).
sys_ticks() { for p in "$@"; do awk '{ print $15 }' "/proc/$p/stat" 2>/dev/null; done | awk '{ s += $1 } END { print s + 0 }'; }
# switches PID...: context switches (voluntary and not) of every thread of the processes so far.
switches() {
  for p in "$@"; do cat /proc/"$p"/task/*/status 2>/dev/null; done |
    awk '/^(non)?voluntary_ctxt_switches:/ { s += $2 } END { print s + 0 }'
}
# with_cpu PIDS COMMAND...: runs a wrk COMMAND and adds cpu_us= (the PIDS' CPU per request, in
# microseconds) and wrk_us= (wrk's own) to its RESULT line: what a request costs the server, which
# wrk's own limits (it shares the machine) do not hide the way they can hide throughput, and what
# it costs the client that shares the cores with it; sys_us= is the kernel's part of cpu_us. Also cs= (the PIDS' context switches per
# request) and, where perf can count system calls, epoll= (their epoll_wait calls per request):
# how often a server goes to sleep and is woken, which instructions do not show.
with_cpu() {
  local pids=$1; shift
  local before after sys_before sys_after cs_before cs_after line client perf_pid epolls TIMEFORMAT='%3U %3S'
  : >"$work/with_cpu.perf"
  if perf stat -e syscalls:sys_enter_epoll_wait -- true >/dev/null 2>&1; then
    perf stat -x, -e syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait -p "$(echo $pids | tr ' ' ,)" \
      -o "$work/with_cpu.perf" 2>/dev/null &
    perf_pid=$!
    sleep 0.2
  fi
  before=$(cpu_ticks $pids); sys_before=$(sys_ticks $pids); cs_before=$(switches $pids)
  # `time` reports wrk's user and system seconds on the group's stderr; wrk's own stderr is kept.
  client=$({ { time "$@" 2>&3 >"$work/with_cpu.out"; } 2>&1; } 3>&2)
  after=$(cpu_ticks $pids); sys_after=$(sys_ticks $pids); cs_after=$(switches $pids)
  if [ -n "${perf_pid:-}" ]; then kill -INT "$perf_pid" 2>/dev/null; wait "$perf_pid" 2>/dev/null || true; fi
  # Counted from a little before wrk to a little after: the idle server's calls in between are few.
  epolls=$(awk -F, '/epoll/ { s += $1 } END { print s + 0 }' "$work/with_cpu.perf")
  line=$(grep RESULT "$work/with_cpu.out")
  echo "$line" | sed -n 's/.*requests=\([0-9]*\).*/\1/p' |
    awk -v line="$line" -v d=$((after - before)) -v sys=$((sys_after - sys_before)) -v hz="$(getconf CLK_TCK)" -v client="$client" \
      -v cs=$((cs_after - cs_before)) -v ep="$epolls" -v perf="${perf_pid:+1}" '{
      split(client, c, " ")
      printf "%s cpu_us=%.2f sys_us=%.2f wrk_us=%.2f cs=%.4f", line, $1 ? d * 1e6 / hz / $1 : 0, $1 ? sys * 1e6 / hz / $1 : 0, $1 ? (c[1] + c[2]) * 1e6 / $1 : 0, $1 ? cs / $1 : 0
      if (perf) printf " epoll=%.4f", $1 ? ep / $1 : 0
      printf "\n" }'
}

# start_nginx DIR PORT WORKERS EVENTS: the reference server, nginx answering every path with the
# 302 couchlink would send (a Set-Cookie, Cache-Control, an access log line), in DIR (its pid in
# DIR/nginx.pid). EVENTS is the body of its events block ("" for nginx's defaults).
start_nginx() {
  local dir=$1 port=$2 workers=$3 events=$4
  mkdir -p "$dir/nginx"
  cat >"$dir/nginx.conf" <<NGINX
worker_processes $workers;
pid $dir/nginx.pid;
error_log $dir/nginx/error.log;
events { $events }
http {
  client_body_temp_path $dir/nginx; proxy_temp_path $dir/nginx; fastcgi_temp_path $dir/nginx;
  uwsgi_temp_path $dir/nginx; scgi_temp_path $dir/nginx;
  log_format redirects '\$msec \$remote_addr \$cookie_tid \$http_user_agent \$request_uri \$status \$sent_http_location';
  access_log $dir/nginx/access.log redirects;
  server {
    listen 127.0.0.1:$port;
    location / {
      add_header Set-Cookie "tid=20261122101733a3f9c1e2b7d4e601; Path=/; Max-Age=63072000; HttpOnly; SameSite=Lax" always;
      add_header Cache-Control no-store always;
      return 302 https://example.com/landing\$uri?utm_source=qr;
    }
  }
}
NGINX
  nginx -c "$dir/nginx.conf" -p "$dir/nginx"
}

# interleaved NAME A B COMMAND...: $rounds rounds in which A and B take turns going first (so
# neither always meets a warmer or busier machine), each running `COMMAND... WHO`, whose output
# (one wrk summary) goes to $work/NAME.WHO.
interleaved() {
  local name=$1 a=$2 b=$3 order; shift 3
  : >"$work/$name.$a"; : >"$work/$name.$b"
  for round in $(seq 1 "$rounds"); do
    order="$a $b"; [ $((round % 2)) -eq 0 ] && order="$b $a"
    for who in $order; do "$@" "$who" >>"$work/$name.$who"; done
  done
}

# stat NAME WHO FIELD [DECIMALS]: "median (min-max)" of FIELD over the rounds in $work/NAME.WHO.
stat() {
  tr ' ' '\n' <"$work/$1.$2" | sed -n "s/^$3=//p" | sort -g |
    awk -v p="${4:-0}" '{ v[NR] = $1 } END { printf "%." p "f (%." p "f-%." p "f)", v[int((NR + 1) / 2)], v[1], v[NR] }'
}
# stat2: the same with two decimals (CPU microseconds per request).
stat2() { stat "$1" "$2" "$3" 2; }
# med NAME WHO FIELD: the median of FIELD over the rounds.
med() { tr ' ' '\n' <"$work/$1.$2" | sed -n "s/^$3=//p" | median; }

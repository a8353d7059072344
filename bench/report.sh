#!/usr/bin/env bash
# `couchlink report` against GoAccess and an awk one-liner over the same generated access log,
# in one run, rounds interleaved; prints lines/s, ratios and peak RSS (never a bare time alone:
# the ratios are what holds on a shared, noisy machine).
#
#   bench/report.sh                                   # 1M lines, 3 rounds
#   BENCH_LOG_LINES=500000 BENCH_ROUNDS=5 bench/report.sh
#
# couchlink: `couchlink report --format json` (every per-link, per-version and per-day count);
# couchlink-by: the same with every breakdown (`--by campaign --by device --geoip DB`).
# GoAccess (Debian's goaccess): the README's log format, JSON output, on a file padded to 7
# fields beforehand (the README's recipe pipes it; the padding is left out of its time);
# goaccess-geo: the same with the same country database (its OS, browser and geolocation panels).
# The database: bench/geoip_db.rs, about 300,000 networks in MaxMind's format.
# awk (Debian's default, mawk): 302s per request target, the simplest useful count.
set -euo pipefail
cd "$(dirname "$0")/.."
lines=${BENCH_LOG_LINES:-1000000}
rounds=${BENCH_ROUNDS:-3}
command -v goaccess >/dev/null || { apt-get update -qq && apt-get install -y -qq goaccess >/dev/null; }
cargo build --release --locked -q
cargo build --release --locked -q --example bench-geoip

work=$(mktemp -d "${TMPDIR:-/tmp}/couchlink-report-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
python3 bench/logs.py generate "$work/access.log" "$lines"
awk 'NF == 6 { $0 = $0 " -" } 1' "$work/access.log" > "$work/padded.log"
gzip -c "$work/access.log" > "$work/access.log.gz"
target/release/examples/bench-geoip "$work/country.mmdb" 2>/dev/null
echo "log: $(wc -l < "$work/access.log") lines, $(du -m "$work/access.log" | cut -f1) MiB ($(du -m "$work/access.log.gz" | cut -f1) MiB gzipped); $(nproc) cores; awk is $(readlink -f "$(command -v awk)")"

measure() { python3 bench/logs.py measure "$@"; }
for round in $(seq 1 "$rounds"); do
  echo "couchlink $(measure target/release/couchlink report --format json "$work/access.log")" >> "$work/results"
  echo "couchlink-gz $(measure target/release/couchlink report --format json "$work/access.log.gz")" >> "$work/results"
  echo "couchlink-by $(measure target/release/couchlink report --format json --by campaign --by device \
    --geoip "$work/country.mmdb" "$work/access.log")" >> "$work/results"
  echo "goaccess $(measure goaccess "$work/padded.log" --no-global-config --no-progress --log-format='%x.%^ %h %^ %u %U %s %^' \
    --datetime-format=%Y%m%d%H%M%S -o "$work/goaccess.json")" >> "$work/results"
  echo "goaccess-geo $(measure goaccess "$work/padded.log" --no-global-config --no-progress --log-format='%x.%^ %h %^ %u %U %s %^' \
    --datetime-format=%Y%m%d%H%M%S --geoip-database="$work/country.mmdb" -o "$work/goaccess-geo.json")" >> "$work/results"
  echo "awk $(measure awk '$6 == 302 { n[$5]++ } END { for (k in n) print k, n[k] }' "$work/access.log")" >> "$work/results"
  echo "round $round of $rounds done" >&2
done

python3 - "$work/results" "$lines" <<'PY'
import statistics, sys
runs = {}
for row in open(sys.argv[1]):
    name, seconds, rss = row.split()
    runs.setdefault(name, []).append((float(seconds), int(rss)))
lines = int(sys.argv[2])
med = {name: statistics.median(s for s, _ in r) for name, r in runs.items()}
rss = {name: max(m for _, m in r) for name, r in runs.items()}
print(f"{'':<14}{'lines/s':>12}{'spread':>26}{'peak RSS':>12}")
for name in ["couchlink", "couchlink-gz", "couchlink-by", "goaccess", "goaccess-geo", "awk"]:
    rates = sorted(lines / s for s, _ in runs[name])
    print(f"{name:<14}{lines / med[name]:>12,.0f}{f'{rates[0]:,.0f} - {rates[-1]:,.0f}':>26}{rss[name] / 1024:>9.1f} MiB")
print(f"couchlink / GoAccess: {med['goaccess'] / med['couchlink']:.1f}x lines/s (floor >= 50x), "
      f"peak RSS {rss['couchlink'] / rss['goaccess']:.2f}x (floor <= 0.5x)")
print(f"couchlink / awk:      {med['awk'] / med['couchlink']:.2f}x lines/s (floor >= 2x)")
print(f"with breakdowns:      {med['goaccess-geo'] / med['couchlink-by']:.1f}x GoAccess's lines/s with its OS, browser and "
      f"country panels (floor >= 20x), peak RSS {rss['couchlink-by'] / rss['goaccess-geo']:.2f}x (floor <= 1x)")
print(f"gzipped / plain:      {med['couchlink'] / med['couchlink-gz']:.2f}x lines/s (one gzip stream is read by one thread)")
PY

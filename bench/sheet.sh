#!/usr/bin/env bash
# A print run of 1,000 links: `couchlink qr --sheet a4` against the same tags as 1,000 PNG files
# (`--out DIR`), in one run: seconds and peak RSS of each, and their ratios. Offline: no CouchDB.
#
#   bench/sheet.sh              # 1000 links, 3 rounds each
#   BENCH_LINKS=5000 bench/sheet.sh
set -euo pipefail
cd "$(dirname "$0")/.."
links=${BENCH_LINKS:-1000}
rounds=${BENCH_ROUNDS:-3}
. bench/lib.sh
[ -x /usr/bin/time ] || { echo "bench/sheet.sh needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
cargo build --release --locked -q
bench_work sheet
python3 -c "import sys; sys.path.insert(0, 'bench'); import helpers; print(' '.join(helpers.ids($links)))" >"$work/ids"
# measure NAME ARGS...: one run's wall seconds and peak RSS (KiB), appended to $work/NAME.
measure() {
  local name=$1; shift
  /usr/bin/time -f "seconds=%e rss_kib=%M" -o "$work/time" target/release/couchlink qr --public-url https://0x1f.ie "$@" \
    $(cat "$work/ids") 2>/dev/null
  cat "$work/time" >>"$work/run.$name"
}
for _ in $(seq 1 "$rounds"); do
  measure sheet --sheet a4 --out "$work/sheet.pdf"
  rm -rf "$work/pngs"; measure pngs --out "$work/pngs"
done
pages=$(python3 -c "import re,sys; print(max(int(n) for n in re.findall(rb'/Count (\d+)', open(sys.argv[1],'rb').read())))" "$work/sheet.pdf")
echo "couchlink $(git rev-parse --short HEAD)$(git diff --quiet || echo "+changes"): $links links, median of $rounds rounds"
printf 'seconds  sheet (PDF, %s pages, %s KiB) %s   PNG files %s   %s\n' "$pages" "$(( $(wc -c <"$work/sheet.pdf") / 1024 ))" \
  "$(med run sheet seconds)" "$(med run pngs seconds)" "$(ratio "$(med run sheet seconds)" "$(med run pngs seconds)")"
printf 'peak RSS sheet %s KiB   PNG files %s KiB   %s\n' "$(med run sheet rss_kib)" "$(med run pngs rss_kib)" \
  "$(ratio "$(med run sheet rss_kib)" "$(med run pngs rss_kib)")"

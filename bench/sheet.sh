#!/usr/bin/env bash
# A print run of 1,000 links: `couchlink qr --sheet a4` against the same tags as 1,000 PNG files
# (`--out DIR`), in one run: seconds and peak RSS of each, and their ratios; then a sheet ten
# times as long (its peak RSS should not grow: the PDF is written a page at a time), the same
# sheet as SVG pages, and with a logo (every tag read back). Offline: no CouchDB.
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
python3 -c "import sys; sys.path.insert(0, 'bench'); import helpers; print('\\n'.join(helpers.ids($links)))" >"$work/ids"
python3 -c "import sys; sys.path.insert(0, 'bench'); import helpers; print('\\n'.join(helpers.ids($links * 10)))" >"$work/ids10"
printf '%s' '<svg xmlns="http://www.w3.org/2000/svg" width="48" height="48" viewBox="0 0 64 64"><rect width="64" height="64" rx="12" fill="#e4572e"/><path d="M16 44 L32 16 L48 44 Z" fill="#fff"/></svg>' >"$work/logo.svg"
# measure NAME IDS ARGS...: one run's wall seconds and peak RSS (KiB), appended to $work/NAME.
measure() {
  local name=$1 ids=$2; shift 2
  /usr/bin/time -f "seconds=%e rss_kib=%M" -o "$work/time" target/release/couchlink qr --public-url https://0x1f.ie "$@" \
    --ids-from "$work/$ids" 2>/dev/null
  cat "$work/time" >>"$work/run.$name"
}
for _ in $(seq 1 "$rounds"); do
  measure sheet ids --sheet a4 --out "$work/sheet.pdf"
  rm -rf "$work/pngs"; measure pngs ids --out "$work/pngs"
  measure sheet10 ids10 --sheet a4 --out "$work/sheet10.pdf"
  rm -f "$work"/svg*.svg; measure svg ids --sheet a4 --out "$work/svg.svg"
  measure logo ids --sheet a4 --logo "$work/logo.svg" --out "$work/logo.pdf"
done
pages=$(python3 -c "import re,sys; print(max(int(n) for n in re.findall(rb'/Count (\d+)', open(sys.argv[1],'rb').read())))" "$work/sheet.pdf")
echo "couchlink $(git rev-parse --short HEAD)$(git diff --quiet || echo "+changes"): $links links, median of $rounds rounds"
printf 'seconds  sheet (PDF, %s pages, %s KiB) %s   PNG files %s   %s\n' "$pages" "$(( $(wc -c <"$work/sheet.pdf") / 1024 ))" \
  "$(med run sheet seconds)" "$(med run pngs seconds)" "$(ratio "$(med run sheet seconds)" "$(med run pngs seconds)")"
printf 'peak RSS sheet %s KiB   PNG files %s KiB   %s\n' "$(med run sheet rss_kib)" "$(med run pngs rss_kib)" \
  "$(ratio "$(med run sheet rss_kib)" "$(med run pngs rss_kib)")"
printf '%s links: seconds %s (%s of %s links)   peak RSS %s KiB (%s)\n' "$(( links * 10 ))" "$(med run sheet10 seconds)" \
  "$(ratio "$(med run sheet10 seconds)" "$(med run sheet seconds)")" "$links" "$(med run sheet10 rss_kib)" \
  "$(ratio "$(med run sheet10 rss_kib)" "$(med run sheet rss_kib)")"
printf 'SVG pages: seconds %s (%s of the PDF)   peak RSS %s KiB\n' "$(med run svg seconds)" \
  "$(ratio "$(med run svg seconds)" "$(med run sheet seconds)")" "$(med run svg rss_kib)"
printf 'with a logo: seconds %s (%s of the PDF)   peak RSS %s KiB\n' "$(med run logo seconds)" \
  "$(ratio "$(med run logo seconds)" "$(med run sheet seconds)")" "$(med run logo rss_kib)"

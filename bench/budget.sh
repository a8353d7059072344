#!/usr/bin/env bash
# The redirect path's budget: instructions and allocations per request of each scenario of
# benches/budget.rs (plain links, a browser with its cookie, a link with rules, 404s, a path
# and query appended, pipelining, a connection per request, several domains), counted under
# Valgrind's callgrind: the same figures on every run, whatever else the machine is doing.
#
#   bench/budget.sh            # measures, and prints each figure against bench/budget.txt
#   bench/budget.sh --check    # the same, failing when a figure is more than 3% off the file
#   bench/budget.sh --write    # measures and writes bench/budget.txt (a deliberate change)
#   BUDGET_WHY="..." bench/budget.sh --write   # the same, with the reason as a comment line
#
# .ci/run runs --check: a change that makes a request dearer (or cheaper) by more than 3% fails
# CI unless bench/budget.txt changes in the same commit, so that every cost is a reviewed line.
# Counts depend on the toolchain, Cargo.lock and the CPU valgrind presents; they are measured on
# the project's CI machine kind (x86_64, rust-version's toolchain).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-show}
budget_file=bench/budget.txt
tolerance=${BUDGET_TOLERANCE:-0.03}
command -v valgrind >/dev/null ||
  { echo "bench/budget.sh needs valgrind (apt-get install valgrind)" >&2; exit 1; }

cargo bench --bench budget --locked --no-run
bin=$(cargo bench --bench budget --locked --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "budget" and m.get("executable"):
        print(m["executable"])')
[ -x "$bin" ] || { cargo bench --bench budget --locked --no-run >&2; echo "no benchmark binary" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/couchlink-budget.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Collected only inside `measured`, on the thread that runs it (the access log's own threads,
# which wake on a timer, are left out), and dumped after each call: dump N is the N-th line the
# binary prints. Run several times, each scenario's least count kept: the allocator's pages
# (mimalloc's) are freed and taken fresh per request in one of two steady states, chosen by how
# the serving thread and the log's thread happened to interleave at start (a connection per
# request: 20.8k or 24.4k instructions, the same build), and the lower is the path's own cost.
runs=${BUDGET_RUNS:-9}
for run in $(seq "$runs"); do
  mkdir "$work/$run"
  valgrind --tool=callgrind --collect-atstart=no --toggle-collect='budget::measured' \
    --dump-after='budget::measured' --callgrind-out-file="$work/$run/cg.out" "$bin" >"$work/$run/runs" \
    2>"$work/$run/valgrind.log" ||
    { cat "$work/$run/valgrind.log" >&2; echo "the benchmark failed under valgrind" >&2; exit 1; }
done

python3 - "$work" "$budget_file" "$mode" "$tolerance" "$runs" "${BUDGET_WHY:-}" <<'PY'
import glob, os, sys
work, budget_file, mode, tolerance = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
def number(path):
    return int(path.rsplit(".", 1)[1])
def total(path):
    for line in open(path):
        if line.startswith("totals:") or line.startswith("summary:"):
            return int(line.split()[1])
    sys.exit(f"no total in {path}")
figures = {}
for run in range(1, int(sys.argv[5]) + 1):
    runs = [line.split() for line in open(f"{work}/{run}/runs") if not line.startswith("#")]
    dumps = sorted((p for p in glob.glob(f"{work}/{run}/cg.out.*") if p.rsplit(".", 1)[1].isdigit()), key=number)
    if len(dumps) != len(runs):
        sys.exit(f"{len(runs)} measured runs but {len(dumps)} callgrind dumps")
    measured = {}
    for (name, requests, allocations, _), dump in zip(runs, dumps):
        measured.setdefault(name, []).append((int(requests), int(allocations), total(dump)))
    for name, ((n1, a1, i1), (n2, a2, i2)) in measured.items():
        # One allocation fewer in the longer run (a log batch handed over in the shorter) is not
        # a negative cost.
        these = ((i2 - i1) / (n2 - n1), max((a2 - a1) / (n2 - n1), 0.0))
        least = figures.get(name, these)
        figures[name] = (min(least[0], these[0]), min(least[1], these[1]))

if mode == "--write":
    with open(budget_file, "w") as f:
        f.write("# The redirect path's budget: instructions and allocations per request of each scenario of\n"
                "# benches/budget.rs, as bench/budget.sh counts them (callgrind). CI fails when a figure is\n"
                "# more than 3% off; a deliberate change rewrites this file in the same commit\n"
                "# (bench/budget.sh --write), so that the cost is a line someone reviewed.\n")
        if sys.argv[6]:
            f.write(f"# Why it last changed: {sys.argv[6]}\n")
        f.write("# scenario   instructions  allocations\n")
        for name, (instructions, allocations) in figures.items():
            f.write(f"{name:<12} {instructions:>12.0f} {allocations:>12.2f}\n")
    print(f"wrote {budget_file}")

budget = {}
if os.path.exists(budget_file):
    for line in open(budget_file):
        parts = line.split()
        if parts and not line.startswith("#"):
            budget[parts[0]] = (float(parts[1]), float(parts[2]))

failed = []
print(f"{'scenario':<12} {'instructions/request':>22} {'budget':>8} {'ratio':>6}   {'allocations/request':>20} {'budget':>7}")
for name, (instructions, allocations) in figures.items():
    b_ins, b_alloc = budget.get(name, (float("nan"), float("nan")))
    ratio = instructions / b_ins if b_ins == b_ins else float("nan")
    print(f"{name:<12} {instructions:>22.0f} {b_ins:>8.0f} {ratio:>6.3f}   {allocations:>20.2f} {b_alloc:>7.2f}")
    if mode == "--check":
        if name not in budget:
            failed.append(f"{name}: not in {budget_file}")
            continue
        if abs(ratio - 1) > tolerance:
            way = "more" if ratio > 1 else "fewer"
            failed.append(f"{name}: {instructions:.0f} instructions per request, {abs(ratio - 1):.1%} {way} than the budget's {b_ins:.0f}")
        # Allocations are few per request: 3%, and at least 0.02 of one (a batch of the log
        # handed over in one run and not the other), either way.
        if abs(allocations - b_alloc) > max(tolerance * b_alloc, 0.02):
            failed.append(f"{name}: {allocations:.2f} allocations per request, the budget says {b_alloc:.2f}")
for name in budget:
    if name not in figures and mode == "--check":
        failed.append(f"{name}: in {budget_file} but not measured")
if failed:
    print("\nthe redirect path's budget does not hold:\n  " + "\n  ".join(failed) +
          f"\nA deliberate change: bench/budget.sh --write, and commit {budget_file} with it.", file=sys.stderr)
    sys.exit(1)
PY

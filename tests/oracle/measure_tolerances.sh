#!/usr/bin/env bash
# Measures the oracle's errors over many input draws, for the tolerance table
# (tests/oracle/tolerances.cpp): runs each oracle executable with KILN_ORACLE_SEED=0..N-1 and
# KILN_ORACLE_MEASURE, and prints per (op, dtype, backend) the worst |got - oracle| / (1 + |oracle|)
# over every problem, element and seed, beside the tolerance row that applies now (its t: the
# larger of rtol and atol) and their ratio. A row's measured bound is this worst times a margin.
#   tests/oracle/measure_tolerances.sh 20 build/tests/kiln_tests_oracle build/tests/kiln_tests_oracle_emu
# (the CPU oracle runs with KILN_ORACLE_DEVICES=cpu; the emulator's checks backend "emu"; cuDNN's
# errors are measured on a GPU: KILN_ORACLE_DEVICES=cuda with the GPU build's kiln_tests_oracle.)
set -euo pipefail
n=${1:?usage: measure_tolerances.sh SEEDS ORACLE...}
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for exe in "$@"; do
  for ((k = 0; k < n; ++k)); do
    # A seed whose errors pass the current rows is what the table needs; one that fails is said
    # (its errors are measured all the same).
    KILN_ORACLE_DEVICES="${KILN_ORACLE_DEVICES:-cpu}" KILN_ORACLE_SEED=$k KILN_ORACLE_MEASURE="$work/$(basename "$exe").$k.tsv" \
      ASAN_OPTIONS=detect_leaks=0 "$exe" --no-intro >"$work/log" 2>&1 ||
      echo "measure_tolerances: $(basename "$exe") seed $k: $(grep -c 'ERROR:' "$work/log") comparison(s) over the current rows:" \
           "$(grep -o 'ERROR: [a-z_0-9]* [a-z]*/[a-z]* on [^:]*' "$work/log" | sort -u | head -3 | tr '\n' ';')"
  done
done
# The rows that apply now: tolerances.cpp read as text (op, dtype, backend, rtol, atol).
python3 - "$(dirname "$0")/tolerances.cpp" "$work"/*.tsv <<'EOF'
import re, sys
rows = [(m[0], m[1], m[2], float(m[3]), float(m[4])) for m in
        re.findall(r'\{"([^"]+)", "([^"]+)", "([^"]+)", ([0-9.e-]+), ([0-9.e-]+),', open(sys.argv[1]).read())]
def row_for(op, dt, be):
    best, score = None, -1
    for r in rows:
        if all(p == "*" or p == v for p, v in zip(r[:3], (op, dt, be))):
            s = 4 * (r[0] != "*") + 2 * (r[1] != "*") + (r[2] != "*")
            if s > score:
                best, score = r, s
    return best
worst = {}
for path in sys.argv[2:]:
    for line in open(path):
        op, dt, be, t, n = line.split("\t")
        w, m = worst.get((op, dt, be), (0.0, 0))
        worst[(op, dt, be)] = (max(w, float(t)), m + int(n))
print(f"{'op':<26} {'dtype':<9} {'backend':<8} {'worst':>9} {'elements':>10} {'row t':>8} {'row/worst':>9}  row")
for (op, dt, be), (w, m) in sorted(worst.items()):
    r = row_for(op, dt, be)
    t = max(r[3], r[4]) if r else 0.0
    ratio = "exact" if w == 0 else f"{t / w:9.1f}"
    print(f"{op:<26} {dt:<9} {be:<8} {w:9.2e} {m:10d} {t:8.1e} {ratio:>9}  {r[0] + '/' + r[1] + '/' + r[2] if r else '-'}")
EOF

#!/usr/bin/env bash
# emu_device.gpu_check: tools/gpu-check end to end on the emulated CUDA device, as a lent GPU
# would run it, so that a script error (an argument, a path, a library path, a parser) is found
# here and not in a lease (docs/gpu.md):
#  1. `pack --emulated` from this build: the gpu tests read from CTest, the binaries and their
#     libraries, the .tar.xz under its size limit, and the binaries run in a root that holds only
#     glibc and libstdc++ (verify-pack);
#  2. `--emulated --pack <the .tar.xz>`: every step (preflight, each gpu test, compute-sanitizer's
#     two, the training run, each benchmark row beside the venv's CPU PyTorch) and the summary;
#  3. the checks below: the pack's test list is the build's, every step ran and passed or was
#     skipped for a reason this device has (no cuDNN, no NCCL, no compute-sanitizer), the summary
#     has every step and every benchmark row with its numbers, and the script exited 0.
# The zoo-net and training gpu tests run with the rest of the gpu label in this build's CTest
# (7 minutes emulated); here they are left out with --skip-tests and listed as such.
#   ctest --test-dir build-emu-device -R emu_device.gpu_check --output-on-failure
set -uo pipefail
src=$1 build=$2 work=$3
source "$src/tests/support/skip.sh"
fail() { echo "FAIL: $*"; exit 1; }

python="${KILN_TEST_PYTHON:-$src/.venv/bin/python}"
[[ -x "$python" ]] || skip_missing "python venv" "$python not found (tools/install-deps.sh --test makes it)"
"$python" -c 'import torch' 2>/dev/null || skip_missing "torch" "$python cannot import torch (tools/install-deps.sh --test)"
if [[ $(id -u) != 0 ]] && ! unshare -r true 2>/dev/null; then
  skip_unavailable "bare root" "verify-pack's chroot needs root or user namespaces"
fi

rm -rf "$work"
mkdir -p "$work"
"$src/tools/gpu-check" pack --emulated --no-build --build-dir "$build" "$work/pack" || fail "pack --emulated failed"
[[ -f "$work/pack.tar.xz" ]] || fail "pack wrote no $work/pack.tar.xz"

skip='^gpu\.test_gpu_(nets|nets_zoo|train)$'
OUT="$work/out" PYTHON="$python" "$src/tools/gpu-check" --emulated --pack "$work/pack.tar.xz" --skip-tests "$skip"
rc=$?
[[ $rc == 0 ]] || fail "tools/gpu-check --emulated exited $rc"
files=$(ls "$work/out")
[[ "$files" == $'gpu-check.log\nlogs.tar.gz\nsummary.md' ]] || fail "\$OUT holds '$files', not the three files a lease returns"
tar -C "$work" -xzf "$work/out/logs.tar.gz" logs/steps.tsv || fail "logs.tar.gz has no steps.tsv"
ctest --test-dir "$build" -N -L '^gpu$' | sed -n 's/^ *Test *#[0-9]*: //p' | sort >"$work/ctest-gpu.txt"

"$python" - "$work/pack/tests.tsv" "$work/ctest-gpu.txt" "$work/logs/steps.tsv" "$work/out/summary.md" "$skip" <<'EOF'
import re, sys
tests_tsv, ctest_list, steps_tsv, summary_md, skip = sys.argv[1:]
errors = []
pack_tests = [l.split("\t")[0] for l in open(tests_tsv) if l.strip()]
built = [l.strip() for l in open(ctest_list) if l.strip()]
if sorted(pack_tests) != sorted(built):
    errors.append(f"the pack's tests {sorted(pack_tests)} are not the build's gpu tests {sorted(built)}")
steps = [l.rstrip("\n").split("\t") for l in open(steps_tsv) if l.strip()]
status = {s[0]: (s[1], s[4]) for s in steps}
nets = ["mnist-cnn", "cifar10-cnn", "lstm-forecast"]
precisions = ["float32", "float16"]
bench = [f"bench.{who}-{p}-{m}" for m in nets for p in precisions for who in ("kiln-cudnn", "kiln-native", "torch")]
expected = ["preflight"] + pack_tests + ["memcheck", "racecheck", "train"] + bench
missing = [s for s in expected if s not in status]
if missing:
    errors.append(f"steps that did not run: {missing}")
extra = [s for s in status if s not in expected]
if extra:
    errors.append(f"steps nobody expected: {extra}")
# What this device lacks by design, and what the test leaves out, may be skipped; nothing else.
may_skip = {"gpu.test_cudnn": "cuDNN", "gpu.test_gpu_nccl": "NCCL", "memcheck": "emulated", "racecheck": "emulated"}
may_skip.update({s: "no cuDNN" for s in bench if "-cudnn-" in s})
may_skip.update({t: "left out" for t in pack_tests if re.search(skip, t)})
for name, (st, why) in status.items():
    if st == "passed":
        continue
    if st == "skipped" and name in may_skip and may_skip[name] in why:
        continue
    errors.append(f"step {name}: {st} ({why})")
text = open(summary_md).read()
for name in expected:
    if f"| {name} |" not in text:
        errors.append(f"the summary has no row for step {name}")
label = {"float32": "float32", "float16": "float16 AMP"}
for m in nets:
    for p in precisions:
        for mode in ("forward", "train"):
            row = re.search(rf"^\| {re.escape(m)} \| 2 \| {mode} \| {label[p]} \|(.*)$", text, re.M)
            if not row:
                errors.append(f"the benchmark table has no row {m} {mode} {p}")
                continue
            cells = [c.strip() for c in row.group(1).split("|")[:-1]]
            # kiln native, PyTorch, kiln/PyTorch (kiln cuDNN and native/cuDNN are '-': no cuDNN)
            for i, what in ((1, "kiln native"), (2, "PyTorch"), (3, "kiln/PyTorch")):
                try:
                    ok = float(cells[i]) > 0
                except ValueError:
                    ok = False
                if not ok:
                    errors.append(f"{m} {mode} {p}: {what} is '{cells[i]}', not a positive number")
for e in errors:
    print("FAIL:", e)
print(f"{len(steps)} steps, {len(errors)} errors")
sys.exit(1 if errors else 0)
EOF

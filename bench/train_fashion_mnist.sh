#!/usr/bin/env bash
# Training benchmark: mnist-cnn (the Keras example: Adam 1e-3, batch 128, 2 epochs) on
# Fashion-MNIST, kiln beside Debian's PyTorch 1.13 training the same net the same way in the same
# session (bench/baselines/pytorch_train.py). Prints each side's images/s per epoch, the test
# accuracy, and the kiln/PyTorch ratio of training images/s (median over epochs).
#   tools/install-deps.sh --all --test --baseline && cmake --build build
#   bench/train_fashion_mnist.sh [threads] [epochs]
set -euo pipefail
cd "$(dirname "$0")/.."
threads="${1:-$(nproc)}"
epochs="${2:-2}"
data=/usr/share/datasets/fashion-mnist
kiln="${KILN_BUILD_DIR:-build}/tools/kiln"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

echo "== kiln ($threads threads)"
"$kiln" train --model mnist-cnn --data "$data" --epochs "$epochs" --batch 128 --optimizer adam --lr 1e-3 \
    --threads "$threads" --logdir "$out/kiln" --quiet 2>&1 | tee "$out/kiln.txt" | grep -E "^epoch|^test"
echo "== PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)') ($threads threads)"
/usr/bin/python3 bench/baselines/pytorch_train.py --data "$data" --epochs "$epochs" --threads "$threads" \
    | tee "$out/torch.txt"

/usr/bin/python3 - "$out" <<'PY'
import csv, json, statistics, sys
out = sys.argv[1]
k = [float(r["images_per_second"]) for r in csv.DictReader(open(f"{out}/kiln/epochs.csv"))]
lines = [json.loads(l) for l in open(f"{out}/torch.txt") if l.startswith("{")]
t = [l["images_per_second"] for l in lines if "images_per_second" in l]
acc = [l["test_accuracy"] for l in lines if "test_accuracy" in l][0]
kt = [l for l in open(f"{out}/kiln.txt") if l.startswith("test:")][0]
print(f"kiln    images/s per epoch: {', '.join(f'{x:.0f}' for x in k)}   {kt.strip()}")
print(f"PyTorch images/s per epoch: {', '.join(f'{x:.0f}' for x in t)}   test top-1 {acc:.4f}")
print(f"kiln / PyTorch training images/s (median over epochs): {statistics.median(k) / statistics.median(t):.2f}")
PY

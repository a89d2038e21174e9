#!/usr/bin/env bash
# The table of record of kiln's CPU speed (issue 19): one run on a quiet machine, every figure a
# ratio measured in that run, beside the machine's measured peak. Writes into OUT (default
# /tmp/kiln-record):
#   peak.txt                    bench_peak: FMA peak per ISA and triad bandwidth, 1 and all threads
#   conv_<dtype>_<backend>.txt  bench_conv, channels-last, native vs onednn, float32 and bfloat16
#   nets_<dtype>_<batch>_native.txt   kiln --backend native
#   nets_<dtype>_<batch>_auto.txt     kiln auto with --vs-pytorch: PyTorch 2.x as installed and at
#                                     its best (channels-last, tuned malloc), Debian's PyTorch 1.13
#                                     at its best, onnxruntime on kiln's export (forward rows)
#   onnx_import.txt             the imported ONNX graph against the zoo net
#   layers_*.txt, ort_nodes.txt where the time goes: kiln --layers, onnxruntime's per-node profile,
#                               PyTorch's per-layer hooks
# Needs tools/install-deps.sh --baseline (the venv and Debian's python3-torch) and a built build/.
# About an hour on 2 cores. Don't build or test meanwhile.
#   bench/table_of_record.sh /tmp/record
set -u
cd "$(dirname "$0")/.." || exit 2
out=${1:-/tmp/kiln-record}
mkdir -p "$out"
K=build/tools/kiln
NETS=${NETS:-alexnet,overfeat,vgg11,googlenet,resnet50}
BATCHES=${BATCHES:-16 64}
py=.venv/bin/python
date -u +%Y-%m-%dT%H:%M:%SZ > "$out/start"
lscpu | grep "Model name" > "$out/cpu.txt"
build/bench/bench_peak > "$out/peak.txt" 2>&1
# AlexNet's, GoogLeNet's, VGG's and ResNet's convolution shapes, batch 16.
L="mb16ic3ih224oc64oh55kh11sh4ph2 mb16ic64ih27oc192oh27kh5ph2 mb16ic192ih13oc384oh13kh3ph1 mb16ic3ih224oc64oh112kh7sh2ph3 mb16ic64ih56oc64oh56kh3ph1 mb16ic128ih28oc128oh28kh3ph1 mb16ic256ih14oc256oh14kh3ph1 mb16ic512ih7oc512oh7kh3ph1 mb16ic128ih112oc128oh112kh3ph1 mb16ic256ih56oc512oh28kh1sh2"
for dt in float32 bfloat16; do
  for b in native onednn; do
    # shellcheck disable=SC2086
    build/bench/bench_conv --layout nhwc --dtype $dt --backend $b --threads 2 --reps 5 $L > "$out/conv_${dt}_$b.txt" 2>&1
  done
done
for dt in float32 bfloat16; do
  for b in $BATCHES; do
    if [ "$b" -le 16 ]; then it="--iters 5 --warmup 2"; else it="--iters 3 --warmup 1"; fi
    # shellcheck disable=SC2086
    $K bench --model "$NETS" --batch "$b" --mode forward,train $it --dtype $dt --backend native --no-progress \
      > "$out/nets_${dt}_${b}_native.txt" 2>&1
    # shellcheck disable=SC2086
    $K bench --model "$NETS" --batch "$b" --mode forward,train $it --dtype $dt --vs-pytorch --no-progress \
      --out "$out/nets_${dt}_${b}_auto.json" > "$out/nets_${dt}_${b}_auto.txt" 2>&1
  done
done
for m in resnet50 googlenet; do $K export --onnx "$out/$m.onnx" --model $m --batch 16 --static-batch > /dev/null; done
$K bench --model "resnet50,$out/resnet50.onnx,googlenet,$out/googlenet.onnx" --batch 16 --mode forward --iters 5 \
  --no-progress > "$out/onnx_import.txt" 2>&1
$K bench --model resnet50,googlenet --batch 16 --mode forward --iters 5 --layers --no-progress > "$out/layers_fwd_auto.txt" 2>&1
$py bench/baselines/onnxruntime_bench.py --run "$out/resnet50.onnx" resnet50 16 --run "$out/googlenet.onnx" googlenet 16 \
  --iters 5 --nodes 60 > "$out/ort_nodes.txt" 2>&1
$K bench --model vgg11 --batch 16 --mode train --iters 5 --layers --no-progress > "$out/layers_vgg11_train_auto.txt" 2>&1
$py bench/baselines/pytorch_layers.py --model vgg11 --batch 16 --mode train --channels-last \
  > "$out/layers_vgg11_train_pytorch.txt" 2>&1
$K bench --model alexnet,googlenet --batch 16 --mode forward,train --iters 5 --layers --backend native --no-progress \
  > "$out/layers_native.txt" 2>&1
$K bench --model alexnet,googlenet --batch 16 --mode forward,train --iters 5 --layers --backend onednn --no-progress \
  > "$out/layers_onednn.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$out/done"
echo "table_of_record: $out"

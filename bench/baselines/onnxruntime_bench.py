#!/usr/bin/env python3
"""Times ONNX models in onnxruntime exactly as `kiln bench` times forward passes, for side-by-side ratios.

`kiln bench --vs-pytorch` exports each zoo net of its forward rows to ONNX with kiln's own exporter
(io/onnx, the same weights and graph kiln runs; batch fixed to the timed one) and runs this script
on those files: onnxruntime's CPU execution provider, graph optimisation ORT_ENABLE_ALL,
intra-op threads = kiln's threads, one inter-op thread, sequential execution. Synthetic float32
input made once (fixed seed); `warmup` untimed runs, then `iters` timed runs of session.run.
Prints the same columns as `kiln bench` and, with --out, writes the same JSON as
`kiln bench --out` (backend "onnxruntime"; `kiln compare` and `kiln plot` read it).

    tools/install-deps.sh --baseline      # the venv (.venv) with onnxruntime and PyTorch 2.x
    build/tools/kiln export --onnx /tmp/alexnet.onnx --model alexnet --batch 16 --static-batch
    .venv/bin/python bench/baselines/onnxruntime_bench.py --run /tmp/alexnet.onnx alexnet 16 --threads 2
    build/tools/kiln bench --model alexnet --batch 16 --mode forward --vs-pytorch   # kiln/onnxruntime per row
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "cpu", "Processor") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return os.uname().machine


def session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])


def run(path, batch, iters, warmup, threads):
    sess = session(path, threads)
    inp = sess.get_inputs()[0]
    shape = [batch if i == 0 or not isinstance(d, int) else d for i, d in enumerate(inp.shape)]
    x = np.random.default_rng(1234).standard_normal(shape, dtype=np.float32)
    feed = {inp.name: x}
    outputs = [o.name for o in sess.get_outputs()]
    for _ in range(warmup):
        sess.run(outputs, feed)
    ms = []
    loop0 = time.perf_counter()
    for _ in range(iters):
        t0 = time.perf_counter()
        sess.run(outputs, feed)
        ms.append((time.perf_counter() - t0) * 1000)
    wall = time.perf_counter() - loop0
    med = statistics.median(ms)
    return {
        "ms": ms, "ms_min": min(ms), "ms_median": med, "ms_max": max(ms), "ms_mean": statistics.fmean(ms),
        "images_per_s": batch * 1000.0 / med, "wall_s": wall, "peak_bytes": None,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run", nargs=3, action="append", default=[], metavar=("FILE", "MODEL", "BATCH"),
                   help="an .onnx file, the model name its results carry, and the batch (repeatable)")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=2, help="intra-op threads (always explicit)")
    p.add_argument("--backend-name", default="onnxruntime", help="backend field of the results")
    p.add_argument("--out", default="", help="write the JSON of kiln bench --out")
    a = p.parse_args()
    if not a.run:
        p.error("give at least one --run FILE MODEL BATCH")

    machine = {
        "framework": "onnxruntime", "version": ort.__version__, "hostname": socket.gethostname(),
        "cpu": cpu_model(), "cores": os.cpu_count(), "threads": a.threads, "gpu": "",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    print(f"{'model':<12} {'device':<6} {'backend':<12} {'batch':>6} {'mode':<8} {'thr':>3} "
          f"{'ms min':>9} {'ms median':>9} {'ms max':>9} {'images/s':>10}", flush=True)
    results = []
    for path, model, batch in a.run:
        batch = int(batch)
        r = run(path, batch, a.iters, a.warmup, a.threads)
        print(f"{model:<12} {'cpu':<6} {a.backend_name:<12} {batch:>6} {'forward':<8} {a.threads:>3} "
              f"{r['ms_min']:9.2f} {r['ms_median']:9.2f} {r['ms_max']:9.2f} {r['images_per_s']:10.1f}", flush=True)
        results.append({"model": model, "device": "cpu", "backend": a.backend_name, "dtype": "float32",
                        "batch": batch, "mode": "forward", "iters": a.iters, "warmup": a.warmup,
                        "threads": a.threads, "loss": "random_grad", **r})
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"format": "kiln-bench-results/1", "machine": machine, "runs": results}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

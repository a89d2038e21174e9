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

--nodes runs the timed iterations again with onnxruntime's profiler and prints, per node of the
optimised graph, the median time over those iterations (largest first), then the sum per operator
type: the peer of `kiln bench --layers` (which node is faster where). The profiled pass is separate
from the timed one, so the profiler's own cost does not reach the images/s above.
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


def session_options(threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return so


def session(path, threads):
    return ort.InferenceSession(path, sess_options=session_options(threads), providers=["CPUExecutionProvider"])


def session_feed(sess, batch):
    inp = sess.get_inputs()[0]
    shape = [batch if i == 0 or not isinstance(d, int) else d for i, d in enumerate(inp.shape)]
    x = np.random.default_rng(1234).standard_normal(shape, dtype=np.float32)
    return {inp.name: x}, [o.name for o in sess.get_outputs()]


def node_times(path, batch, iters, warmup, threads, top):
    """Per-node medians (ms) from onnxruntime's profiler over `iters` runs after `warmup`."""
    so = session_options(threads)
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"ort_nodes_{os.getpid()}")
    sess = ort.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])
    feed, outputs = session_feed(sess, batch)
    for _ in range(warmup):
        sess.run(outputs, feed)
    for _ in range(iters):
        sess.run(outputs, feed)
    trace = sess.end_profiling()
    try:
        with open(trace) as f:
            events = json.load(f)
    finally:
        os.remove(trace)
    # Each session.run is one "model_run" event; node events fall inside one of them. Keep the
    # last `iters` runs (the warm-up runs come first).
    runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name") == "model_run")[-iters:]
    per_node, op_of = {}, {}
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        ts = e["ts"]
        if not any(a <= ts <= b for a, b in runs):
            continue
        name = e["name"][: -len("_kernel_time")]
        per_node.setdefault(name, []).append(e["dur"] / 1000.0)
        op_of[name] = e.get("args", {}).get("op_name", "?")
    rows = sorted(((statistics.median(v) * len(v) / iters, n) for n, v in per_node.items()), reverse=True)
    total = sum(ms for ms, _ in rows)
    print(f"  per node (median ms per run over {iters} profiled runs; nodes total {total:.2f} ms)")
    for ms, n in rows[:top]:
        print(f"    {n:<48} {op_of[n]:<22} {ms:9.3f}")
    by_op = {}
    for ms, n in rows:
        by_op[op_of[n]] = by_op.get(op_of[n], 0.0) + ms
    print("  per operator type")
    for op, ms in sorted(by_op.items(), key=lambda kv: -kv[1]):
        print(f"    {op:<22} {ms:9.3f} ms {100.0 * ms / total if total else 0.0:5.1f}%")


def run(path, batch, iters, warmup, threads):
    sess = session(path, threads)
    feed, outputs = session_feed(sess, batch)
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
    p.add_argument("--nodes", type=int, default=0, metavar="N",
                   help="also profile each model and print its N slowest nodes and the time per operator type")
    a = p.parse_args()
    if not a.run:
        p.error("give at least one --run FILE MODEL BATCH")
    if a.iters < 1 or a.warmup < 0 or a.threads < 1 or a.nodes < 0:
        p.error("--iters and --threads must be at least 1, --warmup and --nodes at least 0")

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
        if a.nodes:
            node_times(path, batch, a.iters, a.warmup, a.threads, a.nodes)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"format": "kiln-bench-results/1", "machine": machine, "runs": results}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Loader and compute sharing the cores: `kiln train` and PyTorch on real JPEGs and on synthetic
data, each on a quiet machine and beside a neighbour that keeps one core busy.

Per framework four runs of the same training steps (model, batch, loader workers):
  real        the JPEG tree (bench/make_jpeg_folder.py; written first if DIR has no train/)
  synthetic   synthetic:3x224x224:CLASSES:N, no decoding
  real+nb, synthetic+nb   the same with a spin loop pinned to one core (`taskset -c CORE`), the
              trainer unpinned and at its default thread count, as a user would run it
Images/s are the steady part: the steps after --skip, each from the end of the previous step (so
waiting for a batch counts). kiln's come from its train.csv (--log-every 1), PyTorch's from
baselines/pytorch_loader_train.py. Runs are interleaved (kiln, PyTorch, kiln, ...) and each figure
is the median over --repeat rounds, since other load on the machine moves single runs.
The table: images/s, real/synthetic, with-neighbour/without. --variant adds kiln row sets run with
other environment variables (OpenMP wait policy, thread count), interleaved with the plain ones.

    .venv/bin/python bench/loader_share.py --model alexnet --batch 64 --steps 8 --skip 3 --repeat 3
    .venv/bin/python bench/loader_share.py --only kiln --variant passive:OMP_WAIT_POLICY=passive
    .venv/bin/python bench/loader_share.py --model resnet50 --batch 16 --steps 10 --skip 3
"""
import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def steady_kiln(csv_path, skip):
    rows = list(csv.DictReader(open(csv_path)))
    steady = rows[skip:]
    if not steady:
        sys.exit(f"loader_share.py: {csv_path} has {len(rows)} steps, none after --skip {skip}")
    # Each row's rate is its own step's (--log-every 1): a step of b images took b / rate seconds.
    # The batches are all full (N is a multiple of the batch), so the steady rate is
    # b / mean(b / rate) = 1 / mean(1 / rate).
    return len(steady) / sum(1.0 / float(r["images_per_second"]) for r in steady)


def run_kiln(a, data, env, tmp):
    logdir = tempfile.mkdtemp(dir=tmp)
    cmd = [a.kiln, "train", "--model", a.model, "--data", data, "--batch", str(a.batch), "--workers",
           str(a.workers), "--max-steps", str(a.steps), "--log-every", "1", "--logdir", logdir, "--checkpoint-dir",
           os.path.join(logdir, "ck"), "--quiet", "--epochs", "1000"] + a.kiln_arg
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"loader_share.py: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    ips = steady_kiln(os.path.join(logdir, "train.csv"), a.skip)
    shutil.rmtree(logdir, ignore_errors=True)
    return ips


def run_torch(a, data, env):
    cmd = [sys.executable, os.path.join(HERE, "baselines", "pytorch_loader_train.py"), "--model", a.model,
           "--batch", str(a.batch), "--data", data, "--workers", str(a.workers), "--steps", str(a.steps),
           "--skip", str(a.skip)]
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"loader_share.py: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])["images_per_s"]


def start_neighbour(core):
    # A shell spin loop: one busy thread, pinned, as another user's job would be.
    return subprocess.Popen(["taskset", "-c", str(core), "sh", "-c", "while :; do :; done"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="alexnet")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--workers", type=int, default=2, help="loader threads (kiln) / worker processes (PyTorch)")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--skip", type=int, default=3, help="first steps left out (warm-up, first batches)")
    p.add_argument("--repeat", type=int, default=1, help="rounds; each figure is the median")
    p.add_argument("--data", default="/tmp/kiln-jpeg", help="JPEG tree (written if missing)")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--core", type=int, default=1, help="the core the neighbour keeps busy")
    p.add_argument("--only", choices=["kiln", "pytorch"], help="one framework only")
    p.add_argument("--cases", default="real,synthetic,real+nb,synthetic+nb",
                   help="which of real, synthetic, real+nb, synthetic+nb to run (comma list)")
    p.add_argument("--kiln", default=os.path.join(ROOT, os.environ.get("KILN_BUILD_DIR", "build"), "tools", "kiln"))
    p.add_argument("--kiln-arg", action="append", default=[], help="one more argument for kiln train (repeatable)")
    p.add_argument("--env", action="append", default=[], help="NAME=VALUE for the trainers (repeatable)")
    p.add_argument("--variant", action="append", default=[],
                   help="LABEL:NAME=VALUE[,NAME=VALUE...]: one more kiln row set, run with these variables "
                        "(interleaved with the others), e.g. passive:OMP_WAIT_POLICY=passive")
    p.add_argument("--json", help="also write the medians and every run here")
    a = p.parse_args()
    if a.batch < 1 or a.workers < 0 or a.skip < 0 or a.steps <= a.skip or a.repeat < 1:
        sys.exit("loader_share.py: --batch, --repeat >= 1; --workers, --skip >= 0; --steps > --skip")
    if a.only != "pytorch" and not os.access(a.kiln, os.X_OK):
        sys.exit(f"loader_share.py: no kiln binary at {a.kiln} (build it, or pass --kiln)")
    if not 0 <= a.core < (os.cpu_count() or 1):
        sys.exit(f"loader_share.py: --core {a.core}: this machine has cores 0 to {(os.cpu_count() or 1) - 1}")
    all_cases = ["real", "synthetic", "real+nb", "synthetic+nb"]
    chosen = [c.strip() for c in a.cases.split(",") if c.strip()]
    if not chosen or any(c not in all_cases for c in chosen):
        sys.exit(f"loader_share.py: --cases {a.cases}: a comma list of {', '.join(all_cases)}")
    if any(c.endswith("+nb") for c in chosen) and shutil.which("taskset") is None:
        sys.exit("loader_share.py: taskset (util-linux) is needed for the neighbour")
    if not os.path.isdir(os.path.join(a.data, "train")):
        per_class = max(128, (a.batch * a.steps + a.classes - 1) // a.classes)
        subprocess.run([sys.executable, os.path.join(HERE, "make_jpeg_folder.py"), a.data, "--classes",
                        str(a.classes), "--per-class", str(per_class)], check=True)
    n_train = sum(len(fs) for _, _, fs in os.walk(os.path.join(a.data, "train")))
    if n_train < a.batch * a.steps:
        sys.exit(f"loader_share.py: {a.data} has {n_train} training images, fewer than {a.steps} steps of {a.batch}")
    synth = f"synthetic:3x224x224:{a.classes}:{a.batch * a.steps}"
    env = dict(os.environ)
    for kv in a.env:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            sys.exit(f"loader_share.py: --env {kv}: expected NAME=VALUE")
        env[k] = v
    frameworks = [f for f in ("kiln", "pytorch") if a.only in (None, f)]
    variants = {}  # label -> the environment of that kiln row set
    for v in a.variant:
        label, sep, assigns = v.partition(":")
        if not sep or not label or label in ("kiln", "pytorch") or label in variants:
            sys.exit(f"loader_share.py: --variant {v}: expected LABEL:NAME=VALUE[,...] with a new label")
        venv = dict(env)
        for kv in assigns.split(","):
            k, sep, val = kv.partition("=")
            if not sep or not k:
                sys.exit(f"loader_share.py: --variant {v}: '{kv}' is not NAME=VALUE")
            venv[k] = val
        variants[label] = venv
    frameworks += list(variants)
    cases = [(c, a.data if c.startswith("real") else synth, c.endswith("+nb")) for c in all_cases if c in chosen]
    results = {(f, c[0]): [] for f in frameworks for c in cases}
    tmp = tempfile.mkdtemp(prefix="kiln-loader-share-")
    try:
        for rnd in range(a.repeat):
            for name, data, nb in cases:
                for f in frameworks:
                    spin = start_neighbour(a.core) if nb else None
                    try:
                        time.sleep(0.2 if nb else 0)
                        if f == "pytorch":
                            ips = run_torch(a, data, env)
                        else:
                            ips = run_kiln(a, data, variants.get(f, env), tmp)
                    finally:
                        if spin:
                            spin.kill()
                            spin.wait()
                    results[(f, name)].append(ips)
                    print(f"round {rnd + 1}/{a.repeat} {f:8s} {name:13s} {ips:8.1f} images/s", file=sys.stderr,
                          flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in results.items()}
    best = {k: max(v) for k, v in results.items()}
    print(f"{a.model} batch {a.batch}, {a.workers} loader workers, steps {a.skip + 1}-{a.steps} of {a.steps}, "
          f"{a.repeat} rounds; neighbour: a spin loop on core {a.core}")
    print("images/s: median (best) of the rounds; the ratios are of the medians")

    def ratio(f, num, den):
        return f"{med[(f, num)] / med[(f, den)]:.2f}" if (f, num) in med and (f, den) in med else ""

    print(f"{'framework':10s} {'run':13s} {'images/s':>16s} {'real/synth':>10s} {'nb/quiet':>9s}  runs")
    for f in frameworks:
        for name, _, nb in cases:
            kind, suffix = name.split("+")[0], ("+nb" if nb else "")
            rs = ratio(f, "real" + suffix, "synthetic" + suffix) if kind == "real" else ""
            nq = ratio(f, name, kind) if nb else ""
            runs = " ".join(f"{x:.1f}" for x in results[(f, name)])
            fig = f"{med[(f, name)]:.1f} ({best[(f, name)]:.1f})"
            print(f"{f:10s} {name:13s} {fig:>16s} {rs:>10s} {nq:>9s}  {runs}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"model": a.model, "batch": a.batch, "workers": a.workers, "steps": a.steps, "skip": a.skip,
                       "env": a.env, "variants": a.variant, "median": {f"{f}/{n}": v for (f, n), v in med.items()},
                       "best": {f"{f}/{n}": v for (f, n), v in best.items()},
                       "runs": {f"{f}/{n}": v for (f, n), v in results.items()}}, fh, indent=1)


if __name__ == "__main__":
    main()

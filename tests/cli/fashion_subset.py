#!/usr/bin/env python3
"""Writes the first images of an MNIST-format data set (Fashion-MNIST) as a data set directory
of its own, for short training runs: `kiln train` tests on the whole test split of a directory
(--limit-test bounds only the per-epoch validation), so a short run under an emulator needs a
small test split.

    tests/cli/fashion_subset.py SRC DST N_TRAIN N_TEST      (ctest -R cli.fashion_subset)

SRC holds train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and
t10k-labels-idx1-ubyte.gz; DST gets the same four files with the first N_TRAIN / N_TEST records.
Prints "SKIPPED: ..." and exits 77 where SRC is missing (1 under CI=true, which installs it).
"""
import gzip
import os
import struct
import sys


def subset(src, dst, name, n):
    with gzip.open(os.path.join(src, name), "rb") as f:
        data = f.read()
    ndim = data[3]  # IDX magic: 0, 0, type, number of dimensions
    dims = list(struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim]))
    if n > dims[0]:
        sys.exit(f"fashion_subset: {name} has {dims[0]} records, {n} asked for")
    record = 1
    for d in dims[1:]:
        record *= d
    header = 4 + 4 * ndim
    dims[0] = n
    out = data[:4] + struct.pack(">" + "I" * ndim, *dims) + data[header:header + n * record]
    # mtime 0: the same bytes on every run.
    with open(os.path.join(dst, name), "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(out)


def main(argv):
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst, n_train, n_test = argv[1], argv[2], int(argv[3]), int(argv[4])
    files = {"train-images-idx3-ubyte.gz": n_train, "train-labels-idx1-ubyte.gz": n_train,
             "t10k-images-idx3-ubyte.gz": n_test, "t10k-labels-idx1-ubyte.gz": n_test}
    missing = [f for f in files if not os.path.exists(os.path.join(src, f))]
    if missing:
        reason = f"{src}/{missing[0]} not found (Debian's dataset-fashion-mnist: tools/install-deps.sh --test)"
        if os.environ.get("CI") == "true":
            print(f"MISSING (required with CI=true): Fashion-MNIST: {reason}")
            return 1
        print(f"SKIPPED: Fashion-MNIST: {reason}")
        return 77
    os.makedirs(dst, exist_ok=True)
    for name, n in files.items():
        subset(src, dst, name, n)
    print(f"fashion_subset: {dst}: {n_train} training and {n_test} test images of {src}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

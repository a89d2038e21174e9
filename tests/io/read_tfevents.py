# Reads a TensorBoard event file with TensorBoard's own reader (the PyPI `tensorboard` package's
# EventAccumulator) and prints every scalar and histogram as JSON, for tests/io/test_tfevents.cpp.
#   python read_tfevents.py <event file or logdir>
import json
import sys

from tensorboard.backend.event_processing import event_accumulator as ea

acc = ea.EventAccumulator(sys.argv[1], size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0})
acc.Reload()
tags = acc.Tags()
out = {"scalars": {}, "histograms": {}}
for tag in tags["scalars"]:
    out["scalars"][tag] = [[e.step, e.value] for e in acc.Scalars(tag)]
for tag in tags["histograms"]:
    out["histograms"][tag] = []
    for e in acc.Histograms(tag):
        h = e.histogram_value
        out["histograms"][tag].append({"step": e.step, "min": h.min, "max": h.max, "num": h.num, "sum": h.sum,
                                       "sum_squares": h.sum_squares, "bucket_limit": list(h.bucket_limit),
                                       "bucket": list(h.bucket)})
print(json.dumps(out))

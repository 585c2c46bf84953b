"""GATConv inference on the pubmed replica: eager vs both compiled backends, side by side.

    python bench/gat_backends.py THREADS [FEATURE_WIDTH]

One process; each system warmed up 3 times, then 7 rounds in which every
system runs once (interleaved, so load changes hit all alike); medians.
"""

import statistics
import sys
import time

import torch

import gnnc
from gnnc.data import synthetic
from gnnc.models.gat import GATConv

threads = int(sys.argv[1])
torch.set_num_threads(threads)
width = int(sys.argv[2]) if len(sys.argv) > 2 else 64
ds = synthetic("pubmed", feat_dim=width)
g = ds.graph
x = g.ndata["feat"]
torch.manual_seed(0)
m = GATConv(x.shape[1], 8, 8).eval()
runs = {
    "eager": m,
    "compiled (cpu)": gnnc.compile(m, backend="cpu"),
    "compiled (torch)": gnnc.compile(m, backend="torch"),
}
res = {k: [] for k in runs}
with torch.no_grad():
    for f in runs.values():
        for _ in range(3):
            f(g, x)
    for _ in range(7):
        for k, f in runs.items():
            s = time.perf_counter()
            f(g, x)
            res[k].append(time.perf_counter() - s)
med = {k: statistics.median(v) * 1e3 for k, v in res.items()}
print(
    f"GATConv({width}->8x8) pubmed replica inference, {threads} thread(s), median of 7 interleaved: "
    + "; ".join(f"{k} {v:.2f} ms ({med['eager'] / v:.1f}x)" for k, v in med.items())
)

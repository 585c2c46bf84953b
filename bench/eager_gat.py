"""Eager UDF executor: GAT layer forward on synthetic replicas, against the hardware floor.

Each dataset runs in a fresh process; peak memory is the resident-set high-water
mark above what the process held before the first forward (graph and features). Times are
medians of --runs runs after one warm-up. The floor is the larger of
(compulsory bytes / measured copy bandwidth) and (necessary FLOPs / measured
matmul throughput) on this machine.

    python bench/eager_gat.py --datasets pubmed arxiv --runs 5 --json out/eager_gat.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import time

import torch

from harness.machine import measure_rates
from harness.procfs import reset_peak, status_kib


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def gat_floor(n: int, e: int, f_in: int, heads: int, f_out: int) -> dict:
    """Work any GAT forward must do: project nodes, score and aggregate edges."""
    hf = heads * f_out
    flops = 2 * n * f_in * hf + 4 * n * hf + 5 * e * heads + 2 * e * hf
    # read features, weights, CSR (indptr + neighbour ids), write the output
    bytes_ = 4 * (n * f_in + f_in * hf + n * hf) + 8 * (n + 1 + e)
    return {"flops": flops, "bytes": bytes_}


def run_case(name: str, scale: float, runs: int, heads: int, hidden: int, seed: int, queue) -> None:
    from gnnc import data, models

    torch.manual_seed(seed)
    ds = data.synthetic(name, scale=scale, seed=seed)
    g, x = ds.graph, ds.graph.ndata["feat"]
    layer = models.GATConv(x.shape[1], hidden, num_heads=heads).eval()
    before = status_kib("VmRSS")
    reset_peak()
    times = []
    with torch.no_grad():
        layer(g, x)  # warm-up: CSR and degree buckets are built and cached here
        for _ in range(runs):
            times.append(_timed(lambda: layer(g, x)))
    peak_kib = status_kib("VmHWM") - before
    buckets = len(g.index.degree_buckets(None))
    queue.put(
        {
            "dataset": name,
            "scale": scale,
            "nodes": g.num_nodes(),
            "edges": g.num_edges(),
            "in_dim": x.shape[1],
            "heads": heads,
            "hidden": hidden,
            "degree_buckets": buckets,
            "forward_ms_median": 1e3 * statistics.median(times),
            "forward_ms_all": [1e3 * t for t in times],
            "peak_extra_mib": peak_kib / 1024,
            **gat_floor(g.num_nodes(), g.num_edges(), x.shape[1], heads, hidden),
        }
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", nargs="+", default=["pubmed", "arxiv"])
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--hidden", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write results here")
    args = p.parse_args()

    rates = measure_rates()
    ctx = mp.get_context("spawn")
    rows = []
    for name in args.datasets:
        q = ctx.Queue()
        proc = ctx.Process(target=run_case, args=(name, args.scale, args.runs, args.heads, args.hidden, args.seed, q))
        proc.start()
        row = q.get()
        proc.join()
        floor_s = max(row["bytes"] / rates["copy_bytes_per_s"], row["flops"] / rates["matmul_flops_per_s"])
        row["floor_ms"] = 1e3 * floor_s
        row["x_floor"] = row["forward_ms_median"] / row["floor_ms"]
        rows.append(row)

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; copy "
        f"{rates['copy_bytes_per_s'] / 1e9:.1f} GB/s, matmul {rates['matmul_flops_per_s'] / 1e9:.1f} GFLOP/s"
    )
    print(
        f"{'dataset':<8} {'nodes':>9} {'edges':>10} {'buckets':>7} {'fwd ms':>9} {'floor ms':>9} "
        f"{'x floor':>8} {'peak MiB':>9}"
    )
    for r in rows:
        print(
            f"{r['dataset']:<8} {r['nodes']:>9,} {r['edges']:>10,} {r['degree_buckets']:>7} "
            f"{r['forward_ms_median']:>9.1f} {r['floor_ms']:>9.2f} {r['x_floor']:>8.1f} {r['peak_extra_mib']:>9.1f}"
        )
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(
                {"machine": {"cores": os.cpu_count(), "torch": torch.__version__, **rates}, "rows": rows}, f, indent=1
            )


if __name__ == "__main__":
    main()

"""gnnc's primitives (the torch backend, or with --backend cpu the numba one) against naive gather /
index_add formulations.

Random graphs of the size of pubmed (19,717 nodes, 88,651 edges) and
ogbn-arxiv (169,343 / 1,166,243), unsorted destinations, 64 features as
8 heads x 8 (edge weights and logits per head). Each primitive is timed
forward (no grad) and forward + backward, median of --runs runs after one
warm-up (which also builds the cached CSR structure; its one-off cost is
printed separately). Peak memory is the resident-set high-water mark
(VmHWM, reset by writing 5 to /proc/self/clear_refs) above the resident
set at the reset; each dataset runs in a fresh process.

Naive formulations are what a compiler without these primitives emits:
whole-edge gathers, element-wise ops and index_add / scatter_reduce under
plain autograd (which saves the gathered [E, F] operands), and typed matmuls
as a Python loop of slice matmuls over a full [E, K] gather.

    python bench/primitives.py --datasets pubmed arxiv --runs 5 [--threads 1] [--backend cpu]
"""

from __future__ import annotations

import argparse
import gc
import math
import multiprocessing as mp
import os
import platform
import statistics
import time

import torch

from gnnc import backend as gnnc_backend
from harness.procfs import reset_peak, status_kib, trim_heap

DATASETS = {"pubmed": (19_717, 88_651), "arxiv": (169_343, 1_166_243)}


def reset_peak_rss() -> int:
    """Return freed heap to the OS, reset VmHWM and return the resident set (KiB) it was reset to."""
    gc.collect()
    trim_heap()
    reset_peak()
    return status_kib("VmRSS")


def naive_softmax(logits, dst, n):
    index = dst.view(-1, *([1] * (logits.dim() - 1))).expand_as(logits)
    m = logits.new_full((n, *logits.shape[1:]), -math.inf).scatter_reduce(0, index, logits.detach(), "amax")
    ex = torch.exp(logits - m[dst])
    return ex / ex.new_zeros(m.shape).index_add(0, dst, ex)[dst]


def naive_index_add(msg, dst, n):
    return msg.new_zeros((n, *msg.shape[1:])).index_add(0, dst, msg)


def workloads(n: int, e: int, heads: int, feats: int, seed: int, backend: str = "torch"):
    """(name, gnnc fn on ``backend``, naive fn, inputs) per primitive; every float input gets a gradient."""
    B = gnnc_backend.package(backend)

    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (e,), generator=gen)
    dst = torch.randint(0, n, (e,), generator=gen)
    per_head = feats // heads
    x = torch.randn(n, heads, per_head, generator=gen)
    xf = x.reshape(n, feats)
    w = torch.rand(e, heads, 1, generator=gen)
    w1 = torch.rand(e, 1, generator=gen)
    logits = torch.randn(e, heads, generator=gen)
    values = torch.randn(e, feats, generator=gen)
    types = 4
    ptr = sorted(torch.randint(0, n, (types - 1,), generator=gen).tolist())
    ptr = [0, *ptr, n]
    eptr = [0, *sorted(torch.randint(0, e, (types - 1,), generator=gen).tolist()), e]
    weight = torch.randn(types, feats, feats, generator=gen) / feats**0.5
    bias = torch.randn(types, feats, generator=gen)

    def typed_loop(x, ptr, weight, bias=None):
        parts = [x[lo:hi] @ weight[t] for t, (lo, hi) in enumerate(zip(ptr, ptr[1:]))]
        out = torch.cat(parts)
        if bias is not None:
            out = out + torch.repeat_interleave(bias, torch.tensor(ptr).diff(), dim=0)
        return out

    def naive_max(msg):
        index = dst.view(-1, *([1] * (msg.dim() - 1))).expand_as(msg)
        return msg.new_zeros((n, *msg.shape[1:])).scatter_reduce(0, index, msg, "amax", include_self=False)

    return [
        (
            "segment_reduce sum [E,64]",
            lambda v: B.segment_reduce(v, dst, n, "sum"),
            lambda v: naive_index_add(v, dst, n),
            [values],
        ),
        ("segment_reduce max [E,64]", lambda v: B.segment_reduce(v, dst, n, "max"), naive_max, [values]),
        (
            "edge_softmax [E,8]",
            lambda logit: B.edge_softmax(logit, dst, n),
            lambda logit: naive_softmax(logit, dst, n),
            [logits],
        ),
        ("spmm copy sum [N,64]", lambda x: B.spmm(x, src, dst, n), lambda x: naive_index_add(x[src], dst, n), [xf]),
        (
            "spmm mul sum [N,64]x[E,1]",
            lambda x, w: B.spmm(x, src, dst, n, w, "mul"),
            lambda x, w: naive_index_add(x[src] * w, dst, n),
            [xf, w1],
        ),
        (
            "spmm mul sum [N,8,8]x[E,8,1]",
            lambda x, w: B.spmm(x, src, dst, n, w, "mul"),
            lambda x, w: naive_index_add(x[src] * w, dst, n),
            [x, w],
        ),
        (
            "spmm mul max [N,8,8]x[E,8,1]",
            lambda x, w: B.spmm(x, src, dst, n, w, "mul", "max"),
            lambda x, w: naive_max(x[src] * w),
            [x, w],
        ),
        (
            "sddmm dot [N,8,8]",
            lambda a, b: B.sddmm(a, src, b, dst, "dot"),
            lambda a, b: (a[src] * b[dst]).sum(-1, keepdim=True),
            [x, x.clone()],
        ),
        (
            "sddmm mul [N,64]",
            lambda a, b: B.sddmm(a, src, b, dst, "mul"),
            lambda a, b: a[src] * b[dst],
            [xf, xf.clone()],
        ),
        (
            "edge_softmax_aggregate [E,8],[N,8,8]",
            lambda logit, x: B.edge_softmax_aggregate(logit, x, src, dst, n),
            lambda logit, x: naive_index_add(naive_softmax(logit, dst, n)[..., None] * x[src], dst, n),
            [logits, x],
        ),
        (
            "segment_matmul 4 types 64x64",
            lambda x, W, b: B.segment_matmul(x, ptr, W, b),
            lambda x, W, b: typed_loop(x, ptr, W, b),
            [xf, weight, bias],
        ),
        (
            "gather_segment_matmul 4 rel 64x64",
            lambda x, W: B.gather_segment_matmul(x, src, eptr, W),
            lambda x, W: typed_loop(x[src], eptr, W),
            [xf, weight],
        ),
    ], (src, dst, n)


def measure(fn, inputs, runs: int, backward: bool) -> tuple[float, float]:
    """(median ms, peak extra MiB) of fn(*inputs), optionally with backward of a fixed upstream gradient."""
    leaves = [t.detach().requires_grad_(backward) for t in inputs]

    def once():
        if not backward:
            with torch.no_grad():
                fn(*leaves)
            return
        out = fn(*leaves)
        out.backward(torch.ones_like(out))
        for t in leaves:
            t.grad = None

    once()
    base = reset_peak_rss()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        once()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times), (status_kib("VmHWM") - base) / 1024


def run_case(name: str, runs: int, heads: int, feats: int, seed: int, threads: int | None, backend: str, queue) -> None:
    from gnnc.backend.pytorch import clear_structure_cache
    from gnnc.backend.pytorch.csr import csr_structure

    if threads:
        torch.set_num_threads(threads)
    n, e = DATASETS[name]
    cases, (src, dst, _) = workloads(n, e, heads, feats, seed, backend)
    start = time.perf_counter()
    csr_structure(dst, n, src)
    build_ms = 1e3 * (time.perf_counter() - start)
    clear_structure_cache()
    rows = []
    for label, fast, naive, inputs in cases:
        row = {"dataset": name, "primitive": label}
        for impl, fn in (("naive", naive), ("gnnc", fast)):
            row[impl + "_fwd_ms"], row[impl + "_fwd_mib"] = measure(fn, inputs, runs, backward=False)
            row[impl + "_fb_ms"], row[impl + "_fb_mib"] = measure(fn, inputs, runs, backward=True)
        rows.append(row)
    queue.put({"rows": rows, "csr_build_ms": build_ms, "nodes": n, "edges": e})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    p.add_argument(
        "--backend",
        choices=["torch", "cpu"],
        default="torch",
        help="the primitives' backend: torch (reference) or cpu (numba kernels where it has them)",
    )
    args = p.parse_args()

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{args.threads or torch.get_num_threads()} threads, backend {args.backend}"
    )
    ctx = mp.get_context("spawn")
    header = (
        f"{'primitive':<37} {'fwd naive':>9} {'fwd gnnc':>9} {'x':>5} {'f+b naive':>9} {'f+b gnnc':>9} {'x':>5} "
        f"{'MiB fwd naive':>13} {'gnnc':>6} {'MiB f+b naive':>13} {'gnnc':>6}"
    )
    for name in args.datasets:
        q = ctx.Queue()
        proc = ctx.Process(
            target=run_case, args=(name, args.runs, args.heads, args.features, args.seed, args.threads, args.backend, q)
        )
        proc.start()
        result = q.get()
        proc.join()
        print(
            f"\n{name}: {result['nodes']:,} nodes, {result['edges']:,} edges; times in ms (median of {args.runs}), "
            f"peak = extra resident MiB; one-off CSR build {result['csr_build_ms']:.1f} ms"
        )
        print(header)
        for r in result["rows"]:
            print(
                f"{r['primitive']:<37} {r['naive_fwd_ms']:>9.1f} {r['gnnc_fwd_ms']:>9.1f} "
                f"{r['naive_fwd_ms'] / r['gnnc_fwd_ms']:>5.1f} {r['naive_fb_ms']:>9.1f} {r['gnnc_fb_ms']:>9.1f} "
                f"{r['naive_fb_ms'] / r['gnnc_fb_ms']:>5.1f} {r['naive_fwd_mib']:>13.1f} {r['gnnc_fwd_mib']:>6.1f} "
                f"{r['naive_fb_mib']:>13.1f} {r['gnnc_fb_mib']:>6.1f}"
            )


if __name__ == "__main__":
    main()

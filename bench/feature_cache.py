"""Hit rates and traffic of Heta's feature cache vs hotness-only and random caching.

On the mag replica (``gnnc.data.synthetic('mag')`` with reverse relations;
read-only 'paper' features, learnable author / institution / field_of_study
tables), pre-samples hotness once, measures each type's miss penalty once,
then for each budget (a fraction of all feature bytes: read-only rows plus
learnable tables, without optimizer state) and each allocation builds a
cache and replays the same stream of sampled batches (a fresh epoch, drawn
with other seeds than the pre-sampling) through ``FeatureCache.fetch_nodes``.

Batches are fetched as in training (gradients on, so a learnable miss
counts its row and Adam state read and written back). Reported per
configuration: hit rate per node type, store traffic of the misses (see
``gnnc.distributed.cache``), and the modelled miss time, sum over misses of
footprint x the type's measured miss-penalty ratio ``o_a``. Fetch wall time
is printed only for a CUDA cache: with the cache on the host, a hit and a
miss are the same host gather.

    python bench/feature_cache.py --scale 0.05 --threads 1
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

from gnnc.data import synthetic
from gnnc.data.neighbor_sampler import NeighborSampler
from gnnc.distributed import add_reverse_relations
from gnnc.distributed.cache import ALLOCATIONS, FeatureCache, measure_transfer_cost, presample_hotness
from gnnc.nn import SparseAdam


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=0.05)
    p.add_argument("--fanouts", type=int, nargs="+", default=[25, 20])
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument(
        "--budgets",
        type=float,
        nargs="+",
        default=[0.05, 0.10, 0.25],
        help="cache budgets as fractions of all feature bytes",
    )
    p.add_argument("--presample-epochs", type=int, default=2)
    p.add_argument("--feat-dim", type=int, default=128, help="paper feature width (ogbn-mag: 128)")
    p.add_argument("--embed-dim", type=int, default=64, help="learnable table width")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    ds = synthetic("mag", scale=args.scale, seed=args.seed, feat_dim=args.feat_dim)
    g = add_reverse_relations(ds.graph)
    target = ds.target_ntype
    features = {target: g.nodes[target].data["feat"]}
    gen = torch.Generator().manual_seed(args.seed)
    learnable = {
        t: nn.Parameter(torch.randn(g.num_nodes(t), args.embed_dim, generator=gen)) for t in g.ntypes if t != target
    }
    stores = {**features, **learnable}
    all_bytes = sum(x.numel() * x.element_size() for x in stores.values())
    train = torch.nonzero(g.nodes[target].data["train_mask"]).squeeze(1)
    batches_per_epoch = -(-train.numel() // args.batch_size)
    print(
        f"mag replica, scale {args.scale}: "
        + ", ".join(f"{t} {g.num_nodes(t):,}" for t in g.ntypes)
        + f"; {g.num_edges():,} edges; {train.numel():,} training papers; fanouts {args.fanouts}, "
        f"batch {args.batch_size}; feature bytes {all_bytes / 2**20:.1f} MiB; device {device}, "
        f"{torch.get_num_threads()} threads"
    )

    start = time.perf_counter()
    sampler = NeighborSampler(g, args.fanouts, target, seed=args.seed)
    hot = presample_hotness(
        sampler, train, args.presample_epochs * batches_per_epoch, args.batch_size, seed=args.seed + 1
    )
    print(f"pre-sampling: {hot.num_batches} batches in {time.perf_counter() - start:.1f}s")
    penalty = {}
    print("\nmiss-penalty ratios (ns per byte; o_a = read, plus write for learnable types):")
    for t in g.ntypes:
        rows = max(1, round(hot.per_batch(t)))
        read, write = (measure_transfer_cost(stores[t], device, rows, w, repeats=20) for w in (False, True))
        penalty[t] = read + write if t in learnable else read
        print(
            f"  {t:<15} read {read * 1e9:7.4f}  write {write * 1e9:7.4f}  o_a {penalty[t] * 1e9:7.4f}  "
            f"({rows:,} rows per batch, {'learnable' if t in learnable else 'read-only'}, "
            f"{stores[t].shape[1] * stores[t].element_size()} B per row)"
        )

    # The evaluation stream: one fresh epoch, other sampler and shuffle seeds.
    start = time.perf_counter()
    stream_sampler = NeighborSampler(g, args.fanouts, target, seed=args.seed + 100)
    order = train[torch.randperm(train.numel(), generator=torch.Generator().manual_seed(args.seed + 101))]
    stream = [stream_sampler.sample(b)[0].src_ids for b in order.split(args.batch_size)]
    print(
        f"evaluation stream: {len(stream)} batches, {sum(s.numel() for s in stream):,} row reads, "
        f"sampled in {time.perf_counter() - start:.1f}s\n"
    )

    configs = [(0.0, "none")] + [(f, a) for f in args.budgets for a in ALLOCATIONS]
    header = [
        "budget",
        "allocation",
        *[f"hit {t}" for t in g.ntypes],
        "hit all",
        "MiB moved",
        "miss time (ms)",
        "cached MiB",
    ]
    if device.type == "cuda":
        header.append("fetch (ms)")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for fraction, allocation in configs:
        cache = FeatureCache.from_hotness(
            hot,
            features,
            learnable,
            fraction * all_bytes,
            device,
            ntypes=g.ntypes,
            allocation="heta" if allocation == "none" else allocation,
            penalties=penalty,
            seed=args.seed,
        )
        cache.bind_optimizer(SparseAdam(learnable.values()))
        elapsed = 0.0
        for ids in stream:
            ids = ids.to(device)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            tic = time.perf_counter()
            cache.fetch_nodes(ids)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            elapsed += time.perf_counter() - tic
        stats = cache.stats()
        per = stats.per_type
        miss_ms = sum(per[t].misses * cache.plan[t].footprint * penalty[t] for t in g.ntypes) * 1e3
        row = [
            f"{fraction:.0%}",
            allocation,
            *[f"{per[t].hit_rate:.1%}" for t in g.ntypes],
            f"{stats.total.hit_rate:.1%}",
            f"{stats.total.bytes_moved / 2**20:,.1f}",
            f"{miss_ms:.2f}",
            f"{cache.cache_bytes() / 2**20:.2f}",
        ]
        if device.type == "cuda":
            row.append(f"{elapsed * 1e3:.1f}")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()

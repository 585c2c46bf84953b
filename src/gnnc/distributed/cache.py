"""Heta's miss-penalty-aware feature cache (Heta §6), for read-only and learnable features.

Building a cache (``FeatureCache.build``) takes two measurements and one plan:

1. **Hotness** (``presample_hotness``): the sampler is run for a number of
   batches (two epochs by default, as Heta) and every node of each batch's
   input layer (``blocks[0].src_ids``: the rows a batch fetches) counts one
   access. The sampler's random state is restored afterwards.
2. **Miss-penalty ratio** ``o_a`` per node type (``miss_penalty``), Heta's
   "time penalty per unit cache size incurred when the feature of a node of
   type ``a`` is not in the cache". A row's ``footprint`` is what it occupies
   in the cache: ``row_bytes`` for read-only features; for learnable ones the
   row, its two Adam moments and its int64 step (``3 * row_bytes + 8``),
   since Heta caches the optimizer state with the row. A read-only miss reads
   the row from the store; a learnable miss reads the row and its state and
   writes them back after the update, so its penalty per row is about three
   times (the state travels with the row) that of a read-only row of the same
   width, read AND written. Measured: seconds per byte of a representative
   fetch (as many random rows as a batch reads of that type) gathered from
   the host store and copied to the cache device (``measure_transfer_cost``;
   on a CPU-only machine a host-to-host gather), plus for learnable types
   the seconds per byte of writing rows back, times the bytes that move per
   miss divided by the footprint. As the bytes that move are the footprint,
   ``o_a`` is the read cost per byte (read-only) or read plus write cost per
   byte (learnable): the tripled per-row penalty is divided by a tripled
   cache size.
3. **Budget split** (``split_budget``), Heta's formula: node type ``a`` gets
   the fraction ``count_a * o_a / sum_a' count_a' * o_a'`` of the budget,
   where ``count_a`` is the total pre-sampled access count of the rows this
   worker may cache. Row width is deliberately not a factor: ``o_a`` is per
   cached byte, so ``count_a * o_a`` is the miss time an average cached byte
   of type ``a`` saves, and a wide type gets no extra share for being wide.
   A type's share is capped at the bytes of its accessed rows; what a capped
   type cannot use is re-split among the others by the same weights
   (water-filling). Only when every accessed row fits are never-accessed rows
   cached, the rest split in proportion to ``o_a``.
4. **Fill**: each type's share holds its hottest rows first (ties: lower id first).

Learnable rows are never replicated: a cached learnable row lives only in
the cache (its copy in the store goes stale until ``write_back``), and with
an ownership map (``owners[ntype][local id]`` = worker, e.g.
``modulo_owners``, Heta's ``nid mod num_gpus``) a worker caches only the
learnable rows it owns, so no learnable row is cached twice across workers;
``owner`` tells a trainer where a row lives, and ``fetch`` refuses learnable
rows another worker owns (their only up-to-date copy may be in that worker's
cache), so the trainer routes them to their owner. Read-only rows may be
cached, and fetched, by every worker.

Training with learnable features: ``bind_optimizer(opt)`` (a
``gnnc.nn.SparseAdam`` that updates the store tables) moves the cached rows'
optimizer state into the cache and adds the cache's tables to ``opt`` with
the same hyper-parameters, so ``opt.step()`` updates hits in the cache (on
the device) and misses in the store. ``write_back()`` copies the rows updated
since the last write-back, and their optimizer state, to the store; call it
after each optimizer step to keep store and cache equal at all times, and at
the latest before anything reads the store directly (evaluation through
``TypedEmbedding``, checkpoints). Gradients computed elsewhere (a worker
receiving them for the rows it owns) join through ``accumulate_grad``, which
routes each row's to where the row lives. Because ``SparseAdam`` keeps its
state per row, training through the cache gives exactly the parameters
training without it gives. The distributed trainers build one cache per
rank over the rows it stores (``gnnc.distributed.trainer.DistTrainer.build_cache``).

In a trainer::

    cache = FeatureCache.build(sampler, {"paper": feat}, {t: emb.embeddings[t].weight for t in emb.embeddings},
                               budget_bytes, device, presample_batches=None, seeds=train_ids)
    cache.bind_optimizer(sparse_opt)
    for seeds in batches:
        blocks = sampler.sample(seeds)
        logits = model(blocks, emb.project(cache.fetch_nodes(blocks[0].src_ids)))
        ...  # loss.backward(); dense_opt.step(); sparse_opt.step()
        cache.write_back()

Traffic accounting (``stats``), the model behind the penalties: a read-only
miss moves ``row_bytes`` from the store; a learnable miss fetched for
training (gradients enabled) moves ``2 * footprint`` (row and state read,
then written back); one fetched without gradients only reads its row. A hit
saves what its miss would have moved.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from ..nn.embedding import FetchedRows, split_by_type
from ..nn.sparse_adam import SparseAdam

ALLOCATIONS = ("heta", "hotness", "random")
ADAM_STATE_ROWS = 2  # exp_avg and exp_avg_sq, each as wide as the row
STEP_BYTES = 8  # SparseAdam's per-row int64 step count


# --------------------------------------------------------------------- hotness
@dataclass
class Hotness:
    """Pre-sampled access counts: ``counts[ntype][local id]`` over ``num_batches`` batches."""

    counts: dict[str, torch.Tensor]
    num_batches: int

    def per_batch(self, ntype: str) -> float:
        """Mean number of rows of ``ntype`` one batch reads."""
        return float(self.counts[ntype].sum()) / max(self.num_batches, 1)


def presample_hotness(sampler, seeds, num_batches: int | None = None, batch_size: int = 1024, seed: int = 0) -> Hotness:
    """Count how often each node is in a batch's input layer over ``num_batches`` batches.

    Batches are consecutive slices of ``seeds`` (target-type local ids),
    reshuffled every pass; ``num_batches`` defaults to two passes. The
    sampler is reseeded with ``seed`` for the count and its random state is
    restored afterwards, so pre-sampling never changes the training stream.
    """
    seeds = torch.as_tensor(seeds).to(device="cpu", dtype=torch.int64)
    if seeds.dim() != 1 or seeds.numel() == 0:
        raise ValueError(
            f"presample_hotness: seeds must be a non-empty 1-D tensor of target node ids, "
            f"got shape {tuple(seeds.shape)}"
        )
    if batch_size < 1:
        raise ValueError(f"presample_hotness: batch_size must be at least 1, got {batch_size}")
    per_pass = math.ceil(seeds.numel() / batch_size)
    num_batches = 2 * per_pass if num_batches is None else int(num_batches)
    if num_batches < 1:
        raise ValueError(f"presample_hotness: num_batches must be at least 1, got {num_batches}")
    g = sampler.g
    offsets = [int(o) for o in g.index.ntype_offsets]
    total = torch.zeros(g.num_nodes(), dtype=torch.int64, device=g.device)
    saved = sampler.state_dict()
    shuffle = torch.Generator().manual_seed(int(seed))
    sampler.manual_seed(seed)
    try:
        done = 0
        while done < num_batches:
            order = seeds.index_select(0, torch.randperm(seeds.numel(), generator=shuffle))
            for batch in order.split(batch_size)[: num_batches - done]:
                src = sampler.sample(batch.to(g.device))[0].src_ids
                total += torch.bincount(src, minlength=total.numel())
                done += 1
    finally:
        sampler.load_state_dict(saved)
    counts = {t: total[offsets[i] : offsets[i + 1]].cpu() for i, t in enumerate(g.ntypes)}
    return Hotness(counts, num_batches)


# ----------------------------------------------------------------- penalties
def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_transfer_cost(
    store: torch.Tensor, device, num_rows: int, write: bool = False, repeats: int = 5, seed: int = 0
) -> float:
    """Seconds per byte to move ``num_rows`` random rows of ``store`` to ``device`` (or back).

    Reading gathers the rows and copies them to ``device``; writing copies
    them from ``device`` and scatters them into ``store`` (the values read,
    so the store is left as it was). Median of ``repeats`` timed moves after
    one warm-up.
    """
    device = torch.device(device)
    n = store.shape[0]
    row_bytes = _row_bytes(store)
    if n == 0 or row_bytes == 0:
        raise ValueError(f"measure_transfer_cost: nothing to time in a store of shape {tuple(store.shape)}")
    num_rows = max(1, min(int(num_rows), n))
    data = store.detach()
    idx = torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:num_rows].to(data.device)
    rows = data.index_select(0, idx).to(device)
    times = []
    for i in range(repeats + 1):
        _synchronize(device)
        start = time.perf_counter()
        if write:
            data.index_copy_(0, idx, rows.to(data.device))
        else:
            data.index_select(0, idx).to(device)
        _synchronize(device)
        if i:
            times.append(time.perf_counter() - start)
    return statistics.median(times) / (num_rows * row_bytes)


def miss_penalty(store: torch.Tensor, device, num_rows: int, learnable: bool, repeats: int = 5, seed: int = 0) -> float:
    """Heta's miss-penalty ratio ``o_a``: seconds of miss time per cached byte (see the module docstring)."""
    read = measure_transfer_cost(store, device, num_rows, False, repeats, seed)
    return read + measure_transfer_cost(store, device, num_rows, True, repeats, seed) if learnable else read


# -------------------------------------------------------------------- planning
def split_budget(budget: float, weights: dict, capacity: dict) -> dict:
    """Bytes per type in proportion to ``weights``, none above ``capacity`` (water-filling).

    A type whose proportional share exceeds its capacity gets its capacity,
    and the rest of the budget is re-split among the remaining types. Types of
    zero weight or capacity get nothing.
    """
    if budget < 0:
        raise ValueError(f"split_budget: budget must be non-negative, got {budget}")
    alloc = dict.fromkeys(weights, 0.0)
    active = [t for t in weights if weights[t] > 0 and capacity[t] > 0]
    left = float(budget)
    while active and left > 0:
        total = sum(weights[t] for t in active)
        full = [t for t in active if left * weights[t] / total >= capacity[t]]
        if not full:
            for t in active:
                alloc[t] = left * weights[t] / total
            break
        for t in full:
            alloc[t] = float(capacity[t])
            left -= capacity[t]
            active.remove(t)
    return alloc


def hottest_first(counts: torch.Tensor, eligible: torch.Tensor | None = None) -> torch.Tensor:
    """Local ids of the eligible rows, most accessed first, ties by id."""
    ids = torch.arange(counts.numel()) if eligible is None else torch.nonzero(eligible).squeeze(1)
    order = torch.argsort(counts.index_select(0, ids), descending=True, stable=True)
    return ids.index_select(0, order)


def modulo_owners(num_nodes: dict, world_size: int) -> dict:
    """Heta's modular ownership: row ``i`` of every type belongs to worker ``i mod world_size``."""
    if world_size < 1:
        raise ValueError(f"modulo_owners: world_size must be at least 1, got {world_size}")
    return {t: torch.arange(int(n)) % world_size for t, n in num_nodes.items()}


@dataclass(frozen=True)
class TypePlan:
    """How one node type was given cache space.

    ``count``: pre-sampled accesses of the rows this worker may cache;
    ``penalty``: ``o_a`` in seconds per cached byte; ``share_bytes``: bytes
    the split gave; ``rows``: rows cached (``rows * footprint <= share_bytes``).
    """

    learnable: bool
    row_bytes: int
    footprint: int
    count: int
    penalty: float
    share_bytes: float
    rows: int


def _check_owners(owners: dict, ntype: str, n: int) -> None:
    if ntype in owners and owners[ntype].shape != (n,):
        raise ValueError(
            f"FeatureCache: the ownership map of {ntype!r} has shape {tuple(owners[ntype].shape)}, "
            f"expected one owner per row ({n})"
        )


def _row_bytes(t: torch.Tensor) -> int:
    return math.prod(t.shape[1:]) * t.element_size()


def _footprint(row_bytes: int, learnable: bool) -> int:
    return (1 + ADAM_STATE_ROWS) * row_bytes + STEP_BYTES if learnable else row_bytes


def _prefix_within(footprints: torch.Tensor, budget: float) -> int:
    """How many leading entries fit in ``budget`` bytes."""
    return int((torch.cumsum(footprints, 0) <= budget).sum())


def _plan_heta(order, counts, fp, penalty, budget):
    """Rows per type: Heta's proportional split over accessed rows, then over the others."""
    hot = {t: int((counts[t].index_select(0, order[t]) > 0).sum()) for t in order}
    weight = {t: float(counts[t].sum()) * penalty[t] if fp[t] else 0.0 for t in order}
    share = split_budget(budget, weight, {t: hot[t] * fp[t] for t in order})
    rows = {t: min(hot[t], int(share[t] // fp[t])) if fp[t] else 0 for t in order}
    if all(rows[t] == hot[t] for t in order if fp[t]):
        left = budget - sum(rows[t] * fp[t] for t in order)
        cold = {t: (order[t].numel() - hot[t]) * fp[t] for t in order}
        extra = split_budget(left, {t: penalty[t] if fp[t] else 0.0 for t in order}, cold)
        for t in order:
            if fp[t]:
                share[t] += extra[t]
                rows[t] += min(order[t].numel() - hot[t], int(extra[t] // fp[t]))
    return rows, share


def _plan_global(order, counts, fp, budget, generator, by_hotness: bool):
    """Cached ids per type from one ranking of all rows, filled in rank order while they fit:
    by access count (ties: type order, then each type's hottest-first order) or uniformly random."""
    types = [t for t in order if fp[t]]
    kind = torch.cat(
        [torch.full((order[t].numel(),), i, dtype=torch.int64) for i, t in enumerate(types)]
        + [torch.zeros(0, dtype=torch.int64)]
    )
    local = torch.cat([order[t] for t in types] + [torch.zeros(0, dtype=torch.int64)])
    sizes = torch.tensor([float(fp[t]) for t in types] + [0.0], dtype=torch.float64).index_select(0, kind)
    if by_hotness:
        hits = torch.cat([counts[t].index_select(0, order[t]) for t in types] + [torch.zeros(0, dtype=torch.int64)])
        rank = torch.argsort(hits, descending=True, stable=True)
    else:
        rank = torch.randperm(kind.numel(), generator=generator)
    taken = rank[: _prefix_within(sizes.index_select(0, rank), budget)]
    taken_kind, taken_local = kind.index_select(0, taken), local.index_select(0, taken)
    cached = {t: torch.zeros(0, dtype=torch.int64) for t in order}
    cached.update({t: taken_local[taken_kind == i] for i, t in enumerate(types)})
    return cached, {t: float(cached[t].numel() * fp[t]) for t in order}


# ----------------------------------------------------------------------- stats
@dataclass
class TypeStats:
    """Fetch traffic of one node type since the last ``reset_stats``."""

    hits: int = 0
    misses: int = 0
    bytes_moved: int = 0  # store traffic of the misses (module docstring)
    bytes_saved: int = 0  # store traffic the hits avoided
    rows_written_back: int = 0
    cached_rows: int = 0
    cache_bytes: int = 0

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.misses
        return self.hits / n if n else float("nan")


@dataclass
class CacheStats:
    """``per_type[ntype]`` and their sum ``total``."""

    per_type: dict[str, TypeStats] = field(default_factory=dict)

    @property
    def total(self) -> TypeStats:
        out = TypeStats()
        for s in self.per_type.values():
            for k in vars(out):
                setattr(out, k, getattr(out, k) + getattr(s, k))
        return out


def add_sparse_grad(param: torch.Tensor, rows: torch.Tensor, values: torch.Tensor) -> None:
    """``param.grad += `` the sparse rows ``values`` at ``rows`` (coalesced)."""
    extra = torch.sparse_coo_tensor(rows.unsqueeze(0), values.to(param.device), param.shape, check_invariants=True)
    param.grad = extra.coalesce() if param.grad is None else (param.grad + extra).coalesce()


# ----------------------------------------------------------------------- cache
class FeatureCache:
    """Rows of read-only features and learnable tables, hottest ones on ``device``.

    ``features``: ``{ntype: tensor [n, width]}`` read-only stores (host).
    ``learnable``: ``{ntype: nn.Parameter [n, width]}`` the embedding tables
    (e.g. ``TypedEmbedding.embeddings[t].weight``). ``cached``: ``{ntype:
    local ids}`` to hold on the device (types left out hold none).
    ``ntypes``: node types in graph order, which defines the global ids of
    ``fetch_nodes``. ``owners`` / ``rank``: see the module docstring; a
    cached learnable row must be owned by ``rank``. Most users call ``build``.
    """

    def __init__(
        self,
        features: dict,
        learnable: dict,
        cached: dict,
        device="cpu",
        *,
        ntypes,
        owners: dict | None = None,
        rank: int = 0,
        plan: dict | None = None,
    ):
        self.ntypes = list(ntypes)
        self.device = torch.device(device)
        features, learnable, cached = dict(features or {}), dict(learnable or {}), dict(cached or {})
        for t in list(features) + list(learnable) + list(cached):
            if t not in self.ntypes:
                raise KeyError(f"FeatureCache: unknown node type {t!r}; node types: {self.ntypes}")
        for t in self.ntypes:
            if (t in features) == (t in learnable):
                where = "both read-only features and a learnable table" if t in features else "no rows"
                raise ValueError(f"FeatureCache: node type {t!r} has {where}; give exactly one")
        self.owners = {t: torch.as_tensor(o, dtype=torch.int64).cpu() for t, o in (owners or {}).items()}
        self._owner_on_device = {t: o.to(self.device) for t, o in self.owners.items()}
        self.rank = int(rank)
        self.plan = dict(plan or {})
        self._store: dict[str, torch.Tensor] = {}
        self._learnable: set[str] = set(learnable)
        self._slot: dict[str, torch.Tensor] = {}
        self._ids: dict[str, torch.Tensor] = {}
        self._rows: dict[str, torch.Tensor] = {}
        self._dirty: dict[str, torch.Tensor] = {}
        self._footprint: dict[str, int] = {}
        self._row_bytes: dict[str, int] = {}
        self._optimizer: SparseAdam | None = None
        offsets = [0]
        for t in self.ntypes:
            store = features[t] if t in features else learnable[t]
            if store.dim() != 2:
                raise ValueError(
                    f"FeatureCache: rows of {t!r} must be a 2-D [nodes, width] tensor, got shape {tuple(store.shape)}"
                )
            if t in learnable and not isinstance(store, nn.Parameter):
                raise TypeError(
                    f"FeatureCache: the learnable table of {t!r} must be an nn.Parameter "
                    f"(e.g. TypedEmbedding.embeddings[{t!r}].weight)"
                )
            _check_owners(self.owners, t, store.shape[0])
            offsets.append(offsets[-1] + store.shape[0])
            self._store[t] = store
            self._row_bytes[t] = _row_bytes(store)
            self._footprint[t] = _footprint(self._row_bytes[t], t in learnable)
            self._place(t, cached.get(t))
        self.offsets = torch.tensor(offsets, dtype=torch.int64, device=self.device)
        self.reset_stats()

    def _place(self, t: str, ids) -> None:
        """Copy the rows ``ids`` of type ``t`` to the device and index them."""
        store = self._store[t]
        n = store.shape[0]
        ids = torch.zeros(0, dtype=torch.int64) if ids is None else torch.as_tensor(ids, dtype=torch.int64).cpu()
        if ids.dim() != 1:
            raise ValueError(f"FeatureCache: cached ids of {t!r} must be 1-D, got shape {tuple(ids.shape)}")
        if ids.numel():
            if int(ids.min()) < 0 or int(ids.max()) >= n:
                raise IndexError(
                    f"FeatureCache: cached ids of {t!r} must lie in [0, {n}), "
                    f"got range [{int(ids.min())}, {int(ids.max())}]"
                )
            if torch.unique(ids).numel() != ids.numel():
                raise ValueError(f"FeatureCache: cached ids of {t!r} contain duplicates")
            if t in self._learnable and t in self.owners:
                foreign = self.owners[t].index_select(0, ids) != self.rank
                if bool(foreign.any()):
                    bad = int(ids[foreign][0])
                    raise ValueError(
                        f"FeatureCache: learnable row {bad} of {t!r} belongs to worker "
                        f"{int(self.owners[t][bad])}, not {self.rank}; a learnable row is cached "
                        "only by its owner"
                    )
        slot = torch.full((n,), -1, dtype=torch.int64)
        slot[ids] = torch.arange(ids.numel())
        self._slot[t] = slot.to(self.device)
        self._ids[t] = ids.to(self.device)
        rows = store.detach().index_select(0, ids.to(store.device)).to(self.device)
        if t in self._learnable:
            self._rows[t] = nn.Parameter(rows.clone(), requires_grad=store.requires_grad)
            self._dirty[t] = torch.zeros(ids.numel(), dtype=torch.bool, device=self.device)
        else:
            self._rows[t] = rows

    # ------------------------------------------------------------- building
    @classmethod
    def build(
        cls,
        sampler,
        features_per_type: dict,
        learnable_per_type: dict,
        budget_bytes: float,
        device="cpu",
        presample_batches: int | None = None,
        seeds=None,
        *,
        batch_size: int = 1024,
        presample_seed: int = 0,
        allocation: str = "heta",
        penalties: dict | None = None,
        owners: dict | None = None,
        rank: int = 0,
    ) -> FeatureCache:
        """Pre-sample ``sampler`` over ``seeds``, measure penalties, split ``budget_bytes``, fill.

        ``seeds``: training nodes of the sampler's target type (default: all
        of them). ``allocation``: 'heta' (the split of the module docstring),
        'hotness' (globally hottest rows, penalties ignored, as PaGraph and
        GNNLab) or 'random' (uniformly random rows). ``penalties``: ``{ntype:
        o_a}`` (seconds per cached byte) to use instead of ``miss_penalty``.
        """
        if seeds is None:
            seeds = torch.arange(sampler.g.num_nodes(sampler.target_ntype))
        hotness = presample_hotness(sampler, seeds, presample_batches, batch_size, presample_seed)
        return cls.from_hotness(
            hotness,
            features_per_type,
            learnable_per_type,
            budget_bytes,
            device,
            ntypes=sampler.g.ntypes,
            allocation=allocation,
            penalties=penalties,
            owners=owners,
            rank=rank,
            seed=presample_seed,
        )

    @classmethod
    def from_hotness(
        cls,
        hotness: Hotness,
        features: dict,
        learnable: dict,
        budget_bytes: float,
        device="cpu",
        *,
        ntypes,
        allocation: str = "heta",
        penalties: dict | None = None,
        owners: dict | None = None,
        rank: int = 0,
        seed: int = 0,
    ) -> FeatureCache:
        """``build`` from already counted hotness (e.g. to compare allocations on one count)."""
        if allocation not in ALLOCATIONS:
            raise ValueError(f"FeatureCache: allocation must be one of {ALLOCATIONS}, got {allocation!r}")
        if budget_bytes < 0:
            raise ValueError(f"FeatureCache: budget_bytes must be non-negative, got {budget_bytes}")
        device = torch.device(device)
        stores = {**dict(features or {}), **dict(learnable or {})}
        owners = {t: torch.as_tensor(o, dtype=torch.int64) for t, o in (owners or {}).items()}
        order, counts, fp, penalty, rb = {}, {}, {}, {}, {}
        for t in ntypes:
            if t not in stores:
                raise ValueError(f"FeatureCache: node type {t!r} has neither read-only features nor a table")
            if t not in hotness.counts or hotness.counts[t].numel() != stores[t].shape[0]:
                raise ValueError(f"FeatureCache: hotness of {t!r} does not count its {stores[t].shape[0]} rows")
            is_learnable = t in (learnable or {})
            _check_owners(owners, t, stores[t].shape[0])
            eligible = owners[t] == rank if is_learnable and t in owners else None
            counts[t] = hotness.counts[t].cpu()
            order[t] = hottest_first(counts[t], eligible)
            rb[t] = _row_bytes(stores[t])
            fp[t] = _footprint(rb[t], is_learnable) if rb[t] else 0
            counts[t] = torch.zeros_like(counts[t]).index_copy_(0, order[t], counts[t].index_select(0, order[t]))
            if not fp[t]:
                penalty[t] = 0.0
            elif penalties is not None:
                if t not in penalties:
                    raise KeyError(f"FeatureCache: penalties has no entry for node type {t!r}")
                penalty[t] = float(penalties[t])
            else:
                sample = max(1, round(hotness.per_batch(t)))
                penalty[t] = miss_penalty(stores[t], device, sample, is_learnable, seed=seed)
        if allocation == "heta":
            rows, share = _plan_heta(order, counts, fp, penalty, budget_bytes)
            cached = {t: order[t][: rows[t]] for t in order}
        else:
            generator = torch.Generator().manual_seed(int(seed))
            cached, share = _plan_global(order, counts, fp, budget_bytes, generator, allocation == "hotness")
        plan = {
            t: TypePlan(
                t in (learnable or {}), rb[t], fp[t], int(counts[t].sum()), penalty[t], share[t], cached[t].numel()
            )
            for t in ntypes
        }
        return cls(features, learnable, cached, device, ntypes=ntypes, owners=owners, rank=rank, plan=plan)

    # ------------------------------------------------------------- queries
    def cached_ids(self, ntype: str) -> torch.Tensor:
        """Local ids of the rows of ``ntype`` held on the device (hottest first when built)."""
        return self._ids[self._check_type(ntype)]

    def owner(self, ntype: str, ids) -> torch.Tensor:
        """Worker owning each row ``ids`` of ``ntype`` under the ownership map."""
        if ntype not in self.owners:
            raise KeyError(
                f"FeatureCache.owner: no ownership map for node type {ntype!r} (the map covers {sorted(self.owners)})"
            )
        return self.owners[ntype].index_select(0, torch.as_tensor(ids, dtype=torch.int64).cpu())

    def cache_bytes(self) -> int:
        """Bytes the cached rows (and learnable rows' optimizer state) occupy on the device."""
        return sum(self._ids[t].numel() * self._footprint[t] for t in self.ntypes)

    def _check_type(self, ntype: str) -> str:
        if ntype not in self._store:
            raise KeyError(f"FeatureCache: unknown node type {ntype!r}; node types: {self.ntypes}")
        return ntype

    # ------------------------------------------------------------- fetching
    def fetch(self, ntype: str, ids) -> torch.Tensor:
        """Rows ``ids`` (local ids) of ``ntype`` on the device: hits from the cache, misses from the store.

        For a learnable type the result is differentiable: gradients reach the
        cache's table for hits and the store's table for misses (both sparse).
        With an ownership map, learnable rows owned by another worker are
        refused (ValueError): the trainer routes them to their owner.
        """
        t = self._check_type(ntype)
        ids = torch.as_tensor(ids)
        if ids.dim() != 1 or ids.is_floating_point() or ids.dtype == torch.bool:
            raise ValueError(
                f"FeatureCache.fetch: ids must be a 1-D integer tensor, got shape {tuple(ids.shape)} dtype {ids.dtype}"
            )
        ids = ids.to(device=self.device, dtype=torch.int64)
        store, rows = self._store[t], self._rows[t]
        n = store.shape[0]
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= n):
            raise IndexError(
                f"FeatureCache.fetch: ids of {t!r} must lie in [0, {n}), got range [{int(ids.min())}, {int(ids.max())}]"
            )
        learnable = t in self._learnable
        if learnable and t in self.owners:
            owner = self._owner_on_device[t].index_select(0, ids)
            foreign = torch.nonzero(owner != self.rank).squeeze(1)
            if foreign.numel():
                i = int(foreign[0])
                raise ValueError(
                    f"FeatureCache.fetch: learnable row {int(ids[i])} of {t!r} belongs to worker "
                    f"{int(owner[i])}, not {self.rank}; fetch it through its owner (see owner()), "
                    "which holds its only up-to-date copy"
                )
        training = learnable and torch.is_grad_enabled() and store.requires_grad
        slot = self._slot[t].index_select(0, ids)
        hit = slot >= 0
        hit_pos, miss_pos = torch.nonzero(hit).squeeze(1), torch.nonzero(~hit).squeeze(1)
        hit_slot = slot.index_select(0, hit_pos)
        if training and hit_pos.numel():
            if self._optimizer is None:
                raise RuntimeError(
                    f"FeatureCache.fetch: learnable rows of {t!r} are cached but no optimizer "
                    "updates them; call bind_optimizer(opt) first, or fetch under torch.no_grad()"
                )
            self._dirty[t][hit_slot] = True
        miss_ids = ids.index_select(0, miss_pos).to(store.device)
        if learnable:
            hit_rows = F.embedding(hit_slot, rows, sparse=True)
            miss_rows = F.embedding(miss_ids, store, sparse=True).to(self.device)
        else:
            hit_rows = rows.index_select(0, hit_slot)
            miss_rows = store.index_select(0, miss_ids).to(self.device)
        out = hit_rows.new_zeros((ids.numel(),) + tuple(store.shape[1:]))
        out = out.index_copy(0, hit_pos, hit_rows).index_copy(0, miss_pos, miss_rows)
        traffic = 2 * self._footprint[t] if training else self._row_bytes[t]
        s = self._stats[t]
        s.hits += hit_pos.numel()
        s.misses += miss_pos.numel()
        s.bytes_saved += hit_pos.numel() * traffic
        s.bytes_moved += miss_pos.numel() * traffic
        return out

    def fetch_nodes(self, ids) -> FetchedRows:
        """Rows of the nodes ``ids`` (global ids in ``ntypes`` order), grouped by type.

        Laid out as ``TypedEmbedding.fetch`` lays them out, so
        ``embedding.project(cache.fetch_nodes(ids))`` replaces ``embedding(ids)``.
        """
        ids = torch.as_tensor(ids).to(device=self.device, dtype=torch.int64)
        parts = [
            (i, pos, self.fetch(t, local))
            for i, t, pos, local in split_by_type(ids, self.offsets, self.ntypes, "FeatureCache.fetch_nodes")
        ]
        return FetchedRows(ids.numel(), parts)

    # ------------------------------------------------------------ training
    def accumulate_grad(self, ntype: str, ids, values: torch.Tensor) -> None:
        """Add a gradient computed elsewhere (e.g. received from another worker) for learnable rows
        ``ids`` of ``ntype`` (local ids, distinct; ``values`` one row each).

        A cached row's part joins the cache table's sparse gradient (and the
        row is written back at the next ``write_back``), the others' the
        store's, so the optimizer updates each row where it lives, exactly as
        it would update the store without a cache.
        """
        t = self._check_type(ntype)
        if t not in self._learnable:
            raise ValueError(f"FeatureCache.accumulate_grad: {t!r} is read-only; only learnable rows take gradients")
        ids = torch.as_tensor(ids).to(device=self.device, dtype=torch.int64)
        if values.shape != (ids.numel(),) + tuple(self._store[t].shape[1:]):
            raise ValueError(
                f"FeatureCache.accumulate_grad: {ids.numel()} ids of {t!r} but values of shape {tuple(values.shape)}"
            )
        slot = self._slot[t].index_select(0, ids)
        hit = slot >= 0
        hit_pos, miss_pos = torch.nonzero(hit).squeeze(1), torch.nonzero(~hit).squeeze(1)
        if hit_pos.numel():
            hit_slot = slot.index_select(0, hit_pos)
            self._dirty[t][hit_slot] = True
            add_sparse_grad(self._rows[t], hit_slot, values.index_select(0, hit_pos.to(values.device)))
        if miss_pos.numel():
            store = self._store[t]
            add_sparse_grad(
                store,
                ids.index_select(0, miss_pos).to(store.device),
                values.index_select(0, miss_pos.to(values.device)),
            )

    def bind_optimizer(self, optimizer: SparseAdam) -> None:
        """Let ``optimizer`` (which updates the store tables) update the cached learnable rows too.

        Each cached table joins ``optimizer`` as a new parameter group with
        the hyper-parameters of its store table's group, and takes over the
        optimizer state of its rows.
        """
        if not isinstance(optimizer, SparseAdam):
            raise TypeError(
                f"FeatureCache.bind_optimizer: needs a gnnc.nn.SparseAdam (per-row state that can "
                f"move to the cache), got {type(optimizer).__name__}"
            )
        if self._optimizer is not None:
            raise RuntimeError("FeatureCache.bind_optimizer: an optimizer is already bound")
        for t in self.ntypes:
            if t not in self._learnable or self._ids[t].numel() == 0:
                continue
            store, table = self._store[t], self._rows[t]
            group = next((g for g in optimizer.param_groups if any(p is store for p in g["params"])), None)
            if group is None:
                raise ValueError(f"FeatureCache.bind_optimizer: the optimizer does not update the table of {t!r}")
            optimizer.add_param_group({"params": [table], **{k: v for k, v in group.items() if k != "params"}})
            state = optimizer.state.get(store)
            if state:
                ids = self._ids[t].to(store.device)
                optimizer.state[table] = {k: v.index_select(0, ids).to(self.device) for k, v in state.items()}
        self._optimizer = optimizer

    @torch.no_grad()
    def write_back(self) -> int:
        """Copy the cached learnable rows fetched for training since the last call (and their
        optimizer state) to the store; returns how many rows were written."""
        written = 0
        for t in self.ntypes:
            if t not in self._learnable or not bool(self._dirty[t].any()):
                continue
            slots = torch.nonzero(self._dirty[t]).squeeze(1)
            store, table = self._store[t], self._rows[t]
            ids = self._ids[t].index_select(0, slots).to(store.device)
            store.index_copy_(0, ids, table.index_select(0, slots).to(store.device))
            cached_state = self._optimizer.state.get(table) if self._optimizer is not None else None
            if cached_state:
                state = self._optimizer.state[store]
                if not state:  # SparseAdam's own lazy initialization of a table's state
                    state["step"] = torch.zeros(store.shape[0], dtype=torch.int64, device=store.device)
                    state["exp_avg"] = torch.zeros_like(store, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(store, memory_format=torch.preserve_format)
                for k, v in cached_state.items():
                    state[k].index_copy_(0, ids, v.index_select(0, slots).to(store.device))
            self._dirty[t].zero_()
            self._stats[t].rows_written_back += slots.numel()
            written += slots.numel()
        return written

    # --------------------------------------------------------------- stats
    def reset_stats(self) -> None:
        self._stats = {t: TypeStats() for t in self.ntypes}

    def stats(self) -> CacheStats:
        """Hits, misses, hit rates and bytes moved / saved per type since the last ``reset_stats``."""
        out = CacheStats()
        for t in self.ntypes:
            s = TypeStats(**vars(self._stats[t]))
            s.cached_rows = self._ids[t].numel()
            s.cache_bytes = s.cached_rows * self._footprint[t]
            out.per_type[t] = s
        return out

    def __repr__(self) -> str:
        held = {t: self._ids[t].numel() for t in self.ntypes}
        return f"FeatureCache(device={self.device}, cached_rows={held}, bytes={self.cache_bytes()})"

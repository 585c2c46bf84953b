"""What RAF and the vanilla baseline share: the epoch loop, optimizers, the feature cache, checkpoint state.

``DistTrainer`` runs epochs of ``train_step`` and records one
``DistEpochStats`` per epoch: per-step losses, accuracies, seconds and bytes
per stage and, with a feature cache, its hits, misses and store traffic per
node type.

**Device** (``device``, e.g. ``cuda:LOCAL_RANK``): as in Heta, the host
keeps the partition graph, the sampler and the stores of input rows; the
model, the input projections and their Adam state, the sampled blocks and
the input rows a step computes with live on ``device``.

**Feature cache** (``build_cache``): Heta's miss-penalty-aware cache
(``gnnc.distributed.cache``) over the rows this rank stores (its read-only
features and the learnable rows it owns), the stores on the host and the
hot rows on the training device. Hotness comes from
pre-sampling epochs of the run's own batches (keyed apart from every
training step) on all ranks; a stored row counts the reads of this rank's
batches and of the requests it serves to other ranks. Every read of a stored
row then goes through the cache and counts a hit or a miss. Rows stored
elsewhere are still fetched from their rank (which serves them through its
own cache): a learnable row may be cached by its owner only, as its only
up-to-date copy may be in that cache, and read-only rows are not replicated
across ranks (RAF never fetches one from another rank; the vanilla baseline
does). The cache changes no value: losses and parameters equal those
without it.

**Checkpoint state** (written by ``gnnc.distributed.checkpoint``):
``replicated_state`` is what every rank holds alike (dense parameters, their
Adam state, the step and epoch counters); ``rank_state`` is what this rank
alone holds: its rows of relation parameters no other rank updates (RAF),
its learnable rows and their SparseAdam state, its sampler and shuffling
streams and its epoch history. Both hold CPU tensors whatever the training
device. ``load_state`` puts both back into a freshly built trainer (on
either device), which then continues exactly as the uninterrupted run.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict, dataclass, field

import torch

from ..message_passing import compiling
from ..nn import SparseAdam
from ..training.minibatch import STAGES
from ..training.resume_state import load_random_state, random_state
from .cache import FeatureCache, Hotness
from .grad_sync import GradSync


@dataclass
class DistEpochStats:
    """One epoch of one rank: per-step and mean loss, accuracies, wall and CPU seconds per stage, mean
    bytes and collective rounds per step by stage, and the feature cache's traffic per node type (``cache``, None
    without cache)."""

    epoch: int
    loss: float
    train_acc: float
    steps: int
    seconds: dict = field(default_factory=dict)
    sent_per_step: dict = field(default_factory=dict)
    received_per_step: dict = field(default_factory=dict)
    val_acc: float = float("nan")
    test_acc: float = float("nan")
    eval_seconds: float = 0.0
    losses: list = field(default_factory=list)
    cache: dict | None = None  # ntype -> CACHE_FIELDS
    rounds_per_step: dict = field(default_factory=dict)
    cpu_seconds: dict = field(default_factory=dict)

    @property
    def train_seconds(self) -> float:
        return sum(self.seconds.values())

    @property
    def bytes_per_step(self) -> float:
        """Bytes sent plus received by this rank per training step."""
        return sum(self.sent_per_step.values()) + sum(self.received_per_step.values())

    def format(self, epochs: int) -> str:
        stages = "  ".join(f"{s} {self.seconds.get(s, 0.0):.2f}s" for s in STAGES)
        line = (
            f"epoch {self.epoch}/{epochs}  loss {self.loss:.4f}  train {self.train_acc * 100:.1f}%  "
            f"val {self.val_acc * 100:.1f}%  test {self.test_acc * 100:.1f}%  | {stages}  | "
            f"train {self.train_seconds:.2f}s  | {self.bytes_per_step / 2**20:.2f} MiB/step sent+received"
        )
        if self.cache is not None:
            line += "  | " + format_cache(self.cache)
        return line


CACHE_FIELDS = ("hits", "misses", "bytes_moved", "bytes_saved", "cached_rows", "cache_bytes")


def cache_summary(cache: FeatureCache) -> dict:
    """``{ntype: {field: value}}`` (``CACHE_FIELDS``) of the cache's counts since its last ``reset_stats``."""
    return {t: {k: getattr(s, k) for k in CACHE_FIELDS} for t, s in cache.stats().per_type.items()}


def format_cache(per_type: dict) -> str:
    """Hit rate per type and overall, and store bytes read with the cache and without it (moved + saved)."""

    def rate(hits, misses):
        return f"{hits / (hits + misses) * 100:.1f}%" if hits + misses else "-"

    total = {k: sum(s[k] for s in per_type.values()) for k in CACHE_FIELDS}
    rates = ", ".join(f"{t} {rate(s['hits'], s['misses'])}" for t, s in per_type.items())
    return (
        f"cache hit {rate(total['hits'], total['misses'])} ({rates}); store reads "
        f"{total['bytes_moved'] / 2**20:.2f} MiB, {(total['bytes_moved'] + total['bytes_saved']) / 2**20:.2f} "
        f"MiB without cache"
    )


def run_config(parts, **settings) -> dict:
    """The settings of a run and its partitioning (method, parameters, parent node and edge counts), as JSON
    values: what a checkpoint must match to be resumed."""
    settings = {k: str(v) if isinstance(v, torch.dtype) else v for k, v in settings.items()}
    config = {
        **settings,
        "partition": parts.method,
        "partition_params": parts.params,
        "num_nodes": [[t, int(n)] for t, n in parts.schema.ntypes],
        "relations": [[list(rel), int(n)] for rel, n in parts.schema.relations],
    }
    return json.loads(json.dumps(config))


class DistTrainer:
    """Shared part of ``RAFTrainer`` and ``VanillaTrainer``; see the module docstring.

    Subclasses call ``__init__`` first, then set ``model``, ``inputs``
    (``InputRows``), ``labels`` (host), ``compiled``, ``sampler`` (keyed:
    its ``step`` picks the draws) and ``shuffle``, call ``_prepare_training``,
    and provide ``train_step(seeds) -> (loss, correct, count)``,
    ``epoch_batches(generator=None)`` (this epoch's batches, shuffled by
    ``generator`` or the run's own ``shuffle``) and ``evaluate(split)``.
    ``method`` names the trainer in checkpoints; ``config`` (JSON-able) is
    what a checkpoint must match to be resumed; ``device`` is where it
    computes (module docstring).
    """

    method = ""

    def __init__(self, comm, seed: int, config: dict, device="cpu"):
        self.comm, self.seed, self.config = comm, seed, config
        self.device = torch.device(device)
        self.epoch = self.step_count = 0
        self.history: list[DistEpochStats] = []
        self.cache: FeatureCache | None = None

    def message_passing(self):
        """Context for the model's message passing: ``gnnc.compile``'s compiler, or eager."""
        return compiling({}) if self.compiled else contextlib.nullcontext()

    def _sample_and_fetch(self, sampler, seeds: torch.Tensor):
        """Blocks for ``seeds`` on ``device`` and their fetched input rows, timed as the sample (with the
        move) and feature-fetch stages."""
        meter = self.comm.meter
        with meter.stage("sample"):
            blocks = [b if b.device == self.device else b.to(self.device) for b in sampler.sample(seeds)]
        with meter.stage("feature fetch"):
            fetched = self.inputs.fetch(blocks[0].src_ids)
        return blocks, fetched

    def _labels(self, seeds: torch.Tensor) -> torch.Tensor:
        """Labels of the target ids ``seeds``, on ``device``."""
        return self.labels.index_select(0, seeds).to(self.device)

    def _prepare_training(self, lr: float, embed_lr: float | None, synced_rows: dict | None = None) -> None:
        """Move the model and the input projections to ``device``, create the optimizers (Adam; SparseAdam
        for the learnable rows, on the host) and ``grad_sync`` (``GradSync`` with ``synced_rows``)."""
        self.model.to(self.device)
        self.inputs.projections.to(self.device)
        dense = list(self.model.parameters()) + self.inputs.dense_parameters()
        self.dense_opt = torch.optim.Adam(dense, lr=lr)
        tables = self.inputs.sparse_parameters()
        self.sparse_opt = SparseAdam(tables, lr=lr if embed_lr is None else embed_lr) if tables else None
        self.grad_sync = GradSync(self.comm, dense, synced_rows)

    def _zero_grad(self) -> None:
        self.dense_opt.zero_grad()
        if self.sparse_opt is not None:
            self.sparse_opt.zero_grad()  # the stores' tables and the cache's

    def _update(self) -> None:
        """Sum dense gradients over ranks and step Adam; send row gradients to owners, step SparseAdam and
        write cached rows back to their stores."""
        meter = self.comm.meter
        with meter.stage("dense update"):
            self.grad_sync()
            self.dense_opt.step()
        with meter.stage("embedding update"):
            self.inputs.push_grads()
            if self.sparse_opt is not None:
                self.sparse_opt.step()
            self.inputs.write_back()

    def run_epoch(self, evaluate: bool = True) -> DistEpochStats:
        """One pass over this epoch's batches, then (optionally) validation and test accuracy."""
        meter = self.comm.meter
        first = len(meter.steps)
        if self.cache is not None:
            self.cache.reset_stats()
        losses, correct, seen = [], 0, 0
        self.model.train()
        for seeds in self.epoch_batches():
            loss, hits, count = self.train_step(seeds)
            losses.append(loss)
            correct, seen = correct + hits, seen + count
        summary = meter.summary(first)
        self.epoch += 1
        stats = DistEpochStats(
            self.epoch,
            sum(losses) / max(len(losses), 1),
            correct / max(seen, 1),
            len(losses),
            summary["seconds"],
            summary["sent_per_step"],
            summary["received_per_step"],
            losses=losses,
            rounds_per_step=summary["rounds_per_step"],
            cpu_seconds=summary["cpu_seconds"],
        )
        if self.cache is not None:
            stats.cache = cache_summary(self.cache)
        if evaluate:
            start = time.perf_counter()
            stats.val_acc, stats.test_acc = self.evaluate("val"), self.evaluate("test")
            stats.eval_seconds = time.perf_counter() - start
        self.history.append(stats)
        return stats

    # ------------------------------------------------------------ cache
    def build_cache(self, fraction: float, presample_epochs: int = 2) -> FeatureCache:
        """Build Heta's feature cache over this rank's stores and serve reads from it; every rank calls it.

        The budget is ``fraction`` of the bytes of the rows this rank stores
        (features and tables, without optimizer state; a cached learnable
        row also holds its Adam state, three times its bytes). Hotness:
        ``presample_epochs`` pre-sampled epochs (module docstring); miss
        penalties are measured. Load a checkpoint before, not after: the
        cache copies the rows and optimizer state it takes over.
        """
        if fraction < 0:
            raise ValueError(f"build_cache: fraction must be non-negative, got {fraction}")
        if self.cache is not None:
            raise RuntimeError("build_cache: this trainer already has a cache")
        stores = self.inputs.stores()
        counts, num_batches = self._presample_counts(presample_epochs)
        learnable = {t: s for t, s in stores.items() if t in self.inputs.tables}
        features = {t: s for t, s in stores.items() if t not in learnable}
        budget = fraction * sum(s.numel() * s.element_size() for s in stores.values())
        cache = FeatureCache.from_hotness(
            Hotness({t: counts[t] for t in stores}, num_batches),
            features,
            learnable,
            budget,
            self.device,
            ntypes=list(stores),
            seed=self.seed,
        )
        if learnable:
            cache.bind_optimizer(self.sparse_opt)
        self.inputs.attach_cache(cache)
        self.cache = cache
        return cache

    def _presample_counts(self, epochs: int):
        """({type: reads of each of this rank's store rows}, batches sampled here) over ``epochs`` epochs.

        Draws other batches (their own shuffle) and other keys (negative
        steps) than training, and leaves the training streams alone. A row
        read from another rank is stored by that rank alone (both trainers
        place rows so), so the remote reads of all ranks, summed, are the
        requests the storing rank serves.
        """
        if epochs < 1:
            raise ValueError(f"build_cache: presample_epochs must be at least 1, got {epochs}")
        inputs = self.inputs
        offsets = inputs.offsets.tolist()
        stored = torch.cat(
            [
                inputs.local_row[t] >= 0
                if t in inputs.local_row
                else torch.zeros(offsets[i + 1] - offsets[i], dtype=torch.bool)
                for i, t in enumerate(inputs.ntypes)
            ]
        )
        local = torch.zeros(offsets[-1], dtype=torch.int64)
        remote = torch.zeros(offsets[-1], dtype=torch.int64)
        shuffle = torch.Generator().manual_seed(self.seed + 1_000_003)
        batches = [seeds for _ in range(epochs) for seeds in self.epoch_batches(shuffle)]
        step = self.sampler.step
        with self.comm.meter.outside_steps():
            for k, seeds in enumerate(batches):
                self.sampler.step = -1 - k
                reads = torch.bincount(self.sampler.sample(seeds)[0].src_ids, minlength=offsets[-1])
                local += torch.where(stored, reads, 0)
                remote += torch.where(stored, 0, reads)
            self.comm.all_reduce(remote)
        self.sampler.step = step
        served = torch.where(stored, local + remote, 0)
        counts = {}
        for i, t in enumerate(inputs.ntypes):
            if t in inputs.local_row:
                rows = inputs.local_row[t]
                mine = torch.nonzero(rows >= 0).squeeze(1)
                per_row = torch.zeros(int(mine.numel()), dtype=torch.int64)
                counts[t] = per_row.index_copy_(
                    0, rows.index_select(0, mine), served[offsets[i] : offsets[i + 1]][mine]
                )
        return counts, len(batches)

    # ------------------------------------------------------- checkpoint state
    def _split_rows(self) -> list:
        """(name, parameter, rows every rank holds alike, rows only this rank updates) of the dense
        parameters that are not replicated whole; their other rows never change on this rank. None here."""
        return []

    def replicated_state(self) -> dict:
        """What every rank holds alike (rank 0 writes it once), on the CPU; see the module docstring."""
        return on_cpu(
            {
                "model": self.model.state_dict(),
                "projections": self.inputs.projections.state_dict(),
                "dense_opt": self.dense_opt.state_dict(),
                "epoch": self.epoch,
                "step_count": self.step_count,
            }
        )

    def rank_state(self) -> dict:
        """What this rank alone holds, on the CPU; see the module docstring."""
        self.inputs.write_back()
        rows = {}
        for name, p, _, own in self._split_rows():
            adam = self.dense_opt.state.get(p, {})
            at = own.to(p.device)
            rows[name] = {
                "rows": own,
                "value": p.detach().index_select(0, at),
                **{k: adam[k].index_select(0, at) for k in ("exp_avg", "exp_avg_sq") if k in adam},
            }
        tables = {t: table.weight.detach() for t, table in self.inputs.tables.items()}
        sparse = {t: dict(self.sparse_opt.state.get(table.weight, {})) for t, table in self.inputs.tables.items()}
        return on_cpu(
            {
                "rank": self.comm.rank,
                "epoch": self.epoch,
                "rows": rows,
                "tables": tables,
                "sparse_opt": sparse,
                **random_state(self.sampler, self.shuffle),
                "history": [asdict(s) for s in self.history],
            }
        )

    def load_state(self, replicated: dict, own: dict) -> None:
        """Continue from ``replicated_state`` (rank 0's) and this rank's ``rank_state``; before any training
        and before ``build_cache``."""
        rank = self.comm.rank
        if self.cache is not None:
            raise RuntimeError("load_state: load the checkpoint before build_cache (the cache copies the rows)")
        if own["rank"] != rank:
            raise ValueError(f"load_state: rank {rank} was given rank {own['rank']}'s state")
        split = self._split_rows()
        initial = {name: p.detach().clone() for name, p, _, _ in split}
        self.model.load_state_dict(replicated["model"])
        self.inputs.projections.load_state_dict(replicated["projections"])
        self.dense_opt.load_state_dict(replicated["dense_opt"])
        for name, p, shared, mine in split:
            saved = own["rows"].get(name)
            if saved is None or not torch.equal(saved["rows"], mine):
                raise ValueError(
                    f"load_state: rank {rank}'s checkpoint does not hold the rows of {name!r} this "
                    f"rank updates ({mine.tolist()})"
                )
            with torch.no_grad():
                p.copy_(_combine(initial[name], p.detach(), shared, saved["value"], mine))
            adam = self.dense_opt.state.get(p, {})
            for k in ("exp_avg", "exp_avg_sq"):
                if k in adam:  # rows this rank never updates have zero moments
                    adam[k] = _combine(torch.zeros_like(adam[k]), adam[k], shared, saved[k], mine)
        if set(own["tables"]) != set(self.inputs.tables):
            raise ValueError(
                f"load_state: rank {rank}'s checkpoint holds tables {sorted(own['tables'])}, this rank "
                f"{sorted(self.inputs.tables)}"
            )
        for t, table in self.inputs.tables.items():
            if own["tables"][t].shape != table.weight.shape:
                raise ValueError(
                    f"load_state: rank {rank}'s {t!r} table has shape {tuple(own['tables'][t].shape)} "
                    f"in the checkpoint, {tuple(table.weight.shape)} here"
                )
            with torch.no_grad():
                table.weight.copy_(own["tables"][t])
            if own["sparse_opt"][t]:
                self.sparse_opt.state[table.weight] = dict(own["sparse_opt"][t])
        load_random_state(own, self.sampler, self.shuffle)
        self.epoch, self.step_count = replicated["epoch"], replicated["step_count"]
        self.history = [DistEpochStats(**s) for s in own["history"]]


def _combine(
    base: torch.Tensor, shared_src: torch.Tensor, shared: torch.Tensor, own_rows: torch.Tensor, own: torch.Tensor
) -> torch.Tensor:
    """``base`` with rows ``shared`` taken from ``shared_src`` and rows ``own`` set to ``own_rows``, on
    ``base``'s device."""
    out = base.clone()
    shared, own = shared.to(out.device), own.to(out.device)
    out[shared] = shared_src[shared]
    out[own] = own_rows.to(out.device)
    return out


def on_cpu(state):
    """``state`` (nested dicts, lists and tuples) with every tensor on the CPU: tensors there are kept,
    the others copied; a state dict keeps its ``_metadata``."""
    if isinstance(state, torch.Tensor):
        return state.cpu()
    if isinstance(state, (list, tuple)):
        return type(state)(on_cpu(v) for v in state)
    if not isinstance(state, dict):
        return state
    out = type(state)((k, on_cpu(v)) for k, v in state.items())
    if hasattr(state, "_metadata"):
        out._metadata = state._metadata
    return out

"""Single-process mini-batch node classification on a heterogeneous graph.

``train_minibatch`` samples blocks around batches of target nodes
(``gnnc.data.neighbor_sampler``), builds each block's input from read-only features
and learnable embeddings (``gnnc.nn.TypedEmbedding``), runs a stack of gnnc
layers over the blocks, and updates dense parameters with Adam and the
embedding tables with the per-row lazy ``gnnc.nn.SparseAdam``. Message
passing runs through ``gnnc.compile`` unless ``compiled=False`` (the eager
executor, for comparison): blocks share the graph's schema, so every block
after the first reuses the plans the first one built. Every epoch reports
the time spent per stage (``STAGES``), the training loss and the accuracy on
the validation and test masks (evaluated by sampling too).

Checkpoints (``checkpoint_dir/epoch{e}.pt`` and its manifest, written after
each epoch as a generation of ``gnnc.checkpoints``: sha256-checked on resume,
the previous generation kept) hold the model, the embeddings, both optimizer
states, the sampler, shuffling and torch random states, the epoch counter and
the history, so a resumed run continues with exactly the losses an
uninterrupted one has.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .. import checkpoints
from .. import progress as shown
from ..compile import compile as compile_model
from ..data.neighbor_sampler import NeighborSampler
from ..graph.reverse_relations import add_reverse_relations
from ..nn import SparseAdam, TypedEmbedding
from .model_builders import MODEL_BUILDERS
from .resume_state import config_differences, load_random_state, random_state

STAGES = ("sample", "feature fetch", "forward", "backward", "dense update", "embedding update")
CHECKPOINT_VERSION = 2
CHECKPOINT_FILE = re.compile(r"epoch\d+\.pt(\.tmp)?")


# ---------------------------------------------------------------------- results
@dataclass
class EpochStats:
    """One epoch: mean training loss, accuracies (fractions) and seconds per stage."""

    epoch: int
    loss: float
    train_acc: float
    val_acc: float
    test_acc: float
    steps: int
    times: dict = field(default_factory=dict)  # stage -> seconds, keys STAGES
    eval_seconds: float = 0.0

    @property
    def train_seconds(self) -> float:
        return sum(self.times.values())

    def format(self, epochs: int) -> str:
        stages = "  ".join(f"{s} {self.times[s]:.2f}s" for s in STAGES)
        return (
            f"epoch {self.epoch}/{epochs}  loss {self.loss:.4f}  train {self.train_acc * 100:.1f}%  "
            f"val {self.val_acc * 100:.1f}%  test {self.test_acc * 100:.1f}%  | {stages}  "
            f"| train {self.train_seconds:.2f}s  eval {self.eval_seconds:.2f}s"
        )


@dataclass
class MinibatchResult:
    """History of a run (``epochs``, ``losses[e][step]``) and the trained modules."""

    epochs: list[EpochStats]
    losses: list[list[float]]
    model: nn.Module
    embedding: TypedEmbedding

    @property
    def final(self) -> EpochStats:
        return self.epochs[-1]


# ---------------------------------------------------------------------- trainer
class MinibatchTrainer:
    """Everything one mini-batch run holds; ``train_minibatch`` drives it.

    ``model_builder(g, hidden, num_classes, num_layers)`` returns a module
    with ``forward(blocks, x) -> logits of the seeds`` (e.g. ``LayerStack``)
    or is a name in ``MODEL_BUILDERS``. ``add_reverse`` trains on
    ``gnnc.graph.reverse_relations.add_reverse_relations(dataset.graph)`` (the graph the
    partitioners split), so every node type is reachable from the target
    type. ``learnable``: ``"non-target"`` (every
    type but the target gets an embedding table, as ogbn-mag), ``"missing"``
    (types without ``feat``) or a list of node types. ``compiled``: run the
    model through ``gnnc.compile`` (default) or eagerly; ``self.model`` is
    the plain model either way, so checkpoints of both modes are alike.
    """

    def __init__(
        self,
        dataset,
        model_builder,
        fanouts,
        batch_size: int,
        lr: float,
        seed: int,
        *,
        hidden: int = 64,
        embed_dim: int | None = None,
        embed_lr: float | None = None,
        learnable="non-target",
        add_reverse: bool = True,
        dtype=torch.float32,
        device="cpu",
        compiled: bool = True,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.device = torch.device(device)
        g = add_reverse_relations(dataset.graph) if add_reverse else dataset.graph
        self.g = g
        target = dataset.target_ntype
        data = g.nodes[target].data
        self.labels = data["label"].to(self.device)
        self.split_ids = {k: torch.nonzero(data[f"{k}_mask"]).squeeze(1) for k in ("train", "val", "test")}
        if self.split_ids["train"].numel() == 0:
            raise ValueError(f"dataset {dataset.name!r} has no training nodes of type {target!r}")
        self.sampler = NeighborSampler(g, fanouts, target, seed=seed + 1)
        self.eval_sampler = NeighborSampler(g, fanouts, target, seed=seed + 2)
        self.batch_size, self.fanouts, self.seed = batch_size, self.sampler.fanouts, seed
        self.shuffle = torch.Generator().manual_seed(seed)
        learnable_types = _learnable_types(g, target, learnable)
        if isinstance(model_builder, str):
            if model_builder not in MODEL_BUILDERS:
                raise KeyError(f"unknown model {model_builder!r}; choose one of {list(MODEL_BUILDERS)}")
            model_name, model_builder = model_builder, MODEL_BUILDERS[model_builder]
        else:
            model_name = getattr(model_builder, "__qualname__", type(model_builder).__name__)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.embedding = TypedEmbedding.from_graph(g, hidden, learnable_types, embed_dim, dtype=dtype)
            self.model = model_builder(g, hidden, dataset.num_classes, len(self.fanouts)).to(dtype)
        self.embedding.to(self.device)
        self.model.to(self.device)
        self.run_model = compile_model(self.model) if compiled else self.model
        self.dense_opt = torch.optim.Adam(list(self.model.parameters()) + self.embedding.dense_parameters(), lr=lr)
        tables = self.embedding.sparse_parameters()
        self.sparse_opt = SparseAdam(tables, lr=lr if embed_lr is None else embed_lr) if tables else None
        self.epoch = 0
        self.history: list[EpochStats] = []
        self.losses: list[list[float]] = []
        self.config = {
            "dataset": dataset.name,
            "num_nodes": [g.num_nodes(t) for t in g.ntypes],
            "relations": [list(k) for k in g.canonical_etypes],
            "fanouts": self.fanouts,
            "batch_size": batch_size,
            "lr": lr,
            "embed_lr": embed_lr,
            "seed": seed,
            "hidden": hidden,
            "embed_dim": embed_dim,
            "learnable": learnable_types,
            "model": model_name,
            "dtype": str(dtype),
        }

    # ------------------------------------------------------------------ steps
    def _blocks(self, sampler, seeds):
        """Sampled blocks on the training device (the move counts as sampling time)."""
        return [b.to(self.device) for b in sampler.sample(seeds)]

    def run_epoch(self, progress: bool = False) -> EpochStats:
        """Train one pass over the shuffled training nodes, evaluate, record and return the epoch."""
        times, losses, train_acc = self._train_epoch(progress)
        start = time.perf_counter()
        val_acc, test_acc = self.evaluate("val", progress), self.evaluate("test", progress)
        stats = EpochStats(
            self.epoch,
            sum(losses) / len(losses),
            train_acc,
            val_acc,
            test_acc,
            len(losses),
            times,
            time.perf_counter() - start,
        )
        self.history.append(stats)
        self.losses.append(losses)
        return stats

    def _train_epoch(self, progress: bool):
        self.model.train()
        self.embedding.train()
        times = dict.fromkeys(STAGES, 0.0)
        train = self.split_ids["train"]
        order = train.index_select(0, torch.randperm(train.numel(), generator=self.shuffle))
        batches = order.split(self.batch_size)
        losses, correct = [], 0
        bar = shown.bar(batches, desc=f"epoch {self.epoch + 1}", unit="batch", disable=not progress, leave=False)
        clock = _StageClock(times, self.device)
        for seeds in bar:
            clock.start()
            blocks = self._blocks(self.sampler, seeds)
            clock.lap("sample")
            fetched = self.embedding.fetch(blocks[0].src_ids)
            clock.lap("feature fetch")
            logits = self.run_model(blocks, self.embedding.project(fetched))
            labels = self.labels.index_select(0, seeds.to(self.device))
            loss = F.cross_entropy(logits, labels)
            clock.lap("forward")
            self.dense_opt.zero_grad()
            if self.sparse_opt is not None:
                self.sparse_opt.zero_grad()
            loss.backward()
            clock.lap("backward")
            self.dense_opt.step()
            clock.lap("dense update")
            if self.sparse_opt is not None:
                self.sparse_opt.step()
            clock.lap("embedding update")
            losses.append(loss.item())
            correct += int((logits.argmax(-1) == labels).sum())
            bar.set_postfix(loss=f"{losses[-1]:.4f}")
        self.epoch += 1
        return times, losses, correct / train.numel()

    @torch.no_grad()
    def evaluate(self, split: str, progress: bool = False) -> float:
        """Accuracy on ``split`` ('train', 'val' or 'test'), with sampled blocks (a progress bar with
        ``progress`` when there are several batches).

        The evaluation sampler is reseeded from the epoch, so evaluating
        never disturbs the training streams and repeats exactly on resume.
        """
        self.model.eval()
        self.embedding.eval()
        ids = self.split_ids[split]
        if ids.numel() == 0:
            return float("nan")
        self.eval_sampler.manual_seed(self.seed * 1_000_003 + 2 * self.epoch + (split == "test"))
        correct = 0
        batches = ids.split(self.batch_size)
        for seeds in shown.bar(
            batches, desc=f"evaluating {split}", unit="batch", leave=False, disable=len(batches) < 2 or not progress
        ):
            blocks = self._blocks(self.eval_sampler, seeds)
            logits = self.run_model(blocks, self.embedding(blocks[0].src_ids))
            correct += int((logits.argmax(-1) == self.labels.index_select(0, seeds.to(self.device))).sum())
        return correct / ids.numel()

    # ------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict:
        return {
            "version": CHECKPOINT_VERSION,
            "config": self.config,
            "epoch": self.epoch,
            "model": self.model.state_dict(),
            "embedding": self.embedding.state_dict(),
            "dense_opt": self.dense_opt.state_dict(),
            "sparse_opt": None if self.sparse_opt is None else self.sparse_opt.state_dict(),
            **random_state(self.sampler, self.shuffle),
            "history": [asdict(s) for s in self.history],
            "losses": self.losses,
        }

    def load_state_dict(self, state: dict) -> None:
        if state.get("version") != CHECKPOINT_VERSION:
            raise ValueError(
                f"checkpoint format version {state.get('version')!r}; this gnnc reads version {CHECKPOINT_VERSION}"
            )
        diff = config_differences(state["config"], self.config)
        if diff:
            raise ValueError("checkpoint was written by a different run configuration:\n  " + "\n  ".join(diff))
        self.model.load_state_dict(state["model"])
        self.embedding.load_state_dict(state["embedding"])
        self.dense_opt.load_state_dict(state["dense_opt"])
        if self.sparse_opt is not None:
            self.sparse_opt.load_state_dict(state["sparse_opt"])
        load_random_state(state, self.sampler, self.shuffle)
        self.epoch = state["epoch"]
        self.history = [EpochStats(**s) for s in state["history"]]
        self.losses = [list(x) for x in state["losses"]]

    def save(self, directory) -> Path:
        """Write this epoch's generation (``epoch{e}.pt`` and its manifest) into ``directory``; returns the
        manifest path. The previous generation stays until this one is committed."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        name = f"epoch{self.epoch}.pt"
        checkpoints.retire(directory, self.epoch)
        entry = checkpoints.write_file(self.state_dict(), directory / name)
        record = {
            "format": "gnnc-minibatch-checkpoint",
            "version": CHECKPOINT_VERSION,
            "epoch": self.epoch,
            "files": {name: entry},
        }
        return checkpoints.commit(directory, self.epoch, record, CHECKPOINT_FILE)

    def load(self, directory) -> None:
        """Restore the newest generation in ``directory`` whose file passes its size and sha256 check."""
        directory = Path(directory)

        def read(record):
            ((name, entry),) = record["files"].items()
            return checkpoints.read_file(directory / name, entry)

        self.load_state_dict(checkpoints.newest_whole(directory, read))


class _StageClock:
    """``lap(stage)`` adds the time since the previous lap (or ``start``) to ``times[stage]``.

    CUDA work is synchronized first, so each stage is charged its own kernels.
    """

    def __init__(self, times: dict, device: torch.device):
        self.times, self.device = times, device
        self.last = time.perf_counter()

    def start(self) -> None:
        self._sync()
        self.last = time.perf_counter()

    def lap(self, stage: str) -> None:
        self._sync()
        now = time.perf_counter()
        self.times[stage] += now - self.last
        self.last = now

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def _learnable_types(g, target: str, learnable) -> list[str]:
    if learnable == "non-target":
        return [t for t in g.ntypes if t != target]
    if learnable == "missing":
        return [t for t in g.ntypes if "feat" not in g.nodes[t].data]
    if isinstance(learnable, str):
        raise ValueError(f"learnable must be 'non-target', 'missing' or a list of node types, got {learnable!r}")
    for t in learnable:
        g.ntype_id(t)  # KeyError naming the unknown type
    return [t for t in g.ntypes if t in set(learnable)]  # graph order, so checkpoints compare equal


def train_minibatch(
    dataset,
    model_builder,
    fanouts,
    batch_size: int,
    epochs: int,
    lr: float,
    seed: int,
    checkpoint_dir=None,
    resume: bool = False,
    progress: bool = True,
    **options,
) -> MinibatchResult:
    """Mini-batch node classification on ``dataset.target_ntype``; see the module docstring.

    ``options`` go to ``MinibatchTrainer`` (hidden, embed_dim, embed_lr,
    learnable, add_reverse, dtype, device, compiled). With ``resume`` the run continues
    from ``checkpoint_dir`` up to ``epochs`` epochs in total. Per-epoch lines
    are printed when ``progress`` is set.
    """
    if resume and checkpoint_dir is None:
        raise ValueError("resume needs a checkpoint_dir")
    if checkpoint_dir is not None:
        checkpoints.check_writable(checkpoint_dir)
    trainer = MinibatchTrainer(dataset, model_builder, fanouts, batch_size, lr, seed, **options)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if resume:
            trainer.load(checkpoint_dir)
            if progress:
                shown.line(f"resumed from {checkpoint_dir} after epoch {trainer.epoch}", sys.stdout)
        while trainer.epoch < epochs:
            stats = trainer.run_epoch(progress)
            if progress:
                shown.line(stats.format(epochs), sys.stdout)
            if checkpoint_dir is not None:
                trainer.save(checkpoint_dir)
    return MinibatchResult(trainer.history, trainer.losses, trainer.model, trainer.embedding)

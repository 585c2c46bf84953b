"""Vanilla data-parallel training on edge-cut partitions: the DGL / GraphLearn execution model.

Rank ``r`` holds edge-cut part ``r`` (``gnnc.distributed.edgecut``): the
in-edges of the nodes it owns and the features or learnable rows of those
nodes (and every target's label, a few bytes each). Each rank trains on its
own seeds: an even share of the training targets, as many of its own as
fit (DGL's ``node_split(force_even=True)``), in the same number of batches
on every rank:

1. sampling is distributed: every hop sends each frontier node to its owner,
   which draws its in-edges (``KeyedSampler``, so blocks equal those of a
   keyed sampler on the whole graph) and answers with (destination,
   source, edge id) triples;
2. the input rows of the sampled nodes owned elsewhere are fetched from
   their owners (``InputRows``); gradients of fetched learnable rows go
   back to the owners, which update them;
3. the unmodified model runs on the blocks; the loss is the sum of the
   cross-entropies over the global batch divided by its size, and dense
   gradients are summed over ranks (DDP), so a step equals single-process
   training on the union of the ranks' seeds.

Every byte of it goes through ``Comm`` and is counted per stage.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..data.neighbor_sampler import NeighborSampler
from ..graph import heterograph
from .collectives import Comm
from .input_rows import InputRows
from .raf import KeyedSampler, feature_widths, initial_modules, resolve_learnable, schema_graph
from .trainer import DistTrainer, run_config


class OwnerSampler:
    """Keyed k-hop sampling in which the owner of each node draws its in-edges.

    ``sample(seeds)`` (this rank's seeds, target-type parent ids) returns
    blocks over parent global ids, input layer first, like
    ``NeighborSampler``; every rank must call it once per step (it serves
    the other ranks' requests). Set ``step`` first, the same on all ranks.
    """

    def __init__(self, comm: Comm, parts, fanouts, target: str, seed: int = 0):
        self.comm = comm
        self.part = part = parts.parts[comm.rank]
        self.fanouts, self.target = list(fanouts), target
        self.ntypes = [t for t, _ in parts.schema.ntypes]
        self.counts = {t: int(n) for t, n in parts.schema.ntypes}
        self.relations = [rel for rel, _ in parts.schema.relations]
        if part.relations != self.relations or part.node_types != self.ntypes:
            raise ValueError(
                f"OwnerSampler: part {part.part_id} does not keep every node type and relation of "
                f"the graph; edge-cut parts (random / METIS) do"
            )
        offsets = [0]
        for t in self.ntypes:
            offsets.append(offsets[-1] + self.counts[t])
        self.offsets = offsets
        self.rel_offsets = [sum(n for _, n in parts.schema.relations[:r]) for r in range(len(self.relations))]
        self.owner = torch.cat([parts.owner(t) for t in self.ntypes])
        self.local = KeyedSampler(part.graph, fanouts, target, seed, part.edge_ids)
        self.step = 0

    def state_dict(self) -> dict:
        return {"step": self.step, "local": self.local.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.step = int(state["step"])
        self.local.load_state_dict(state["local"])

    def sample(self, seeds) -> list:
        seeds = torch.as_tensor(seeds, dtype=torch.int64)
        counts = [0] * len(self.ntypes)
        counts[self.ntypes.index(self.target)] = seeds.numel()
        frontier = seeds + self.offsets[self.ntypes.index(self.target)]
        self.local.step = self.step
        blocks = []
        for layer in reversed(range(len(self.fanouts))):
            block = self._hop(frontier, counts, self.fanouts[layer], layer)
            blocks.append(block)
            frontier, counts = block.src_ids, list(block.index.ntype_counts)
        return blocks[::-1]

    def _hop(self, frontier: torch.Tensor, counts: list, fanout: int, layer: int):
        world, num_rels = self.comm.world, len(self.relations)
        owners = self.owner.index_select(0, frontier)
        where = [torch.nonzero(owners == q).squeeze(1) for q in range(world)]
        incoming = self.comm.exchange([frontier.index_select(0, w) for w in where])
        replies = self.comm.exchange([self._answer(gids, fanout, layer) for gids in incoming])
        edges = torch.cat(
            [
                torch.stack([w.index_select(0, rep[:, 0] // num_rels), rep[:, 0] % num_rels, rep[:, 1], rep[:, 2]], 1)
                for w, rep in zip(where, replies)
            ]
        )
        data, eids = {}, []
        for r, rel in enumerate(self.relations):
            mine = edges[edges[:, 1] == r]
            src = mine[:, 2] - self.offsets[self.ntypes.index(rel[0])]
            dst = frontier.index_select(0, mine[:, 0]) - self.offsets[self.ntypes.index(rel[2])]
            data[rel] = (src, dst)
            eids.append(mine[:, 3] + self.rel_offsets[r])  # parent user edge ids, as Block documents
        picked = heterograph(data, num_nodes=self.counts)
        # Every edge of `picked` ends in the frontier: taking all of them
        # builds the block with NeighborSampler's own layout.
        block = NeighborSampler(picked, [-1], self.target)._sample_hop(frontier, counts, -1)
        block.parent_eids = torch.cat(eids).index_select(0, block.parent_eids)
        return block

    def _answer(self, gids: torch.Tensor, fanout: int, layer: int) -> torch.Tensor:
        """Sampled in-edges of owned nodes ``gids``: rows (request position * R + relation, source gid, edge id)."""
        part, num_rels = self.part, len(self.relations)
        types = torch.searchsorted(torch.tensor(self.offsets[1:]), gids, right=True)
        local_offsets = part.graph.index.ntype_offsets
        out = [torch.zeros((0, 3), dtype=torch.int64)]
        for r, (s, _, d) in enumerate(self.relations):
            pos = torch.nonzero(types == self.ntypes.index(d)).squeeze(1)
            if pos.numel() == 0:
                continue
            dst_local = part.to_local(d, gids.index_select(0, pos) - self.offsets[self.ntypes.index(d)])
            src, seg, eids = self.local.pick_in_edges(r, dst_local, fanout, layer)
            s_id = self.ntypes.index(s)
            src_parent = part.node_ids[s].index_select(0, src - local_offsets[s_id]) + self.offsets[s_id]
            out.append(torch.stack([pos.index_select(0, seg) * num_rels + r, src_parent, eids], 1))
        return torch.cat(out)


def edge_cut_inputs(comm: Comm, parts, initial, learnable: list) -> InputRows:
    """``InputRows`` of rank ``comm.rank`` on an edge-cut partitioning: owned rows here, the rest remote."""
    part = parts.parts[comm.rank]
    counts = {t: int(n) for t, n in parts.schema.ntypes}
    dtype = initial.projections[initial.ntypes[0]].weight.dtype
    features, tables, local_row, owner = {}, {}, {}, {}
    for t, n in counts.items():
        owned = part.owned(t)
        local_row[t] = torch.full((n,), -1, dtype=torch.int64)
        local_row[t][owned] = torch.arange(owned.numel())
        owner[t] = parts.owner(t)
        if t in learnable:
            rows = initial.embeddings[t].weight.detach().index_select(0, owned).clone()
            tables[t] = nn.Embedding.from_pretrained(rows, freeze=False, sparse=True)
        elif "feat" not in part.node_feats[t]:
            raise KeyError(f"node type {t!r} has no 'feat' features in part {part.part_id}; make it learnable")
        else:
            features[t] = part.node_feats[t]["feat"].to(dtype)
    remote = list(counts) if comm.world > 1 else []
    return InputRows(
        comm, list(counts), counts, initial.projections, features, tables, local_row, owner, remote, learnable
    )


def balanced_shares(owned: list, world: int) -> list:
    """Split the union of the disjoint id sets ``owned[r]`` into ``world`` shares whose sizes differ
    by at most one; rank ``r`` keeps as many of ``owned[r]`` as fit, the rest is dealt in rank order."""
    total = sum(o.numel() for o in owned)
    sizes = [total // world + (r < total % world) for r in range(world)]
    pool = torch.cat([o[size:] for o, size in zip(owned, sizes)] + [torch.zeros(0, dtype=torch.int64)])
    shares, start = [], 0
    for o, size in zip(owned, sizes):
        kept = o[:size]
        shares.append(torch.cat([kept, pool[start : start + size - kept.numel()]]))
        start += size - kept.numel()
    return shares


class VanillaTrainer(DistTrainer):
    """Data-parallel training of rank ``comm.rank`` on edge-cut partitions; see the module docstring.

    Options as ``RAFTrainer``. Each epoch every rank shuffles its share of
    the training targets and splits it into ``ceil(largest share /
    batch_size)`` batches, so all ranks take the same number of steps.
    The model is replicated whole; each rank's own state is its learnable
    rows, its share's shuffling and its sampler.
    """

    method = "vanilla"

    def __init__(
        self,
        comm: Comm,
        parts,
        model: str,
        fanouts,
        batch_size: int,
        lr: float,
        seed: int,
        *,
        num_classes: int,
        target: str,
        hidden: int = 64,
        embed_dim: int | None = None,
        embed_lr: float | None = None,
        learnable="non-target",
        dtype: torch.dtype = torch.float32,
        compiled: bool = False,
        device="cpu",
    ):
        if parts.method not in ("metis", "random"):
            raise ValueError(f"the vanilla baseline needs edge-cut partitions (metis / random), got {parts.method!r}")
        if parts.num_parts != comm.world:
            raise ValueError(f"vanilla: {parts.num_parts} partitions for {comm.world} ranks; give one part per rank")
        graph = schema_graph(parts.schema)
        widths = feature_widths(parts)
        learnable = resolve_learnable(graph.ntypes, target, widths, learnable)
        super().__init__(
            comm,
            seed,
            run_config(
                parts,
                model=model,
                fanouts=fanouts,
                batch_size=batch_size,
                lr=lr,
                embed_lr=embed_lr,
                seed=seed,
                num_classes=num_classes,
                target=target,
                hidden=hidden,
                embed_dim=embed_dim,
                learnable=learnable,
                dtype=dtype,
            ),
            device,
        )
        self.batch_size, self.target, self.compiled = batch_size, target, compiled
        self.sampler = OwnerSampler(comm, parts, fanouts, target, seed)
        self.eval_sampler = OwnerSampler(comm, parts, fanouts, target, seed + 1)
        initial, self.model = initial_modules(
            graph, model, hidden, num_classes, len(fanouts), widths, learnable, embed_dim, seed, dtype
        )
        self.inputs = edge_cut_inputs(comm, parts, initial, learnable)
        self._prepare_training(lr, embed_lr)
        self.labels = torch.zeros(dict(parts.schema.ntypes)[target], dtype=torch.int64)
        self.split_ids, self.num_batches = {}, {}
        for split in ("train", "val", "test"):
            owned = []
            for part in parts.parts:
                data = part.node_feats[target]
                self.labels[part.owned(target)] = data["label"]
                owned.append(part.owned(target)[data[f"{split}_mask"]])
            shares = balanced_shares(owned, comm.world)
            self.split_ids[split] = shares[comm.rank]
            self.num_batches[split] = max(1, -(-shares[0].numel() // batch_size))  # shares[0] is a largest
        self.shuffle = torch.Generator().manual_seed(seed * 7919 + comm.rank)

    def epoch_batches(self, generator: torch.Generator | None = None):
        """This rank's share of the training targets in ``num_batches['train']`` batches, shuffled by
        ``generator`` (default: the run's)."""
        train = self.split_ids["train"]
        order = torch.randperm(train.numel(), generator=self.shuffle if generator is None else generator)
        return train.index_select(0, order).tensor_split(self.num_batches["train"])

    def _logits(self, sampler, seeds: torch.Tensor):
        blocks, fetched = self._sample_and_fetch(sampler, seeds)
        with self.comm.meter.stage("forward"), self.message_passing():
            x = self.inputs.project(fetched)
            return self.model(blocks, x) if seeds.numel() else None

    def train_step(self, seeds) -> tuple[float, int, int]:
        """One data-parallel step on this rank's ``seeds`` (target ids; may be empty).

        Returns (loss, correct predictions, seeds) of the global batch.
        """
        seeds = torch.as_tensor(seeds, dtype=torch.int64)
        self.sampler.step = self.step_count
        logits = self._logits(self.sampler, seeds)
        meter = self.comm.meter
        with meter.stage("forward"):
            labels = self._labels(seeds)
            ce = F.cross_entropy(logits, labels, reduction="sum") if logits is not None else None
            correct = 0 if logits is None else int((logits.argmax(-1) == labels).sum())
            totals = torch.tensor([0.0 if ce is None else ce.item(), correct, seeds.numel()], dtype=torch.float64)
            self.comm.all_reduce(totals)
        with meter.stage("backward"):
            self._zero_grad()
            if ce is not None:
                (ce / totals[2].item()).backward()
        self._update()
        self.step_count += 1
        meter.end_step()
        return float(totals[0] / totals[2]), int(totals[1]), int(totals[2])

    @torch.no_grad()
    def evaluate(self, split: str) -> float:
        """Accuracy on ``split`` over all ranks' shares (every rank must call it)."""
        self.model.eval()
        correct = torch.zeros(2, dtype=torch.float64)
        with self.comm.meter.outside_steps():
            for k, seeds in enumerate(self.split_ids[split].tensor_split(self.num_batches[split])):
                self.eval_sampler.step = self.epoch * 1_000_003 + k
                logits = self._logits(self.eval_sampler, seeds)
                if logits is not None:
                    correct[0] += int((logits.argmax(-1) == self._labels(seeds)).sum())
                correct[1] += seeds.numel()
            self.comm.all_reduce(correct)
        self.model.train()
        return float(correct[0] / correct[1]) if correct[1] else float("nan")

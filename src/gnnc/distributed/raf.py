"""Relation-Aggregation-First (RAF) training on meta partitions (Heta §4), exact to single process.

Rank ``r`` holds meta partition ``r``: its relations (complete mono-relation
subgraphs), its node types' features and the learnable rows it owns. All
ranks hold the whole (small) model and draw the same seed batch.

**Who computes what.** Seeds are the target nodes of the batch; in every
block they are the first destination rows of the target type. A rank
aggregates, into a seed, only its root relations (``info['root_relations']``,
the relations of the metatree's first hop that its sub-metatrees start with)
and only for seeds of its share (target id mod replicas, when sub-metatrees
are replicated); into every other node it aggregates all its relations, and
by construction of the depth-k metatree those are all the relations into
that node's type, so non-seed embeddings are complete locally.
``PartitionSampler`` samples exactly those edges. The seeds' partial
aggregations are then summed over ranks (``Comm.sum_over_ranks``) and the
cross-relation part of each layer (self loop and bias of R-GCN; the softmax
normalisation of R-GAT; normalisation, update and skip of HGT) runs on every
rank, so every rank holds the seeds' exact embeddings for the next layer.
Attention needs the softmax over all in-edges of a seed, across ranks: the
per-seed maximum is all-reduced (max), then the sums of ``exp(score - max)``
and of ``exp(score - max) * value`` (one all-reduce), then divided.

**Last layer.** Only rank 0 needs the seeds' final embeddings: the last
layer's seed partials are reduced to rank 0 (``Comm.sum_to_root``), which
finishes the layer, applies the head and computes the loss; other ranks
carry placeholders (Heta's designated worker).

**Gradients.** Rank 0 backpropagates the loss, every other rank zero; the
backward of ``sum_to_root`` broadcasts rank 0's gradient of the last
partials, and the backward of ``sum_over_ranks`` sums gradients over
ranks, so every rank's partials get their full gradient. A parameter's
gradient is then the sum of its ranks' contributions, so ``GradSync``
all-reduces every dense gradient, except rows of relation parameters used by
one rank only (e.g. each root relation's last-layer weight), which stay
local, as Heta's per-partition parameters. Learnable input rows of a type
held by several partitions are stored once, by the partition that reaches
the type deepest in the metatree; the others fetch the rows they sample and
send their gradients back (``InputRows``). With these rules a RAF step gives
the loss, gradients and updated parameters of single-process training.
(``shared_learnable='replicate'`` instead gives every partition its own copy
of such rows, as Heta does: no row traffic, but a different model.)

**Sampling.** ``KeyedSampler`` draws, for each destination and relation, the
in-edges with the smallest keys ``hash(seed, step, layer, relation, parent
edge id)``: the draw does not depend on anything else being sampled, so
partitions sampling their own relations reproduce the single-process blocks
of a ``KeyedSampler`` on the whole graph.

**Checkpoints.** All ranks hold the whole model, but a relation
parameter's rows that only one rank aggregates (e.g. each root relation's
last-layer weight) are updated on that rank alone; they are that rank's to
save, with the learnable rows it stores (``DistTrainer.rank_state``).

``RAFTrainer`` runs it. ``KeyedSampler`` and the module set-up helpers are
shared with the vanilla baseline (``gnnc.distributed.vanilla``), and so is
``gnnc.distributed.trainer.DistTrainer`` (the epoch loop, optimizers,
feature cache and checkpoint state).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..data.neighbor_sampler import NeighborSampler
from ..graph import Graph, heterograph
from ..models import HGTConv, RGATConv, RGCNConv
from ..models.common import bias_and_activation
from ..models.norm import relation_in_degree_norm
from ..nn import TypedEmbedding
from ..training.model_builders import MODEL_BUILDERS
from .collectives import Comm
from .input_rows import InputRows
from .meta_partition import MetaTree
from .trainer import DistTrainer, run_config

_MASK64 = (1 << 64) - 1


# ====================================================================== sampling
def _mix64(z: int) -> int:
    """splitmix64 finalizer on a Python int."""
    z = (z + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def edge_keys(salt: int, eids: torch.Tensor) -> torch.Tensor:
    """Pseudo-random int64 keys (63 bits) of edge ids under ``salt``: splitmix64 of ``eid + salt``."""
    x = eids.detach().cpu().numpy().astype(np.uint64) + np.uint64(salt & _MASK64)
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x = x ^ (x >> np.uint64(31))
    return torch.from_numpy((x >> np.uint64(1)).astype(np.int64)).to(eids.device)


def _smallest_per_segment(seg: torch.Tensor, keys: torch.Tensor, k: int) -> torch.Tensor:
    """Mask of the ``k`` smallest keys within each segment (``seg`` non-decreasing)."""
    order = torch.argsort(keys, stable=True)
    order = order.index_select(0, torch.argsort(seg.index_select(0, order), stable=True))
    sorted_seg = seg.index_select(0, order)
    rank = torch.arange(seg.numel(), device=seg.device) - torch.searchsorted(sorted_seg, sorted_seg)
    keep = torch.zeros(seg.numel(), dtype=torch.bool, device=seg.device)
    keep[order[rank < k]] = True
    return keep


class KeyedSampler(NeighborSampler):
    """``NeighborSampler`` whose draws are keyed by edge instead of a random stream.

    Same blocks, layout and fanout semantics. Each in-edge gets the key
    ``hash(seed, step, layer, relation name, parent edge id)`` and every
    destination keeps, per relation, the ``fanout`` in-edges with the
    smallest keys: a uniform draw without replacement that depends only on
    the destination's own in-edges. Set ``step`` before each ``sample``.
    ``parent_eids[rel]`` gives the parent edge id (within the relation) of
    each of ``g``'s edges of ``rel`` in user order, when ``g`` is a part of
    a larger graph (default: ``g`` is the parent). Blocks' ``parent_eids``
    are ``g``'s edge ids, as with ``NeighborSampler``.
    """

    def __init__(self, g: Graph, fanouts, target_ntype: str, seed: int = 0, parent_eids: dict | None = None):
        super().__init__(g, fanouts, target_ntype, seed)
        self.seed, self.step, self._layer = int(seed), 0, 0
        index = g.index
        self._relation_salt, self._parent_eid = [], []
        for r, rel in enumerate(index.etypes):
            self._relation_salt.append(zlib.crc32("|".join(rel).encode()))
            lo, hi = index.rel_range(r)
            user = torch.arange(hi - lo, device=g.device) if index.user_eid is None else index.user_eid[lo:hi] - lo
            if parent_eids is not None:
                user = torch.as_tensor(parent_eids[rel], dtype=torch.int64, device=g.device).index_select(0, user)
            self._parent_eid.append(user)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "step": self.step}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.step = int(state["step"])

    def sample(self, seeds):
        self._layer = len(self.fanouts)
        return super().sample(seeds)

    def _sample_hop(self, frontier, counts, fanout):
        self._layer -= 1  # hops run from the last layer to the first
        return super()._sample_hop(frontier, counts, fanout)

    def pick_in_edges(self, r: int, dst_local: torch.Tensor, fanout: int, layer: int):
        """Sampled in-edges of relation ``r`` into ``dst_local`` (type-local ids of ``g``) for ``layer``.

        Returns (source ids in ``g``'s global id space, position of each
        edge's destination in ``dst_local``, parent edge ids).
        """
        self._layer = layer
        pos, seg = self._pick(r, dst_local, fanout)
        return self._src[r].index_select(0, pos), seg, self._parent_eid[r].index_select(0, pos)

    def _allowed(self, r: int, pos: torch.Tensor, seg: torch.Tensor):
        """Hook: which candidate in-edges may be drawn at all (default: every one)."""
        return pos, seg

    def _pick(self, r, dst_local, fanout):
        pos, seg = super()._pick(r, dst_local, -1)  # every in-edge, by destination then position
        pos, seg = self._allowed(r, pos, seg)
        if fanout < 0 or pos.numel() == 0:
            return pos, seg
        salt = _mix64(_mix64(_mix64(_mix64(self.seed) ^ self.step) ^ self._layer) ^ self._relation_salt[r])
        keys = edge_keys(salt, self._parent_eid[r].index_select(0, pos))
        keep = _smallest_per_segment(seg, keys, fanout)
        return pos[keep], seg[keep]


class PartitionSampler(KeyedSampler):
    """``KeyedSampler`` of one RAF rank: into the seeds only its root relations, for its share.

    ``g`` has the parent's node types, counts and relations (the ones the
    partition lacks are empty). Edges into a seed (the first ``len(seeds)``
    target-type destinations of every block) are drawn only for relations in
    ``root_relations`` and only for seeds with ``id % replicas == replica``;
    edges into other nodes are drawn for every relation of ``g``.
    """

    def __init__(
        self,
        g: Graph,
        fanouts,
        target_ntype: str,
        root_relations,
        replica: int = 0,
        replicas: int = 1,
        seed: int = 0,
        parent_eids: dict | None = None,
    ):
        super().__init__(g, fanouts, target_ntype, seed, parent_eids)
        roots = {tuple(rel) for rel in root_relations}
        unknown = roots - set(g.canonical_etypes)
        if unknown:
            raise KeyError(f"PartitionSampler: root relations {sorted(unknown)} are not relations of the graph")
        self._is_root = [rel in roots for rel in g.canonical_etypes]
        self._into_target = [rel[2] == target_ntype for rel in g.canonical_etypes]
        self.replica, self.replicas = int(replica), int(replicas)
        self._in_share = torch.zeros(0, dtype=torch.bool)

    def sample(self, seeds):
        seeds = torch.as_tensor(seeds, device=self.g.device)
        self._in_share = (seeds % self.replicas) == self.replica
        return super().sample(seeds)

    def _allowed(self, r, pos, seg):
        if not self._into_target[r]:
            return pos, seg
        num_seeds = self._in_share.numel()
        ok = seg >= num_seeds
        if self._is_root[r] and num_seeds:
            ok |= self._in_share.index_select(0, seg.clamp(max=num_seeds - 1)) & (seg < num_seeds)
        return pos[ok], seg[ok]


# =================================================================== layer split
class SeedRows:
    """The seeds' rows among a block's destination rows, combined over ranks.

    ``sum(t)`` / ``max(t)`` return ``t`` (one row per destination) with the
    seed rows replaced by their sum (differentiable) / maximum (not
    differentiable) over ranks. With ``to_root`` (the last layer, whose
    output only rank 0's loss uses) the sum goes to rank 0 alone
    (``Comm.sum_to_root``); other ranks' results are then placeholders.
    """

    def __init__(self, block, target_id: int, num_seeds: int, comm: Comm, to_root: bool = False):
        start = sum(block.num_dst_per_type[:target_id])
        if block.num_dst_per_type[target_id] < num_seeds:
            raise ValueError(
                f"SeedRows: the block has {block.num_dst_per_type[target_id]} target destinations, "
                f"fewer than the {num_seeds} seeds"
            )
        self.rows = torch.arange(start, start + num_seeds, device=block.device)
        self.comm, self.to_root = comm, to_root

    def sum(self, t: torch.Tensor) -> torch.Tensor:
        if self.comm.world == 1:
            return t
        combine = self.comm.sum_to_root if self.to_root else self.comm.sum_over_ranks
        return t.index_copy(0, self.rows, combine(t.index_select(0, self.rows)))

    def max(self, t: torch.Tensor) -> torch.Tensor:
        if self.comm.world == 1:
            return t
        return t.index_copy(0, self.rows, self.comm.all_reduce(t.index_select(0, self.rows), "max"))


def _dst_rows_of_edges(block) -> torch.Tensor:
    """Destination row (position in ``block.slice_dst`` order) of every edge, user order."""
    row_of = torch.full((block.num_src_nodes(),), -1, dtype=torch.int64, device=block.device)
    row_of[block.dst_index] = torch.arange(block.dst_index.numel(), device=block.device)
    return row_of.index_select(0, block.find_edges()[1])


def softmax_aggregate(block, score: torch.Tensor, value: torch.Tensor, seeds: SeedRows) -> torch.Tensor:
    """Per destination row: ``sum_e softmax(score)_e * value_e`` over its in-edges, per head.

    ``score`` is [E, H], ``value`` [E, H, D]; returns [num_dst, H, D] with
    zeros for destinations without in-edges. Seed rows are normalised over
    their in-edges on all ranks: max all-reduce, then one sum all-reduce of
    the denominators and numerators.
    """
    rows = _dst_rows_of_edges(block)
    n_dst, heads = block.dst_index.numel(), score.shape[1]
    peak = score.new_full((n_dst, heads), float("-inf")).scatter_reduce_(
        0, rows.unsqueeze(1).expand(-1, heads), score.detach(), "amax"
    )
    peak = seeds.max(peak)
    weight = torch.exp(score - peak.index_select(0, rows)).unsqueeze(-1)
    stats = torch.cat([weight, weight * value], dim=-1)
    total = seeds.sum(score.new_zeros((n_dst, heads, 1 + value.shape[-1])).index_add(0, rows, stats))
    denom = total[..., :1]
    return total[..., 1:] / torch.where(denom > 0, denom, torch.ones_like(denom))


def rgcn_layer(layer: RGCNConv, block, x: torch.Tensor, seeds: SeedRows) -> torch.Tensor:
    """``RGCNConv`` on ``block``'s destination rows: relation sums local, seed sums over ranks."""
    with block.local_scope():
        block.ndata_all["x"] = x
        block.edata_all["norm"] = relation_in_degree_norm(block, x.dtype)
        block.etype_data["W"] = layer.relation_weights()
        block.update_all(layer.message, layer.reduce)
        h = seeds.sum(block.slice_dst(block.ndata_all["h"]))
    if layer.loop_weight is not None:
        h = h + block.slice_dst(x) @ layer.loop_weight
    return bias_and_activation(h, layer.bias, layer.activation)


def rgat_layer(layer: RGATConv, block, x: torch.Tensor, seeds: SeedRows) -> torch.Tensor:
    """``RGATConv`` on ``block``'s destination rows, the cross-relation softmax over all ranks."""
    with block.local_scope():
        block.ndata_all["x"] = x
        block.etype_data["W"] = layer.weight
        block.etype_data["a"] = layer.attn
        block.apply_edges(layer.message)
        score, value = block.edata_all["e"], block.edata_all["z"]
    return softmax_aggregate(block, score, value, seeds).flatten(1)


def hgt_layer(layer: HGTConv, block, x: torch.Tensor, seeds: SeedRows) -> torch.Tensor:
    """``HGTConv`` on ``block``'s destination rows, the cross-relation softmax over all ranks."""
    if layer.training and layer.dropout > 0:
        raise ValueError("RAF: HGTConv dropout must be 0 in training; every rank must apply the same mask")
    with block.local_scope():
        block.ndata_all["x"] = x
        for name in ("k_weight", "q_weight", "v_weight", "k_bias", "q_bias", "v_bias"):
            block.ntype_data[name] = getattr(layer, name)
        for name in ("relation_att", "relation_msg", "relation_pri"):
            block.etype_data[name] = getattr(layer, name)
        block.apply_edges(layer.message)
        score, value = block.edata_all["attn"], block.edata_all["v"]
    t = softmax_aggregate(block, score, value, seeds).flatten(1)
    dst = heterograph({}, num_nodes=dict(zip(block.ntypes, block.num_dst_per_type)), device=x.device)
    dst.ndata_all["x"], dst.ndata_all["t"] = block.slice_dst(x), t
    for name in ("a_weight", "a_bias", "skip"):
        dst.ntype_data[name] = getattr(layer, name)
    dst.apply_nodes(layer.update)
    if layer.use_norm:
        dst.ntype_data["norm_weight"], dst.ntype_data["norm_bias"] = layer.norm_weight, layer.norm_bias
        dst.apply_nodes(layer.layer_norm)
    return dst.ndata_all["h"]


LAYER_SPLITS = {RGCNConv: rgcn_layer, RGATConv: rgat_layer, HGTConv: hgt_layer}
# Parameters whose first dimension is the relation: row r only serves relation r.
RELATION_PARAMS = {
    RGCNConv: ("weight", "coeff"),
    RGATConv: ("weight", "attn"),
    HGTConv: ("relation_att", "relation_msg", "relation_pri"),
}


def raf_forward(model, blocks, x: torch.Tensor, target_id: int, num_seeds: int, comm: Comm) -> torch.Tensor:
    """``model(blocks, x)`` (a ``gnnc.training.model_builders.LayerStack``) computed the RAF way; see the module
    docstring.

    The result is exact on rank 0; other ranks return a placeholder of the
    same shape, which must get a zero gradient.
    """
    layers = list(model.layers)
    if len(layers) != len(blocks):
        raise ValueError(f"raf_forward: {len(layers)} layers but {len(blocks)} blocks")
    h = x
    for i, (layer, block) in enumerate(zip(layers, blocks)):
        split = LAYER_SPLITS.get(type(layer))
        if split is None:
            raise TypeError(
                f"RAF supports {[c.__name__ for c in LAYER_SPLITS]} layers; layer {i} is {type(layer).__name__}"
            )
        last = i + 1 == len(layers)
        h = split(layer, block, h, SeedRows(block, target_id, num_seeds, comm, to_root=last))
        if model.activation is not None and i + 1 < len(layers):
            h = model.activation(h)
    return h if model.head is None else model.head(model.activation(h))


# ======================================================================= inputs
def initial_modules(
    schema_graph: Graph,
    model: str,
    hidden: int,
    num_classes: int,
    num_layers: int,
    widths: dict,
    learnable: list,
    embed_dim: int | None,
    seed: int,
    dtype: torch.dtype,
):
    """(TypedEmbedding, model) exactly as ``MinibatchTrainer`` initialises them with ``seed``.

    ``schema_graph`` only lends its node types, counts and relations;
    ``widths[t]`` is the feature width of each read-only type. The random
    draws depend on shapes only, so every rank gets the same values without
    the features (their stand-ins are zero-stride views). Each learnable
    table is allocated in full here, once.
    """
    if model not in MODEL_BUILDERS:
        raise KeyError(f"unknown model {model!r}; choose one of {list(MODEL_BUILDERS)}")
    counts = {t: schema_graph.num_nodes(t) for t in schema_graph.ntypes}
    width = hidden if embed_dim is None else embed_dim
    features = {
        t: torch.zeros((1, widths[t]), dtype=dtype).expand(n, widths[t])
        for t, n in counts.items()
        if t not in learnable
    }
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        embedding = TypedEmbedding(counts, hidden, features, {t: width for t in learnable}, dtype)
        net = MODEL_BUILDERS[model](schema_graph, hidden, num_classes, num_layers).to(dtype)
    return embedding, net


def resolve_learnable(ntypes: list, target: str, widths: dict, learnable) -> list:
    """Learnable node types, in graph order: 'non-target', 'missing' (no features) or a list."""
    if learnable == "non-target":
        return [t for t in ntypes if t != target]
    if learnable == "missing":
        return [t for t in ntypes if t not in widths]
    if isinstance(learnable, str):
        raise ValueError(f"learnable must be 'non-target', 'missing' or a list of node types, got {learnable!r}")
    unknown = [t for t in learnable if t not in ntypes]
    if unknown:
        raise KeyError(f"learnable: unknown node types {unknown}; node types: {ntypes}")
    return [t for t in ntypes if t in set(learnable)]


def feature_widths(parts) -> dict:
    """Width of the 'feat' rows of every node type some part stores features of."""
    widths = {}
    for part in parts.parts:
        for t, feats in part.node_feats.items():
            if "feat" in feats:
                widths[t] = int(feats["feat"].shape[1])
    return widths


# ========================================================================= plan
def _type_depths(tree: MetaTree, depth: int, out: dict) -> None:
    out[tree.ntype] = max(out.get(tree.ntype, 0), depth)
    for child in tree.children:
        _type_depths(child, depth + 1, out)


@dataclass(frozen=True)
class RAFPlan:
    """What every rank of a meta partitioning holds and aggregates (rank r = part r).

    ``held[r]``: relations of part r; ``roots[r]``: its root relations;
    ``node_types[r]``; ``depth[r][t]``: deepest metatree level of type t in
    part r's sub-metatrees (the root is level 0).
    """

    target: str
    num_layers: int
    relations: tuple
    held: tuple
    roots: tuple
    node_types: tuple
    depth: tuple
    shares: tuple  # (replica, replicas) per rank

    @classmethod
    def of(cls, parts) -> RAFPlan:
        if parts.method != "meta":
            raise ValueError(f"RAF needs meta partitions (gnnc partition --method meta), got {parts.method!r}")
        if parts.params.get("depth") is None:
            raise ValueError("RAF needs a metatree built by depth (one level per layer), not from metapaths")
        depths = []
        for part in parts.parts:
            d = {part.info["target"]: 0}
            for sub in part.info["subtrees"]:
                _type_depths(MetaTree.from_json(sub), 1, d)
            depths.append(d)
        return cls(
            parts.params["target"],
            int(parts.params["depth"]),
            tuple(rel for rel, _ in parts.schema.relations),
            tuple(tuple(p.relations) for p in parts.parts),
            tuple(tuple(tuple(r) for r in p.info["root_relations"]) for p in parts.parts),
            tuple(tuple(p.node_types) for p in parts.parts),
            tuple(depths),
            tuple(tuple(p.info["replica"]) for p in parts.parts),
        )

    def relations_used(self, rank: int, layer: int) -> set:
        """Relations rank ``rank`` may aggregate at ``layer``: root ones at the last, all its own below."""
        return set(self.roots[rank] if layer == self.num_layers - 1 else self.held[rank])

    def shared_relation_ids(self, layer: int) -> torch.Tensor:
        """Indices (graph order) of relations more than one rank may aggregate at ``layer``."""
        users = [sum(rel in self.relations_used(r, layer) for r in range(len(self.held))) for rel in self.relations]
        return torch.tensor([i for i, n in enumerate(users) if n > 1], dtype=torch.int64)

    def holders(self, ntype: str) -> list:
        return [r for r, types in enumerate(self.node_types) if ntype in types]

    def row_owner(self, ntype: str) -> int:
        """The holder reaching ``ntype`` deepest in its sub-metatrees, where the most of its rows are
        sampled; ties go to the lowest rank."""
        return max(self.holders(ntype), key=lambda r: (self.depth[r].get(ntype, 0), -r))


def schema_graph(schema, part=None) -> Graph:
    """A graph with the parent's node types, counts and relations, holding ``part``'s edges (parent ids).

    Without ``part`` every relation is empty. Returns (graph, parent edge
    ids per relation) when ``part`` is given.
    """
    counts = {t: int(n) for t, n in schema.ntypes}
    data, eids = {}, {}
    for rel, _ in schema.relations:
        if part is not None and rel in part.relations:
            src, dst = part.graph.find_edges(rel)
            data[rel] = (part.node_ids[rel[0]].index_select(0, src), part.node_ids[rel[2]].index_select(0, dst))
            eids[rel] = part.edge_ids[rel]
        else:
            data[rel] = (torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64))
            eids[rel] = torch.zeros(0, dtype=torch.int64)
    g = heterograph(data, num_nodes=counts)
    return g if part is None else (g, eids)


def meta_inputs(
    comm: Comm, parts, plan: RAFPlan, initial: TypedEmbedding, learnable: list, shared_learnable: str = "owner"
) -> InputRows:
    """``InputRows`` of rank ``comm.rank`` on a meta partitioning.

    Learnable rows of a type held by several parts live with
    ``plan.row_owner(type)`` (``shared_learnable='owner'``, exact), or each
    holder trains its own copy (``'replicate'``, Heta's per-partition
    learnable features: no row traffic, but no longer the single-process model).
    """
    if shared_learnable not in ("owner", "replicate"):
        raise ValueError(f"shared_learnable must be 'owner' or 'replicate', got {shared_learnable!r}")
    replicate = shared_learnable == "replicate"
    part = parts.parts[comm.rank]
    counts = {t: int(n) for t, n in parts.schema.ntypes}
    dtype = initial.projections[initial.ntypes[0]].weight.dtype
    features, tables, local_row, owner = {}, {}, {}, {}
    for t in part.node_types:
        n = counts[t]
        if t not in learnable:
            if "feat" not in part.node_feats[t]:
                raise KeyError(f"node type {t!r} has no 'feat' features in part {part.part_id}; make it learnable")
            features[t] = part.node_feats[t]["feat"].to(dtype)
            local_row[t] = torch.arange(n)
        elif replicate or plan.row_owner(t) == comm.rank:
            tables[t] = nn.Embedding.from_pretrained(
                initial.embeddings[t].weight.detach().clone(), freeze=False, sparse=True
            )
            local_row[t] = torch.arange(n)
        else:
            local_row[t] = torch.full((n,), -1, dtype=torch.int64)
            owner[t] = torch.full((n,), plan.row_owner(t), dtype=torch.int64)
    remote = [] if replicate else [t for t in learnable if len(plan.holders(t)) > 1]
    return InputRows(
        comm, list(counts), counts, initial.projections, features, tables, local_row, owner, remote, learnable
    )


# ====================================================================== training
class RAFTrainer(DistTrainer):
    """Relation-Aggregation-First training of rank ``comm.rank`` on meta partitions; see the module docstring.

    ``model`` is a ``gnnc.training.model_builders.MODEL_BUILDERS`` name (rgcn, rgat, hgt);
    initial values are those ``MinibatchTrainer`` draws from ``seed``, the
    other options mean what they mean there; ``compiled`` runs message
    passing through ``gnnc.compile``'s compiler; ``shared_learnable`` as in
    ``meta_inputs``; ``device`` as in ``DistTrainer``. Every rank draws the
    same batches: a permutation of all training targets per epoch.
    """

    method = "raf"

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
        hidden: int = 64,
        embed_dim: int | None = None,
        embed_lr: float | None = None,
        learnable="non-target",
        dtype: torch.dtype = torch.float32,
        compiled: bool = False,
        shared_learnable: str = "owner",
        device="cpu",
    ):
        if parts.num_parts != comm.world:
            raise ValueError(f"RAF: {parts.num_parts} partitions for {comm.world} ranks; give one part per rank")
        self.plan = plan = RAFPlan.of(parts)
        if len(fanouts) != plan.num_layers:
            raise ValueError(
                f"RAF: {len(fanouts)} fanouts (layers) but the metatree has depth {plan.num_layers}; "
                f"partition with --depth {len(fanouts)}"
            )
        part = parts.parts[comm.rank]
        graph, eids = schema_graph(parts.schema, part)
        widths = feature_widths(parts)
        learnable = resolve_learnable(graph.ntypes, plan.target, widths, learnable)
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
                hidden=hidden,
                embed_dim=embed_dim,
                learnable=learnable,
                dtype=dtype,
                shared_learnable=shared_learnable,
            ),
            device,
        )
        self.batch_size, self.compiled = batch_size, compiled
        self.target = plan.target
        self.target_id = graph.ntype_id(self.target)
        replica, replicas = plan.shares[comm.rank]
        roots = plan.roots[comm.rank]
        self.sampler = PartitionSampler(graph, fanouts, self.target, roots, replica, replicas, seed, eids)
        self.eval_sampler = PartitionSampler(graph, fanouts, self.target, roots, replica, replicas, seed + 1, eids)
        initial, self.model = initial_modules(
            graph, model, hidden, num_classes, len(fanouts), widths, learnable, embed_dim, seed, dtype
        )
        self.inputs = meta_inputs(comm, parts, plan, initial, learnable, shared_learnable)
        data = part.node_feats[self.target]
        self.labels = data["label"]
        self.split_ids = {k: torch.nonzero(data[f"{k}_mask"]).squeeze(1) for k in ("train", "val", "test")}
        self._prepare_training(lr, embed_lr, self._synced_rows())
        self.shuffle = torch.Generator().manual_seed(seed)

    def _relation_params(self):
        """(layer index, name, parameter) for every relation-indexed parameter of the model."""
        for i, layer in enumerate(self.model.layers):
            for name in RELATION_PARAMS.get(type(layer), ()):
                param = getattr(layer, name, None)
                if isinstance(param, nn.Parameter):
                    yield i, name, param

    def _synced_rows(self) -> dict:
        return {id(p): self.plan.shared_relation_ids(i) for i, _, p in self._relation_params()}

    def unused_rows(self) -> dict:
        """{parameter name: relation rows this rank neither aggregates nor syncs}; their values stay stale here."""
        names = {id(p): n for n, p in self.model.named_parameters()}
        out = {}
        for i, _, p in self._relation_params():
            used = self.plan.relations_used(self.comm.rank, i)
            shared = set(self.plan.shared_relation_ids(i).tolist())
            rows = [r for r, rel in enumerate(self.plan.relations) if rel not in used and r not in shared]
            out[names[id(p)]] = torch.tensor(rows, dtype=torch.int64)
        return out

    def _split_rows(self) -> list:
        """Relation parameters: rows of relations several ranks aggregate are alike on every rank; rows of
        the relations only this rank aggregates are its own."""
        names = {id(p): n for n, p in self.model.named_parameters()}
        out = []
        for i, _, p in self._relation_params():
            shared = self.plan.shared_relation_ids(i)
            used, alike = self.plan.relations_used(self.comm.rank, i), set(shared.tolist())
            own = [r for r, rel in enumerate(self.plan.relations) if rel in used and r not in alike]
            out.append((names[id(p)], p, shared, torch.tensor(own, dtype=torch.int64)))
        return out

    def epoch_batches(self, generator: torch.Generator | None = None):
        """All training targets in batches, shuffled by ``generator`` (default: the run's); the same on every rank."""
        train = self.split_ids["train"]
        order = torch.randperm(train.numel(), generator=self.shuffle if generator is None else generator)
        return train.index_select(0, order).split(self.batch_size)

    def _logits(self, sampler, seeds: torch.Tensor) -> torch.Tensor:
        blocks, fetched = self._sample_and_fetch(sampler, seeds)
        with self.comm.meter.stage("forward"), self.message_passing():
            return raf_forward(
                self.model, blocks, self.inputs.project(fetched), self.target_id, seeds.numel(), self.comm
            )

    def train_step(self, seeds) -> tuple[float, int, int]:
        """One RAF step on the batch ``seeds`` (target ids, the same on every rank).

        Returns (loss, correct predictions, batch size). Gradients stay in
        ``.grad`` (summed over ranks) after the update.
        """
        seeds = torch.as_tensor(seeds, dtype=torch.int64)
        self.sampler.step = self.step_count
        logits = self._logits(self.sampler, seeds)
        labels = self._labels(seeds)
        with self.comm.meter.stage("forward"):
            loss = F.cross_entropy(logits, labels)
            # Rank 0 holds the logits; the others learn the loss from it.
            result = torch.tensor([loss.item(), float((logits.argmax(-1) == labels).sum())], dtype=torch.float64)
            self.comm.broadcast(result)
        with self.comm.meter.stage("backward"):
            self._zero_grad()
            # Other ranks' logits are placeholders: they backpropagate zero.
            self.comm.tie(loss if self.comm.rank == 0 else loss * 0.0).backward()
        self._update()
        self.step_count += 1
        self.comm.meter.end_step()
        return float(result[0]), int(result[1]), seeds.numel()

    @torch.no_grad()
    def evaluate(self, split: str) -> float:
        """Accuracy on ``split`` ('train', 'val', 'test'); every rank runs every batch, rank 0 counts."""
        ids = self.split_ids[split]
        if ids.numel() == 0:
            return float("nan")
        self.model.eval()
        correct = torch.zeros(1, dtype=torch.float64)
        with self.comm.meter.outside_steps():
            for k, seeds in enumerate(ids.split(self.batch_size)):
                self.eval_sampler.step = self.epoch * 1_000_003 + k
                logits = self._logits(self.eval_sampler, seeds)
                correct += int((logits.argmax(-1) == self._labels(seeds)).sum())
            self.comm.broadcast(correct)
        self.model.train()
        return float(correct) / ids.numel()

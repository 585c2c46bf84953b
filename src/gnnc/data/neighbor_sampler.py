"""Heterogeneous neighbor sampling into per-layer blocks (DGL's block convention).

``NeighborSampler(g, fanouts, target_ntype, seed).sample(seeds)`` returns one
``Block`` per GNN layer, input layer first. ``fanouts[l]`` is the fanout of
layer ``l``, so the hop next to the seeds uses ``fanouts[-1]`` (as DGL's
``MultiLayerNeighborSampler``); -1 takes every neighbor. For every
destination node and every relation into its type, up to ``fanout`` in-edges
are drawn uniformly WITHOUT replacement (all of them when there are fewer).

A ``Block`` is a gnnc ``Graph`` with the parent's node types and relations
(some relations may be empty). Its nodes are the layer's source nodes,
grouped by node type in the parent's order; within each type the layer's
destination nodes come first, in the order they were given, then the other
sources sorted by parent id. Every edge ends at a destination node, so a layer
runs on all block nodes and its output is cut down to the destination rows
with ``block.slice_dst`` (``forward_blocks`` does this for a stack of layers).
The destination nodes of block ``l`` are exactly the nodes of block ``l + 1``,
in the same order.
"""

from __future__ import annotations

import torch

from ..graph import Graph
from ..graph.block import Block

FLOYD_MAX_FANOUT = 64  # larger fanouts draw by sorting random keys (see NeighborSampler._draw)
DENSE_IDS_FACTOR = 16  # node types larger than this times the ids to number are numbered by sorting


def forward_blocks(layers, blocks, x: torch.Tensor, activation=None) -> torch.Tensor:
    """Run ``h = layer(block, h)`` and keep the destination rows, layer by layer.

    ``x`` holds one row per node of ``blocks[0]``; the result has one row per
    destination node of ``blocks[-1]``. ``activation`` (if given) is applied
    between layers, not after the last.
    """
    if len(layers) != len(blocks):
        raise ValueError(f"forward_blocks: {len(layers)} layers but {len(blocks)} blocks")
    h = x
    for i, (layer, block) in enumerate(zip(layers, blocks)):
        if h.shape[0] != block.num_src_nodes():
            raise ValueError(
                f"forward_blocks: block {i} has {block.num_src_nodes()} source nodes but its input has "
                f"{h.shape[0]} rows"
            )
        h = block.slice_dst(layer(block, h))
        if activation is not None and i + 1 < len(layers):
            h = activation(h)
    return h


class NeighborSampler:
    """Per-relation uniform neighbor sampling without replacement; see the module docstring.

    Deterministic given ``seed``; ``state_dict`` / ``load_state_dict`` save and
    restore the random stream for checkpoint/resume.
    """

    def __init__(self, g: Graph, fanouts, target_ntype: str | None = None, seed: int = 0):
        self.g = g
        self.fanouts = _check_fanouts(fanouts)
        if target_ntype is None and len(g.index.ntypes) == 1:
            target_ntype = g.index.ntypes[0]
        self.target_ntype = target_ntype  # None: seeds come by type (sample_by_type)
        self._target = None if target_ntype is None else g.ntype_id(target_ntype)
        self.generator = torch.Generator(device=g.device)
        self.generator.manual_seed(int(seed))
        index = g.index
        self._rel_dst_type = [g.ntype_id(dt) for _, _, dt in index.etypes]
        self._rel_src_type = [g.ntype_id(st) for st, _, _ in index.etypes]
        # Per relation: CSR over the destination type's local ids; edges of a
        # relation are one block of internal order sorted by destination.
        self._indptr, self._src = [], []
        for r in range(len(index.etypes)):
            lo, hi = index.rel_range(r)
            t = self._rel_dst_type[r]
            local_dst = index.dst[lo:hi] - index.ntype_offsets[t]
            counts = torch.bincount(local_dst, minlength=index.ntype_counts[t])
            indptr = torch.zeros(index.ntype_counts[t] + 1, dtype=torch.int64, device=g.device)
            torch.cumsum(counts, 0, out=indptr[1:])
            self._indptr.append(indptr)
            self._src.append(index.src[lo:hi])

    # ----------------------------------------------------------------- RNG
    def manual_seed(self, seed: int) -> None:
        self.generator.manual_seed(int(seed))

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])

    # ------------------------------------------------------------ sampling
    def sample(self, seeds) -> list[Block]:
        """Blocks for ``seeds`` (local ids of the target type, distinct), input layer first.

        The last block's destination nodes are the seeds in the given order.
        """
        if self._target is None:
            raise ValueError(
                f"sample: the graph has several node types {list(self.g.index.ntypes)}; name target_ntype, "
                "or give seeds by type to sample_by_type"
            )
        return self.sample_by_type({self._target: seeds})

    def sample_by_type(self, seeds: dict) -> list[Block]:
        """Blocks for ``seeds`` ({node type index: local ids, distinct}), input layer first; the last block's
        destination nodes of each type are that type's seeds in the given order."""
        index = self.g.index
        counts = [0] * len(index.ntypes)
        parts = []
        for t in range(len(index.ntypes)):
            if t in seeds:
                ids = self._check_seeds(seeds[t], t)
                counts[t] = ids.numel()
                parts.append(ids + index.ntype_offsets[t])
        frontier = torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64, device=self.g.device)
        blocks = []
        for fanout in reversed(self.fanouts):
            block = self._sample_hop(frontier, counts, fanout)
            blocks.append(block)
            frontier, counts = block.src_ids, list(block.index.ntype_counts)
        return blocks[::-1]

    def _check_seeds(self, seeds, t: int) -> torch.Tensor:
        seeds = torch.as_tensor(seeds, device=self.g.device)
        if seeds.dim() != 1 or seeds.is_floating_point() or seeds.dtype == torch.bool:
            raise ValueError(
                f"sample: seeds must be a 1-D tensor of integer node ids, got "
                f"shape {tuple(seeds.shape)} dtype {seeds.dtype}"
            )
        seeds = seeds.to(torch.int64)
        ntype = self.g.index.ntypes[t]
        n = self.g.num_nodes(ntype)
        if seeds.numel():
            bad = (seeds < 0) | (seeds >= n)
            if bool(bad.any()):
                raise ValueError(
                    f"sample: seed {int(seeds[bad][0])} is not a {ntype!r} node (ids run from 0 to {n - 1})"
                )
            if torch.unique(seeds).numel() != seeds.numel():
                raise ValueError("sample: seeds contain duplicates; give each seed node once")
        return seeds

    def _sample_hop(self, frontier: torch.Tensor, counts: list[int], fanout: int) -> Block:
        """One block whose destination nodes are ``frontier`` (global ids, grouped by type)."""
        index = self.g.index
        starts = [0]
        for c in counts:
            starts.append(starts[-1] + c)
        sources_by_type = [[] for _ in index.ntypes]  # global source ids, one piece per relation
        picked = []  # per relation: (destination position within its type, parent internal edge id)
        for r in range(len(index.etypes)):
            t = self._rel_dst_type[r]
            dst_local = frontier[starts[t] : starts[t + 1]] - index.ntype_offsets[t]
            pos, seg = self._pick(r, dst_local, fanout)
            sources_by_type[self._rel_src_type[r]].append(self._src[r].index_select(0, pos))
            picked.append((seg, pos + index.rel_offsets[r]))
        src_ids, node_counts, local_src = [], [], [None] * len(index.etypes)
        for t in range(len(index.ntypes)):
            dst_t = frontier[starts[t] : starts[t + 1]]
            pieces = sources_by_type[t]
            cand = torch.cat(pieces) if pieces else dst_t[:0]
            local, new_nodes = _local_ids(dst_t, cand, *index.ntype_range(t))
            src_ids += [dst_t, new_nodes]
            node_counts.append(dst_t.numel() + new_nodes.numel())
            rels_from_t = [r for r in range(len(index.etypes)) if self._rel_src_type[r] == t]
            for r, part in zip(rels_from_t, local.split([p.numel() for p in pieces])):
                local_src[r] = part
        # in g's type order (a reversed graph's relations are not sorted), as the ids above are
        relations = [(key, local_src[r], picked[r][0]) for r, key in enumerate(index.etypes)]
        parent = Graph._build(list(index.ntypes), node_counts, relations, self.g.device)
        internal = torch.cat([eids for _, eids in picked])
        parent_eids = internal if index.user_eid is None else index.user_eid.index_select(0, internal)
        return Block(parent.index, torch.cat(src_ids), counts, parent_eids)

    def _pick(self, r: int, dst_local: torch.Tensor, fanout: int):
        """Sampled in-edges of relation ``r`` for ``dst_local``.

        Returns (edge position within the relation, position of its
        destination in ``dst_local``), ordered by destination then position,
        so the block needs no re-sorting. Work is proportional to the edges
        kept (plus the draw, see ``_draw``), not to the destinations' degrees.
        """
        indptr = self._indptr[r]
        device = dst_local.device
        empty = torch.zeros(0, dtype=torch.int64, device=device)
        if fanout == 0 or dst_local.numel() == 0:
            return empty, empty
        start = indptr.index_select(0, dst_local)
        deg = indptr.index_select(0, dst_local + 1) - start
        take = deg if fanout < 0 else deg.clamp(max=fanout)
        total = int(take.sum())
        if total == 0:
            return empty, empty
        seg = torch.repeat_interleave(torch.arange(dst_local.numel(), device=device), take, output_size=total)
        first = torch.cumsum(take, 0) - take
        slot = torch.arange(total, device=device) - first.index_select(0, seg)
        big = torch.nonzero(deg > fanout).squeeze(1) if fanout > 0 else empty
        if big.numel():
            rows = first.index_select(0, big).unsqueeze(1) + torch.arange(fanout, device=device)
            slot[rows.flatten()] = self._draw(deg.index_select(0, big), fanout).flatten()
        return start.index_select(0, seg) + slot, seg

    def _draw(self, deg: torch.Tensor, k: int) -> torch.Tensor:
        """``[len(deg), k]``: ``k`` distinct offsets in ``[0, deg[i])`` per row (every ``deg[i] > k``),
        each ``k``-subset equally likely, ascending within a row.

        Floyd's algorithm for ``k <= FLOYD_MAX_FANOUT`` (``O(k^2)`` per row,
        whatever the degree); otherwise the ``k`` smallest of random keys per
        row (one sort, ``O(deg log deg)``).
        """
        device, n = deg.device, deg.numel()
        if k <= FLOYD_MAX_FANOUT:
            u = torch.rand(n, k, generator=self.generator, device=device, dtype=torch.float64)
            chosen = torch.empty(n, k, dtype=torch.int64, device=device)
            for i in range(k):
                j = deg - (k - i)  # step i draws from [0, j]; j itself when the draw is taken already
                t = torch.minimum((u[:, i] * (j + 1)).to(torch.int64), j)
                chosen[:, i] = torch.where((chosen[:, :i] == t.unsqueeze(1)).any(1), j, t)
            return chosen.sort(1).values
        total = int(deg.sum())
        row = torch.repeat_interleave(torch.arange(n, device=device), deg, output_size=total)
        first = torch.cumsum(deg, 0) - deg
        # Sorting row + key (key in [0, 1)) orders by (row, key); float64 keeps
        # 2**-32 of the key below 2**20 rows (equal sums, rare, keep position
        # order). Rows stay contiguous, so row i's k smallest keys sit at
        # first[i] .. first[i] + k - 1 of the order.
        keys = torch.rand(total, generator=self.generator, device=device, dtype=torch.float64)
        order = torch.argsort(keys.add_(row), stable=True)
        picked = order.index_select(0, (first.unsqueeze(1) + torch.arange(k, device=device)).flatten())
        return (picked - first.index_select(0, row.index_select(0, picked))).view(n, k).sort(1).values


def _local_ids(dst: torch.Tensor, cand: torch.Tensor, lo: int, hi: int):
    """Block-local ids (within one node type, global ids ``lo..hi-1``) of ``cand`` given destinations ``dst``.

    ``dst`` (distinct) take ids ``0..len(dst)-1`` in order; the other distinct
    values of ``cand`` follow, sorted. Returns (ids of ``cand``, the new nodes).
    A table over the type's nodes does it in ``O(hi - lo)`` when the type has
    at most ``DENSE_IDS_FACTOR`` times as many nodes as ids are given;
    otherwise ``_local_ids_by_sorting``.
    """
    n_dst, device = dst.numel(), dst.device
    if hi - lo > DENSE_IDS_FACTOR * (n_dst + cand.numel()):
        return _local_ids_by_sorting(dst, cand)
    table = torch.full((hi - lo,), -1, dtype=torch.int64, device=device)
    table[dst - lo] = torch.arange(n_dst, device=device)
    fresh = torch.zeros(hi - lo, dtype=torch.bool, device=device)
    fresh[cand - lo] = True
    fresh[dst - lo] = False
    new_nodes = torch.nonzero(fresh).squeeze(1)
    table[new_nodes] = torch.arange(n_dst, n_dst + new_nodes.numel(), device=device)
    return table.index_select(0, cand - lo), new_nodes + lo


def _local_ids_by_sorting(dst: torch.Tensor, cand: torch.Tensor):
    """``_local_ids`` by one sort of ``dst`` and ``cand``, whatever the type's size."""
    n_dst = dst.numel()
    values = torch.cat([dst, cand])
    uniq, inverse = torch.unique(values, return_inverse=True)
    first = torch.full((uniq.numel(),), values.numel(), dtype=torch.int64, device=values.device)
    first.scatter_reduce_(0, inverse, torch.arange(values.numel(), device=values.device), "amin")
    is_dst = first < n_dst
    is_new = ~is_dst
    local_of_uniq = torch.where(is_dst, first, n_dst + torch.cumsum(is_new, 0) - 1)
    return local_of_uniq.index_select(0, inverse[n_dst:]), uniq[is_new]


def _check_fanouts(fanouts) -> list[int]:
    if isinstance(fanouts, int) or not hasattr(fanouts, "__iter__"):
        raise TypeError(f"fanouts must be a list of ints, one per layer (e.g. [25, 20]), got {fanouts!r}")
    out = list(fanouts)
    if not out:
        raise ValueError("fanouts must name at least one layer")
    for i, f in enumerate(out):
        if isinstance(f, bool) or not isinstance(f, int) or f < -1:
            raise ValueError(f"fanouts[{i}] = {f!r}: a fanout is a non-negative int, or -1 for all neighbors")
    return out

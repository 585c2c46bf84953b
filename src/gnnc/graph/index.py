"""Immutable graph structure: one id space, type pointers, edges sorted by (relation, dst).

A ``GraphIndex`` holds no features. Node ids are global: node types in the
order the user gave them, then ids within the type. Edges are kept sorted by
(relation, destination), stably, so a relation's edges form one contiguous
block whose bounds are the same in the user's edge order and in the internal
order; ``user_eid`` maps internal positions back to user edge ids.
CSR by destination / source and degree buckets are built lazily and cached.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .inference_safe import cached_structure, structure_builder
from .permutation import inverse_permutation, permute_rows


@dataclass(frozen=True)
class DegreeBucket:
    """Nodes that have exactly ``degree`` in-edges in some edge block.

    ``edge_pos[i, j]`` is the position (within the block) of the j-th in-edge
    of ``nodes[i]``, in internal edge order.
    """

    degree: int
    nodes: torch.Tensor
    edge_pos: torch.Tensor


class GraphIndex:
    """Structure of a (possibly heterogeneous) graph; see the module docstring."""

    def __init__(self, ntypes, ntype_counts, etypes, rel_counts, src, dst, user_eid):
        self.ntypes: tuple[str, ...] = tuple(ntypes)
        self.etypes: tuple[tuple[str, str, str], ...] = tuple(etypes)
        self.ntype_counts: tuple[int, ...] = tuple(int(c) for c in ntype_counts)
        self.rel_counts: tuple[int, ...] = tuple(int(c) for c in rel_counts)
        self.ntype_offsets = _offsets(self.ntype_counts)
        self.rel_offsets = _offsets(self.rel_counts)
        self.src: torch.Tensor = src
        self.dst: torch.Tensor = dst
        # None means the internal order already equals the user order.
        self.user_eid: torch.Tensor | None = user_eid
        self._per_relation: dict = {}  # (what, relation) -> what ``_derived`` built
        self._subsets: dict = {}

    @classmethod
    def from_relation_blocks(cls, ntypes, ntype_counts, etypes, blocks, device):
        """Index from per-relation ``(global_src, global_dst)`` in user edge order.

        Sorting each relation's block by destination (stably) is the whole
        (relation, dst) sort, because the blocks are already in relation order.
        """
        srcs, dsts, orders = [], [], []
        for src, dst in blocks:
            order = None
            if dst.numel() > 1 and not bool((dst[1:] >= dst[:-1]).all()):
                _, order = torch.sort(dst, stable=True)
                src, dst = src[order], dst[order]
            srcs.append(src)
            dsts.append(dst)
            orders.append(order)
        rel_counts = [dst.numel() for dst in dsts]
        user_eid = None
        if any(o is not None for o in orders):
            offsets = _offsets(rel_counts)
            user_eid = _cat(
                [
                    (torch.arange(n, device=device) if o is None else o) + off
                    for o, n, off in zip(orders, rel_counts, offsets)
                ],
                device,
            )
        return cls(ntypes, ntype_counts, etypes, rel_counts, _cat(srcs, device), _cat(dsts, device), user_eid)

    # ------------------------------------------------------------------ sizes
    @property
    def device(self) -> torch.device:
        return self.src.device

    @property
    def num_nodes(self) -> int:
        return self.ntype_offsets[-1]

    @property
    def num_edges(self) -> int:
        return self.rel_offsets[-1]

    def rel_range(self, rel: int) -> tuple[int, int]:
        return self.rel_offsets[rel], self.rel_offsets[rel + 1]

    def ntype_range(self, ntype: int) -> tuple[int, int]:
        return self.ntype_offsets[ntype], self.ntype_offsets[ntype + 1]

    # --------------------------------------------------------- type lookups
    @cached_structure
    def node_type(self) -> torch.Tensor:
        """Node type index of every global node id."""
        counts = torch.tensor(self.ntype_counts, dtype=torch.int64, device=self.device)
        return torch.repeat_interleave(torch.arange(len(self.ntypes), device=self.device), counts)

    @cached_structure
    def edge_rel(self) -> torch.Tensor:
        """Relation index of every edge, internal order; int32 (kept as long as the index: half of int64's
        bytes per edge)."""
        counts = torch.tensor(self.rel_counts, dtype=torch.int64, device=self.device)
        return torch.repeat_interleave(torch.arange(len(self.etypes), dtype=torch.int32, device=self.device), counts)

    @cached_structure
    def internal_eid(self) -> torch.Tensor | None:
        """Inverse of ``user_eid``: internal position of every user edge id."""
        return None if self.user_eid is None else inverse_permutation(self.user_eid)

    def to_user_order(self, x: torch.Tensor, lo: int = 0, hi: int | None = None) -> torch.Tensor:
        """Reorder rows of ``x`` (edges lo..hi in internal order) into user order."""
        if self.user_eid is None:
            return x
        hi = self.num_edges if hi is None else hi
        if (lo, hi) == (0, self.num_edges):
            return permute_rows(x, self.internal_eid, self.user_eid)
        order = self.user_eid[lo:hi] - lo
        return permute_rows(x, inverse_permutation(order), order)

    def from_user_order(self, x: torch.Tensor, lo: int = 0, hi: int | None = None) -> torch.Tensor:
        """Rows of user-ordered ``x`` (edges lo..hi) in internal order."""
        hi = self.num_edges if hi is None else hi
        if self.user_eid is None:
            return x
        if (lo, hi) == (0, self.num_edges):
            return permute_rows(x, self.user_eid, self.internal_eid)
        return permute_rows(x, self.user_eid[lo:hi] - lo)

    # ----------------------------------------------------------- CSR / CSC
    @cached_structure
    def in_csr(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(indptr [N+1], internal edge ids sorted by destination, stable)."""
        return _csr(self.dst, self.num_nodes)

    @cached_structure
    def out_csr(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(indptr [N+1], internal edge ids sorted by source, stable)."""
        return _csr(self.src, self.num_nodes)

    def in_degrees(self) -> torch.Tensor:
        return self.in_csr[0].diff()

    def out_degrees(self) -> torch.Tensor:
        return self.out_csr[0].diff()

    def sorted_pairs(self, rel: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        """``(order, keys, width)`` of relation ``rel``: ``keys`` = ``src * width + dst`` (ids within their
        types, ``width`` the destination type's node count) of its edges, sorted stably; ``order`` their edge
        ids within the relation (user order). ``edge_ids`` looks pairs up in it."""
        return self._derived("sorted pairs", rel, self._sort_pairs)

    def _sort_pairs(self, rel: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        lo, hi = self.rel_range(rel)
        st, dt = (self.ntypes.index(t) for t in (self.etypes[rel][0], self.etypes[rel][2]))
        src = self.to_user_order(self.src[lo:hi], lo, hi).long() - self.ntype_offsets[st]
        dst = self.to_user_order(self.dst[lo:hi], lo, hi).long() - self.ntype_offsets[dt]
        width = max(self.ntype_counts[dt], 1)
        order = torch.argsort(src * width + dst, stable=True)
        return order, (src * width + dst)[order], width

    def subset(self, rel: int, eids: torch.Tensor, build) -> GraphIndex:
        """``build()``, the index of relation ``rel``'s edges ``eids`` alone (a partial call's compute graph),
        kept for the last ``eids`` of each relation: published code passes the same edges call after call
        (``send_and_recv(g.edges(), ...)``), and the CSR and groupings of that index are then made once."""
        last = self._subsets.get(rel)
        if last is not None and last[0].shape == eids.shape and torch.equal(last[0], eids):
            return last[1]
        index = build()
        self._subsets[rel] = (eids.clone(), index)
        return index

    def receivers(self, rel: int) -> torch.Tensor:
        """Ids (within their type) of the nodes relation ``rel``'s edges point to, ascending."""
        return self._derived("receivers", rel, self._find_receivers)

    def _find_receivers(self, rel: int) -> torch.Tensor:
        lo, hi = self.rel_range(rel)
        offset = self.ntype_offsets[self.ntypes.index(self.etypes[rel][2])]
        return torch.unique_consecutive(self.dst[lo:hi]).long() - offset  # sorted by destination within a relation

    def degree_buckets(self, rel: int | None = None) -> list[DegreeBucket]:
        """Group destination nodes of an edge block by in-degree (as DGL does).

        ``rel=None`` is the whole graph; otherwise one relation's block.
        Nodes without in-edges in the block appear in no bucket.
        """
        return self._derived("degree buckets", rel, self._make_buckets)

    def _derived(self, what: str, rel: int | None, build):
        """``build(rel)``, made once per structure (the index is immutable) by ``structure_builder``."""
        key = (what, rel)
        if key not in self._per_relation:
            self._per_relation[key] = structure_builder(build)(rel)
        return self._per_relation[key]

    def _make_buckets(self, rel):
        if rel is None:
            indptr, eids = self.in_csr
            pos = eids
        else:
            lo, hi = self.rel_range(rel)
            # Within a relation the block is already sorted by destination.
            indptr, _ = _csr(self.dst[lo:hi], self.num_nodes, already_sorted=True)
            pos = torch.arange(hi - lo, device=self.device)
        deg = indptr.diff()
        order = torch.argsort(deg, stable=True)
        degrees, counts = torch.unique_consecutive(deg[order], return_counts=True)
        buckets = []
        for d, nodes in zip(degrees.tolist(), order.split(counts.tolist())):
            if d == 0:
                continue
            slots = indptr[nodes].unsqueeze(1) + torch.arange(d, device=self.device)
            buckets.append(DegreeBucket(d, nodes, pos[slots]))
        return buckets

    # -------------------------------------------------------------- moving
    def to(self, device) -> GraphIndex:
        device = torch.device(device)
        if device == self.device:
            return self
        user_eid = None if self.user_eid is None else self.user_eid.to(device)
        return GraphIndex(
            self.ntypes,
            self.ntype_counts,
            self.etypes,
            self.rel_counts,
            self.src.to(device),
            self.dst.to(device),
            user_eid,
        )


def _offsets(counts) -> tuple[int, ...]:
    out = [0]
    for c in counts:
        out.append(out[-1] + int(c))
    return tuple(out)


def _cat(parts: list, device) -> torch.Tensor:
    if not parts:
        return torch.zeros(0, dtype=torch.int64, device=device)
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def _csr(keys: torch.Tensor, num_rows: int, already_sorted: bool = False):
    counts = torch.bincount(keys, minlength=num_rows)
    indptr = torch.zeros(num_rows + 1, dtype=torch.int64, device=keys.device)
    torch.cumsum(counts, 0, out=indptr[1:])
    if already_sorted:
        return indptr, torch.arange(keys.numel(), device=keys.device)
    _, order = torch.sort(keys, stable=True)
    return indptr, order

"""``GraphContext``: the structure tensors a compiled plan reads for one edge block.

A block is the whole graph (``rel=None``: all edges, all nodes are
destinations) or one relation (its edges; destinations are its dst type).
Contexts are cached on the graph, so building one is free after the first
call on a graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..bounded_cache import BoundedCache
from ..graph.index import GraphIndex
from ..graph.inference_safe import cached_structure, structure_builder
from . import cost

# Distinct pairs are counted with one bincount over the nodes per relation while relations x nodes is at
# most this many times the edges, else by sorting the pair keys.
BINCOUNT_MAX_WORK = 8


@dataclass
class GraphContext:
    """Index tensors of one block in internal edge order.

    ``src`` / ``dst`` are global node ids; ``dst_local`` counts from the
    first destination node ``node_lo``; ``edge_rel`` are global relation ids.
    """

    index: GraphIndex
    rel: int | None
    src: torch.Tensor
    dst: torch.Tensor
    node_lo: int
    node_hi: int
    edge_lo: int
    edge_hi: int
    parent_edges: torch.Tensor | None = None  # a ``retyped`` block: its edge i is the parent's edge parent_edges[i]

    @property
    def num_nodes(self) -> int:
        return self.index.num_nodes

    @property
    def num_dst(self) -> int:
        return self.node_hi - self.node_lo

    @property
    def num_edges(self) -> int:
        return self.edge_hi - self.edge_lo

    @cached_structure
    def dst_local(self) -> torch.Tensor:
        return self.dst - self.node_lo if self.node_lo else self.dst

    @cached_structure
    def edge_rel(self) -> torch.Tensor:
        return self.index.edge_rel[self.edge_lo : self.edge_hi]

    @cached_structure
    def src_type(self) -> torch.Tensor:
        return self.index.node_type[self.src]

    @cached_structure
    def dst_type(self) -> torch.Tensor:
        return self.index.node_type[self.dst]

    @cached_structure
    def dst_node_type(self) -> torch.Tensor:
        """Node type of every destination-range node."""
        return self.index.node_type[self.node_lo : self.node_hi]

    @cached_structure
    def in_degrees(self) -> torch.Tensor:
        return torch.bincount(self.dst_local, minlength=self.num_dst)

    @cached_structure
    def has_in_edges(self) -> torch.Tensor:
        return self.in_degrees > 0

    @cached_structure
    def rel_ptr(self) -> list[int]:
        """Edge offsets (block-local) of every relation: edges are sorted by relation."""
        return [min(max(o - self.edge_lo, 0), self.num_edges) for o in self.index.rel_offsets]

    @cached_structure
    def ntype_ptr(self) -> list[int]:
        """Global node offsets of every node type: nodes are grouped by type."""
        return list(self.index.ntype_offsets)

    @cached_structure
    def dst_ntype_ptr(self) -> list[int]:
        """Node-type offsets within the destination range."""
        return [min(max(o - self.node_lo, 0), self.num_dst) for o in self.index.ntype_offsets]

    @cached_structure
    def src_pairs(self) -> Pairs:
        """The block's (relation, source node) pair table (Hector's compact materialization)."""
        return Pairs.choose(self.edge_rel, self.src, self.rel_ptr)

    @cached_structure
    def dst_pairs(self) -> Pairs:
        """The block's (relation, destination node) pair table."""
        return Pairs.choose(self.edge_rel, self.dst, self.rel_ptr)

    @cached_structure
    def dst_pair_edges(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(pair ids, their destinations counted from ``node_lo``): the destination pairs as an edge list,
        to sum per-pair rows into their nodes with the sparse kernels."""
        pairs = self.dst_pairs
        return torch.arange(pairs.count, device=pairs.node.device), pairs.node - self.node_lo

    def pairs(self, side: str) -> Pairs:
        """``src_pairs`` or ``dst_pairs`` by ``side`` (src or dst)."""
        return self.src_pairs if side == "src" else self.dst_pairs

    def pair_count(self, side: str) -> int:
        """``pairs(side).count`` without building that table when it is not built yet: the cost model
        weighs both sides, and a plan that reads one should not keep the other's [E] index alive."""
        built = self.__dict__.get(f"{side}_pairs")
        if built is not None:
            return built.count
        counts = self.__dict__.setdefault("_pair_counts", {})
        if side not in counts:
            node = self.src if side == "src" else self.dst
            unique = Pairs.count_unique(self.edge_rel, node, self.rel_ptr, self.num_nodes)
            counts[side] = unique if cost.compacts(node.numel(), unique) else node.numel()
        return counts[side]

    def buckets(self):
        return self.index.degree_buckets(self.rel)

    @cached_structure
    def parent_edges_inverse(self) -> torch.Tensor:
        """Of a ``retyped`` block: the parent's edge i is this block's edge ``parent_edges_inverse[i]``."""
        parent = self.parent_edges
        assert parent is not None, "parent_edges_inverse is a retyped block's (it has parent_edges)"
        inverse = torch.empty_like(parent)
        inverse[parent] = torch.arange(parent.numel(), device=parent.device)
        return inverse

    def last_retyped(self) -> GraphContext | None:
        """The block ``retyped`` built or returned last (``explain`` shows the cost model's choices on it)."""
        cache = self.__dict__.get("_retyped")
        return cache.values()[-1][1] if cache else None

    @structure_builder
    def retyped(self, grouping) -> tuple[GraphContext, torch.Tensor]:
        """This block with each edge's relation replaced by its type in ``grouping`` (the stable sort of an
        integer edge feature by value, ``backend.torch.index_matmul.grouping``), and ``perm``: the new
        context's edge i is this block's edge ``perm[i]``. The types become relations, so pair tables and
        typed aggregations run on a type read from edge data (DGL's ``weight[edges.data['rel_type']]``).
        Cached per grouping (the last few)."""
        cache = self.__dict__.setdefault("_retyped", BoundedCache(4))
        hit = cache.get(id(grouping))
        if hit is not None and hit[0] is grouping:  # holding the grouping pins its id
            return hit[1], hit[2]
        offsets = grouping.groups.offsets
        src, dst = self.src[grouping.perm], self.dst[grouping.perm]
        names = [("_N", f"type{t}", "_N") for t in range(len(offsets) - 1)]
        index = GraphIndex.from_relation_blocks(
            ["_N"],
            [self.num_nodes],
            names,
            [(src[lo:hi], dst[lo:hi]) for lo, hi in zip(offsets, offsets[1:])],
            self.src.device,
        )
        perm = grouping.perm if index.user_eid is None else grouping.perm[index.user_eid]
        typed = GraphContext(index, None, index.src, index.dst, self.node_lo, self.node_hi, 0, self.num_edges, perm)
        cache.put(id(grouping), (grouping, typed, perm))
        return typed, perm


@dataclass(frozen=True)
class Pairs:
    """A table of (relation, node) pairs that a block's edges read rows of, sorted by relation.

    ``edge_pair[e]`` is edge e's pair; pair p is node ``node[p]`` (global id)
    under relation ``rel[p]``; pairs of relation r are ``rel_ptr[r]`` up to
    ``rel_ptr[r + 1]``. A value that depends only on an edge's (relation,
    node) is computed once per pair and read by edges through ``edge_pair``.
    ``unique`` counts the distinct pairs; the table holds them once each
    (compact) or is one pair per edge (``identity``: ``edge_pair`` is 0..E-1)
    where compacting would save less than ``cost.MIN_PAIR_SAVING`` of the rows.
    """

    edge_pair: torch.Tensor
    node: torch.Tensor
    rel: torch.Tensor
    rel_ptr: list
    unique: int
    identity: bool = False

    @property
    def count(self) -> int:
        return self.node.numel()

    @staticmethod
    def choose(edge_rel: torch.Tensor, node: torch.Tensor, rel_ptr: list) -> Pairs:
        """The compact table, or the identity one when the cost model (``cost.compacts``) says so."""
        compact = Pairs.build(edge_rel, node, len(rel_ptr) - 1)
        if cost.compacts(node.numel(), compact.count):
            return compact
        edges = torch.arange(node.numel(), device=node.device)
        return Pairs(edges, node, edge_rel, list(rel_ptr), compact.count, identity=True)

    @staticmethod
    def count_unique(edge_rel: torch.Tensor, node: torch.Tensor, rel_ptr: list, num_nodes: int) -> int:
        """The number of distinct (relation, node) pairs of edges grouped by relation (``rel_ptr``)."""
        if node.numel() and (len(rel_ptr) - 1) * num_nodes > BINCOUNT_MAX_WORK * node.numel():
            return int(torch.unique(edge_rel.to(torch.int64) * num_nodes + node).numel())
        return sum(
            int(torch.bincount(node[lo:hi], minlength=num_nodes).count_nonzero())
            for lo, hi in zip(rel_ptr, rel_ptr[1:])
            if hi > lo
        )

    @staticmethod
    def build(edge_rel: torch.Tensor, node: torch.Tensor, num_rels: int) -> Pairs:
        """The compact table: every distinct (relation, node) pair once."""
        width = int(node.max()) + 1 if node.numel() else 1
        key = edge_rel.to(torch.int64) * width + node
        if key.numel() < 2 or bool((key[1:] >= key[:-1]).all()):  # edges sorted by (relation, node): runs
            unique, edge_pair = torch.unique_consecutive(key, return_inverse=True)
        else:
            unique, edge_pair = torch.unique(key, sorted=True, return_inverse=True)
        rel, pair_node = (unique // width).to(edge_rel.dtype), unique % width
        counts = torch.bincount(rel, minlength=num_rels)
        rel_ptr = [0] + torch.cumsum(counts, 0).tolist()
        return Pairs(edge_pair, pair_node, rel, rel_ptr, int(unique.numel()))


def graph_context(g, rel: int | None) -> GraphContext:
    """The (cached) context of the whole graph or of relation ``rel``.

    Cached on the graph object, not on its index: a context refers to the
    index, so a cache on the index would be a reference cycle, and a dropped
    graph (a sampled block) would keep its structures until a full garbage
    collection. The cache holds the index it was built for: a mutated graph
    (``add_edges``, ``remove_nodes``, ...) has a new index, and its contexts,
    with everything cached on them, are built anew.
    """
    index = g.index
    built_for, cache = g.__dict__.get("_contexts", (None, None))
    if built_for is not index:
        cache = {}
        g.__dict__["_contexts"] = (index, cache)
    if rel not in cache:
        if rel is None:
            elo, ehi, nlo, nhi = 0, index.num_edges, 0, index.num_nodes
        else:
            elo, ehi = index.rel_range(rel)
            nlo, nhi = index.ntype_range(index.ntypes.index(index.etypes[rel][2]))
        cache[rel] = GraphContext(index, rel, index.src[elo:ehi], index.dst[elo:ehi], nlo, nhi, elo, ehi)
    return cache[rel]


def user_order_context(g) -> GraphContext:
    """The whole graph's context with its edges in the user's order (``src`` and ``dst`` permuted), cached
    beside ``graph_context(g, None)``: for plans that compute every edge from its own row alone
    (``gnnc.compiler.edge_order``)."""
    whole = graph_context(g, None)
    cache = _cache(g)
    if "user order" not in cache:
        index = whole.index
        src, dst = index.to_user_order(whole.src), index.to_user_order(whole.dst)
        cache["user order"] = GraphContext(index, None, src, dst, whole.node_lo, whole.node_hi, 0, whole.num_edges)
    return cache["user order"]


def user_order_ends(g, side: str, lo: int, hi: int) -> torch.Tensor:
    """The ``side`` (``src`` or ``dst``) node of internal edges lo..hi (the whole graph or one relation's
    block), in the user's order of those edges; cached beside ``graph_context(g, None)``."""
    if (lo, hi) == (0, g.index.num_edges):
        return getattr(user_order_context(g), side)
    cache = _cache(g)
    key = ("user order ends", side, lo, hi)
    if key not in cache:
        cache[key] = g.index.to_user_order(getattr(g.index, side)[lo:hi], lo, hi)
    return cache[key]


def _cache(g) -> dict:
    """The cache ``graph_context`` keeps on ``g`` for its current index (made anew for a new index)."""
    graph_context(g, None)
    return g.__dict__["_contexts"][1]

"""``g[etype]``: one relation of a graph as DGL's relation slice, sharing the graph's features.

DGL code takes a relation out of a heterograph (``sub = G[srctype, etype, dsttype]``, as its HGT
example does), writes ``sub.srcdata`` / ``sub.dstdata`` / ``sub.edata`` and calls
``sub.apply_edges`` / ``sub.update_all`` / ``edge_softmax(sub, ...)`` on it. Here the slice is a
view: its features are the parent's per-type features (a write through the slice is seen by the
parent, and the other way round, except inside the slice's own ``local_scope``, as in DGL), and its
message passing is the parent's on that relation
(``etype=`` the relation), so it runs compiled like any relation call.
"""

from __future__ import annotations

import contextlib

import torch

from . import subgraph
from .core import ALL, NodeSpace


class RelationGraph:
    """Relation ``rel`` of graph ``g``: node types its two ends' (one when they are the same), its edges."""

    def __init__(self, g, rel: int):
        self.parent, self.rel = g, rel
        self.canonical_etype = g.canonical_etypes[rel]

    # --------------------------------------------------------------- schema
    @property
    def canonical_etypes(self) -> list[tuple[str, str, str]]:
        return [self.canonical_etype]

    @property
    def etypes(self) -> list[str]:
        return [self.canonical_etype[1]]

    @property
    def srctypes(self) -> list[str]:
        return [self.canonical_etype[0]]

    @property
    def dsttypes(self) -> list[str]:
        return [self.canonical_etype[2]]

    @property
    def ntypes(self) -> list[str]:
        src, _, dst = self.canonical_etype
        return [src] if src == dst else [src, dst]

    @property
    def is_homogeneous(self) -> bool:
        return len(self.ntypes) == 1

    @property
    def device(self) -> torch.device:
        return self.parent.device

    @property
    def idtype(self) -> torch.dtype:
        return self.parent.idtype

    def _own(self, etype) -> tuple[str, str, str]:
        """This relation, checking that ``etype`` (if given) names it."""
        if etype is not None and self.parent.etype_id(etype) != self.rel:
            raise KeyError(f"relation {etype!r} is not this slice's relation {self.canonical_etype}")
        return self.canonical_etype

    def etype_id(self, etype) -> int:
        """0, the slice's only relation (KeyError for any other)."""
        self._own(etype)
        return 0

    def _ntype(self, ntype) -> str:
        if ntype is None:
            if not self.is_homogeneous:
                raise ValueError(f"name the node type: this relation joins node types {self.ntypes}")
            return self.ntypes[0]
        if ntype not in self.ntypes:
            raise KeyError(f"node type {ntype!r} is not an end of relation {self.canonical_etype}")
        return ntype

    def num_nodes(self, ntype=None) -> int:
        return self.parent.num_nodes(self._ntype(ntype))

    number_of_nodes = num_nodes

    @property
    def is_block(self) -> bool:
        """Whether the parent is a block (DGL's slice of a block is one)."""
        return self.parent.is_block

    def _end(self, ntype, slot: int) -> str:
        """The relation's source (``slot`` 0) or destination (2) type, checking that ``ntype`` (if given)
        names it."""
        end = self.canonical_etype[slot]
        if ntype is not None and ntype != end:
            raise KeyError(
                f"node type {ntype!r} is not the {'source' if slot == 0 else 'destination'} type "
                f"of relation {self.canonical_etype}"
            )
        return end

    def num_src_nodes(self, ntype=None) -> int:
        return self.parent.num_nodes(self._end(ntype, 0))

    number_of_src_nodes = num_src_nodes

    def num_dst_nodes(self, ntype=None) -> int:
        return self.parent.num_dst_nodes(self._end(ntype, 2))

    number_of_dst_nodes = num_dst_nodes

    def num_edges(self, etype=None) -> int:
        return self.parent.num_edges(self._own(etype))

    number_of_edges = num_edges

    # ------------------------------------------------------------- features
    @property
    def srcdata(self):
        return self.parent.srcnodes[self.canonical_etype[0]].data

    @property
    def dstdata(self):
        """The destination type's data (of a block: its destination rows)."""
        return self.parent.dstnodes[self.canonical_etype[2]].data

    @property
    def ndata(self):
        return self.parent.nodes[self._ntype(None)].data

    @property
    def edata(self):
        return self.parent.edges[self.canonical_etype].data

    @contextlib.contextmanager
    def local_scope(self):
        """DGL's scope of a relation slice: inside it, the slice's feature writes (and its message passing's
        results) are its own, unseen by the parent and dropped on exit; the parent's own writes meanwhile
        (through it or another slice) stay, and are not seen through this slice until the scope ends."""
        parent = self.parent
        self.parent = parent.local_var()  # the same structure and tensors; feature writes of its own
        try:
            yield self
        finally:
            self.parent = parent

    @property
    def nodes(self):
        """DGL's ``g[etype].nodes``: the node space of the relation's end types."""
        return NodeSpace(self.parent, self.ntypes)

    @property
    def srcnodes(self):
        return NodeSpace(self.parent, self.srctypes)

    @property
    def dstnodes(self):
        return NodeSpace(self.parent, self.dsttypes) if not self.parent.is_block else self.parent.dstnodes

    # ------------------------------------------------------------ structure
    @property
    def edges(self) -> _RelationEdges:
        """DGL's ``edges``: ``edges(form, order)`` the edges (local ids) and ``edges[...].data`` their features."""
        return _RelationEdges(self)

    def all_edges(self, form: str = "uv", order: str = "eid", etype=None):
        return self.edges(form, order, etype)

    def to_canonical_etype(self, etype) -> tuple[str, str, str]:
        return self._own(etype)

    def __getitem__(self, etype) -> RelationGraph:
        """The slice itself, for its own relation (DGL's ``g[etype][etype]``)."""
        self._own(etype)
        return self

    def find_edges(self, eid=None, etype=None):
        return self.parent.find_edges(eid, self._own(etype))

    def edge_ids(self, u, v, return_uv: bool = False, etype=None):
        return self.parent.edge_ids(u, v, return_uv, self._own(etype))

    def in_edges(self, v, form: str = "uv", etype=None):
        return self.parent.in_edges(v, form, self._own(etype))

    def out_edges(self, u, form: str = "uv", etype=None):
        return self.parent.out_edges(u, form, self._own(etype))

    def has_edges_between(self, u, v, etype=None):
        return self.parent.has_edges_between(u, v, self._own(etype))

    def predecessors(self, v, etype=None):
        return self.parent.predecessors(v, self._own(etype))

    def successors(self, v, etype=None):
        return self.parent.successors(v, self._own(etype))

    def adj_external(self, transpose: bool = False, ctx="cpu", scipy_fmt=None, etype=None):
        return self.parent.adj_external(transpose, ctx, scipy_fmt, self._own(etype))

    def inc(self, typestr: str, ctx="cpu", etype=None):
        return self.parent.inc(typestr, ctx, self._own(etype))

    def in_degrees(self, v=ALL, etype=None):
        return self.parent.in_degrees(v, self._own(etype))

    def out_degrees(self, u=ALL, etype=None):
        return self.parent.out_degrees(u, self._own(etype))

    def subgraph(self, nodes, **options):
        """DGL's ``node_subgraph`` of the slice (the graph of this relation)."""
        return subgraph.node_subgraph(self, nodes, **options)

    def edge_subgraph(self, edges, **options):
        """DGL's ``edge_subgraph`` of the slice (the graph of this relation)."""
        return subgraph.edge_subgraph(self, edges, **options)

    # ------------------------------------------------------- message passing
    def apply_edges(self, message=None, edges=None, etype=None, compile=None, **dgl_kwargs) -> None:
        self.parent.apply_edges(message, edges, self._own(etype), compile, **dgl_kwargs)

    def apply_nodes(self, func, v=None, ntype=None) -> None:
        self.parent.apply_nodes(func, v, self._ntype(ntype))

    def update_all(self, message=None, reduce=None, update=None, etype=None, compile=None, **dgl_kwargs) -> None:
        self.parent.update_all(message, reduce, update, self._own(etype), compile, **dgl_kwargs)

    def send_and_recv(self, edges, message=None, reduce=None, update=None, etype=None, **dgl_kwargs) -> None:
        self.parent.send_and_recv(edges, message, reduce, update, self._own(etype), **dgl_kwargs)

    def pull(self, v, message=None, reduce=None, update=None, etype=None, **dgl_kwargs) -> None:
        self.parent.pull(v, message, reduce, update, self._own(etype), **dgl_kwargs)

    def push(self, u, message=None, reduce=None, update=None, etype=None, **dgl_kwargs) -> None:
        self.parent.push(u, message, reduce, update, self._own(etype), **dgl_kwargs)

    def __repr__(self) -> str:
        return (
            f"RelationGraph({self.canonical_etype}, num_src_nodes={self.num_src_nodes()}, "
            f"num_dst_nodes={self.num_dst_nodes()}, num_edges={self.num_edges()})"
        )


class _RelationEdges:
    """A slice's ``edges``: the parent's edge space on the slice's relation."""

    def __init__(self, view: RelationGraph):
        self._view = view

    def __call__(self, form: str = "uv", order: str = "eid", etype=None):
        return self._view.parent.edges(form, order, self._view._own(etype))

    def __getitem__(self, key):
        """``edges[etype]`` / ``edges[:]`` (every edge of the relation) or ``edges[ids]``."""
        if isinstance(key, slice) and key != slice(None):
            raise ValueError("only the full slice ':' selects rows of an edge space")
        own = self._view.canonical_etype
        if isinstance(key, (str, tuple, slice)):
            return self._view.parent.edges[self._view._own(None if isinstance(key, slice) else key)]
        return self._view.parent.edges[key, own]

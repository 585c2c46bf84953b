"""``EdgeBatch`` and ``NodeBatch``: the views UDFs receive (DGL semantics).

EdgeBatch covers a contiguous block of edges in internal order (the whole
graph or one relation), or chosen edges of such a block (DGL's
``apply_edges(func, edges)``): ``src[k]``/``dst[k]`` gather node features by each
edge's endpoints (``g.side_data``: ``g.ndata_all`` for the whole graph; for one relation, the
features of its source / destination node type, as DGL reads per-type
features set on some types only; a block's source and destination sides), ``data[k]`` is edge data, and
Graphiler's typed lookups ``srctype[k]``/``dsttype[k]``/``type[k]`` pick rows of ``g.ntype_data[k]`` /
``g.etype_data[k]`` by each edge's source type, destination type, relation.
NodeBatch covers a set of nodes: ``data[k]``, ``mailbox[k]`` of shape
``[nodes, degree, ...]`` and ``type[k]``.

As in DGL, a UDF may write ``edges.data[k]`` / ``nodes.data[k]``: the value is read back in the UDF, and an
edge value is stored in the graph when the batch is every edge of the graph or relation (the message UDF of
``update_all`` / ``apply_edges``); on chosen edges (``send_and_recv``, ``pull``, ``apply_edges(func, eids)``)
and on nodes it stays the batch's (DGL's sub-frames).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch


class _Lookup(Mapping):
    """Read-only mapping whose values are computed on access."""

    def __init__(self, fetch, keys, what: str, where: str = ""):
        self._fetch, self._keys, self._what, self._where = fetch, keys, what, where

    def __getitem__(self, key):
        if key not in self._keys():
            raise KeyError(f"{self._what}[{key!r}]: no such feature{self._where}; available: {list(self._keys())}")
        return self._fetch(key)

    def __iter__(self):
        return iter(self._keys())

    def __len__(self):
        return len(self._keys())

    def __setitem__(self, key, value):
        raise TypeError(
            f"{self._what}[{key!r}] = ...: this space of a UDF's batch is read-only; return the value "
            "in the UDF's dict instead"
        )


class _Features(_Lookup):
    """A batch's own features (``edges.data``, ``nodes.data``), writable as DGL's frames are: a value written
    is read back by the UDF and, where the batch covers every row of the graph's frame (``keep`` given),
    stored in the graph at once; on a batch of some rows only it stays the batch's (DGL's sub-frame)."""

    def __init__(self, fetch, keys, what: str, where: str, rows: int, keep=None):
        self._written: dict = {}
        super().__init__(
            lambda k: self._written[k] if k in self._written else fetch(k),
            lambda: list(dict.fromkeys([*keys(), *self._written])),
            what,
            where,
        )
        self._rows, self._keep = rows, keep

    def __setitem__(self, key, value):
        if not isinstance(value, torch.Tensor) or value.dim() == 0 or value.shape[0] != self._rows:
            got = f"{value.shape[0]} rows" if isinstance(value, torch.Tensor) and value.dim() else type(value).__name__
            raise ValueError(
                f"{self._what}[{key!r}] = ...: expected a tensor of {self._rows} rows (one per row of "
                f"the batch), got {got}"
            )
        self._written[key] = value
        if self._keep is not None:
            self._keep(key, value)

    def update(self, other=(), **more) -> None:
        """``dict.update``'s forms, as DGL's frames take them: each item is written as ``self[key] = value``."""
        for key, value in dict(other, **more).items():
            self[key] = value


def _type_lookup(g, side: str, ntype: str, nodes: torch.Tensor, what: str) -> _Lookup:
    """Features of node type ``ntype`` on ``side`` at ``nodes`` (global ids of that type)."""
    view = g.side_data(side, g.ntype_id(ntype))
    offset = g.index.ntype_offsets[g.ntype_id(ntype)]
    local = nodes - offset if offset else nodes
    return _Lookup(lambda k: view[k].index_select(0, local), lambda: list(view), what, f" on node type {ntype!r}")


class EdgeBatch:
    """The edges ``lo..hi`` (internal order) of graph ``g``; with ``subset`` (user edge ids local to the
    block, int64), only those edges, in that order; ``user_order``: all of them in user order."""

    def __init__(
        self, g, lo: int, hi: int, rel: int | None = None, subset: torch.Tensor | None = None, user_order: bool = False
    ):
        self._g, self._lo, self._hi, self._rel, self._subset = g, lo, hi, rel, subset
        self._user_order = user_order and subset is None and g.index.internal_eid is not None
        index = g.index
        if self._user_order:
            self._pos = index.internal_eid[lo:hi]
        elif subset is None:
            self._pos = slice(lo, hi)
        elif index.internal_eid is None:
            self._pos = subset + lo
        else:
            self._pos = index.internal_eid[subset + lo]
        self._src = index.src[self._pos]
        self._dst = index.dst[self._pos]
        ntd, etd = g.ntype_data, g.etype_data
        if rel is None:
            sources, ends = g.side_data("src"), g.side_data("dst")
            self.src = _Lookup(lambda k: sources[k].index_select(0, self._src), lambda: list(sources), "edges.src")
            self.dst = _Lookup(lambda k: ends[k].index_select(0, self._dst), lambda: list(ends), "edges.dst")
        else:
            src_type, _, dst_type = index.etypes[rel]
            self.src = _type_lookup(g, "src", src_type, self._src, "edges.src")
            self.dst = _type_lookup(g, "dst", dst_type, self._dst, "edges.dst")
        keep = self._keep if subset is None else None
        self.data = _Features(self._edge_data, self._edge_keys, "edges.data", "", self._src.numel(), keep)
        self.srctype = _Lookup(
            lambda k: ntd[k].index_select(0, index.node_type[self._src]), lambda: list(ntd), "edges.srctype"
        )
        self.dsttype = _Lookup(
            lambda k: ntd[k].index_select(0, index.node_type[self._dst]), lambda: list(ntd), "edges.dsttype"
        )
        self.type = _Lookup(
            lambda k: etd[k].index_select(0, index.edge_rel[self._pos]), lambda: list(etd), "edges.type"
        )

    def _edge_keys(self):
        return list(self._edge_store())

    def _edge_store(self):
        return self._g.edata_all if self._rel is None else self._g.edges[self._g.canonical_etypes[self._rel]].data

    def _keep(self, key, value) -> None:
        """Store a whole block's edge value written in the UDF (rows in the batch's order) in the graph."""
        if not self._user_order and self._g.index.internal_eid is not None:
            value = self._g.index.to_user_order(value, self._lo, self._hi)
        self._edge_store()[key] = value

    def _edge_data(self, key):
        user = self._edge_store()[key]
        if self._subset is not None:
            return user.index_select(0, self._subset)
        return user if self._user_order else self._g.index.from_user_order(user, self._lo, self._hi)

    @property
    def canonical_etype(self) -> tuple[str, str, str]:
        """DGL's: the (src_type, name, dst_type) of the batch's relation; AttributeError for a batch over the
        edges of several relations (gnnc's whole-graph call)."""
        rels = self._g.canonical_etypes
        if self._rel is None and len(rels) != 1:
            raise AttributeError(
                f"edges.canonical_etype: this batch covers the edges of {len(rels)} relations; "
                "call with etype= for one relation's batch"
            )
        return rels[0 if self._rel is None else self._rel]

    @property
    def mailbox(self):
        raise AttributeError(
            "edges have no mailbox: is a reduce function passed as the message function? update_all(message, reduce)"
        )

    def edges(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(src, dst, user edge id) of the batch's edges, global node ids; a compute graph's edges by their
        ids in the graph they were taken from (``Graph.parent_eid``), as DGL's."""
        index = self._g.index
        if self._subset is not None:
            eid = self._subset + self._lo
        elif self._user_order:
            eid = torch.arange(self._lo, self._hi, device=index.device)
        elif index.user_eid is not None:
            eid = index.user_eid[self._lo : self._hi]
        else:
            eid = torch.arange(self._lo, self._hi, device=index.device)
        parent = self._g.parent_eid
        return self._src, self._dst, eid if parent is None else parent.index_select(0, eid)

    def batch_size(self) -> int:
        return self._src.numel()

    def __len__(self) -> int:
        return self.batch_size()


class NodeBatch:
    """Nodes ``nodes`` (global ids) with optional mailbox.

    ``read(key)`` supplies node data for exactly these nodes; the executor
    passes a per-type reader when a node type's features have their own width,
    and ``where`` (" on node type 'user'") for the error naming a missing feature.
    """

    def __init__(self, g, nodes: torch.Tensor, mailbox: dict | None = None, read=None, keys=None, where: str = ""):
        self._g, self._nodes = g, nodes
        ndata, ntd = g.side_data("dst"), g.ntype_data
        read = read or (lambda k: ndata[k].index_select(0, nodes))
        self.data = _Features(read, keys or (lambda: list(ndata)), "nodes.data", where, nodes.numel())
        box = mailbox or {}
        self.mailbox = _Lookup(box.__getitem__, lambda: list(box), "nodes.mailbox")
        self.type = _Lookup(lambda k: ntd[k].index_select(0, g.index.node_type[nodes]), lambda: list(ntd), "nodes.type")

    def nodes(self) -> torch.Tensor:
        return self._nodes

    @property
    def ntype(self) -> str:
        """DGL's: the node type of the batch's nodes; AttributeError for a batch of nodes of several types
        (gnnc's whole-graph call)."""
        ntypes = self._g.index.ntypes
        types = [0] if len(ntypes) == 1 else self._g.index.node_type[self._nodes].unique().tolist()
        if len(types) != 1:
            raise AttributeError(
                f"nodes.ntype: this batch holds nodes of {len(types)} node types; call with "
                "ntype= (or etype=) for one type's batch"
            )
        return ntypes[types[0]]

    def batch_size(self) -> int:
        return self._nodes.numel()

    def __len__(self) -> int:
        return self.batch_size()

"""The ``Graph`` class and its constructors ``graph`` and ``heterograph``.

One class serves homogeneous and heterogeneous graphs: a homogeneous graph
is one node type and one relation. Structure lives in a ``GraphIndex``;
features live in ``TypedStore``s (edge features in the user's edge order).
"""

from __future__ import annotations

import contextlib
import numbers
from dataclasses import dataclass

import torch

from . import mutation, queries, sparse_formats, type_names, validate
from .edge_data import check_idtype, relation_edges, sparse_rows
from .frame import RowsView, TypedStore, TypeParams, TypesView, TypeView, WholeView
from .index import GraphIndex
from .message_passing_hook import message_passing
from .validate import as_ids, canonical_key, check_range

DEFAULT_NTYPE = "_N"
DEFAULT_ETYPE = "_E"
ALL = "__ALL__"  # DGL's "every node / edge" argument (``dgl.base.ALL``)


def heterograph(data_dict, num_nodes=None, device=None, *, idtype=None, num_nodes_dict=None) -> Graph:
    """Build a graph from ``{(src_type, rel, dst_type): edges}`` (edges in any of DGL's forms:
    ``gnnc.graph.edge_data``).

    Ids are local to their node type. ``num_nodes`` (DGL: ``num_nodes_dict``) maps node type -> count
    and every type a relation uses must be in it. As DGL's, node types are sorted by name and relations
    by canonical triple, whatever order the dicts give: type ids follow that order. Types missing
    from ``num_nodes`` when it is None get ``max id + 1`` nodes. ``idtype`` (int32 or int64) is the type of
    the ids the graph's queries return (the ids' own type by default when they are tensors, else int64).
    Raises ValueError / KeyError naming the relation, id or type at fault.
    """
    if not isinstance(data_dict, dict):
        raise TypeError(f"heterograph expects a dict of relations, got {type(data_dict).__name__}")
    if num_nodes_dict is not None:
        if num_nodes is not None:
            raise TypeError("heterograph got both num_nodes and DGL's num_nodes_dict")
        num_nodes = num_nodes_dict
    relations, types, declared = [], set(), []
    for key, data in data_dict.items():
        key = canonical_key(key)
        src, dst, relation_idtype = relation_edges(data, f"relation {key}", idtype)
        if (rows := sparse_rows(data)) is not None:
            declared.append((key, *rows))
        types.add(relation_idtype)
        if src.numel() != dst.numel():
            raise ValueError(f"relation {key}: {src.numel()} source ids but {dst.numel()} destination ids")
        relations.append((key, src, dst))
    relations.sort(key=lambda relation: relation[0])
    if len(types) > 1:
        raise ValueError(f"relations of one graph must have ids of one type, got {sorted(map(str, types))}")
    ntypes, counts = _node_types(relations, num_nodes)
    _count_sparse_rows(declared, ntypes, counts, given=num_nodes is not None)
    for (st, _, dt), src, dst in relations:
        check_range(src, counts[ntypes.index(st)], f"relation {(st, _, dt)} source ({st!r})")
        check_range(dst, counts[ntypes.index(dt)], f"relation {(st, _, dt)} destination ({dt!r})")
    if device is None:
        device = next((s.device for _, s, _ in relations), torch.device("cpu"))
    out = Graph._build(ntypes, counts, relations, device)
    out.idtype = types.pop() if types else check_idtype(idtype or torch.int64)
    return out


def graph(
    data,
    num_nodes=None,
    ntype=DEFAULT_NTYPE,
    etype=DEFAULT_ETYPE,
    device=None,
    *,
    idtype=None,
    row_sorted: bool = False,
    col_sorted: bool = False,
) -> Graph:
    """Build a homogeneous graph from its edges in any of DGL's forms (``(src_ids, dst_ids)``,
    ``('csr', (indptr, indices, edge_ids))``, a list of pairs: ``gnnc.graph.edge_data``).

    ``num_nodes`` defaults to ``max id + 1``; ``idtype`` as :func:`heterograph`'s. ``row_sorted`` /
    ``col_sorted`` (DGL's promises about the ids' order) change nothing here.
    """
    sizes = None if num_nodes is None else {ntype: num_nodes}
    return heterograph({(ntype, etype, ntype): data}, sizes, device, idtype=idtype)


def _count_sparse_rows(declared, ntypes, counts: list, given: bool) -> None:
    """A csr / csc relation's indptr declares its row end's node count, as in DGL: it must be the count given,
    and raises an inferred one (trailing rows without edges are nodes too)."""
    for key, end, rows in declared:
        t = ntypes.index(key[end])
        if given and counts[t] != rows:
            raise ValueError(
                f"relation {key}: its indptr declares {rows} {'source' if end == 0 else 'destination'}"
                f" nodes, but node type {key[end]!r} has {counts[t]}"
            )
        counts[t] = max(counts[t], rows)


def _node_types(relations, num_nodes):
    if num_nodes is not None:
        if not isinstance(num_nodes, dict):
            raise TypeError("num_nodes must map node type -> count for heterograph")
        for t, n in num_nodes.items():
            if int(n) != n or n < 0:
                raise ValueError(f"num_nodes[{t!r}] must be a non-negative integer, got {n!r}")
        ntypes = sorted(num_nodes)
        for (st, rel, dt), _, _ in relations:
            for t in (st, dt):
                if t not in num_nodes:
                    raise KeyError(
                        f"relation {(st, rel, dt)} uses node type {t!r}, which is not in "
                        f"num_nodes (known types: {ntypes})"
                    )
        return ntypes, [int(num_nodes[t]) for t in ntypes]
    ntypes, counts = [], {}
    for (st, _, dt), src, dst in relations:
        for t, ids in ((st, src), (dt, dst)):
            if t not in counts:
                ntypes.append(t)
                counts[t] = 0
            if ids.numel():
                counts[t] = max(counts[t], int(ids.max()) + 1)
    ntypes.sort()
    return ntypes, [counts[t] for t in ntypes]


@dataclass(frozen=True)
class MetaGraph:
    """Node types with counts and relations with counts, in graph order."""

    ntypes: tuple[tuple[str, int], ...]
    relations: tuple[tuple[tuple[str, str, str], int], ...]

    # DGL's metagraph is a networkx MultiDiGraph (node types as nodes, a relation as an edge keyed by its
    # name): ``nodes`` and ``edges`` read as that graph's do
    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.ntypes)

    def edges(self, keys: bool = False):
        """``(src_type, dst_type)`` per relation; with ``keys``, ``{(src_type, dst_type, name): {}}`` (networkx's
        edge view: the keyed edges and their attributes, none here)."""
        if keys:
            return {(s, d, r): {} for (s, r, d), _ in self.relations}
        return [(s, d) for (s, _, d), _ in self.relations]

    def __str__(self) -> str:
        lines = [f"{len(self.ntypes)} node types, {sum(c for _, c in self.ntypes):,} nodes"]
        lines += [f"  {name:<24} {count:>12,}" for name, count in self.ntypes]
        lines.append(f"{len(self.relations)} relations, {sum(c for _, c in self.relations):,} edges")
        lines += [f"  {s} -[{r}]-> {d}".ljust(50) + f" {count:>12,}" for (s, r, d), count in self.relations]
        return "\n".join(lines)


class Graph:
    """A directed multigraph with typed nodes and relations and feature storage."""

    is_block = False  # DGL's flag: True for a sampled layer's block (``gnnc.data.neighbor_sampler.Block``)
    # ``gnnc.batch``'s graphs: ([graphs, node types] node counts, [graphs, relations] edge counts or None where
    # the edges of a graph are no longer contiguous); None for one graph
    batch_counts: tuple | None = None
    idtype: torch.dtype = torch.int64  # the type of ids its queries return (DGL's; storage is int64 always)
    # A partial call's compute graph (DGL's): each edge's id in the graph its edges were taken from
    parent_eid: torch.Tensor | None = None

    def __init__(self, index: GraphIndex, nstore: TypedStore | None = None, estore: TypedStore | None = None):
        self.index = index
        self._nstore = nstore or TypedStore("node", index.ntypes, index.ntype_counts)
        self._estore = estore or TypedStore("edge", [r for _, r, _ in index.etypes], index.rel_counts)
        self.ntype_data = TypeParams("node", index.ntypes)
        self.etype_data = TypeParams("edge", [r for _, r, _ in index.etypes])
        self.initializers: dict[str, dict] = {"node": {}, "edge": {}}  # kind -> field (None: any) -> function

    @classmethod
    def _build(cls, ntypes, counts, relations, device) -> Graph:
        """Graph from ``[(canonical_key, local_src, local_dst)]`` in user edge order."""
        offsets = [0]
        for c in counts:
            offsets.append(offsets[-1] + c)
        blocks = []
        for (st, _, dt), src, dst in relations:
            src_off, dst_off = offsets[ntypes.index(st)], offsets[ntypes.index(dt)]
            blocks.append(
                (
                    src.to(device) + src_off if src_off else src.to(device),
                    dst.to(device) + dst_off if dst_off else dst.to(device),
                )
            )
        index = GraphIndex.from_relation_blocks(ntypes, counts, [k for k, _, _ in relations], blocks, device)
        return cls(index)

    # --------------------------------------------------------------- schema
    @property
    def ntypes(self) -> list[str]:
        return list(self.index.ntypes)

    @property
    def canonical_etypes(self) -> list[tuple[str, str, str]]:
        return list(self.index.etypes)

    @property
    def etypes(self) -> list[str]:
        return [r for _, r, _ in self.index.etypes]

    @property
    def is_multigraph(self) -> bool:
        """Whether some two edges of one relation join the same pair of nodes (DGL's ``is_multigraph``)."""
        for key in self.canonical_etypes:
            src, dst = self.find_edges(key)
            pairs = src.long() * max(self.num_nodes(key[2]), 1) + dst.long()
            if pairs.unique().numel() != pairs.numel():
                return True
        return False

    @property
    def is_homogeneous(self) -> bool:
        return len(self.index.ntypes) == 1 and len(self.index.etypes) == 1

    @property
    def device(self) -> torch.device:
        return self.index.device

    def ntype_id(self, ntype: str | None) -> int:
        """Index of a node type (None: the only one, as DGL); KeyError listing the known types otherwise."""
        if ntype is None and len(self.index.ntypes) == 1:
            return 0
        if isinstance(ntype, str) and ntype[:4] in ("SRC/", "DST/") and self.is_unibipartite:  # DGL's side names
            ntype = ntype[4:] if ntype[4:] in (self.srctypes if ntype[0] == "S" else self.dsttypes) else ntype
        try:
            return self.index.ntypes.index(ntype)
        except ValueError:
            raise KeyError(f"unknown node type {ntype!r}; node types: {self.ntypes}") from None

    def etype_id(self, etype) -> int:
        """Index of a relation given as its name or (src_type, name, dst_type) (None: the only one, as DGL)."""
        if etype is None and len(self.index.etypes) == 1:
            return 0
        if isinstance(etype, tuple):
            if etype in self.index.etypes:
                return self.index.etypes.index(etype)
            raise KeyError(f"unknown relation {etype!r}; relations: {self.canonical_etypes}")
        matches = [i for i, (_, r, _) in enumerate(self.index.etypes) if r == etype]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise KeyError(f"unknown relation {etype!r}; relations: {self.etypes}")
        raise KeyError(f"relation name {etype!r} is ambiguous; use one of {[self.index.etypes[i] for i in matches]}")

    get_ntype_id = ntype_id  # DGL's names
    get_etype_id = etype_id

    @property
    def _etype2canonical(self) -> dict:
        """DGL's private map relation name -> (src_type, name, dst_type), ``()`` for a name several relations
        share: code written against DGL graphs reads it."""
        return type_names.etype_to_canonical(self.index.etypes)

    def num_nodes(self, ntype: str | None = None) -> int:
        if ntype is None:
            return self.index.num_nodes
        return self.index.ntype_counts[self.ntype_id(ntype)]

    def num_edges(self, etype=None) -> int:
        if etype is None:
            return self.index.num_edges
        return self.index.rel_counts[self.etype_id(etype)]

    def number_of_nodes(self, ntype: str | None = None) -> int:
        """DGL's older name of :meth:`num_nodes`."""
        return self.num_nodes(ntype)

    def number_of_edges(self, etype=None) -> int:
        """DGL's older name of :meth:`num_edges`."""
        return self.num_edges(etype)

    def num_src_nodes(self, ntype: str | None = None) -> int:
        """DGL's source-side node count: the nodes of ``ntype``, else of every type in :attr:`srctypes` (the
        source side of a uni-bipartite graph, else every node)."""
        if ntype is None:
            return sum(self.num_nodes(t) for t in self.srctypes)
        return self.num_nodes(ntype)

    number_of_src_nodes = num_src_nodes

    def num_dst_nodes(self, ntype: str | None = None) -> int:
        """DGL's destination-side node count: the nodes of ``ntype``, else of every type in :attr:`dsttypes`
        (a block's are its first nodes: ``Block.num_dst_nodes``)."""
        if ntype is None:
            return sum(self.num_nodes(t) for t in self.dsttypes)
        return self.num_nodes(ntype)

    number_of_dst_nodes = num_dst_nodes

    @property
    def is_unibipartite(self) -> bool:
        """True when every node type is only a source or only a destination of relations (DGL)."""
        src, dst = {k[0] for k in self.index.etypes}, {k[2] for k in self.index.etypes}
        return not src & dst and src | dst == set(self.index.ntypes)

    @property
    def srctypes(self) -> list[str]:
        """DGL's source node types: the source side of a uni-bipartite graph, else every node type."""
        return self._end_types(0)

    @property
    def dsttypes(self) -> list[str]:
        """DGL's destination node types: the destination side of a uni-bipartite graph, else every node type."""
        return self._end_types(2)

    def _end_types(self, slot: int) -> list[str]:
        if not self.is_unibipartite:
            return self.ntypes
        return [t for t in self.index.ntypes if any(k[slot] == t for k in self.index.etypes)]

    def metagraph(self) -> MetaGraph:
        return MetaGraph(
            tuple(zip(self.index.ntypes, self.index.ntype_counts)), tuple(zip(self.index.etypes, self.index.rel_counts))
        )

    # ------------------------------------------------------------- features
    @property
    def ndata(self):
        """DGL's node data: :attr:`ndata_all` with one node type, else ``{ntype: tensor}`` per feature
        (``gnnc.graph.frame.TypesView``)."""
        if len(self.index.ntypes) <= 1:
            return WholeView(self._nstore, self.ntype_id)
        return TypesView(self._nstore, range(len(self.index.ntypes)), self.index.ntypes, self.ntype_id)

    @property
    def edata(self):
        """DGL's edge data: :attr:`edata_all` with one relation, else ``{canonical etype: tensor}``."""
        if len(self.index.etypes) <= 1:
            return WholeView(self._estore, self.etype_id)
        return TypesView(self._estore, range(len(self.index.etypes)), self.index.etypes, self.etype_id)

    @property
    def ndata_all(self):
        """gnnc's node features over all nodes, types concatenated in type order (global ids); a per-type
        feature reads when every type holds it with one shape (a block's: its one-node-set ``ndata``)."""
        return self.ndata if self.is_block else WholeView(self._nstore, self.ntype_id)

    @property
    def edata_all(self) -> WholeView:
        """gnnc's edge features over all edges of all relations, in the user's edge order."""
        return WholeView(self._estore, self.etype_id)

    @property
    def srcdata(self):
        """DGL's source node data: ``ndata`` with one node type, else one source type's data, else a
        ``{type: tensor}`` view over the source types (:attr:`srctypes`)."""
        return self._end_data(self.srctypes)

    @property
    def dstdata(self):
        """DGL's destination node data, as :attr:`srcdata` for the destination types."""
        return self._end_data(self.dsttypes)

    def side_data(self, side: str, ntype: int | None = None):
        """The node features a message-passing call reads on ``side`` of its edges ("src": ``edges.src``;
        "dst": ``edges.dst`` and the reduce and update functions' ``nodes.data``, where its results go), over
        every node (``ntype`` None) or node type ``ntype``'s: ``ndata_all`` / ``nodes[t].data`` (a block's sides
        differ: ``gnnc.graph.block``)."""
        return self.ndata_all if ntype is None else self.nodes[self.ntypes[ntype]].data

    def _end_data(self, types: list[str]):
        if len(self.index.ntypes) == 1:
            return self.ndata
        if len(types) == 1:
            return self.nodes[types[0]].data
        return TypesView(self._nstore, [self.ntype_id(t) for t in types])

    @property
    def nodes(self) -> NodeSpace:
        return NodeSpace(self)

    @property
    def srcnodes(self) -> NodeSpace:
        """DGL's ``g.nodes`` restricted to :attr:`srctypes` (all of ``g.nodes`` unless uni-bipartite)."""
        return NodeSpace(self, self.srctypes if self.is_unibipartite else None)

    @property
    def dstnodes(self) -> NodeSpace:
        """DGL's ``g.nodes`` restricted to :attr:`dsttypes` (all of ``g.nodes`` unless uni-bipartite)."""
        return NodeSpace(self, self.dsttypes if self.is_unibipartite else None)

    @property
    def edges(self) -> _EdgeSpace:
        return _EdgeSpace(self)

    @contextlib.contextmanager
    def local_scope(self):
        """Feature assignments inside the block are undone on exit (like DGL)."""
        saved = (
            self._nstore.open_scope(),
            self._estore.open_scope(),
            dict(self.ntype_data.data),
            dict(self.etype_data.data),
        )
        try:
            yield self
        finally:
            self._nstore.close_scope(saved[0])
            self._estore.close_scope(saved[1])
            self.ntype_data.data, self.etype_data.data = saved[2], saved[3]

    def local_var(self) -> Graph:
        """DGL's ``local_var`` (deprecated there for ``local_scope``): a graph of the same structure whose
        features are this graph's tensors, and whose feature writes and deletions stay its own."""
        out = Graph(self.index, self._nstore.copy(), self._estore.copy())
        out.ntype_data.data, out.etype_data.data = dict(self.ntype_data.data), dict(self.etype_data.data)
        out.batch_counts, out.idtype = self.batch_counts, self.idtype
        out.initializers = {kind: dict(fields) for kind, fields in self.initializers.items()}
        return out

    # ---------------------------------------------------------- initializers
    def set_n_initializer(self, initializer, field=None, ntype=None) -> None:
        """DGL's ``set_n_initializer``: ``initializer(shape, dtype, device, id_range)`` makes the rows of node
        feature ``field`` (every feature when None) that a call writing some nodes only leaves unset (zeros
        by default). Set per graph, for all node types (``ntype`` is accepted and checked)."""
        if ntype is not None:
            self.ntype_id(ntype)
        self.initializers["node"][field] = initializer

    def set_e_initializer(self, initializer, field=None, etype=None) -> None:
        """DGL's ``set_e_initializer``: as :meth:`set_n_initializer` for edge features."""
        if etype is not None:
            self.etype_id(etype)
        self.initializers["edge"][field] = initializer

    def initial_rows(self, kind: str, field: str, count: int, like: torch.Tensor) -> torch.Tensor:
        """``count`` rows of a new ``kind`` ("node" / "edge") feature ``field`` shaped as ``like``'s rows, from
        its initializer (zeros without one)."""
        return mutation.initial_rows(
            self.initializers[kind], field, (count,) + tuple(like.shape[1:]), like, slice(0, count)
        )

    # -------------------------------------------------------------- batches
    @property
    def batch_size(self) -> int:
        """How many graphs ``gnnc.batch`` joined into this one (1 for any other graph)."""
        return 1 if self.batch_counts is None else self.batch_counts[0].shape[0]

    def batch_num_nodes(self, ntype: str | None = None) -> torch.Tensor:
        """Nodes (of ``ntype``; needed when there are several types) of every graph of the batch."""
        return self.batch_num_nodes_by_type()[:, self.ntype_id(self._only_type(ntype, self.index.ntypes, "node"))]

    def batch_num_edges(self, etype=None) -> torch.Tensor:
        """Edges (of relation ``etype``; needed when there are several) of every graph of the batch."""
        key = self._only_type(etype, self.canonical_etypes, "relation")
        return self.batch_num_edges_by_type()[:, self.etype_id(key)]

    def batch_num_nodes_by_type(self) -> torch.Tensor:
        """[graphs, node types]: the node counts of every graph of the batch."""
        if self.batch_counts is None:
            return torch.tensor([self.index.ntype_counts], dtype=torch.int64)
        return self.batch_counts[0]

    def batch_num_edges_by_type(self) -> torch.Tensor:
        """[graphs, relations]: the edge counts of every graph of the batch."""
        if self.batch_counts is None:
            return torch.tensor([self.index.rel_counts], dtype=torch.int64)
        if self.batch_counts[1] is None:
            raise ValueError(
                "this batch's edges are no longer grouped by graph (add_self_loop appends the loops "
                "after every graph's edges): add self loops to each graph before gnnc.batch"
            )
        return self.batch_counts[1]

    def set_batch_num_nodes(self, val) -> None:
        """DGL's ``set_batch_num_nodes``: this graph's nodes as a batch of graphs of ``val`` nodes (per type)."""
        from . import batching as batch

        batch.set_batch_num_nodes(self, val)

    def set_batch_num_edges(self, val) -> None:
        """DGL's ``set_batch_num_edges``: this graph's edges as a batch of graphs of ``val`` edges (per relation)."""
        from . import batching as batch

        batch.set_batch_num_edges(self, val)

    @staticmethod
    def _only_type(name, names: list, what: str):
        if name is not None:
            return name
        if len(names) != 1:
            raise ValueError(f"name the {what}: the graph has several {names}")
        return names[0]

    # ------------------------------------------------------------ structure
    def node_type_ids(self) -> torch.Tensor:
        """Node type index of every node (global ids)."""
        return self.index.node_type

    def edge_type_ids(self) -> torch.Tensor:
        """Relation index of every edge, user edge order."""
        return self.index.to_user_order(self.index.edge_rel).long()

    def edge_relation_in_degrees(self) -> torch.Tensor:
        """For every edge (user edge order), how many in-edges of its relation its destination has: R-GCN's
        normaliser c_{v,r}. One pass over the edges, which are kept sorted by (relation, destination)."""
        key = self.index.edge_rel.long() * self.index.num_nodes + self.index.dst
        _, group, counts = torch.unique_consecutive(key, return_inverse=True, return_counts=True)
        return self.index.to_user_order(counts.index_select(0, group))

    def find_edges(self, eid=None, etype=None) -> tuple[torch.Tensor, torch.Tensor]:
        """DGL's ``find_edges(eid, etype)``: (src, dst) of edges ``eid`` (all by default, in edge-id order) of
        relation ``etype`` (local ids), or of the whole graph (global ids) without one. gnnc's own
        ``find_edges(etype)`` names the relation first. With ``eid`` and no ``etype`` on a graph of one relation
        between two node types, that relation's local ids (as ``edges()`` gives them, DGL's)."""
        if isinstance(eid, str) or (isinstance(eid, tuple) and all(isinstance(k, str) for k in eid)):
            eid, etype = None, eid
        if etype is None and eid is not None and self.default_relation() is not None:
            etype = self.index.etypes[0]
        if etype is None:
            src, dst = self.index.to_user_order(self.index.src), self.index.to_user_order(self.index.dst)
        else:
            r = self.etype_id(etype)
            lo, hi = self.index.rel_range(r)
            st, _, dt = self.index.etypes[r]
            src = self.index.to_user_order(self.index.src[lo:hi], lo, hi) - self.index.ntype_offsets[self.ntype_id(st)]
            dst = self.index.to_user_order(self.index.dst[lo:hi], lo, hi) - self.index.ntype_offsets[self.ntype_id(dt)]
        if eid is not None:
            ids = as_ids(torch.as_tensor(eid, device=self.device).reshape(-1), "find_edges(eid)", "edge")
            check_range(ids, src.numel(), "find_edges(eid)", "edge")
            src, dst = src.index_select(0, ids), dst.index_select(0, ids)
        return self.ids(src), self.ids(dst)

    def default_relation(self) -> int | None:
        """DGL's relation of a call or query without etype: the only one (its index, local ids) when it joins
        two node types; None otherwise (the whole graph, where gnnc's ids are global)."""
        return 0 if len(self.index.etypes) == 1 and len(self.index.ntypes) > 1 else None

    def ids(self, t: torch.Tensor) -> torch.Tensor:
        """Node or edge ids ``t`` (int64) in the graph's :attr:`idtype`, as its queries return them."""
        return t if self.idtype == torch.int64 else t.to(self.idtype)

    def astype(self, idtype) -> Graph:
        """DGL's ``astype``: this graph (features shared, as :meth:`local_var`) with queries in ``idtype``."""
        out = self.local_var()
        out.idtype = check_idtype(idtype)
        return out

    def int(self) -> Graph:
        return self.astype(torch.int32)

    def long(self) -> Graph:
        return self.astype(torch.int64)

    def in_degrees(self, v=ALL, etype=None):
        """DGL's ``in_degrees(v=ALL, etype=None)``: in-degrees (within relation ``etype``) of nodes ``v`` (all
        nodes of the destination type by default); an int for an int ``v``, else an int64 tensor."""
        return self._degrees(v, etype, self.index.dst, 2, "in_degrees(v, etype)")

    def out_degrees(self, u=ALL, etype=None):
        """DGL's ``out_degrees(u=ALL, etype=None)``: out-degrees (within relation ``etype``) of nodes ``u``."""
        return self._degrees(u, etype, self.index.src, 0, "out_degrees(u, etype)")

    def _degrees(self, nodes, etype, ends, end_slot, call: str):
        relation_name = isinstance(nodes, str) or (
            isinstance(nodes, tuple) and len(nodes) == 3 and all(isinstance(k, str) for k in nodes)
        )
        if relation_name and nodes != ALL:
            raise TypeError(f"{call}: {nodes!r} is not a node id; name the relation as etype={nodes!r}")
        if etype is None and self.default_relation() is not None:
            etype = self.index.etypes[0]
        t = None
        if etype is None:
            degrees = torch.bincount(ends, minlength=self.index.num_nodes)
        else:
            r = self.etype_id(etype)
            lo, hi = self.index.rel_range(r)
            t = self.ntype_id(self.index.etypes[r][end_slot])
            start, stop = self.index.ntype_range(t)
            degrees = torch.bincount(ends[lo:hi] - start, minlength=stop - start)
        if self.is_block:  # DGL's: over the destination nodes (in-degrees) or the source nodes (out-degrees)
            degrees = self.side_rows(degrees, t, end_slot)
        if isinstance(nodes, str):
            return self.ids(degrees)
        if isinstance(nodes, numbers.Integral):
            validate.check_range(torch.tensor([int(nodes)]), degrees.numel(), call, "node")
            return int(degrees[int(nodes)])
        ids = validate.as_ids(torch.as_tensor(nodes, device=self.device).reshape(-1), call, "node")
        validate.check_range(ids, degrees.numel(), call, "node")
        return self.ids(degrees.index_select(0, ids))

    def reverse(self, *args, **options) -> Graph:
        """DGL's ``g.reverse``: :func:`gnnc.graph.derived.reverse` (edge features only with copy_edata=True)."""
        from . import derived

        return derived.reverse(self, *args, **options)

    def add_self_loop(self, etype=None, fill_data: float = 1.0) -> Graph:
        """New graph with one (v, v) edge per node of a same-type relation.

        The loops follow that relation's existing edges in user order; their
        edge features are ``fill_data``. ``etype`` may be omitted for a graph
        with one relation.
        """
        r = self._loop_relation(etype, "add_self_loop")
        st = self.index.etypes[r][0]
        loops = torch.arange(self.num_nodes(st), device=self.device)
        relations = []
        for i, key in enumerate(self.index.etypes):
            src, dst = self.find_edges(key)
            if i == r:
                src, dst = torch.cat([src, loops]), torch.cat([dst, loops])
            relations.append((key, src, dst))
        out = Graph._build(list(self.index.ntypes), list(self.index.ntype_counts), relations, self.device)
        out._nstore, out.idtype = self._nstore.copy(), self.idtype
        for key, i, val in self._edge_features_by_relation():
            if i == r:
                val = torch.cat([val, val.new_full((loops.numel(),) + tuple(val.shape[1:]), fill_data)])
            out._estore.set_typed(key, i, val)
        if self.batch_counts is not None:
            out.batch_counts = (self.batch_counts[0], None)
        return out

    def remove_self_loop(self, etype=None) -> Graph:
        """New graph without the (v, v) edges of a same-type relation; other edges keep their order and
        features. ``etype`` may be omitted for a graph with one relation."""
        r = self._loop_relation(etype, "remove_self_loop")
        src, dst = self.find_edges(self.index.etypes[r])
        keep = src != dst
        relations = [
            (key, *((s[keep], d[keep]) if i == r else (s, d)))
            for i, key in enumerate(self.index.etypes)
            for s, d in [self.find_edges(key)]
        ]
        out = Graph._build(list(self.index.ntypes), list(self.index.ntype_counts), relations, self.device)
        out._nstore, out.idtype = self._nstore.copy(), self.idtype
        for key, i, val in self._edge_features_by_relation():
            out._estore.set_typed(key, i, val[keep] if i == r else val)
        if self.batch_counts is not None:
            out.batch_counts = (self.batch_counts[0], None)
        return out

    def relation_of_call(self, etype, call: str) -> int:
        """Index of relation ``etype``, which ``call`` may leave out (None) on a graph with one relation."""
        if etype is None and len(self.index.etypes) != 1:
            raise ValueError(f"{call} needs etype= on a graph with several relations {self.canonical_etypes}")
        return 0 if etype is None else self.etype_id(etype)

    def _loop_relation(self, etype, call: str) -> int:
        r = self.relation_of_call(etype, call)
        st, rel, dt = self.index.etypes[r]
        if st != dt:
            raise ValueError(f"{call}: relation {(st, rel, dt)} joins two different node types")
        return r

    def _edge_features_by_relation(self):
        """(name, relation index, that relation's rows) of every edge feature a relation has."""
        for key in self._estore.keys():
            for i in range(len(self.index.etypes)):
                try:
                    yield key, i, self._estore.get_typed(key, i)
                except KeyError:
                    continue

    def edge_ids(self, u, v, return_uv: bool = False, etype=None):
        """DGL's ``edge_ids``: the id (within relation ``etype``) of an edge from each ``u`` to each ``v`` (the
        smallest where several join them; an int for int ``u`` and ``v``), ValueError naming a pair no edge
        joins; with ``return_uv``, (src, dst, eid) of every edge joining each pair."""
        key = self.canonical_etypes[self.relation_of_call(etype, "edge_ids")]
        scalar = isinstance(u, numbers.Integral) and isinstance(v, numbers.Integral)
        u = as_ids(torch.as_tensor(u, device=self.device).reshape(-1), "edge_ids(u)")
        v = as_ids(torch.as_tensor(v, device=self.device).reshape(-1), "edge_ids(v)")
        if u.numel() != v.numel():
            raise ValueError(f"edge_ids: {u.numel()} source ids but {v.numel()} destination ids")
        check_range(u, self.num_nodes(key[0]), "edge_ids(u)")
        check_range(v, self.num_nodes(key[2]), "edge_ids(v)")
        order, keys, width = self.index.sorted_pairs(self.etype_id(key))
        wanted = u.long() * width + v.long()
        first = torch.searchsorted(keys, wanted)
        found = first < keys.numel()
        found[found.clone()] = keys[first[found]] == wanted[found]
        if return_uv:
            counts = torch.searchsorted(keys, wanted, right=True) - first
            pair = torch.repeat_interleave(torch.arange(u.numel(), device=self.device), counts)
            starts = torch.repeat_interleave(first - (torch.cumsum(counts, 0) - counts), counts)
            return (
                self.ids(u[pair]),
                self.ids(v[pair]),
                self.ids(order[starts + torch.arange(pair.numel(), device=self.device)]),
            )
        if not bool(found.all()):
            bad = int(torch.nonzero(~found)[0])
            raise ValueError(
                f"edge_ids: ({int(u[bad])}, {int(v[bad])}) at position {bad} does not form an edge of relation {key}"
            )
        eid = order[first]
        return int(eid[0]) if scalar else self.ids(eid)

    def in_edges(self, v, form: str = "uv", etype=None):
        """DGL's ``g.in_edges``: the edges (of relation ``etype``) into nodes ``v``, in edge-id order, as
        ``uv`` (src, dst), ``eid`` or ``all`` (src, dst, eid)."""
        return self._edges_at(v, form, etype, 1)

    def out_edges(self, u, form: str = "uv", etype=None):
        """DGL's ``g.out_edges``: the edges (of relation ``etype``) out of nodes ``u``; forms as ``in_edges``."""
        return self._edges_at(u, form, etype, 0)

    def _edges_at(self, nodes, form, etype, end: int):
        if form not in ("uv", "eid", "all"):
            raise ValueError(f"form must be one of ['uv', 'eid', 'all'], got {form!r}")
        src, dst, eid = self.edges(form="all", etype=etype)
        chosen = torch.isin((src, dst)[end], torch.as_tensor(nodes, device=self.device).reshape(-1))
        src, dst, eid = src[chosen], dst[chosen], eid[chosen]
        return {"uv": (src, dst), "eid": eid, "all": (src, dst, eid)}[form]

    def to(self, device) -> Graph:
        """Copy of the graph (structure, features, type data) on ``device``; on the same device (``"cuda"``
        being the current GPU) the structure and its caches are shared.

        Nothing stays on the old device: edge results a compiled call left
        unwritten are materialized and moved, and the structure caches (CSR
        by destination and source, type pointers, degree buckets, compiled
        calls' contexts) are rebuilt on ``device`` when first used there.
        Compiled plans are keyed by device, so the first compiled call on the
        copy builds its own (on CUDA: the triton backend under ``auto``).
        """
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:  # "cuda" is the current GPU, as tensors read it
            device = torch.device("cuda", torch.cuda.current_device())
        out = Graph(
            self.index.to(device), self._nstore.copy(lambda t: t.to(device)), self._estore.copy(lambda t: t.to(device))
        )
        out.ntype_data.data = {k: v.to(device) for k, v in self.ntype_data.data.items()}
        out.etype_data.data = {k: v.to(device) for k, v in self.etype_data.data.items()}
        out.batch_counts, out.idtype = self.batch_counts, self.idtype
        return out

    # -------------------------------------------------------- message passing
    def apply_edges(self, message=None, edges=None, etype=None, compile=None, **dgl_kwargs) -> None:
        """Run ``message(edges)`` on every edge (or one relation's); store results in edge data.

        ``edges``: as DGL, edge ids (of the relation) to run on instead of all; their rows of each result
        feature are written, other rows keep their values (zeros for a new feature). Such calls run eagerly.
        ``compile=True`` runs this call through the compiler (``gnnc.compile`` does it for a model).
        DGL's keyword ``func=`` names ``message`` too.
        """
        message_passing().apply_edges(self, message, edges, etype, compile, **dgl_kwargs)

    def filter_nodes(self, predicate, nodes=ALL, ntype=None) -> torch.Tensor:
        """DGL's ``filter_nodes``: ids of the nodes whose ``predicate(nodes)`` is nonzero (``gnnc.graph.filters``)."""
        from . import filters

        return filters.filter_nodes(self, predicate, nodes, ntype)

    def filter_edges(self, predicate, edges=ALL, etype=None) -> torch.Tensor:
        """DGL's ``filter_edges``: ids of the edges whose ``predicate(edges)`` is nonzero (``gnnc.graph.filters``)."""
        from . import filters

        return filters.filter_edges(self, predicate, edges, etype)

    def apply_nodes(self, func, v=None, ntype=None) -> None:
        """Run ``func(nodes)`` on every node (or one type's); store results in node data.

        ``v``: as DGL, node ids (of the type) to run on instead of all; other rows keep their values
        (zeros for a new feature)."""
        message_passing().apply_nodes(self, func, v, ntype)

    def update_all(self, message=None, reduce=None, update=None, etype=None, compile=None, **dgl_kwargs) -> None:
        """Message on all edges, reduce at destinations, optional node update.

        Nodes without in-edges receive zeros. With ``etype`` only that
        relation's edges take part and only its destination type is written.
        ``compile=True`` runs this call through the compiler. DGL's keywords
        ``message_func``, ``reduce_func``, ``apply_node_func`` name the three functions too.
        """
        message_passing().update_all(self, message, reduce, update, etype, compile, **dgl_kwargs)

    def send_and_recv(self, edges, message=None, reduce=None, update=None, etype=None, **dgl_kwargs) -> None:
        """DGL's ``send_and_recv``: message on edges ``edges`` (ids of relation ``etype``; needed when there are
        several), reduce at their destinations, then ``update`` on those nodes only. Other nodes keep their
        features (zeros for a new one). Runs eagerly (a compiled call covers whole graphs or relations)."""
        message_passing().send_and_recv(self, edges, message, reduce, update, etype, **dgl_kwargs)

    def pull(self, v, message=None, reduce=None, update=None, etype=None, **dgl_kwargs) -> None:
        """DGL's ``pull``: nodes ``v`` (of the destination type) reduce messages over all their in-edges (zeros
        without any), then ``update`` on them; other nodes keep their features. Runs eagerly."""
        message_passing().pull(self, v, message, reduce, update, etype, **dgl_kwargs)

    def push(self, u, message=None, reduce=None, update=None, etype=None, **dgl_kwargs) -> None:
        """DGL's ``push``: ``send_and_recv`` on the out-edges of nodes ``u`` (of the source type). Runs eagerly."""
        message_passing().push(self, u, message, reduce, update, etype, **dgl_kwargs)

    def prop_nodes(self, nodes_generator, message_func, reduce_func, apply_node_func=None, etype=None) -> None:
        """DGL's ``prop_nodes``: :meth:`pull` on each node frontier of ``nodes_generator`` in turn."""
        for frontier in nodes_generator:
            self.pull(frontier, message_func, reduce_func, apply_node_func, etype=etype)

    def prop_edges(self, edges_generator, message_func, reduce_func, apply_node_func=None, etype=None) -> None:
        """DGL's ``prop_edges``: :meth:`send_and_recv` on each edge frontier of ``edges_generator`` in turn."""
        for frontier in edges_generator:
            self.send_and_recv(frontier, message_func, reduce_func, apply_node_func, etype=etype)

    def multi_update_all(self, funcs=None, cross_reducer: str = "sum", update=None, compile=None, **dgl_kwargs) -> None:
        """Per-relation ``{rel: (message, reduce)}`` then combine per node type, then ``update`` each such type.

        ``cross_reducer`` is one of sum, mean, max, min, stack (as DGL).
        ``compile=True`` runs each relation's call through the compiler.
        DGL's keywords ``etype_dict`` and ``apply_node_func`` name ``funcs`` and ``update`` too.
        """
        message_passing().multi_update_all(self, funcs, cross_reducer, update, compile, **dgl_kwargs)

    # ----------------------------------------------------------- converters
    def to_edge_list(self, etype=None):
        from . import convert

        return convert.to_edge_list(self, etype)

    def to_scipy(self, etype=None, fmt: str = "coo"):
        from . import convert

        return convert.to_scipy(self, etype, fmt)

    def to_networkx(self, node_attrs=(), edge_attrs=()):
        from . import convert

        return convert.to_networkx(self, node_attrs, edge_attrs)

    def to_pyg(self):
        from . import convert

        return convert.to_pyg(self)

    def __getitem__(self, key):
        """DGL's relation slice ``g[etype]`` / ``g[src_type, etype, dst_type]``: a view of one relation
        sharing this graph's features (:class:`~gnnc.graph.relation_view.RelationGraph`); where ``:`` (any
        type) or a name several relations share matches more, a new graph flattening them
        (``gnnc.graph.flatten``)."""
        from . import flatten

        return flatten.relation_slice(self, key)

    def formats(self, formats=None):
        """DGL's sparse-format query (``gnnc.graph.sparse_formats``): with no argument, the formats held; gnnc has
        no format switch, so naming formats raises NotImplementedError."""
        return sparse_formats.query(formats)

    def __repr__(self) -> str:
        if self.is_homogeneous:
            return (
                f"Graph(num_nodes={self.num_nodes()}, num_edges={self.num_edges()}, "
                f"ndata={list(self.ndata)}, edata={list(self.edata)})"
            )
        return (
            f"Graph(ntypes={dict(zip(self.index.ntypes, self.index.ntype_counts))}, "
            f"relations={len(self.index.etypes)}, num_edges={self.num_edges()})"
        )

    # -------------------------------------------------------------- mutation
    def add_nodes(self, num, data=None, ntype=None) -> None:
        """DGL's ``add_nodes``, in place: ``num`` nodes appended to ``ntype`` (needed when there are several
        node types), with ``data``'s features (``gnnc.graph.mutation``; ``gnnc.add_nodes`` makes a new graph)."""
        t = self.ntype_id(self._only_type(ntype, self.index.ntypes, "node type"))
        self._mutate(mutation.add_nodes(self._structure(), self.initializers, t, num, data))

    def add_edges(self, u, v, data=None, etype=None) -> None:
        """DGL's ``add_edges``, in place: edges ``u[i] -> v[i]`` appended to relation ``etype`` (needed when
        there are several), adding the nodes their ids reach; ``data``: their features."""
        r = self.relation_of_call(etype, "add_edges")
        self._mutate(mutation.add_edges(self._structure(), self.initializers, r, u, v, data))

    def remove_edges(self, eids, etype=None, store_ids: bool = False) -> None:
        """DGL's ``remove_edges``, in place: the other edges of relation ``etype`` keep their order and
        features, renumbered; ``store_ids`` keeps their old ids as ``edata['_ID']``."""
        r = self.relation_of_call(etype, "remove_edges")
        self._mutate(mutation.remove_edges(self._structure(), r, eids, store_ids, self.idtype))

    def remove_nodes(self, nids, ntype=None, store_ids: bool = False) -> None:
        """DGL's ``remove_nodes``, in place: nodes ``nids`` of ``ntype`` and their edges go, the others keep
        their order and features, renumbered; ``store_ids`` keeps old ids as ``ndata`` / ``edata['_ID']``."""
        t = self.ntype_id(self._only_type(ntype, self.index.ntypes, "node type"))
        self._mutate(mutation.remove_nodes(self._structure(), t, nids, store_ids, self.idtype))

    def clone(self) -> Graph:
        """DGL's ``clone``: this graph's structure and feature tensors in a graph of its own (mutating or
        writing features of either leaves the other as it is)."""
        return self.local_var()

    def _structure(self) -> mutation.Structure:
        if self.is_block:
            raise TypeError("a block cannot be mutated (nor can DGL's): mutate the graph it was sampled from")
        return mutation.Structure(self.index, self._nstore, self._estore, self.batch_counts)

    def _mutate(self, state: mutation.Structure) -> None:
        """Take a mutation's result. The new index is what tells every cache derived from the old structure
        (contexts of compiled calls, CSR, buckets) that it is stale."""
        self.index, self.batch_counts = state.index, state.batch_counts
        self._nstore.take(state.nodes)
        self._estore.take(state.edges)

    # ------------------------------------------------------------- subgraphs
    # DGL's methods of the functions in ``gnnc.graph.subgraph`` (the graph is their first argument)
    def subgraph(self, nodes, **options) -> Graph:
        from . import subgraph

        return subgraph.node_subgraph(self, nodes, **options)

    def edge_subgraph(self, edges, **options) -> Graph:
        from . import subgraph

        return subgraph.edge_subgraph(self, edges, **options)

    def in_subgraph(self, nodes, **options) -> Graph:
        from . import subgraph

        return subgraph.in_subgraph(self, nodes, **options)

    def out_subgraph(self, nodes, **options) -> Graph:
        from . import subgraph

        return subgraph.out_subgraph(self, nodes, **options)

    def khop_in_subgraph(self, nodes, k, **options):
        from . import subgraph

        return subgraph.khop_in_subgraph(self, nodes, k, **options)

    def khop_out_subgraph(self, nodes, k, **options):
        from . import subgraph

        return subgraph.khop_out_subgraph(self, nodes, k, **options)

    def node_type_subgraph(self, ntypes, output_device=None) -> Graph:
        from . import subgraph

        return subgraph.node_type_subgraph(self, ntypes, output_device)

    def edge_type_subgraph(self, etypes, output_device=None) -> Graph:
        from . import subgraph

        return subgraph.edge_type_subgraph(self, etypes, output_device)

    # DGL's methods of the transforms in ``gnnc.graph.derived`` / ``gnnc.graph.relabel`` (the graph is first)
    def line_graph(self, backtracking: bool = True, shared: bool = False) -> Graph:
        from . import derived

        return derived.line_graph(self, backtracking, shared)

    def to_simple(self, *args, **options):
        from . import derived

        return derived.to_simple(self, *args, **options)

    def reorder_graph(self, *args, **options) -> Graph:
        from . import relabel

        return relabel.reorder_graph(self, *args, **options)

    def all_edges(self, form: str = "uv", order: str = "eid", etype=None):
        """DGL's ``all_edges``: :attr:`edges` called with the same arguments."""
        return self.edges(form, order, etype)

    def to_canonical_etype(self, etype) -> tuple[str, str, str]:
        """DGL's ``to_canonical_etype``: the (src_type, name, dst_type) of relation ``etype``."""
        return self.canonical_etypes[self.etype_id(etype)]

    # ---------------------------------------------------------- DGL queries (``gnnc.graph.queries``)
    def has_nodes(self, vid, ntype=None):
        return queries.has_nodes(self, vid, ntype)

    def has_edges_between(self, u, v, etype=None):
        return queries.has_edges_between(self, u, v, etype)

    def predecessors(self, v, etype=None) -> torch.Tensor:
        return queries.predecessors(self, v, etype)

    def successors(self, v, etype=None) -> torch.Tensor:
        return queries.successors(self, v, etype)

    def adj_external(self, transpose: bool = False, ctx="cpu", scipy_fmt=None, etype=None):
        return queries.adj_external(self, transpose, ctx, scipy_fmt, etype)

    def inc(self, typestr: str, ctx="cpu", etype=None) -> torch.Tensor:
        return queries.inc(self, typestr, ctx, etype)

    incidence_matrix = inc  # DGL's older name

    def adj(self, etype=None, eweight_name=None):
        return queries.adj(self, etype, eweight_name)

    def adj_tensors(self, fmt: str, etype=None):
        return queries.adj_tensors(self, fmt, etype)


class NodeSpace:
    """``g.nodes[ntype].data`` and ``g.nodes(ntype)`` (node ids); ``types`` limits it to some node types (a
    relation slice's, a block's ends)."""

    def __init__(self, g: Graph, types: list[str] | None = None):
        self._g, self._types = g, types

    def _check(self, ntype) -> None:
        if self._types is not None and ntype not in self._types:
            raise KeyError(f"node type {ntype!r} is not among this view's node types {self._types}")

    def __getitem__(self, key) -> _TypeSpace:
        """``g.nodes[ntype]``; as DGL also ``g.nodes[ids]`` (the only type's), ``g.nodes[ids, ntype]`` and
        ``g.nodes[:]``: rows of the features (``data``) to read or write."""
        ids, ntype = _space_key(key, lambda k: isinstance(k, str))
        if ntype is None and self._types is not None and len(self._types) == 1:
            ntype = self._types[0]
        if ntype is not None:
            self._check(ntype)
        t = self._g.ntype_id(ntype)
        return _space(self._g, "node", *self._data(t), ids)

    def _data(self, t: int) -> tuple:
        """(features, rows) of node type ``t`` in this space (a block's spaces differ: ``gnnc.graph.block``)."""
        return TypeView(self._g._nstore, t), self._g.index.ntype_counts[t]

    def __call__(self, ntype=None) -> torch.Tensor:
        if ntype is None and self._types is not None:
            if len(self._types) > 1:
                raise ValueError(f"name the node type: this view covers several node types {self._types}")
            ntype = self._types[0]
        if ntype is not None:
            self._check(ntype)
        n = self._g.num_nodes(ntype)
        return self._g.ids(torch.arange(n, device=self._g.device))


class _EdgeSpace:
    """``g.edges[rel].data`` and DGL's ``g.edges(form='uv', order='eid', etype=None)``: in edge-id order,
    ``uv`` (src, dst), ``eid`` the edge ids, ``all`` (src, dst, eid); ``order='srcdst'`` sorts by source,
    then destination."""

    _FORMS = ("uv", "eid", "all")

    def __init__(self, g: Graph):
        self._g = g

    def __getitem__(self, key) -> _TypeSpace:
        """``g.edges[etype]``; as DGL also ``g.edges[ids]`` / ``g.edges[u, v]`` (the only relation's),
        ``g.edges[ids, etype]`` and ``g.edges[:]``: rows of the features (``data``) to read or write."""

        def named(k):
            return isinstance(k, str) or (isinstance(k, tuple) and len(k) == 3 and all(isinstance(x, str) for x in k))

        if isinstance(key, tuple) and len(key) == 2 and not named(key[1]):
            key = (self._g.edge_ids(*key), None)  # (u, v) node pairs
        ids, etype = _space_key(key, named)
        r = self._g.etype_id(etype)
        return _space(self._g, "edge", TypeView(self._g._estore, r), self._g.index.rel_counts[r], ids)

    def __call__(self, form="uv", order="eid", etype=None):
        if form not in self._FORMS:  # gnnc's own g.edges(etype)
            form, etype = "uv", form
        if order not in ("eid", "srcdst"):
            raise ValueError(f"edges(order=...) must be 'eid' or 'srcdst', got {order!r}")
        if etype is None and self._g.default_relation() is not None:
            etype = self._g.index.etypes[0]
        src, dst = self._g.find_edges(etype)
        eid = self._g.ids(torch.arange(src.numel(), device=src.device))
        if order == "srcdst":
            width = int(dst.max()) + 1 if dst.numel() else 1
            eid = torch.argsort(src * width + dst, stable=True)
            src, dst = src[eid], dst[eid]
        return {"uv": (src, dst), "eid": eid, "all": (src, dst, eid)}[form]


def _space_key(key, is_type_name):
    """(ids or None for all, type name or None) of a ``g.nodes[...]`` / ``g.edges[...]`` key."""
    if isinstance(key, slice):
        if (key.start, key.stop, key.step) != (None, None, None):
            raise ValueError("only the full slice ':' selects rows of a node or edge space")
        return None, None
    if key is None or is_type_name(key):
        return None, key
    if isinstance(key, tuple) and len(key) == 2 and (key[1] is None or is_type_name(key[1])):
        return key[0], key[1]
    return key, None


def _space(g: Graph, kind: str, view, count: int, ids) -> _TypeSpace:
    """The features ``view`` of a type (``count`` rows), or of rows ``ids`` of it (not None)."""
    if ids is None:
        return _TypeSpace(view)
    what = f"{kind}s[ids]"
    rows = as_ids(torch.as_tensor(ids, device=g.device).reshape(-1), what, kind)
    check_range(rows, count, what, kind)
    return _TypeSpace(RowsView(view, rows, count, lambda k, n, like: g.initial_rows(kind, k, n, like)))


@dataclass(frozen=True)
class _TypeSpace:
    data: TypeView

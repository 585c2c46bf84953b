"""Conversions between ``Graph`` and edge lists, SciPy sparse matrices, networkx and PyG.

Conventions shared by every converter:

- Node ids are local to their node type. Whole-graph views (``etype=None``)
  use global ids: type offset + local id, node types in graph order.
- ``to_*`` keep the user's edge order: relations in graph order, then the
  order the edges were given within each relation.
- ``from_*`` build graphs whose user edge order is the source's edge order.

networkx and torch_geometric are optional; they are imported on first use and
an ImportError says how to install them when they are missing.
"""

from __future__ import annotations

import numpy as np
import torch

from .core import Graph, graph, heterograph
from .validate import as_ids

__all__ = [
    "to_edge_list",
    "from_edge_list",
    "to_scipy",
    "from_scipy",
    "to_networkx",
    "from_networkx",
    "to_pyg",
    "from_pyg",
]

_SCIPY_FORMATS = ("coo", "csr", "csc")


# ----------------------------------------------------------------- edge lists
def to_edge_list(g: Graph, etype=None) -> torch.Tensor:
    """``[E, 2]`` int64 tensor of (src, dst) rows in user edge order.

    Global ids over the whole graph when ``etype`` is None, else the local ids
    of that relation's source and destination types.
    """
    src, dst = g.find_edges(etype)
    return torch.stack([src, dst], dim=1)


def from_edge_list(edges, num_nodes: int | None = None) -> Graph:
    """Homogeneous graph from ``[E, 2]`` (src, dst) rows (tensor, array or list of pairs).

    Row ``i`` becomes edge ``i``. ``num_nodes`` defaults to ``max id + 1``.
    Raises ValueError naming the row of a negative or out-of-range id.
    """
    pairs = _edge_rows(edges)
    bad = pairs < 0
    if num_nodes is not None:
        bad |= pairs >= num_nodes
    if bool(bad.any()):
        row, col = (int(i) for i in torch.nonzero(bad)[0])
        value = int(pairs[row, col])
        limit = "is negative" if value < 0 else f"is not below num_nodes={num_nodes}"
        raise ValueError(f"edge list row {row}: node id {value} {limit}")
    return graph((pairs[:, 0], pairs[:, 1]), num_nodes=num_nodes)


def _edge_rows(edges) -> torch.Tensor:
    if not isinstance(edges, torch.Tensor):
        edges = np.asarray(edges)
        if edges.size == 0:
            edges = edges.reshape(0, 2)
    shape = tuple(edges.shape)
    if len(shape) != 2 or shape[1] != 2:
        hint = " (for a [2, E] edge_index pass its transpose)" if len(shape) == 2 and shape[0] == 2 else ""
        raise ValueError(f"edge list must have shape [E, 2], got {shape}{hint}")
    flat = edges.reshape(-1) if isinstance(edges, torch.Tensor) else np.ascontiguousarray(edges).reshape(-1)
    return as_ids(flat, "edge list").reshape(-1, 2)


# ---------------------------------------------------------------------- scipy
def to_scipy(g: Graph, etype=None, fmt: str = "coo", weight_key: str | None = "weight"):
    """Adjacency as a SciPy sparse array (rows = sources, columns = destinations).

    With ``etype`` the shape is (src-type nodes, dst-type nodes) in local ids;
    with ``etype=None`` it is the global (N, N) adjacency of all relations.
    Entries are the 1-D edge feature ``weight_key`` when the graph (or the
    relation) has it, otherwise float32 ones. Every edge is one stored entry,
    multi-edges included (they are not summed). ``fmt='coo'`` keeps user edge
    order; ``'csr'`` / ``'csc'`` order entries by row / column, user order
    within each.
    """
    import scipy.sparse as sp

    if fmt not in _SCIPY_FORMATS:
        raise ValueError(f"to_scipy: unknown format {fmt!r}; use one of {_SCIPY_FORMATS}")
    if etype is None:
        n = g.num_src_nodes() if g.is_block else g.num_nodes()  # a block's node rows are its source nodes
        shape = (n, n)
    else:
        st, _, dt = g.canonical_etypes[g.etype_id(etype)]
        shape = (g.num_nodes(st), g.num_nodes(dt))
    src, dst = (t.cpu().numpy() for t in g.find_edges(etype))
    data = _scipy_entries(g, etype, weight_key, src.size)
    if fmt == "coo":
        return sp.coo_array((data, (src, dst)), shape=shape)
    if fmt == "csr":
        return _compressed(sp.csr_array, src, dst, data, shape, shape[0])
    return _compressed(sp.csc_array, dst, src, data, shape, shape[1])


def _scipy_entries(g: Graph, etype, weight_key, num_edges) -> np.ndarray:
    view = g.edata_all if etype is None else g.edges[etype].data
    relations = g.canonical_etypes if etype is None else [etype]
    if weight_key is None or not any(weight_key in g.edges[r].data for r in relations):
        return np.ones(num_edges, dtype=np.float32)
    try:
        weight = view[weight_key]
    except (KeyError, ValueError) as err:
        raise ValueError(
            f"to_scipy: edge feature {weight_key!r} cannot be read over the whole "
            f"graph ({err}); pass etype= or weight_key=None"
        ) from err
    if weight.dim() != 1:
        raise ValueError(
            f"to_scipy: edge feature {weight_key!r} has shape {tuple(weight.shape)}; "
            f"matrix entries need one value per edge (pass weight_key=None for ones)"
        )
    return weight.detach().cpu().numpy()


def _compressed(cls, major, minor, data, shape, n_major):
    """CSR/CSC arrays built directly so duplicate entries stay separate."""
    order = np.argsort(major, kind="stable")
    indptr = np.zeros(n_major + 1, dtype=np.int64)
    np.cumsum(np.bincount(major, minlength=n_major), out=indptr[1:])
    return cls((data[order], minor[order], indptr), shape=shape)


def from_scipy(
    matrix, weight_key: str | None = "weight", *, eweight_name: str | None = None, idtype=None, device=None
) -> Graph:
    """Homogeneous graph from a square SciPy sparse matrix or array.

    Each stored entry (explicit zeros and duplicates included) is an edge from
    its row to its column, in stored order: as given for COO, row by row for
    CSR, column by column for CSC. The entries become ``g.edata[weight_key]``
    unless they are all 1 or ``weight_key`` is None; with DGL's ``eweight_name``, as ``g.edata[eweight_name]``
    always. ``idtype`` / ``device`` as :func:`gnnc.graph`'s.
    """
    import scipy.sparse as sp

    if not sp.issparse(matrix):
        raise TypeError(f"from_scipy expects a scipy.sparse matrix or array, got {type(matrix).__name__}")
    if len(matrix.shape) != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(
            f"from_scipy builds a homogeneous graph and needs a square matrix, got shape {tuple(matrix.shape)}"
        )
    coo = matrix.tocoo()
    src = torch.from_numpy(coo.row.astype(np.int64))
    dst = torch.from_numpy(coo.col.astype(np.int64))
    g = graph((src, dst), num_nodes=int(matrix.shape[0]), idtype=idtype, device=device)
    if eweight_name is not None:
        g.edata[eweight_name] = torch.from_numpy(np.array(coo.data)).to(g.device)
    elif weight_key is not None and not bool(np.all(coo.data == 1)):
        g.edata[weight_key] = torch.from_numpy(np.array(coo.data)).to(g.device)
    return g


# ------------------------------------------------------------------- networkx
def _import_networkx():
    try:
        import networkx
    except ImportError as err:
        raise ImportError("networkx conversion needs networkx: pip install networkx") from err
    return networkx


def to_networkx(g: Graph, node_attrs=(), edge_attrs=()):
    """``networkx.MultiDiGraph`` with nodes 0..N-1 (global ids) and edges in user order.

    Every edge carries its user edge id as attribute ``'id'``. On a graph with
    several node types or relations, nodes also carry ``'ntype'`` (type name)
    and edges ``'etype'`` (canonical relation). ``node_attrs`` / ``edge_attrs``
    name features copied as per-node / per-edge tensor rows; a type without
    the feature leaves its nodes (edges) without that attribute.
    """
    nx = _import_networkx()
    hetero = not g.is_homogeneous
    _check_reserved(node_attrs, ("ntype",) if hetero else (), "node")
    _check_reserved(edge_attrs, ("id", "etype") if hetero else ("id",), "edge")
    node_rows = _rows_by_type([g.nodes[t].data for t in g.ntypes], node_attrs, "node")
    edge_rows = _rows_by_type([g.edges[r].data for r in g.canonical_etypes], edge_attrs, "edge")
    out = nx.MultiDiGraph()
    for t, ntype in enumerate(g.ntypes):
        start = g.index.ntype_offsets[t]
        for i in range(g.num_nodes(ntype)):
            attrs = {k: rows[i] for k, rows in node_rows[t].items()}
            if hetero:
                attrs["ntype"] = ntype
            out.add_node(start + i, **attrs)
    src, dst = (t.tolist() for t in g.find_edges())
    for r, rel in enumerate(g.canonical_etypes):
        lo = g.index.rel_offsets[r]
        for i in range(g.num_edges(rel)):
            attrs = {k: rows[i] for k, rows in edge_rows[r].items()}
            attrs["id"] = lo + i
            if hetero:
                attrs["etype"] = rel
            out.add_edge(src[lo + i], dst[lo + i], **attrs)
    return out


def _check_reserved(names, reserved, kind):
    clash = [n for n in names if n in reserved]
    if clash:
        raise ValueError(f"to_networkx: {kind} attribute name(s) {clash} are reserved for {list(reserved)}")


def _rows_by_type(views, names, kind) -> list[dict]:
    """Per type, ``{name: rows}`` for the requested features the type has."""
    per_type = [{n: view[n].unbind(0) for n in names if n in view} for view in views]
    for n in names:
        if not any(n in rows for rows in per_type):
            raise KeyError(f"to_networkx: no {kind} feature {n!r} on any type")
    return per_type


def from_networkx(
    nx_graph,
    node_attrs=(),
    edge_attrs=(),
    edge_id_attr: str | None = None,
    *,
    edge_id_attr_name: str | None = None,
    idtype=None,
    device=None,
) -> Graph:
    """Homogeneous graph from any networkx graph.

    Node ``i`` is the i-th label of ``sorted(nx_graph.nodes)`` (labels must be
    mutually comparable). Edges come in ``nx_graph.edges`` order, multi-edges
    kept; an undirected edge {u, v} becomes (u, v) then (v, u), an undirected
    self loop one edge. For a directed graph, ``edge_id_attr`` names an edge
    attribute holding each edge's id (a permutation of 0..E-1, like the
    ``'id'`` that ``to_networkx`` writes) and edges are placed by it.
    ``node_attrs`` / ``edge_attrs`` are stacked into ``ndata`` / ``edata``
    tensors; every node (edge) must have them. DGL's keywords: ``edge_id_attr_name`` (``edge_id_attr``),
    ``idtype``, ``device``.
    """
    nx = _import_networkx()
    node_attrs, edge_attrs = node_attrs or (), edge_attrs or ()
    edge_id_attr = edge_id_attr if edge_id_attr_name is None else edge_id_attr_name
    if not isinstance(nx_graph, nx.Graph):
        raise TypeError(f"from_networkx expects a networkx graph, got {type(nx_graph).__name__}")
    try:
        labels = sorted(nx_graph.nodes)
    except TypeError as err:
        raise TypeError(
            "from_networkx orders nodes by sorted label, but these labels cannot be "
            "compared; relabel with networkx.convert_node_labels_to_integers"
        ) from err
    node_id = {label: i for i, label in enumerate(labels)}
    edges = list(_directed_edges(nx_graph, node_id))
    if edge_id_attr is not None:
        if not nx_graph.is_directed():
            raise ValueError(
                "from_networkx: edge_id_attr needs a directed graph; an undirected "
                "edge gives two edges that would share one id"
            )
        edges = _place_by_id(edges, edge_id_attr)
    src = torch.tensor([u for u, _, _ in edges], dtype=torch.int64)
    dst = torch.tensor([v for _, v, _ in edges], dtype=torch.int64)
    g = graph((src, dst), num_nodes=len(labels), idtype=idtype, device=device)
    for name in node_attrs:
        g.ndata[name] = _stack_attr([(label, nx_graph.nodes[label]) for label in labels], name, "node")
    for name in edge_attrs:
        g.edata[name] = _stack_attr([((u, v), d) for u, v, d in edges], name, "edge")
    return g


def _directed_edges(nx_graph, node_id: dict):
    """(u, v, data) of every edge, ids from ``node_id``; an undirected graph's in DGL's order: relabelled
    (nodes kept in insertion order), then made directed (each node's adjacency in turn)."""
    if nx_graph.is_directed():
        for u, v, data in nx_graph.edges(data=True):
            yield node_id[u], node_id[v], data
        return
    yield from _import_networkx().relabel_nodes(nx_graph, node_id).to_directed(as_view=True).edges(data=True)


def _place_by_id(edges, attr):
    ids = []
    for u, v, data in edges:
        if attr not in data:
            raise KeyError(f"from_networkx: edge {(u, v)!r} has no id attribute {attr!r}")
        ids.append(int(np.asarray(data[attr]).item()))  # DGL's examples hold ids in 1-element arrays
    if sorted(ids) != list(range(len(edges))):
        raise ValueError(f"from_networkx: edge attribute {attr!r} must hold each id 0..{len(edges) - 1} exactly once")
    placed = [None] * len(edges)
    for i, edge in zip(ids, edges):
        placed[i] = edge
    return placed


def _stack_attr(items, name, kind) -> torch.Tensor:
    """Stack attribute ``name`` of each ``(where, attr_dict)``; empty 1-D tensor when none."""
    rows = []
    for where, data in items:
        if name not in data:
            raise KeyError(f"from_networkx: {kind} {where!r} has no attribute {name!r}")
        rows.append(torch.as_tensor(data[name]))
    if not rows:
        return torch.empty(0)
    try:
        return torch.stack(rows)
    except RuntimeError as err:
        raise ValueError(f"from_networkx: {kind} attribute {name!r} has values of different shapes") from err


# ------------------------------------------------------------------------ PyG
def _import_pyg():
    try:
        from torch_geometric.data import Data, HeteroData
    except ImportError as err:
        raise ImportError("PyG conversion needs PyTorch Geometric: pip install torch_geometric") from err
    return Data, HeteroData


def to_pyg(g: Graph):
    """PyG ``Data`` for a homogeneous graph, ``HeteroData`` otherwise.

    ``edge_index`` is [2, E] in user edge order and ``num_nodes`` is set;
    node and edge features are copied under their own names (per type for
    ``HeteroData``). ``ntype_data`` / ``etype_data`` are not exported, and a
    ``Data`` does not keep the graph's type names. PyG tells node from edge
    attributes by size; when a ``Data`` has as many nodes as edges it decides
    by whether the name contains "edge", so ``from_pyg`` may then read an edge
    feature back as a node feature.
    """
    Data, HeteroData = _import_pyg()
    if g.is_homogeneous:
        node_keys, edge_keys = list(g.ndata), list(g.edata)
        _check_pyg_keys(node_keys, ("edge_index", "num_nodes"), "node feature")
        _check_pyg_keys(edge_keys, ("edge_index", "num_nodes"), "edge feature")
        both = [k for k in node_keys if k in edge_keys]
        if both:
            raise ValueError(f"to_pyg: {both} are both node and edge features; a PyG Data holds one attribute per name")
        out = Data(edge_index=torch.stack(g.find_edges()), num_nodes=g.num_nodes())
        for k in node_keys:
            out[k] = g.ndata[k]
        for k in edge_keys:
            out[k] = g.edata[k]
        return out
    out = HeteroData()
    for ntype in g.ntypes:
        feats = g.nodes[ntype].data
        _check_pyg_keys(feats, ("num_nodes",), f"node feature of {ntype!r}")
        out[ntype].num_nodes = g.num_nodes(ntype)
        for k in feats:
            out[ntype][k] = feats[k]
    for rel in g.canonical_etypes:
        feats = g.edges[rel].data
        _check_pyg_keys(feats, ("edge_index",), f"edge feature of {rel}")
        out[rel].edge_index = torch.stack(g.find_edges(rel))
        for k in feats:
            out[rel][k] = feats[k]
    return out


def _check_pyg_keys(keys, taken, what):
    clash = [k for k in keys if k in taken]
    if clash:
        raise ValueError(f"to_pyg: {what} name(s) {clash} clash with PyG attributes {list(taken)}")


def from_pyg(data) -> Graph:
    """Graph from a PyG ``Data`` (homogeneous) or ``HeteroData``.

    Every tensor attribute PyG classifies as node-level (``is_node_attr``) or
    edge-level (``is_edge_attr``) becomes a node / edge feature under the same
    name (per type for ``HeteroData``); graph-level and non-tensor attributes
    are dropped. Edge order is ``edge_index`` column order. ``HeteroData`` node
    types come in ``node_types`` order, then types only named by relations;
    a type's count is its ``num_nodes``, else its largest id + 1.
    """
    Data, HeteroData = _import_pyg()
    if isinstance(data, HeteroData):
        return _from_hetero_data(data)
    if not isinstance(data, Data):
        raise TypeError(f"from_pyg expects a torch_geometric Data or HeteroData, got {type(data).__name__}")
    edge_index = _edge_index(data, "Data")
    g = graph((edge_index[0], edge_index[1]), num_nodes=data.num_nodes)
    for key, value in _features(data, data.is_node_attr):
        g.ndata[key] = value
    for key, value in _features(data, data.is_edge_attr):
        g.edata[key] = value
    return g


def _from_hetero_data(data) -> Graph:
    relations = {rel: _edge_index(data[rel], f"relation {rel}") for rel in data.edge_types}
    ntypes = list(data.node_types)
    for st, _, dt in data.edge_types:
        ntypes += [t for t in (st, dt) if t not in ntypes]
    counts = {t: _type_count(data, t, relations) for t in ntypes}
    g = heterograph({rel: (ei[0], ei[1]) for rel, ei in relations.items()}, num_nodes=counts)
    for ntype in data.node_types:
        store = data[ntype]
        for key, value in _features(store, store.is_node_attr):
            g.nodes[ntype].data[key] = value
    for rel in data.edge_types:
        store = data[rel]
        for key, value in _features(store, store.is_edge_attr):
            g.edges[rel].data[key] = value
    return g


def _type_count(data, ntype, relations) -> int:
    if ntype in data.node_types and data[ntype].num_nodes is not None:
        return int(data[ntype].num_nodes)
    largest = -1
    for (st, _, dt), ei in relations.items():
        for row, t in ((0, st), (1, dt)):
            if t == ntype and ei.shape[1]:
                largest = max(largest, int(ei[row].max()))
    return largest + 1


def _edge_index(store, where) -> torch.Tensor:
    """The store's edge_index as a plain [2, E] tensor ([2, 0] when absent)."""
    if "edge_index" not in store:
        sparse = [k for k in ("adj", "adj_t") if k in store]
        if sparse:
            raise ValueError(f"from_pyg: {where} stores its edges as {sparse[0]!r}; only edge_index is supported")
        return torch.zeros(2, 0, dtype=torch.int64)
    edge_index = store["edge_index"]
    if not isinstance(edge_index, torch.Tensor) or edge_index.dim() != 2 or edge_index.shape[0] != 2:
        shape = tuple(edge_index.shape) if isinstance(edge_index, torch.Tensor) else type(edge_index).__name__
        raise ValueError(f"from_pyg: {where} edge_index must be a [2, E] tensor, got {shape}")
    if type(edge_index) is not torch.Tensor and hasattr(edge_index, "as_tensor"):
        # PyG's EdgeIndex keeps its subclass through every op, as_subclass included.
        edge_index = edge_index.as_tensor()
    return edge_index


def _features(store, is_level):
    """(key, tensor) for the store's tensor attributes that ``is_level`` accepts."""
    for key in list(store.keys()):
        if key in ("edge_index", "num_nodes"):
            continue
        value = store[key]
        if isinstance(value, torch.Tensor) and is_level(key):
            yield key, value

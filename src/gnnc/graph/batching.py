"""``batch``, ``unbatch`` and ``slice_batch``: many graphs as one graph (DGL's ``dgl.batch``), for graph-level tasks.

The batched graph holds the graphs side by side: graph i's nodes of each
type follow graph i-1's, its edges of each relation likewise, and its
features are the graphs' features concatenated. Message passing on it equals
message passing on each graph apart (no edge joins two graphs);
``gnnc.readout`` pools its node or edge features per graph. A batch records
every graph's node count per type and edge count per relation
(``batch_num_nodes`` / ``batch_num_edges``); ``set_batch_num_nodes`` /
``set_batch_num_edges`` declare them for a graph built otherwise, as DGL's.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from .core import ALL, Graph, heterograph
from .mutation import ID
from .validate import as_ids


def batch(graphs, ndata=ALL, edata=ALL) -> Graph:
    """One graph holding ``graphs`` in order, with ``batch_num_nodes`` / ``batch_num_edges`` per graph (a
    batched input contributes each of its graphs: the batch sizes add up).

    The graphs must have the same node types and relations, on one device.
    ``ndata`` / ``edata``: the node / edge features to concatenate (a list of
    names; all by default; None: none). As in DGL, a graph with no nodes of a
    type (no edges of a relation) need not have that type's features; the
    others must have the same features, each of one row shape and dtype: a
    ValueError names the graph and what differs.
    """
    graphs = list(graphs)
    if not graphs:
        raise ValueError("batch needs at least one graph")
    for name, keys in (("ndata", ndata), ("edata", edata)):
        if not (keys is None or isinstance(keys, (list, tuple)) or (isinstance(keys, str) and keys == ALL)):
            raise ValueError(f"batch({name}=...) takes a list of feature names or None, got {keys!r}")
    first = graphs[0]
    for i, g in enumerate(graphs):
        if g.is_block:
            raise ValueError(f"batch: graph {i} is a block (a sampled layer); blocks are not batched (nor in DGL)")
        if set(g.ntypes) != set(first.ntypes) or set(g.canonical_etypes) != set(first.canonical_etypes):
            raise ValueError(
                f"batch: graph {i} has node types {g.ntypes} and relations {g.canonical_etypes}; "
                f"graph 0 has {first.ntypes} and {first.canonical_etypes}"
            )
        if g.device != first.device:
            raise ValueError(f"batch: graph {i} is on {g.device}, graph 0 on {first.device}")
    ntypes, rels = first.ntypes, first.canonical_etypes
    sizes = torch.tensor([[g.num_nodes(t) for t in ntypes] for g in graphs], dtype=torch.int64)
    starts = sizes.cumsum(0) - sizes  # first node of every graph, per type
    relations = {}
    for key in rels:
        s, d = ntypes.index(key[0]), ntypes.index(key[2])
        ends = [g.find_edges(key) for g in graphs]
        relations[key] = (
            torch.cat([src + int(starts[i, s]) for i, (src, _) in enumerate(ends)]),
            torch.cat([dst + int(starts[i, d]) for i, (_, dst) in enumerate(ends)]),
        )
    # in the first graph's type order, as DGL's batch (a reversed graph's relations are not sorted)
    out = Graph._build(ntypes, sizes.sum(0).tolist(), [(key, *relations[key]) for key in rels], first.device)
    out.idtype = first.idtype
    for t in ntypes:
        _concat_features(
            [(g.nodes[t].data, g.num_nodes(t)) for g in graphs], ndata, out.nodes[t].data, f"node type {t!r}"
        )
    for key in rels:
        _concat_features(
            [(g.edges[key].data, g.num_edges(key)) for g in graphs], edata, out.edges[key].data, f"relation {key}"
        )
    out.batch_counts = (
        torch.cat([g.batch_num_nodes_by_type()[:, [g.ntype_id(t) for t in ntypes]] for g in graphs]),
        torch.cat([g.batch_num_edges_by_type()[:, [g.etype_id(r) for r in rels]] for g in graphs]),
    )
    return out


def _concat_features(parts, keys, target, what: str) -> None:
    """``target[name]``: the rows of ``parts`` (each graph's (features, rows)) concatenated, for the names
    ``keys`` gives (ALL: every one; None: none). Graphs without rows are left out unless all are empty."""
    if keys is None:
        return
    chosen = [(i, data) for i, (data, rows) in enumerate(parts) if rows > 0] or list(enumerate(d for d, _ in parts))
    schemas = [(i, {name: (tuple(value.shape[1:]), value.dtype) for name, value in data.items()}) for i, data in chosen]
    (ref, ref_schema), names = schemas[0], list(schemas[0][1]) if isinstance(keys, str) else list(keys)
    for i, schema in schemas:
        if isinstance(keys, str) and set(schema) != set(ref_schema):
            raise ValueError(
                f"batch: {what} of graph {i} has features {sorted(schema)}, graph {ref} has {sorted(ref_schema)}"
            )
        for name in names:
            if name not in schema:
                raise ValueError(f"batch: {what} of graph {i} has no feature {name!r} (it has {sorted(schema)})")
            if schema[name] != ref_schema[name]:
                raise ValueError(
                    f"batch: feature {name!r} of {what} has rows of shape {schema[name][0]} and "
                    f"{schema[name][1]} in graph {i}, of shape {ref_schema[name][0]} and "
                    f"{ref_schema[name][1]} in graph {ref}"
                )
    for name in names:
        target[name] = torch.cat([data[name] for _, data in chosen])


def unbatch(g: Graph, node_split=None, edge_split=None) -> list[Graph]:
    """The graphs ``batch`` joined into ``g``, with their features (``[g]``'s copy when ``g`` is not a batch).

    ``node_split`` / ``edge_split`` (DGL's): the graphs' node counts (a dict
    by node type when there are several) and edge counts (a dict by relation
    when there are several) to cut ``g`` into instead of its batch's; each
    type's counts must add up to its nodes (edges), every type give as many
    graphs, and no edge join two of them (a ValueError says which).
    """
    nodes = (
        g.batch_num_nodes_by_type()
        if node_split is None
        else _count_table(node_split, g.ntypes, g.index.ntype_counts, "unbatch(node_split)")
    )
    edges = (
        g.batch_num_edges_by_type()
        if edge_split is None
        else _count_table(
            edge_split, g.canonical_etypes, g.index.rel_counts, "unbatch(edge_split)", g.to_canonical_etype
        )
    )
    if nodes.shape[0] != edges.shape[0]:
        raise ValueError(f"unbatch: the node counts give {nodes.shape[0]} graphs but the edge counts {edges.shape[0]}")
    node_starts, edge_starts = nodes.cumsum(0) - nodes, edges.cumsum(0) - edges
    ends = [g.find_edges(key) for key in g.canonical_etypes]
    return [_piece(g, ends, (node_starts[i], nodes[i]), (edge_starts[i], edges[i])) for i in range(nodes.shape[0])]


def slice_batch(g: Graph, gid: int, store_ids: bool = False) -> Graph:
    """DGL's ``slice_batch``: graph ``gid`` of batch ``g`` with its features, as :func:`unbatch` gives it;
    ``store_ids`` records its nodes' and edges' ids in ``g`` as feature ``_ID`` (DGL's NID / EID)."""
    nodes, edges = g.batch_num_nodes_by_type(), g.batch_num_edges_by_type()
    if not 0 <= int(gid) < nodes.shape[0]:
        raise IndexError(f"slice_batch: graph {gid} of a batch of {nodes.shape[0]} graphs")
    gid = int(gid)
    ends = [g.find_edges(key) for key in g.canonical_etypes]
    return _piece(g, ends, (nodes[:gid].sum(0), nodes[gid]), (edges[:gid].sum(0), edges[gid]), store_ids)


def _piece(g: Graph, ends, node_rows, edge_rows, store_ids: bool = False) -> Graph:
    """The graph of ``g``'s nodes [start, start + count) of every type and edges likewise of every relation
    (``node_rows`` / ``edge_rows``: (starts, counts) per type / relation), renumbered from 0, with their
    features; ``ends``: every relation's (src, dst)."""
    (node_start, node_count), (edge_start, edge_count) = node_rows, edge_rows
    relations = {}
    for r, (key, (src, dst)) in enumerate(zip(g.canonical_etypes, ends)):
        lo, hi = int(edge_start[r]), int(edge_start[r] + edge_count[r])
        relations[key] = (
            src[lo:hi] - int(node_start[g.ntype_id(key[0])]),
            dst[lo:hi] - int(node_start[g.ntype_id(key[2])]),
        )
    part = heterograph(relations, dict(zip(g.ntypes, node_count.tolist())), g.device, idtype=g.idtype)
    for space, names, (starts, counts) in (("nodes", g.ntypes, node_rows), ("edges", g.canonical_etypes, edge_rows)):
        for t, name in enumerate(names):
            lo, hi = int(starts[t]), int(starts[t] + counts[t])
            source, target = getattr(g, space)[name].data, getattr(part, space)[name].data
            for feature, value in source.items():
                target[feature] = value[lo:hi]
            if store_ids:
                target[ID] = g.ids(torch.arange(lo, hi, device=g.device))
    return part


def set_batch_num_nodes(g: Graph, counts) -> None:
    """``g.set_batch_num_nodes``: declare ``g`` a batch whose graphs have ``counts`` nodes (a dict by node type
    when there are several), each type's adding up to its nodes (DGL's; its edges are one graph's until
    ``set_batch_num_edges``)."""
    table = _count_table(counts, g.ntypes, g.index.ntype_counts, "set_batch_num_nodes")
    g.batch_counts = (
        table,
        torch.tensor([g.index.rel_counts], dtype=torch.int64) if g.batch_counts is None else g.batch_counts[1],
    )


def set_batch_num_edges(g: Graph, counts) -> None:
    """``g.set_batch_num_edges``: as :func:`set_batch_num_nodes` for the edges (a dict by relation when there
    are several)."""
    table = _count_table(counts, g.canonical_etypes, g.index.rel_counts, "set_batch_num_edges", g.to_canonical_etype)
    g.batch_counts = (g.batch_num_nodes_by_type(), table)


def _count_table(counts, names: list, totals, what: str, key_of=lambda key: key) -> torch.Tensor:
    """[graphs, types] int64 counts from DGL's form (a tensor or sequence when there is one type, else a dict
    keyed by type, each key read through ``key_of``); ValueError unless each type's add up to ``totals``."""
    if not isinstance(counts, Mapping):
        if len(names) != 1:
            raise ValueError(f"{what}: give a dict of counts by type, the graph has several {names}")
        counts = {names[0]: counts}
    counts = {key_of(k): v for k, v in counts.items()}
    if set(counts) != set(names):
        raise ValueError(f"{what}: give counts for every type {names}, got {list(counts)}")
    columns = [
        as_ids(v.detach().cpu().reshape(-1) if isinstance(v, torch.Tensor) else v, f"{what}[{n!r}]", "count")
        for n, v in ((n, counts[n]) for n in names)
    ]
    if len({c.numel() for c in columns}) > 1:
        raise ValueError(f"{what}: every type must give as many graphs, got {[c.numel() for c in columns]}")
    for name, column, total in zip(names, columns, totals):
        if bool((column < 0).any()) or int(column.sum()) != total:
            raise ValueError(f"{what}[{name!r}]: counts {column.tolist()} do not split the graph's {total}")
    return torch.stack(columns, 1)

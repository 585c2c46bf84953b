"""DGL's graph mutation as pure functions: structure and feature stores in, new ones out.

A ``Structure`` is what a mutation changes: the ``GraphIndex`` (immutable:
every mutation builds a new one, so whatever was derived from the old one,
which carries it, is seen to be stale), the node and edge ``TypedStore``s
and ``gnnc.batch``'s counts. Semantics are DGL 2.1's:

- ``add_nodes`` / ``add_edges`` append: new ids follow the type's (the
  relation's) last ones. Features ``data`` gives are the new rows; features
  it lacks get rows from the graph's initializer (zeros by default), and a
  feature new to the type gets the old rows from it. ``add_edges`` first
  adds the nodes its ids reach beyond the end of a type. Both drop the batch
  counts, as DGL does.
- ``remove_edges`` / ``remove_nodes`` keep the others in their order,
  renumbered from 0, with their features; removing a node removes its
  edges. ``store_ids`` records the kept ones' old ids as ``_ID`` (DGL's
  ``NID`` / ``EID``: edges only for ``remove_edges``). Batch counts follow.

Deferred edge values (a compiled call's results not computed yet) are
computed before the structure changes: they are computed on the old one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .frame import TypedStore
from .index import GraphIndex
from .validate import as_ids, check_range

ID = "_ID"  # DGL's NID / EID: the ids a kept node or edge had before a removal


@dataclass(frozen=True)
class Structure:
    """What a mutation changes; ``batch_counts`` as ``Graph.batch_counts``."""

    index: GraphIndex
    nodes: TypedStore
    edges: TypedStore
    batch_counts: tuple | None


def add_nodes(state: Structure, initializers: dict, ntype: int, num, data: dict | None) -> Structure:
    """``num`` nodes appended to node type ``ntype``, with ``data``'s rows (see the module)."""
    if isinstance(num, bool) or int(num) != num or num < 0:
        raise ValueError(f"add_nodes: the number of nodes must be a non-negative integer, got {num!r}")
    num = int(num)
    if num == 0:
        return state
    index = state.index
    counts = list(index.ntype_counts)
    counts[ntype] += num
    nodes = _appended(state.nodes, counts, ntype, num, data, initializers["node"], index.device)
    return Structure(_rebuilt(index, counts, _relation_edges(index)), nodes, state.edges, None)


def add_edges(state: Structure, initializers: dict, rel: int, u, v, data: dict | None) -> Structure:
    """Edges ``u[i] -> v[i]`` appended to relation ``rel`` (local ids; a single id on one side pairs with
    every id on the other); nodes the ids reach past a type's end are added first (see the module)."""
    index = state.index
    key = index.etypes[rel]
    u, v = (
        _ids(u, f"add_edges(u) of relation {key}", index.device),
        _ids(v, f"add_edges(v) of relation {key}", index.device),
    )
    if u.numel() == 0 or v.numel() == 0:
        return state
    if u.numel() != v.numel():
        if u.numel() != 1 and v.numel() != 1:
            raise ValueError(
                f"add_edges: {u.numel()} source ids but {v.numel()} destination ids for relation "
                f"{key} (give as many of each, or one on a side)"
            )
        u, v = u.expand(v.numel()) if u.numel() == 1 else u, v.expand(u.numel()) if v.numel() == 1 else v
    for ids, side in ((u, "u"), (v, "v")):
        if bool((ids < 0).any()):
            pos = int(torch.nonzero(ids < 0)[0])
            raise ValueError(
                f"add_edges({side}) of relation {key}: node id {int(ids[pos])} at position {pos} is negative"
            )
    src_t, dst_t = index.ntypes.index(key[0]), index.ntypes.index(key[2])
    reach = {src_t: int(u.max()) + 1}
    reach[dst_t] = max(reach.get(dst_t, 0), int(v.max()) + 1)
    for t, needed in reach.items():
        if needed > state.index.ntype_counts[t]:
            state = add_nodes(state, initializers, t, needed - state.index.ntype_counts[t], None)
    index = state.index
    relations = _relation_edges(index)
    relations[rel] = (torch.cat([relations[rel][0], u]), torch.cat([relations[rel][1], v]))
    counts = [s.numel() for s, _ in relations]
    edges = _appended(state.edges, counts, rel, u.numel(), data, initializers["edge"], index.device)
    return Structure(_rebuilt(index, list(index.ntype_counts), relations), state.nodes, edges, None)


def remove_edges(state: Structure, rel: int, eids, store_ids: bool, idtype: torch.dtype) -> Structure:
    """Relation ``rel`` without edges ``eids`` (see the module)."""
    index = state.index
    key = index.etypes[rel]
    eids = _ids(eids, f"remove_edges(eids) of relation {key}", index.device, "edge")
    if eids.numel() == 0:
        return state
    check_range(eids, index.rel_counts[rel], f"remove_edges(eids) of relation {key}", "edge")
    keep = torch.ones(index.rel_counts[rel], dtype=torch.bool, device=index.device)
    keep[eids] = False
    return _kept(state, _relation_edges(index), {}, {rel: keep}, store_ids, idtype)


def remove_nodes(state: Structure, ntype: int, nids, store_ids: bool, idtype: torch.dtype) -> Structure:
    """Node type ``ntype`` without nodes ``nids`` and their edges (see the module)."""
    index = state.index
    name = index.ntypes[ntype]
    nids = _ids(nids, f"remove_nodes(nids) of node type {name!r}", index.device)
    if nids.numel() == 0:
        return state
    check_range(nids, index.ntype_counts[ntype], f"remove_nodes(nids) of node type {name!r}")
    kept_nodes = torch.ones(index.ntype_counts[ntype], dtype=torch.bool, device=index.device)
    kept_nodes[nids] = False
    new_id = torch.cumsum(kept_nodes, 0) - 1
    relations, keep = _relation_edges(index), {}
    for r, ((st, _, dt), (src, dst)) in enumerate(zip(index.etypes, list(relations))):
        if name not in (st, dt):
            continue
        mask = torch.ones(src.numel(), dtype=torch.bool, device=index.device)
        if st == name:
            mask &= kept_nodes[src]
            src = new_id[src]
        if dt == name:
            mask &= kept_nodes[dst]
            dst = new_id[dst]
        relations[r], keep[r] = (src, dst), mask
    return _kept(state, relations, {ntype: kept_nodes}, keep, store_ids, idtype, node_ids=True)


def _kept(state, relations, node_keep: dict, edge_keep: dict, store_ids, idtype, node_ids=False) -> Structure:
    """``state`` with the nodes and edges the masks keep (by type / relation; missing: all); ``relations``:
    every relation's (src, dst) in user order, already renumbered."""
    index = state.index
    node_counts = [int(node_keep[t].sum()) if t in node_keep else c for t, c in enumerate(index.ntype_counts)]
    relations = [(s[edge_keep[r]], d[edge_keep[r]]) if r in edge_keep else (s, d) for r, (s, d) in enumerate(relations)]
    nodes = _selected(state.nodes, node_counts, node_keep) if node_keep else state.nodes
    edges = _selected(state.edges, [s.numel() for s, _ in relations], edge_keep)
    if store_ids:
        _store_ids(edges, edge_keep, index.rel_counts, idtype, index.device)
        if node_ids:
            _store_ids(nodes, node_keep, index.ntype_counts, idtype, index.device)
    return Structure(
        _rebuilt(index, node_counts, relations), nodes, edges, _batch_kept(state.batch_counts, node_keep, edge_keep)
    )


def _store_ids(store: TypedStore, keep: dict, old_counts, idtype, device) -> None:
    """Feature ``_ID`` of every type: the old ids of what ``keep`` kept (all of a type it does not name)."""
    for t, count in enumerate(old_counts):
        ids = torch.arange(count, device=device)
        store.set_typed(ID, t, (ids[keep[t]] if t in keep else ids).to(idtype))


def _batch_kept(batch_counts, node_keep: dict, edge_keep: dict):
    """``gnnc.batch``'s counts after a removal: each graph's count of what the masks keep."""
    if batch_counts is None:
        return None

    def counted(table, masks):
        table = table.clone()
        for t, mask in masks.items():
            graph = torch.repeat_interleave(torch.arange(table.shape[0]), table[:, t])
            table[:, t] = torch.bincount(graph[mask.cpu()], minlength=table.shape[0])
        return table

    node_counts, edge_counts = batch_counts
    return counted(node_counts, node_keep), None if edge_counts is None else counted(edge_counts, edge_keep)


# --------------------------------------------------------------- structure
def _relation_edges(index: GraphIndex) -> list:
    """Every relation's (local src, local dst) in user edge order."""
    out = []
    for r, (st, _, dt) in enumerate(index.etypes):
        lo, hi = index.rel_range(r)
        src = index.to_user_order(index.src[lo:hi], lo, hi) - index.ntype_offsets[index.ntypes.index(st)]
        dst = index.to_user_order(index.dst[lo:hi], lo, hi) - index.ntype_offsets[index.ntypes.index(dt)]
        out.append((src, dst))
    return out


def _rebuilt(index: GraphIndex, counts: list, relations: list) -> GraphIndex:
    """A new index of ``index``'s types with node ``counts`` and ``relations`` (local ids, user order)."""
    offsets = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).tolist()
    blocks = [
        (s + offsets[index.ntypes.index(st)], d + offsets[index.ntypes.index(dt)])
        for (st, _, dt), (s, d) in zip(index.etypes, relations)
    ]
    return GraphIndex.from_relation_blocks(index.ntypes, counts, index.etypes, blocks, index.device)


def _ids(values, what: str, device, noun: str = "node") -> torch.Tensor:
    """Ids given as an int, a sequence, an array or a tensor, as a 1-D int64 tensor on ``device``."""
    if isinstance(values, torch.Tensor):
        values = values.reshape(-1)
    else:
        values = np.asarray(values).reshape(-1)
    return as_ids(values, what, noun).to(device)


# ---------------------------------------------------------------- features
def _rows_by_type(store: TypedStore):
    """(feature, stored over all types, {type: its rows}) of every feature; deferred values computed."""
    for key in store.keys():
        parts = {t: store.get_typed(key, t) for t in range(len(store.names)) if key in store.typed_keys(t)}
        yield key, key in store.whole, parts


def _store(store: TypedStore, counts: list, features) -> TypedStore:
    """A store like ``store`` with ``counts``, holding ``features``: (key, whole, {type: rows})."""
    out = TypedStore(store.kind, store.names, counts)
    for key, whole, parts in features:
        if whole:
            out.set_whole(key, torch.cat([parts[t] for t in range(len(store.names))]))
        else:
            for t, rows in parts.items():
                out.set_typed(key, t, rows)
    return out


def _selected(store: TypedStore, counts: list, keep: dict) -> TypedStore:
    """``store`` with the rows ``keep`` keeps of each type it names."""
    return _store(
        store,
        counts,
        (
            (key, whole, {t: rows[keep[t]] if t in keep else rows for t, rows in parts.items()})
            for key, whole, parts in _rows_by_type(store)
        ),
    )


def _appended(
    store: TypedStore, counts: list, t: int, num: int, data: dict | None, initializers: dict, device
) -> TypedStore:
    """``store`` with ``num`` rows appended to type ``t``: ``data``'s, else the initializer's; a feature of
    ``data`` new to the type gets its old rows from the initializer."""
    data = dict(data or {})
    name, old = store.names[t], store.counts[t]
    for key, value in data.items():
        data[key] = value = torch.as_tensor(value)
        if value.dim() == 0 or value.shape[0] != num:
            raise ValueError(
                f"{store.kind} feature {key!r} for the new {store.kind}s of type {name!r} has "
                f"{tuple(value.shape)[:1] or 'no'} rows, expected {num}"
            )
    features = []
    for key, whole, parts in _rows_by_type(store):
        if t in parts:
            rows = parts[t]
            new = (
                data.pop(key)
                if key in data
                else initial_rows(initializers, key, (num,) + tuple(rows.shape[1:]), rows, slice(old, old + num))
            )
            if tuple(new.shape[1:]) != tuple(rows.shape[1:]) or new.dtype != rows.dtype:
                raise ValueError(
                    f"{store.kind} feature {key!r} of type {name!r} is {rows.dtype} with rows of "
                    f"shape {tuple(rows.shape[1:])}; the new rows are {new.dtype} of shape "
                    f"{tuple(new.shape[1:])}"
                )
            parts = {**parts, t: torch.cat([rows, new.to(rows.device)])}
        features.append((key, whole, parts))
    out = _store(store, counts, features)
    for key, value in data.items():  # features new to the type
        value = value.to(device)
        first = initial_rows(initializers, key, (old,) + tuple(value.shape[1:]), value, slice(0, old))
        out.set_typed(key, t, torch.cat([first, value]))
    return out


def initial_rows(initializers: dict, field: str, shape: tuple, like: torch.Tensor, id_range: slice) -> torch.Tensor:
    """Rows ``id_range`` (of ``shape``) of feature ``field``, from its initializer (DGL's ``initializer(shape,
    dtype, device, id_range)``), zeros without one."""
    init = initializers.get(field, initializers.get(None))
    if init is None:
        return like.new_zeros(shape)
    rows = init(shape, like.dtype, like.device, id_range)
    if not isinstance(rows, torch.Tensor) or tuple(rows.shape) != tuple(shape):
        raise ValueError(
            f"the initializer of {field!r} returned {getattr(rows, 'shape', type(rows).__name__)}, "
            f"expected a tensor of shape {tuple(shape)}"
        )
    return rows.to(like.dtype)

"""DGL's functional mutation (``dgl.add_nodes``, ``dgl.remove_edges``, ``dgl.add_self_loop``, ...): each
returns a new graph and leaves its argument as it was.

A new graph is the argument's clone (its feature tensors, shared) mutated
in place by the ``Graph`` method of the same name (``gnnc.graph.mutation``).
"""

from __future__ import annotations

import torch

from .core import Graph

__all__ = ["add_edges", "add_nodes", "add_self_loop", "remove_edges", "remove_nodes", "remove_self_loop"]

_AGGREGATIONS = ("sum", "mean", "max", "min")


def add_nodes(g: Graph, num, data=None, ntype=None) -> Graph:
    """``g`` with ``num`` nodes of ``ntype`` appended (``Graph.add_nodes``)."""
    out = g.clone()
    out.add_nodes(num, data=data, ntype=ntype)
    return out


def add_edges(g: Graph, u, v, data=None, etype=None) -> Graph:
    """``g`` with edges ``u[i] -> v[i]`` appended to relation ``etype`` (``Graph.add_edges``)."""
    out = g.clone()
    out.add_edges(u, v, data=data, etype=etype)
    return out


def remove_edges(g: Graph, eids, etype=None, store_ids: bool = False) -> Graph:
    """``g`` without edges ``eids`` of relation ``etype`` (``Graph.remove_edges``)."""
    out = g.clone()
    out.remove_edges(eids, etype=etype, store_ids=store_ids)
    return out


def remove_nodes(g: Graph, nids, ntype=None, store_ids: bool = False) -> Graph:
    """``g`` without nodes ``nids`` of ``ntype`` and their edges (``Graph.remove_nodes``)."""
    out = g.clone()
    out.remove_nodes(nids, ntype=ntype, store_ids=store_ids)
    return out


def add_self_loop(g: Graph, edge_feat_names=None, fill_data=1.0, etype=None) -> Graph:
    """DGL's ``add_self_loop``: ``g`` with an edge (v, v) per node of relation ``etype``'s type appended to it.

    The loops' features ``edge_feat_names`` (all of the relation's by
    default) are ``fill_data`` when it is a number, or the ``sum`` / ``mean``
    / ``max`` / ``min`` of the node's in-edges' values (0 without any) when it
    names one; other features come from the initializer. Batch counts are
    dropped, as DGL does.
    """
    r = g.relation_of_call(etype, "add_self_loop")
    key = g.canonical_etypes[r]
    if key[0] != key[2]:
        raise ValueError(f"add_self_loop: relation {key} joins two different node types")
    if isinstance(fill_data, str) and fill_data not in _AGGREGATIONS:
        raise ValueError(f"add_self_loop: fill_data {fill_data!r} is not one of {list(_AGGREGATIONS)} or a number")
    features = g.edges[key].data
    names = list(features) if edge_feat_names is None else list(edge_feat_names)
    nodes = torch.arange(g.num_nodes(key[0]), device=g.device)
    data = {}
    for name in names:
        values = features[name]
        if isinstance(fill_data, str):
            data[name] = _in_edge_reduction(values, g.find_edges(key)[1].long(), nodes.numel(), fill_data)
        else:
            fill = torch.as_tensor(fill_data).to(values.dtype).to(values.device)
            data[name] = fill.expand((nodes.numel(),) + tuple(values.shape[1:])).clone()
    return add_edges(g, nodes, nodes, data=data, etype=key)


def remove_self_loop(g: Graph, etype=None) -> Graph:
    """DGL's ``remove_self_loop``: ``g`` without the (v, v) edges of relation ``etype`` (batch counts follow)."""
    r = g.relation_of_call(etype, "remove_self_loop")
    key = g.canonical_etypes[r]
    if key[0] != key[2]:
        raise ValueError(f"remove_self_loop: relation {key} joins two different node types")
    src, dst = g.find_edges(key)
    return remove_edges(g, torch.nonzero(src == dst).reshape(-1), etype=key)


def _in_edge_reduction(values: torch.Tensor, dst: torch.Tensor, num_nodes: int, how: str) -> torch.Tensor:
    """Per node, ``how`` of the rows of ``values`` (one per edge) whose edge ends there; 0 for no edge."""
    out = values.new_zeros((num_nodes,) + tuple(values.shape[1:]))
    index = dst.reshape((-1,) + (1,) * (values.dim() - 1)).expand_as(values)
    return out.scatter_reduce(
        0, index, values, {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin"}[how], include_self=False
    )

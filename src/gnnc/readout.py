"""Graph-level readouts over a ``gnnc.batch`` of graphs (DGL's ``dgl.sum_nodes`` family).

Each pools a node (edge) feature per graph of the batch into one row per
graph: ``[batch_size, *feature shape]``; a graph with no nodes (edges) reads
zeros, as in DGL. ``weight`` names a feature of shape ``[N, 1]`` multiplied
in first. On a graph that is not a batch the result has one row. Plain torch
operators: gradients flow to the features and weights.
"""
from __future__ import annotations

import torch

OPS = ("sum", "mean", "max", "min")


def _segments(counts: torch.Tensor, device) -> torch.Tensor:
    """The graph of every row: 0 repeated counts[0] times, then 1, ..."""
    return torch.repeat_interleave(torch.arange(counts.numel(), device=device), counts.to(device))


def _pool(x: torch.Tensor, counts: torch.Tensor, op: str) -> torch.Tensor:
    if op not in OPS:
        raise ValueError(f"unknown readout {op!r}; choose one of {', '.join(OPS)}")
    if x.shape[0] != int(counts.sum()):
        raise ValueError(f"the feature has {x.shape[0]} rows but the batch {int(counts.sum())}")
    seg = _segments(counts, x.device)
    out = x.new_zeros((counts.numel(),) + tuple(x.shape[1:]))
    if op in ("sum", "mean"):
        out = out.index_add(0, seg, x)
        if op == "mean":
            out = out / counts.clamp(min=1).to(x.device, x.dtype).view((-1,) + (1,) * (x.dim() - 1))
        return out
    index = seg.view((-1,) + (1,) * (x.dim() - 1)).expand_as(x)
    return out.scatter_reduce(0, index, x, "amax" if op == "max" else "amin", include_self=False)


def _weighted(data, feat: str, weight: str | None) -> torch.Tensor:
    x = data[feat]
    return x if weight is None else x * data[weight]


def readout_nodes(graph, feat: str, weight: str | None = None, op: str = "sum", ntype=None) -> torch.Tensor:
    """Node feature ``feat`` (of ``ntype``) pooled per graph by ``op``: sum, mean, max or min."""
    ntype = graph._only_type(ntype, graph.ntypes, "node type")
    return _pool(_weighted(graph.nodes[ntype].data, feat, weight), graph.batch_num_nodes(ntype), op)


def readout_edges(graph, feat: str, weight: str | None = None, op: str = "sum", etype=None) -> torch.Tensor:
    """Edge feature ``feat`` (of relation ``etype``) pooled per graph by ``op``: sum, mean, max or min."""
    etype = graph._only_type(etype, graph.canonical_etypes, "relation")
    return _pool(_weighted(graph.edges[etype].data, feat, weight), graph.batch_num_edges(etype), op)


def sum_nodes(graph, feat: str, weight: str | None = None, ntype=None) -> torch.Tensor:
    return readout_nodes(graph, feat, weight, "sum", ntype)


def mean_nodes(graph, feat: str, weight: str | None = None, ntype=None) -> torch.Tensor:
    return readout_nodes(graph, feat, weight, "mean", ntype)


def max_nodes(graph, feat: str, weight: str | None = None, ntype=None) -> torch.Tensor:
    return readout_nodes(graph, feat, weight, "max", ntype)


def sum_edges(graph, feat: str, weight: str | None = None, etype=None) -> torch.Tensor:
    return readout_edges(graph, feat, weight, "sum", etype)


def mean_edges(graph, feat: str, weight: str | None = None, etype=None) -> torch.Tensor:
    return readout_edges(graph, feat, weight, "mean", etype)


def max_edges(graph, feat: str, weight: str | None = None, etype=None) -> torch.Tensor:
    return readout_edges(graph, feat, weight, "max", etype)


def broadcast_nodes(graph, graph_feat: torch.Tensor, ntype=None) -> torch.Tensor:
    """Row i of ``graph_feat`` ([batch_size, ...]) copied to every node (of ``ntype``) of graph i."""
    ntype = graph._only_type(ntype, graph.ntypes, "node type")
    counts = graph.batch_num_nodes(ntype)
    if graph_feat.shape[0] != counts.numel():
        raise ValueError(f"graph_feat has {graph_feat.shape[0]} rows but the batch {counts.numel()} graphs")
    return graph_feat.index_select(0, _segments(counts, graph_feat.device))


def softmax_nodes(graph, feat: str, ntype=None) -> torch.Tensor:
    """Softmax of node feature ``feat`` over the nodes of each graph (attention pooling's weights)."""
    ntype = graph._only_type(ntype, graph.ntypes, "node type")
    x = graph.nodes[ntype].data[feat]
    counts = graph.batch_num_nodes(ntype)
    shifted = x - broadcast_nodes(graph, _pool(x.detach(), counts, "max"), ntype)
    e = shifted.exp()
    return e / broadcast_nodes(graph, _pool(e, counts, "sum"), ntype)

"""Graph-level readouts over a ``gnnc.batch`` of graphs (DGL's ``dgl.sum_nodes`` family).

Each pools a node (edge) feature per graph of the batch into one row per
graph: ``[batch_size, *feature shape]``; a graph with no nodes (edges) reads
zeros, as in DGL. ``weight`` names a feature of shape ``[N, 1]`` multiplied
in first. On a graph that is not a batch the result has one row. The
softmaxes, broadcasts and top-k of DGL's ``dgl.readout`` work per graph of
the batch likewise. Every function takes ``ntype`` (``etype``), needed on a
graph with several node types (relations). Plain torch operators: gradients
flow to the features and weights.
"""

from __future__ import annotations

import warnings

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


def _broadcast(graph_feat: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    if graph_feat.shape[0] != counts.numel() and counts.numel() == 1:
        warnings.warn(
            "for a single graph, give graph_feat the shape (1, *): DGL deprecates a feature of shape "
            "(*), which is broadcast as one row",
            UserWarning,
            stacklevel=3,
        )
        graph_feat = graph_feat.unsqueeze(0)
    if graph_feat.shape[0] != counts.numel():
        raise ValueError(f"graph_feat has {graph_feat.shape[0]} rows but the batch {counts.numel()} graphs")
    return graph_feat.index_select(0, _segments(counts, graph_feat.device))


def broadcast_nodes(graph, graph_feat: torch.Tensor, ntype=None) -> torch.Tensor:
    """Row i of ``graph_feat`` ([batch_size, ...]) copied to every node (of ``ntype``) of graph i. On a graph
    that is not a batch a ``graph_feat`` of another first dimension is one row (DGL's deprecated form, warned)."""
    ntype = graph._only_type(ntype, graph.ntypes, "node type")
    return _broadcast(graph_feat, graph.batch_num_nodes(ntype))


def broadcast_edges(graph, graph_feat: torch.Tensor, etype=None) -> torch.Tensor:
    """Row i of ``graph_feat`` ([batch_size, ...]) copied to every edge (of ``etype``) of graph i; a single
    graph as :func:`broadcast_nodes`."""
    etype = graph._only_type(etype, graph.canonical_etypes, "relation")
    return _broadcast(graph_feat, graph.batch_num_edges(etype))


def _softmax(x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    seg = _segments(counts, x.device)
    e = (x - _pool(x.detach(), counts, "max").index_select(0, seg)).exp()
    return e / _pool(e, counts, "sum").index_select(0, seg)


def softmax_nodes(graph, feat: str, ntype=None) -> torch.Tensor:
    """Softmax of node feature ``feat`` over the nodes of each graph (attention pooling's weights)."""
    ntype = graph._only_type(ntype, graph.ntypes, "node type")
    return _softmax(graph.nodes[ntype].data[feat], graph.batch_num_nodes(ntype))


def softmax_edges(graph, feat: str, etype=None) -> torch.Tensor:
    """Softmax of edge feature ``feat`` over the edges (of ``etype``) of each graph."""
    etype = graph._only_type(etype, graph.canonical_etypes, "relation")
    return _softmax(graph.edges[etype].data[feat], graph.batch_num_edges(etype))


def _topk(x: torch.Tensor, counts: torch.Tensor, k: int, descending: bool, sortby, what: str):
    if x.dim() != 2:
        raise ValueError(
            f"topk needs {what} of shape [N, D], got {tuple(x.shape)}: DGL refuses more dimensions "
            f"and ranks one into undefined results; reshape it"
        )
    if not x.is_floating_point():
        raise TypeError(f"topk needs a floating-point {what} (as DGL), got {x.dtype}")
    batch, width = counts.numel(), x.shape[1]
    length = max(int(counts.max()), k)
    seg = _segments(counts, x.device)
    starts = (counts.cumsum(0) - counts).to(x.device)
    padded = x.new_full((batch, length, width), float("-inf") if descending else float("inf"))
    padded = padded.index_put((seg, torch.arange(x.shape[0], device=x.device) - starts[seg]), x)
    if sortby is None:
        index = padded.topk(k, dim=1, largest=descending).indices
        values = padded.gather(1, index)
    else:
        index = padded[..., sortby].topk(k, dim=1, largest=descending).indices
        values = padded.gather(1, index.unsqueeze(-1).expand(batch, k, width))
    return values.masked_fill(values.isinf(), 0), index


def topk_nodes(graph, feat: str, k: int, *, descending: bool = True, sortby=None, ntype=None):
    """DGL's ``topk_nodes``: per graph, the ``k`` nodes (of ``ntype``) with the largest (``descending=False``:
    smallest) column ``sortby`` of node feature ``feat`` ([N, D]); without ``sortby`` every column is ranked on
    its own. Returns (values [batch_size, k, D], node ids within each graph: [batch_size, k], or [batch_size, k,
    D] without ``sortby``). A graph with fewer than ``k`` nodes pads its values with zeros (its ids there are
    undefined, as DGL's); an infinite value reads as 0 too, as in DGL."""
    ntype = graph._only_type(ntype, graph.ntypes, "node type")
    return _topk(
        graph.nodes[ntype].data[feat], graph.batch_num_nodes(ntype), k, descending, sortby, f"node feature {feat!r}"
    )


def topk_edges(graph, feat: str, k: int, *, descending: bool = True, sortby=None, etype=None):
    """DGL's ``topk_edges``: :func:`topk_nodes` over the edges (of ``etype``) of each graph."""
    etype = graph._only_type(etype, graph.canonical_etypes, "relation")
    return _topk(
        graph.edges[etype].data[feat], graph.batch_num_edges(etype), k, descending, sortby, f"edge feature {feat!r}"
    )

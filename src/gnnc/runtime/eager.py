"""Eager reference executor: runs UDFs exactly as written (the oracle).

Messages are materialized on every edge of the block, the message UDF seeing
the edges in user edge-id order as DGL presents them; reduce UDFs run on
degree buckets (destination nodes grouped by in-degree, as DGL does), with
mailboxes of shape ``[nodes, degree, ...]``; built-in reducers run as one
scatter over all edges, as DGL's built-ins do (max / min pass each gradient
to the first tied edge, as DGL's do and ``torch.max(mailbox, 1)`` does);
nodes without in-edges get zeros. Everything is plain torch, so autograd works through it.

Block conventions: ``rel=None`` is the whole graph (all edges, all nodes);
``rel=r`` is relation r's edges, and node results cover r's destination type;
its UDFs read node features of r's source / destination type (which may be
set on some node types only, as in DGL).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..function import BuiltinReduce
from ..graph.core import Graph
from ..graph.degree_buckets import Buckets
from .udf_views import EdgeBatch, NodeBatch

CROSS_REDUCERS = ("sum", "mean", "max", "min", "stack")


def _call(udf, batch, role: str, rows: int) -> dict:
    out = udf(batch)
    name = getattr(udf, "__qualname__", None) or getattr(udf, "name", None) or type(udf).__name__
    if not isinstance(out, dict):
        raise TypeError(f"{role} function {name} must return a dict of tensors, got {type(out).__name__}")
    for k, v in out.items():
        if not isinstance(v, torch.Tensor):
            raise TypeError(f"{role} function {name} returned {k!r} of type {type(v).__name__}, not a tensor")
        if v.dim() == 0 or v.shape[0] != rows:
            got = "a scalar" if v.dim() == 0 else f"{v.shape[0]} rows"
            raise ValueError(
                f"{role} function {name} returned {k!r} with {got}; expected {rows} "
                f"(one per {'edge' if role == 'message' else 'node'})"
            )
    return out


def edge_block(g: Graph, rel: int | None) -> tuple[int, int]:
    return (0, g.index.num_edges) if rel is None else g.index.rel_range(rel)


def node_block(g: Graph, rel: int | None) -> tuple[int, int]:
    if rel is None:
        return 0, g.index.num_nodes
    dst_type = g.ntype_id(g.index.etypes[rel][2])
    return g.index.ntype_range(dst_type)


def messages(
    g: Graph,
    message: Callable[..., dict],
    rel: int | None = None,
    subset: torch.Tensor | None = None,
    user_order: bool = False,
) -> dict:
    """Run ``message`` on the block's edges; rows in internal edge order, or in user edge order with
    ``user_order`` (as apply_edges stores them); with ``subset``, block-local user edge ids: on those edges,
    rows in ``subset``'s order).

    The UDF sees the edges in user edge order, as DGL presents them: its rows
    line up with a tensor of its own holding one row per edge id (DGL's
    RelGraphConv passes the edge types so, through ``functools.partial``)."""
    lo, hi = edge_block(g, rel)
    batch = EdgeBatch(g, lo, hi, rel, subset, user_order=True)
    out = _call(message, batch, "message", batch.batch_size())
    if subset is None and g.index.user_eid is not None and not user_order:
        out = {k: g.index.from_user_order(v, lo, hi) for k, v in out.items()}
    return out


def reduce(g: Graph, reduce_fn: Callable[..., dict], msgs: dict, rel: int | None = None) -> dict:
    """Aggregate ``msgs`` (from :func:`messages`) at each destination of the block."""
    node_lo, node_hi = node_block(g, rel)
    if isinstance(reduce_fn, BuiltinReduce):
        return {reduce_fn.out: _scatter_reduce(g, reduce_fn, msgs, rel, node_lo, node_hi)}
    buckets = Buckets(g.index, rel, node_lo)
    view, where = _node_view(g, None if rel is None else g.ntype_id(g.index.etypes[rel][2]), "dst")
    data = buckets.reader(view.__getitem__, node_lo)
    parts: dict = {}
    for i, (bucket_nodes, box) in enumerate(buckets.mailboxes(msgs)):
        batch = NodeBatch(g, bucket_nodes, box, read=lambda k, i=i: data(k)[i], keys=lambda: list(view), where=where)
        for k, v in _call(reduce_fn, batch, "reduce", bucket_nodes.numel()).items():
            parts.setdefault(k, []).append(v)
    return buckets.assemble(parts, node_hi - node_lo, lambda k, rows, like: g.initial_rows("node", k, rows, like))


def _scatter_reduce(g, fn: BuiltinReduce, msgs, rel, node_lo, node_hi):
    if fn.msg not in msgs:
        raise KeyError(f"reduce {fn.op}({fn.msg!r}) found no message {fn.msg!r}; messages: {list(msgs)}")
    m = msgs[fn.msg]
    lo, hi = edge_block(g, rel)
    dst = g.index.dst[lo:hi] - node_lo
    n = node_hi - node_lo
    out = m.new_zeros((n,) + tuple(m.shape[1:]))
    if fn.op in ("sum", "mean"):
        out = out.index_add(0, dst, m)
        if fn.op == "mean":
            deg = torch.bincount(dst, minlength=n).clamp(min=1).to(m.dtype)
            out = out / deg.view((n,) + (1,) * (m.dim() - 1))
        return out
    return _scatter_extremum(m, dst, out, fn.op)


def _scatter_extremum(m: torch.Tensor, dst: torch.Tensor, zeros: torch.Tensor, op: str) -> torch.Tensor:
    """Max / min of ``m``'s rows per destination (zeros where none), differentiated as DGL's built-ins are:
    each (node, feature) passes its gradient to one edge, the first (in internal order) among ties.

    (torch's ``scatter_reduce`` would split it evenly among tied edges.)
    """
    idx = dst.view((-1,) + (1,) * (m.dim() - 1)).expand_as(m)
    with torch.no_grad():
        best = zeros.scatter_reduce(0, idx, m, "amax" if op == "max" else "amin", include_self=False)
        edges = m.shape[0]
        position = torch.arange(edges, device=m.device).view(idx.shape[:1] + (1,) * (m.dim() - 1)).expand_as(m)
        candidate = torch.where(m == best.index_select(0, dst), position, edges)
        arg = torch.full_like(best, edges, dtype=torch.int64).scatter_reduce(0, idx, candidate, "amin")
        found = arg < edges
    if not edges:  # zeros, still attached to m's graph as the sum's and mean's results are
        return best + m.sum() * 0
    return torch.where(found, m.gather(0, arg.clamp(max=edges - 1)), best)


def cross_reduce(outs: list[torch.Tensor], how: str) -> torch.Tensor:
    """Combine one node type's per-relation results (DGL's cross reducers)."""
    if how == "stack":
        return torch.stack(outs, 1)
    if len(outs) == 1:
        return outs[0]
    stacked = torch.stack(outs, 0)
    if how == "sum":
        return stacked.sum(0)
    if how == "mean":
        return stacked.mean(0)
    if how == "max":
        return stacked.max(0).values
    return stacked.min(0).values


def receive(g: Graph, ntype: int | None, out: dict) -> None:
    """Store a message-passing call's node results (a row per node of type ``ntype``, or of every node) where
    its calls write: ``g.side_data("dst", ntype)`` (a block keeps the destination rows)."""
    g.side_data("dst", ntype).update(out)


def write_nodes(g: Graph, ntype: int | None, out: dict) -> None:
    """Store ``out``'s tensors as node features (of node type ``ntype``, or of all nodes)."""
    for k, v in out.items():
        if ntype is None:
            g.ndata_all[k] = v
        else:
            g.nodes[g.ntypes[ntype]].data[k] = v


def apply_nodes(
    g: Graph,
    func: Callable[..., dict],
    ntype: int | None = None,
    subset: torch.Tensor | None = None,
    side: str | None = None,
) -> dict:
    """Run ``func`` on all nodes or on one node type's nodes (per-type features); with ``subset``
    (int64 ids local to the type), on those nodes only, rows in ``subset``'s order. ``side="dst"`` (an
    update function's) reads what a reduce function reads, ``g.side_data("dst", ntype)``."""
    lo, hi = (0, g.index.num_nodes) if ntype is None else g.index.ntype_range(ntype)
    view, where = _node_view(g, ntype, side)
    if subset is None:
        nodes, read = torch.arange(lo, hi, device=g.device), view.__getitem__
    else:
        nodes, read = subset + lo, (lambda k: view[k].index_select(0, subset))
    batch = NodeBatch(g, nodes, read=read, keys=lambda: list(view), where=where)
    return _call(func, batch, "update", nodes.numel())


def _node_view(g, ntype: int | None, side=None):
    """(node features, phrase for errors) over all nodes (``ntype=None``) or one node type's, in local order;
    with ``side``, those of ``g.side_data(side, ntype)``."""
    if side is not None:
        return g.side_data(side, ntype), "" if ntype is None else f" on node type {g.index.ntypes[ntype]!r}"
    if ntype is None:
        return g.ndata_all, ""
    return g.nodes[g.index.ntypes[ntype]].data, f" on node type {g.index.ntypes[ntype]!r}"

"""Edge results left unwritten between compiled calls (cross-call fusion).

A compiled whole-graph ``apply_edges`` whose result is an SDDMM of node
tensors the plan computed itself (``u_op_v(a, b, op)``, e.g. GAT's
attention logits) stores a ``DeferredEdges`` instead of the [E, ...]
tensor. A later compiled call on the same graph that reads that feature
inlines the SDDMM into its own MP-DFG (``inline_deferred``), where fusion
can fold it into an aggregation, so the edge tensor is never written. Any
other read (user code, the eager executor, one relation's block)
materializes it once, in the user's edge order: the same values the
apply_edges call would have stored.

Any other whole-graph ``apply_edges`` result is stored as ``InternalOrderEdges``
when the graph keeps its edges in another order than the user's: a compiled
call reading it binds the internal-order tensor as is, and only a read by
user code (or the eager executor) pays the permutation to user order.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.fx as fx

from .. import backend
from ..backend.torch.common import broadcast_shape
from ..graph.frame import Deferred
from ..graph.index import GraphIndex
from ..ir import ops
from ..ir.mpdfg import DEFERRED_INPUT, MPDFG
from .context import GraphContext


@dataclass(eq=False)  # identity comparison: fields are tensors
class DeferredEdges(Deferred):
    """``u_op_v(ctx, a, b, op, b_side, negative_slope)`` over the whole graph, in user edge order once read."""

    ctx: GraphContext
    a: torch.Tensor
    b: torch.Tensor
    op: str
    b_side: str
    negative_slope: float | None
    backend: str

    @property
    def shape(self) -> torch.Size:
        feat = broadcast_shape(tuple(self.a.shape[1:]), tuple(self.b.shape[1:]))
        return torch.Size((self.ctx.num_edges,) + tuple(feat))

    @property
    def dtype(self) -> torch.dtype:
        return self.a.dtype

    @property
    def device(self) -> torch.device:
        return self.a.device

    def compute(self) -> torch.Tensor:
        """The SDDMM's result in internal edge order."""
        with backend.using(self.backend):
            return ops.u_op_v(self.ctx, self.a, self.b, self.op, self.b_side, self.negative_slope)

    def materialize(self) -> torch.Tensor:
        return self.ctx.index.to_user_order(self.compute(), self.ctx.edge_lo, self.ctx.edge_hi)

    def signature(self) -> tuple:
        """What a plan inlining this value depends on."""
        return (self.op, self.b_side, self.negative_slope, self.a.dtype, tuple(self.a.shape[1:]),
                tuple(self.b.shape[1:]))

    def operand(self, which: str) -> torch.Tensor:
        return self.a if which == "a" else self.b


@dataclass(eq=False)
class InternalOrderEdges(Deferred):
    """A whole-graph edge feature of ``index``'s graph held in internal edge order, put in user order when read."""

    index: GraphIndex
    values: torch.Tensor

    @property
    def shape(self) -> torch.Size:
        return self.values.shape

    @property
    def dtype(self) -> torch.dtype:
        return self.values.dtype

    @property
    def device(self) -> torch.device:
        return self.values.device

    def materialize(self) -> torch.Tensor:
        return self.index.to_user_order(self.values)


def in_user_order(g, values: torch.Tensor, rel, lo: int, hi: int):
    """What an apply_edges on block ``rel`` (edges lo..hi) stores for internal-order ``values``: the values
    themselves when the orders agree, an ``InternalOrderEdges`` over the whole graph, else a permuted copy."""
    if g.index.user_eid is None:
        return values
    if rel is None:
        return InternalOrderEdges(g.index, values)
    return g.index.to_user_order(values, lo, hi)


def internal_edges(g, name: str, rel) -> torch.Tensor | None:
    """Edge feature ``name`` in internal order without a permutation, when stored as ``InternalOrderEdges``
    of ``g``'s structure and read over the whole graph; else None."""
    if rel is not None:
        return None
    value = g._estore.peek_whole(name)
    if isinstance(value, InternalOrderEdges) and value.index is g.index:
        return value.values
    return None


def deferrable_outputs(dfg: MPDFG) -> dict:
    """Outputs of an apply_edges plan that can be deferred: key -> its u_op_v node (elementwise op)."""
    if dfg.kind != "apply_edges":
        return {}
    return {key: n for key, n in dfg.outputs.items()
            if isinstance(n, fx.Node) and n.op == "call_function" and n.target is ops.u_op_v
            and n.args[3] != "dot" and len(n.users) == 1 and n.args[4] in ("dst", "dst_local")
            and (len(n.args) < 7 or n.args[6] == "src")}


def deferring_module(dfg: MPDFG, deferred: dict) -> fx.GraphModule:
    """The plan's module returning ``(a, b)`` for each deferred output instead of the SDDMM result."""
    out = dfg.copy()
    nodes = dict(zip(dfg.graph.nodes, out.graph.nodes))
    results = dict(out.outputs)
    for key, n in deferred.items():
        results[key] = (nodes[n].args[1], nodes[n].args[2])
    out.output_node.args = (results,)
    module = out.module()
    module.graph.eliminate_dead_code()  # after module(): fx's purity check of a call_module needs the owner
    module.recompile()
    return module


def wrap(deferred: dict, ctx: GraphContext, inputs: list, results: dict, backend_name: str) -> dict:
    """Run results with each deferred output's ``(a, b)`` made a ``DeferredEdges``.

    An operand sharing memory with an input (a user's tensor, which could
    change in place before the value is read) is computed now instead, as
    the plan would have (internal edge order).
    """
    held = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor)}
    out = dict(results)
    for key, n in deferred.items():
        a, b = results[key]
        value = DeferredEdges(ctx, a, b, n.args[3], n.args[4], n.args[5] if len(n.args) > 5 else None,
                              backend_name)
        aliased = any(t.untyped_storage().data_ptr() in held for t in (a, b))
        out[key] = value.compute() if aliased else value
    return out


def peek(g, name: str, rel) -> DeferredEdges | None:
    """The deferred edge feature ``name`` when a call on block ``rel`` of ``g`` can inline it."""
    if rel is not None:
        return None
    value = g._estore.peek_whole(name)
    if isinstance(value, DeferredEdges) and value.ctx.index is g.index and value.ctx.rel is None:
        return value
    return None


def inline_deferred(dfg: MPDFG, deferred: dict) -> None:
    """Replace each input ``edata[name]`` in ``deferred`` (name -> DeferredEdges) by its SDDMM, in place.

    The operands become placeholders of kind ``DEFERRED_INPUT`` (node rows,
    bound at run time from the stored value).
    """
    g = dfg.graph
    ctx = next(n for n in g.nodes if n.op == "placeholder" and n.meta["input"][0] == "ctx")
    for n in [n for n in g.nodes if n.op == "placeholder" and n.meta["input"][0] == "edata"]:
        name = n.meta["input"][1]
        if name not in deferred:
            continue
        value = deferred[name]
        with g.inserting_before(n):
            a, b = (g.placeholder(f"{n.name}_{which}") for which in "ab")
        for p, which in ((a, "a"), (b, "b")):
            p.meta.update(input=(DEFERRED_INPUT, f"{name}.{which}"), stage=n.meta["stage"], source=n.meta["source"])
        first = next(u for u in g.nodes if u.op != "placeholder")
        with g.inserting_before(first):
            sddmm = g.call_function(ops.u_op_v, (ctx, a, b, value.op, value.b_side, value.negative_slope))
        sddmm.meta.update(stage=n.meta["stage"], source=f"deferred edata[{name!r}] of an earlier apply_edges")
        n.replace_all_uses_with(sddmm)
        g.erase_node(n)
        dfg.log.append(f"inline: edata[{name!r}] is an earlier apply_edges' SDDMM, computed here instead")

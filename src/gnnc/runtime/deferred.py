"""Edge results left unwritten between compiled calls (cross-call fusion).

A compiled whole-graph ``apply_edges`` whose result is an SDDMM of node
tensors the plan computed itself (``u_op_v(a, b, op)``, e.g. GAT's
attention logits) or a gather of node or (relation, node) pair rows (an
RGAT message ``z_src``, once ``compact`` made it a pair table), possibly on
the block regrouped by a type feature (``passes.retype``), stores a
``DeferredEdges`` instead of the [E, ...] tensor. A later compiled call on
the same graph that reads that feature inlines the recipe into its own
MP-DFG (``inline_deferred``), where fusion can fold it into an aggregation,
so the edge tensor is never written. Any
other read (user code, the eager executor, one relation's block)
materializes it once, in the user's edge order: the same values the
apply_edges call would have stored.

Any other whole-graph ``apply_edges`` result is stored as ``InternalOrderEdges``
when the graph keeps its edges in another order than the user's: a compiled
call reading it binds the internal-order tensor as is, and only a read by
user code (or the eager executor) pays the permutation to user order.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.fx as fx

from .. import backend
from ..backend.pytorch.common import broadcast_shape
from ..graph.frame import Deferred
from ..graph.index import GraphIndex
from ..ir import operators as ops
from ..ir.context import GraphContext
from ..ir.mpdfg import DEFERRED_INPUT, MPDFG

_SIDE_ROWS = {"src": "nodes", "src_pair": "src_pairs", "dst": "nodes", "dst_local": "dst", "dst_pair": "dst_pairs"}
# The row space of every tensor operand of the operators whose whole-graph result an apply_edges may leave
# unwritten, from the operator's other arguments (``nodes``: all nodes; ``dst``: the destinations; pair tables;
# ``relations``: per-relation tables).
_RECIPES = {
    ops.u_op_v: lambda op, b_side, slope=None, a_side="src": (_SIDE_ROWS[a_side], _SIDE_ROWS[b_side]),
    ops.gather_src: lambda: ("nodes",),
    ops.gather_dst: lambda: ("nodes",),
    ops.gather_src_pair: lambda: ("src_pairs",),
    ops.gather_dst_pair: lambda: ("dst_pairs",),
    ops.etype_bilinear_dot: lambda q_side: ("nodes", "relations", _SIDE_ROWS[q_side]),
    ops.edge_rows: lambda: ("edges",),
}
ROW_RESIDENCY = {"nodes": "V", "dst": "V", "src_pairs": "Ps", "dst_pairs": "Pd", "relations": "R", "edges": "E"}


def recipe_parts(n: fx.Node) -> tuple[tuple, tuple]:
    """(tensor operands, other arguments) of a recipe node: its context, then operands (fx nodes), then the rest."""
    rest = tuple(a for a in n.args[1:] if not isinstance(a, fx.Node))
    count = len(_RECIPES[n.target](*rest))
    return tuple(n.args[1 : 1 + count]), tuple(n.args[1 + count :])


@dataclass(eq=False)  # identity comparison: fields are tensors
class DeferredEdges(Deferred):
    """``target(ctx, *operands, *args)`` over the whole graph ``base`` — an SDDMM (``u_op_v``), or a gather of
    node or (relation, node) pair rows — in ``base``'s user edge order once read. ``ctx`` is ``base`` or
    ``base`` regrouped by a type feature (``ops.retype``): then the value is computed in ``ctx``'s edge order
    and put back in ``base``'s."""

    base: GraphContext
    ctx: GraphContext
    target: object
    operands: tuple
    args: tuple
    backend: str

    @property
    def moved(self) -> bool:
        return self.ctx is not self.base

    @property
    def shape(self) -> torch.Size:
        if self.target is ops.u_op_v:
            feat = broadcast_shape(tuple(self.operands[0].shape[1:]), tuple(self.operands[1].shape[1:]))
        elif self.target is ops.etype_bilinear_dot:
            feat = tuple(self.operands[0].shape[1:2])
        else:
            feat = tuple(self.operands[0].shape[1:])
        return torch.Size((self.base.num_edges,) + tuple(feat))

    @property
    def dtype(self) -> torch.dtype:
        return self.operands[0].dtype

    @property
    def device(self) -> torch.device:
        return self.operands[0].device

    def compute(self) -> torch.Tensor:
        """The value in ``base``'s internal edge order."""
        with backend.using(self.backend):
            value = self.target(self.ctx, *self.operands, *self.args)
            return ops.edges_from(self.ctx, value) if self.moved else value

    def materialize(self) -> torch.Tensor:
        return self.base.index.to_user_order(self.compute(), self.base.edge_lo, self.base.edge_hi)

    def signature(self) -> tuple:
        """What a plan inlining this value depends on."""
        return (
            self.target.__name__,
            self.args,
            self.moved,
            tuple((t.dtype, tuple(t.shape[1:])) for t in self.operands),
        )

    def operand(self, which: str):
        """A bound input of an inlining plan: ``ctx`` or operand number ``which``."""
        return self.ctx if which == "ctx" else self.operands[int(which)]


@dataclass(eq=False)
class InternalOrderEdges(Deferred):
    """A whole-graph edge feature of ``index``'s graph held in internal edge order, put in user order when read
    (then ``on_read`` is called, when given)."""

    index: GraphIndex
    values: torch.Tensor
    on_read: Callable[[], None] | None = None

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
        if self.on_read is not None:
            self.on_read()
        return self.index.to_user_order(self.values)


def in_user_order(g, values: torch.Tensor, rel, lo: int, hi: int, on_read: Callable[[], None] | None = None):
    """What an apply_edges on block ``rel`` (edges lo..hi) stores for internal-order ``values``: the values
    themselves when the orders agree, an ``InternalOrderEdges`` over the whole graph (told ``on_read``), else
    a permuted copy."""
    if g.index.user_eid is None:
        return values
    if rel is None:
        return InternalOrderEdges(g.index, values, on_read)
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
    """Outputs of an apply_edges plan that can be deferred: key -> (recipe node, retyped context node or None)."""
    if dfg.kind != "apply_edges":
        return {}
    found = {}
    for key, n in dfg.outputs.items():
        if not isinstance(key, str):  # an edge feature the message UDF wrote: stored as computed
            continue
        moved = None
        if isinstance(n, fx.Node) and n.op == "call_function" and n.target is ops.edges_from:
            moved, n = n.args
        if (
            isinstance(n, fx.Node)
            and n.op == "call_function"
            and n.target in _RECIPES
            and not n.kwargs
            and len(n.users) == 1
            and (n.target is not ops.u_op_v or n.args[3] != "dot")
        ):
            found[key] = (n, moved)
    return found


def deferring_module(dfg: MPDFG, deferred: dict) -> fx.GraphModule:
    """The plan's module returning ``(retyped context or None, *tensor operands)`` for each deferred output
    instead of its value."""
    out = dfg.copy()
    nodes = dict(zip(dfg.graph.nodes, out.graph.nodes))
    results = dict(out.outputs)
    for key, (n, moved) in deferred.items():
        operands, _ = recipe_parts(n)
        results[key] = (None if moved is None else nodes[moved],) + tuple(nodes[a] for a in operands)
    out.output_node.args = (results,)
    module = out.module()
    module.graph.eliminate_dead_code()  # after module(): fx's purity check of a call_module needs the owner
    module.recompile()
    return module


def wrap(deferred: dict, ctx: GraphContext, held: list, results: dict, backend_name: str) -> dict:
    """Run results with each deferred output's operands made a ``DeferredEdges``.

    A value with an operand sharing memory with a tensor in ``held`` (the
    plan's inputs and the parameters it reads: a user's tensor or an
    optimizer could change it in place before the value is read) is computed now
    instead, as the plan would have (internal edge order); computed on a
    retyped block, it is kept in that block's edge order for a later call
    on the same block.
    """
    held = {t.untyped_storage().data_ptr() for t in held if isinstance(t, torch.Tensor)}
    out = dict(results)
    for key, (n, _) in deferred.items():
        moved, *operands = results[key]
        _, args = recipe_parts(n)
        value = DeferredEdges(ctx, moved or ctx, n.target, tuple(operands), args, backend_name)
        if any(t.untyped_storage().data_ptr() in held for t in operands):
            if moved is None:
                value = value.compute()
            else:
                with backend.using(backend_name):
                    rows = n.target(moved, *operands, *args)
                value = DeferredEdges(ctx, moved, ops.edge_rows, (rows,), (), backend_name)
        out[key] = value
    return out


# A captured forward's promise (``gnnc.forward.passes.scope_deferral``): nothing writes into a tensor before the graph's
# next compiled call, so the values its next whole-graph apply_edges defers may hold that plan's inputs (which
# ``wrap`` otherwise computes at once). The values so deferred stay pending until a call of the graph runs user
# code eagerly, which settles them first (computes those still deferred), or the forward forgets them.
_TRUSTED: contextvars.ContextVar = contextvars.ContextVar("gnnc_trusted_graph", default=None)
_PENDING: contextvars.ContextVar = contextvars.ContextVar("gnnc_trusted_values", default=None)


def trust_next_apply_edges(graph) -> None:
    """Let ``graph``'s next whole-graph compiled apply_edges defer values that hold its inputs."""
    _TRUSTED.set(graph)


def take_trust(graph) -> bool:
    """Whether ``graph`` was trusted (see ``trust_next_apply_edges``); the trust is used up."""
    if _TRUSTED.get() is not graph:
        return False
    _TRUSTED.set(None)
    return True


def record_trusted(graph, keys) -> None:
    """Edge features of ``graph`` deferred under trust: settled before any user code of it runs eagerly."""
    pending = _PENDING.get()
    earlier = pending[1] if pending is not None and pending[0] is graph else ()
    _PENDING.set((graph, (*earlier, *keys)))


def settle_trusted(graph) -> None:
    """Compute ``graph``'s values deferred under trust that are still deferred (eager user code may write
    into their operands next), and forget them."""
    pending = _PENDING.get()
    if pending is None or pending[0] is not graph:
        return
    _PENDING.set(None)
    for key in pending[1]:
        if isinstance(graph._estore.peek_whole(key), DeferredEdges):
            graph._estore.get_whole(key)


def settle_before_user_writes() -> None:
    """User code is about to write into a tensor while a UDF is traced (it runs for real then): compute every
    value deferred under trust first, whichever tensor it writes."""
    pending = _PENDING.get()
    if pending is not None:
        settle_trusted(pending[0])


def forget_trusted(graph) -> None:
    """The forward's promise ends (its scope does): no trust or pending value of ``graph`` is kept."""
    if _TRUSTED.get() is graph:
        _TRUSTED.set(None)
    pending = _PENDING.get()
    if pending is not None and pending[0] is graph:
        _PENDING.set(None)


def context_sharing(values: list) -> tuple:
    """For each deferred value in ``values``, the position of the first one computed on the same retyped
    block (None when not moved): an inlining plan binds one context for each."""
    first = {}
    return tuple(first.setdefault(id(v.ctx), i) if v.moved else None for i, v in enumerate(values))


def peek(g, name: str, rel) -> DeferredEdges | None:
    """The deferred edge feature ``name`` when a call on block ``rel`` of ``g`` can inline it."""
    if rel is not None:
        return None
    value = g._estore.peek_whole(name)
    if isinstance(value, DeferredEdges) and value.base.index is g.index and value.base.rel is None:
        return value
    return None


def inline_deferred(dfg: MPDFG, deferred: dict) -> None:
    """Replace each input ``edata[name]`` in ``deferred`` (name -> DeferredEdges) by its recipe, in place.

    The operands become placeholders of kind ``DEFERRED_INPUT`` (``meta['rows']``
    names their row space), bound at run time from the stored value; so does
    a retyped context, whose result is put back in the plan's edge order
    (``edges_from``), which ``retype`` may then move the whole plan onto.
    """
    g = dfg.graph
    ctx = next(n for n in g.nodes if n.op == "placeholder" and n.meta["input"][0] == "ctx")
    contexts = {}  # id of a retyped context -> its placeholder: values computed on one block share it
    for n in [n for n in g.nodes if n.op == "placeholder" and n.meta["input"][0] == "edata"]:
        name = n.meta["input"][1]
        if name not in deferred:
            continue
        value = deferred[name]
        rows = _RECIPES[value.target](*value.args)
        with g.inserting_before(n):
            if value.moved and id(value.ctx) not in contexts:
                contexts[id(value.ctx)] = g.placeholder(f"{n.name}_ctx")
                contexts[id(value.ctx)].meta.update(
                    input=(DEFERRED_INPUT, f"{name}.ctx"), input_res="S", stage=n.meta["stage"], source=n.meta["source"]
                )
            moved = contexts[id(value.ctx)] if value.moved else None
            operands = [g.placeholder(f"{n.name}_{i}") for i in range(len(rows))]
        for i, (p, space) in enumerate(zip(operands, rows)):
            p.meta.update(
                input=(DEFERRED_INPUT, f"{name}.{i}"),
                rows=space,
                input_res=ROW_RESIDENCY[space],
                stage=n.meta["stage"],
                source=n.meta["source"],
            )
        first = next(u for u in g.nodes if u.op != "placeholder")
        with g.inserting_before(first):
            recipe = g.call_function(value.target, (moved or ctx, *operands, *value.args))
            result = recipe if moved is None else g.call_function(ops.edges_from, (moved, recipe))
        for made in {recipe, result}:
            made.meta.update(stage=n.meta["stage"], source=f"deferred edata[{name!r}] of an earlier apply_edges")
        n.replace_all_uses_with(result)
        g.erase_node(n)
        dfg.log.append(
            f"inline: edata[{name!r}] is an earlier apply_edges' {value.target.__name__}, computed here instead"
            if value.target is not ops.edge_rows
            else f"inline: edata[{name!r}] was computed "
            "by an earlier apply_edges on a regrouped block: read here in that block's edge order"
        )

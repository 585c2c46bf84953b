"""Running a compiled plan: its placeholders bound to a graph's data, its module run, its results stored.

A ``Plan`` (made by ``gnnc.compiler.driver``) holds an optimized MP-DFG and the module that runs it.
``run_plan`` binds the call's inputs (``bind_inputs``), drops the features a scope releases
(``feature_release``), runs the module on the plan's backend, wraps deferred edge results and stores the
edge features the message UDF wrote. Errors propagate: the driver's failure boundary decides what they mean.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx
from torch.utils import checkpoint

from .. import backend
from ..backend import rebuild_in_backward
from ..backend.pytorch.index_matmul import mark_private
from ..failures import stage
from ..graph.core import Graph
from ..graph.frame import Deferred
from ..graph.value_cache import ByContents
from ..ir import cost
from ..ir.context import GraphContext, graph_context, user_order_context
from ..ir.mpdfg import DEFERRED_INPUT, MPDFG
from ..ir.rules import InferenceFailure
from . import deferred as deferral
from . import edge_writes, feature_release, reach
from .eager import edge_block
from .node_reads import node_feature_sides, node_feature_types


@dataclass
class Plan:
    """An optimized MP-DFG ready to run, or the reason it fell back."""

    dfg: MPDFG | None
    module: fx.GraphModule | None
    fallback: str | None = None
    initial: MPDFG | None = None  # the graph as built, before optimization (for explain)
    call: str = ""
    backend: str = "torch"  # the resolved backend that runs the plan's primitives
    deferred: dict | None = None  # apply_edges outputs left as DeferredEdges: key -> (recipe node, moved ctx)
    context: GraphContext | None = None  # in ``recording`` only: the block the recorded call ran on
    recomputes: bool = False  # the recompute pass marked values to rebuild in backward
    traced: list | None = None  # the call's traced UDFs (what binding reads on a block's sides)
    order_free: bool = False  # a whole-graph plan computing each edge from its own row (compiler.edge_order)
    read_in_user_order: bool = False  # an order-free plan's result was read by user code: run in user order


_STAGES = {"msg": 0, "red": 1, "upd": 2}
# Raised through a plan by saved-tensor hooks, meant for whoever installed them: non-reentrant
# ``torch.utils.checkpoint`` stops its recomputation with the first, reports a mismatch with the second.
AUTOGRAD_SIGNALS = tuple(
    getattr(checkpoint, name) for name in ("_StopRecomputationError", "CheckpointError") if hasattr(checkpoint, name)
)


def bind_inputs(
    dfg: MPDFG, g: Graph, rel: int | None, udfs: Sequence, traced: list | None, user_order: bool = False
) -> list:
    """Run-time values of the plan's placeholders for graph ``g`` (``traced``: the call's traced UDFs), edges
    in internal order, or in the user's (``user_order``: an order-free plan on the whole graph).

    In a relation block, a node feature stored for some node types only is
    bound over all nodes with the rows of the types the UDFs read (zeros
    elsewhere, never read): KeyError when one of them lacks it (as eager),
    InferenceFailure (run eagerly) when their widths or dtypes differ. On a
    block, a feature the UDFs read on the destination side only is bound from
    that side (``Graph.side_data``), any other from the source side.
    """
    ctx = user_order_context(g) if user_order else graph_context(g, rel)
    lo, hi = ctx.edge_lo, ctx.edge_hi
    values: list = []
    node_types = None
    # a block's destination-side reads (its source side is the node store's own features)
    ends = node_feature_sides(traced) if g.is_block else {}
    for n in dfg.inputs():
        kind, name = n.meta["input"]
        if kind == "ctx":
            values.append(ctx)
        elif kind == "ndata" and ends.get(name) == {"dst"}:
            values.append(g.side_data("dst")[name])
        elif kind == "ndata" and (rel is None or name in g._nstore.whole):
            values.append(g.side_data("src")[name])
        elif kind == "ndata" and rel is not None:  # (a whole-graph call binds every node feature above)
            node_types = node_types or node_feature_types(g, rel, traced)
            try:
                values.append(g._nstore.get_spanning(name, node_types[name]))
            except ValueError as err:
                raise InferenceFailure(str(err), reach.udf_location(udfs[0])) from err
        elif kind == "edata" and user_order:  # an internal-order result permuted here, left as stored
            internal = deferral.internal_edges(g, name, rel)
            values.append(g.edata_all[name] if internal is None else g.index.to_user_order(internal))
        elif kind == "edata":
            internal = deferral.internal_edges(g, name, rel)
            if internal is None:
                user = g.edata_all[name] if rel is None else g.edges[g.canonical_etypes[rel]].data[name]
                internal = _internal_order(g.index, user, lo, hi)
            values.append(internal)
        elif kind == "ntype_data":
            values.append(g.ntype_data[name])
        elif kind == "etype_data":
            values.append(g.etype_data[name])
        elif kind == DEFERRED_INPUT:
            feature, which = name.rsplit(".", 1)
            pending = deferral.peek(g, feature, rel)
            assert pending is not None, "a plan with a deferred input is keyed by that value's signature"
            values.append(pending.operand(which))
        else:
            stage, path = n.meta["reach"]
            value = reach.resolve(udfs[_STAGES[stage]], path)
            values.append(g.index.from_user_order(value, lo, hi) if n.meta.get("per_edge") else value)
    return values


def _feature_names(dfg: MPDFG) -> tuple[set, set]:
    """(node, edge) feature names the plan's placeholders bind (deferred edge results included)."""
    nodes, edges = set(), set()
    for n in dfg.inputs():
        kind, name = n.meta["input"]
        if kind == "ndata":
            nodes.add(name)
        elif kind == "edata":
            edges.add(name)
        elif kind == DEFERRED_INPUT:
            edges.add(name.rsplit(".", 1)[0])
    return nodes, edges


# Internal-order copies of per-edge scalars that need no gradient (relation types, norms, weights), kept
# by the user's tensor's contents (``gnnc.graph.value_cache``: a write through ``.data`` or numpy is seen)
# and the edge index (held weakly): models set them once and read them at every call. One number per edge
# each; wider features are permuted per call rather than kept twice.
_INTERNAL_SCALARS = ByContents(16)  # user tensor, (id(index), lo, hi) -> (weakref(index), internal copy)


def forget_bindings() -> None:
    """Drop the kept internal-order copies of per-edge scalars (``gnnc.compiler.driver.clear_cache``)."""
    _INTERNAL_SCALARS.clear()


def _internal_order(index, user: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    scalar = user.dim() == 1 or user.shape[1:].numel() == 1
    if index.user_eid is None or not scalar or user.requires_grad:
        return index.from_user_order(user, lo, hi)
    key = (id(index), lo, hi)
    hit = _INTERNAL_SCALARS.get(user, key)
    if hit is not None and hit[0]() is index:
        return hit[1]
    internal = index.from_user_order(user, lo, hi)
    mark_private(internal)  # bound by plans only, never handed out: its type grouping may go by the object
    _INTERNAL_SCALARS.put(user, (weakref.ref(index), internal), key)
    return internal


def run_plan(plan: Plan, g: Graph, rel: int | None, udfs: Sequence, options: dict[str, Any], trusted: bool) -> dict:
    """The call's results by ``plan`` on graph ``g`` (block ``rel``); ``trusted``: the forward promised that
    the inputs of deferred edge results do not change before they are read."""
    dfg, module = plan.dfg, plan.module
    assert dfg is not None and module is not None, "only a plan that compiled runs"
    user_order = _runs_in_user_order(plan, g)
    with stage("plan binding"):
        inputs = bind_inputs(dfg, g, rel, udfs, plan.traced, user_order)
    feature_release.drop_before_run(dfg.kind, g, rel, lambda: _feature_names(dfg))
    with (
        stage("plan run"),
        backend.using(plan.backend),
        cost.autotuning(options.get("autotune", False)),
        rebuild_in_backward.saving() if plan.recomputes and torch.is_grad_enabled() else contextlib.nullcontext(),
    ):
        results = module(*inputs)
        if plan.deferred:
            # optimizers (or user code between calls) change these in place, unless the forward promised not to
            held = [] if trusted else [*inputs, *module.parameters(), *module.buffers()]
            results = deferral.wrap(plan.deferred, graph_context(g, rel), held, results, plan.backend)
            if trusted:
                deferral.record_trusted(g, [k for k, v in results.items() if isinstance(v, deferral.DeferredEdges)])
        results = edge_writes.store(g, rel, results, user_order)
    if dfg.kind == "apply_edges" and not user_order:
        lo, hi = edge_block(g, rel)
        on_read = functools.partial(_read_by_user, plan) if plan.order_free else None
        results = {
            k: v if isinstance(v, Deferred) else deferral.in_user_order(g, v, rel, lo, hi, on_read)
            for k, v in results.items()
        }
    return results


def _read_by_user(plan: Plan) -> None:
    plan.read_in_user_order = True


def _runs_in_user_order(plan: Plan, g: Graph) -> bool:
    """Whether an order-free whole-graph plan runs in the user's edge order this call, where that saves
    permutations. In internal order the call permutes every edge input stored in user order, and an
    apply_edges result when read; in user order, every input stored in internal order (an earlier compiled
    result). An apply_edges plan switches once user code has read its result (a permutation per call).
    Not while saved-tensor hooks are set (torch.utils.checkpoint): a recomputation must save what its
    forward saved."""
    if not plan.order_free or g.index.user_eid is None:
        return False
    assert plan.dfg is not None
    result_read = plan.read_in_user_order
    if plan.dfg.kind == "apply_edges" and not result_read:
        return False
    names = _feature_names(plan.dfg)[1]
    held_internal = sum(deferral.internal_edges(g, name, None) is not None for name in names)
    return held_internal < len(names) - held_internal + result_read and not _saved_tensors_intercepted()


def _saved_tensors_intercepted() -> bool:
    """Whether saved-tensor hooks are set (non-reentrant checkpointing, offloading); True where torch cannot
    tell."""
    top = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)
    return top is None or top(False) is not None

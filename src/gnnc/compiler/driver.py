"""The compiler driver: trace, build, infer, optimize, lower, cache; run by ``gnnc.runtime.plan``; fall back to eager.

A trace is keyed by the UDFs' reach fingerprint (``gnnc.runtime.reach``:
code, closure and default values, globals read, module identities and
modes, dtypes and shapes of reached tensors); a plan adds the graph schema,
the dtypes and trailing shapes of the data read, the block (whole graph or
relation index), the device and the backend choice (``auto`` resolves to
``cpu`` on CPU when numba is there). A trace that holds only for some
feature schemas is kept per generic key with the guards it was traced
under. Each cache keeps a bounded number of entries, least recently used
first out (``docs/caches.rst`` lists them). Tracing or inference failures fall
back to the eager executor for that call with one ``FallbackWarning``
naming the operator and UDF line. ``run`` is the call's failure boundary
(``gnnc.failures``): any other exception in a stage of planning (tracing,
building the MP-DFG, shape inference, each pass, lowering) or of running
a plan (binding, the release of a scope's features, code generation, the
cost model, the plan's run) is decided by running the call eagerly: the
user's own error is raised from there, in the user's shapes and lines; if
eager succeeds, the call falls back with one warning naming the stage and
the user's line (a gnnc bug). A failed compile is cached as a fallback; a
failure elsewhere is retried by the next call (a failed plan is dropped).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from .. import backend
from ..bounded_cache import BoundedCache
from ..failures import FallbackWarning, blame, failure, fell_back, stage
from ..function import BuiltinReduce
from ..graph.core import Graph
from ..ir import operators as ops
from ..ir.context import graph_context
from ..ir.mpdfg import DEFERRED_INPUT, MPDFG
from ..ir.rules import InferenceFailure, infer
from ..ir.shapes import propagate_shapes
from ..runtime import deferred as deferral
from ..runtime import eager, edge_writes, reach
from ..runtime.node_reads import end_slot, side_of, sides_differ
from ..runtime.plan import AUTOGRAD_SIGNALS, Plan, bind_inputs, forget_bindings, run_plan
from ..scoped import scoped
from ..stage_timings import timed
from . import edge_order
from .build import build_apply_edges, build_update_all
from .passes import optimize
from .trace import PRODUCED, TraceFailure, schema_guards_hold, trace_udf, udf_location

# The bounds hold every plan of a large heterograph model (one per relation block and layer); past them
# the least recently used is traced or compiled again.
_CACHE: BoundedCache[Plan] = BoundedCache(1024)  # trace key, schema, read signature, block, device, options
_TRACES: BoundedCache = BoundedCache(1024)  # (call kind, UDFs' reach fingerprint) -> traced UDFs or failure
# generic trace key -> {serial: (guards on the graph's features, traced UDFs or fallback)}, oldest first out
_SPECIALIZED: BoundedCache[BoundedCache[tuple]] = BoundedCache(256)
_VARIANTS = 16  # specializations kept per generic trace
_SERIALS = itertools.count()  # names a specialization in plan keys, whatever else is evicted
RUN_OPTIONS = ("backend", "autotune")  # compile options that are not passes


def clear_cache() -> None:
    """Forget every traced UDF and plan (e.g. after registering a rule)."""
    _CACHE.clear()
    _TRACES.clear()
    _SPECIALIZED.clear()
    forget_bindings()


_STORE_OF = {"src": "ndata", "dst": "ndata", "srctype": "ntype_data", "dsttype": "ntype_data", "type": "etype_data"}


def _read_signature(g, traced, rel):
    """dtype and trailing shape of every tensor the UDFs read (their plan depends on them)."""
    sig, pending_values = [], []
    for udf, t in enumerate(traced):  # 0: the message UDF
        if t is None or isinstance(t, BuiltinReduce):
            continue
        for space, key in t.accesses:
            if space == "mailbox":  # messages: their signature follows from the message function's
                continue
            store = _STORE_OF.get(space) or ("edata" if udf == 0 else "ndata")
            pending = deferral.peek(g, key, rel) if store == "edata" else None
            if pending is not None:
                sig.append((udf, space, key, DEFERRED_INPUT, pending.signature()))
                pending_values.append(pending)
                continue
            try:
                value = _read(g, store, key, rel, space)
            except (KeyError, ValueError):
                continue  # the UDF itself will report the missing feature
            sig.append(
                (
                    udf,
                    space,
                    key,
                    value.dtype,
                    tuple(value.shape[1:]) if store in ("ndata", "edata") else tuple(value.shape),
                )
            )
    return tuple(sig) + (deferral.context_sharing(pending_values),)


def _read(g, store, key, rel, space=None):
    """What a UDF access in ``space`` reads: in a relation block, that relation's edge data and the
    node data of the access's end type (``gnnc.runtime.node_reads``); the whole graph's otherwise."""
    if store == "edata" and rel is not None:
        return g.edges[g.canonical_etypes[rel]].data[key]
    if store == "edata" and (internal := deferral.internal_edges(g, key, rel)) is not None:
        return internal  # read without putting it in user order
    if store == "ndata":
        t = None if rel is None else g.ntype_id(g.index.etypes[rel][end_slot(space)])
        return g.side_data(side_of(space), t)[key]
    return getattr(g, "edata_all" if store == "edata" else store)[key]


def trace_call(kind: str, udfs: Sequence, g: Graph, rel: int | None) -> tuple[tuple, list | str]:
    """Traced UDFs of a call (cached by code and binding), or the fallback message. A UDF that cannot be
    traced alone (a branch on a feature's dtype or rank, ``'norm' in edges.data``) is traced again on the
    features of ``g``'s block ``rel``, cached with them too."""
    with timed("reach fingerprint"):
        key = (kind, reach.walk(tuple(udfs)).fingerprint)  # one walk: UDFs bound to one module share it
    traced = _TRACES.get(key)  # (read once: another thread may clear the caches)
    if traced is None:
        traced = _TRACES.put(key, _trace_all(udfs, None, []))
    if not isinstance(traced, TraceFailure):
        return key, traced
    schema = feature_schema(g, rel)
    specialized = _SPECIALIZED.setdefault(key, BoundedCache(_VARIANTS))
    for serial, (kept_guards, kept) in specialized.items():  # in the order they were traced
        if schema_guards_hold(kept_guards, schema):
            return key + (serial,), kept
    guards: list = []
    traced = _trace_all(udfs, schema, guards)
    serial = next(_SERIALS)
    entry = specialized.put(serial, (tuple(guards), _fallback(traced) if isinstance(traced, TraceFailure) else traced))
    return key + (serial,), entry[1]


def _trace_all(udfs, schema, guards):
    traced: list = []
    try:
        with stage("tracing"):
            for i, u in enumerate(udfs):
                view = _after_reduce(schema, traced[1]) if schema is not None and i == 2 else schema
                traced.append(
                    u if (u is None or isinstance(u, BuiltinReduce)) else trace_udf(u, view, guards, node_udf=i > 0)
                )
            return traced
    except TraceFailure as err:
        return err


def _after_reduce(schema: dict, reduce) -> dict:
    """The schema an update function (a call's third UDF) traces under: its ``nodes.data`` also holds what
    the reduce before it returned."""
    if reduce is None:
        return schema
    produced = (reduce.out,) if isinstance(reduce, BuiltinReduce) else tuple(reduce.outputs)
    return {**schema, PRODUCED: {"node_data": produced}}


def feature_schema(g: Graph, rel: int | None) -> dict:
    """What UDFs on block ``rel`` of ``g`` can read, per batch space: {key: (dtype, trailing shape)}; a node
    UDF's ``data`` and ``type`` are ``node_data`` and ``node_type`` (``gnnc.compiler.trace.NODE_SPACES``)."""

    def described(view, whole=True):
        return {k: (v.dtype, tuple(v.shape[1:]) if whole else tuple(v.shape)) for k, v in view.items()}

    if rel is None:
        nodes, node_types = described(dict(g._nstore.whole)), described(g.ntype_data.data, False)
        ends = described(dict(g._nstore.side("dst").whole))
        return {
            "src": nodes,
            "dst": ends,
            "data": described(dict(g._estore.whole)),
            "srctype": node_types,
            "dsttype": node_types,
            "type": described(g.etype_data.data, False),
            "node_data": ends,
            "node_type": node_types,
        }
    src_type, _, dst_type = g.canonical_etypes[rel]
    dst_nodes = described(dict(g.side_data("dst", g.ntype_id(dst_type)).items()))
    return {
        "src": described(dict(g.side_data("src", g.ntype_id(src_type)).items())),
        "dst": dst_nodes,
        "data": described(dict(g.edges[g.canonical_etypes[rel]].data.items())),
        "node_data": dst_nodes,
    }


def _fallback(err) -> str:
    """Warn that the call runs eagerly for ``err`` (a TraceFailure or InferenceFailure: what, and where in the
    UDFs), at the user's line (a built-in message's own line is gnnc's, and a compiler failure the whole
    call's)."""
    return fell_back(f"gnnc could not compile this call and runs it eagerly: {err.what}", err.where)


def _gnnc_failure(err, default_stage: str, kind, udfs, g, rel) -> str:
    """After ``err`` in a stage of the call: run the call eagerly, which raises the user's own error as
    eager raises it (called outside the handler of ``err``, so that it is not chained to it); else warn that
    the stage failed (a gnnc bug, unless the user's setup refused it: ``failures.blame``) and the call runs
    eagerly."""
    _run_eagerly(kind, udfs, g, rel)
    return fell_back(
        f"gnnc could not compile this call and runs it eagerly: {failure(err, default_stage)}{blame(err)}",
        _describe(kind, udfs, g, rel),
    )


def _plan(kind, udfs, g, rel, options) -> Plan:
    trace_key, traced = trace_call(kind, udfs, g, rel)
    if isinstance(traced, str):
        return Plan(None, None, traced, call=_describe(kind, udfs, g, rel))
    if g.is_block and (feature := sides_differ(g, traced)) is not None:
        return Plan(
            None,
            None,
            fell_back(
                f"gnnc runs this call eagerly: its UDFs read node feature {feature!r} on "
                "both sides of a block, whose source and destination values differ"
            ),
            call=_describe(kind, udfs, g, rel),
        )
    key = (
        trace_key,
        (g.index.ntypes, g.index.etypes),
        _read_signature(g, traced, rel),
        rel,
        str(g.device),
        _autocast(g.device),
        tuple(sorted(options.items())),
    )
    plan = _CACHE.get(key)
    if plan is None:
        with torch.no_grad():  # nothing of compiling is differentiated, nor saved (a checkpointed forward counts)
            plan = _CACHE.put(key, _compile(kind, traced, udfs, g, rel, options))
    return plan


def _autocast(device) -> tuple:
    """Whether autocast is on for ``device``'s type, and its dtype: it changes the dtypes a plan computes in."""
    kind = torch.device(device).type
    return (torch.is_autocast_enabled(kind), torch.get_autocast_dtype(kind)) if kind in ("cpu", "cuda") else ()


def _compile(kind, traced, udfs, g, rel, options) -> Plan:
    try:
        with stage("building the MP-DFG"):
            dfg = build_update_all(*traced) if kind == "update_all" else build_apply_edges(*traced)
        dfg.whole_graph = rel is None
        pending = {
            name: value
            for kind, name in (n.meta["input"] for n in dfg.inputs())
            if kind == "edata" and (value := deferral.peek(g, name, rel)) is not None
        }
        deferral.inline_deferred(dfg, pending)
        ctx = graph_context(g, rel)
        with stage("plan binding"):
            inputs = bind_inputs(dfg, g, rel, udfs, traced)

        def annotate(d: MPDFG) -> None:
            propagate_shapes(d.module(), ctx, inputs)
            infer(d.graph, d.root)

        try:
            with stage("shape inference"):
                annotate(dfg)
        except Exception:  # noqa: BLE001 - maybe a tensor of the user's with a row per edge or node; else re-raised
            if not _per_row_externals(dfg, inputs, ctx, annotate):
                raise
            inputs = bind_inputs(dfg, g, rel, udfs, traced)
        edge_writes.check(dfg)
        initial = dfg.copy()
        dfg = optimize(dfg, annotate, **{k: v for k, v in options.items() if k not in RUN_OPTIONS})
        with stage("lowering"):
            return _finish(kind, dfg, initial, traced, udfs, g, rel, options)
    except InferenceFailure as err:
        return Plan(None, None, _fallback(err), call=_describe(kind, udfs, g, rel))
    except Exception as err:  # noqa: BLE001 - a user's shape error (raised by the eager run), or a compiler bug
        failed = err
    return Plan(None, None, _gnnc_failure(failed, "compiling", kind, udfs, g, rel), call=_describe(kind, udfs, g, rel))


def _finish(kind, dfg, initial, traced, udfs, g, rel, options) -> Plan:
    deferred = deferral.deferrable_outputs(dfg) if rel is None else {}
    for key in deferred:
        dfg.log.append(
            f"defer: edata[{key!r}] ({deferred[key][0].target.__name__}) is left for the next compiled "
            "call to fuse; "
            "computed when read otherwise"
        )
    unordered = rel is None and not deferred and edge_order.order_free(dfg)
    if unordered:
        when = (
            "once user code reads the result"
            if kind == "apply_edges"
            else "while more of its edge inputs are held in user order than in internal order"
        )
        dfg.log.append(
            f"edge order: every edge is computed from its own rows alone; {when}, runs in the user's edge "
            "order (no permutation in or out)"
        )
    module = deferral.deferring_module(dfg, deferred) if deferred else dfg.module()
    dtypes = {n.meta["dtype"] for n in dfg.graph.nodes if isinstance(n.meta.get("dtype"), torch.dtype)}
    return Plan(
        dfg,
        module,
        None,
        initial,
        _describe(kind, udfs, g, rel),
        backend.resolve(options.get("backend", "auto"), g.device, dtypes),
        deferred,
        recomputes=any(n.target is ops.recomputable for n in dfg.graph.nodes),
        traced=traced,
        order_free=unordered,
    )


def _describe(kind, udfs, g, rel) -> str:
    names = ", ".join(getattr(u, "name", None) or udf_location(u) for u in udfs if u is not None)
    block = "whole graph" if rel is None else f"relation {g.canonical_etypes[rel]}"
    return f"{kind} on {block}: {names}"


_RECORDING: contextvars.ContextVar = contextvars.ContextVar("gnnc_recording", default=None)


@contextlib.contextmanager
def recording() -> Iterator[list[Plan]]:
    """Collect the plans every compiled call uses inside the block."""
    plans: list[Plan] = []
    with scoped(_RECORDING, plans):
        yield plans


def _per_row_externals(dfg: MPDFG, inputs: list, ctx, annotate, most: int = 3) -> bool:
    """Mark tensors the UDFs reach from outside with a row per edge or per node of the block as such rows:
    one per edge (user edge order, bound in internal edge order) reached from a message UDF, as DGL's
    RelGraphConv passes its edge types; one per destination node reached from the node UDF (all nodes
    of a whole-graph call, the destination type's of a relation), as APPNP's teleport term ``0.1 * h0``.
    The fewest of them (up to ``most``) with which ``annotate(dfg)`` succeeds (a table whose rows happen to
    number the edges stays a table). Whether some did."""

    def rows(n, value):
        if n.meta["input"][0] != "external" or not isinstance(value, torch.Tensor) or value.dim() == 0:
            return None
        if n.meta["stage"] == "message" and value.shape[0] == ctx.num_edges:
            return {"per_edge": True, "input_res": "E"}
        if n.meta["stage"] == "update" and value.shape[0] == ctx.num_dst:
            return {"per_node": True, "input_res": "V"}
        return None

    candidates = [(n, marks) for n, value in zip(dfg.inputs(), inputs) if (marks := rows(n, value))]
    for size in range(1, min(len(candidates), most) + 1):
        for chosen in itertools.combinations(candidates, size):
            for n, marks in chosen:
                n.meta.update(marks)
            try:
                annotate(dfg)
                return True
            except Exception:  # noqa: BLE001 - not these: try the next choice
                for n, marks in chosen:
                    for key in marks:
                        del n.meta[key]
    return False


def run(kind: str, udfs: Sequence, g: Graph, rel: int | None, options: dict[str, Any]) -> dict | None:
    """Results of the call by its compiled plan, or None when it must run eagerly (the call's failure
    boundary: see the module)."""
    failed = None
    try:
        plan = _plan(kind, udfs, g, rel, options)
    except Exception as err:  # noqa: BLE001 - the eager run decides whose error it is
        failed = err
    if failed is not None:
        deferral.take_trust(g)
        deferral.settle_trusted(g)
        _gnnc_failure(failed, "planning", kind, udfs, g, rel)
        return None
    record = _RECORDING.get()
    if record is not None:
        record.append(dataclasses.replace(plan, context=graph_context(g, rel)))
    trusted = deferral.take_trust(g) and kind == "apply_edges" and rel is None
    if plan.module is None:
        deferral.settle_trusted(g)  # the caller runs the UDFs eagerly next
        return None
    try:
        results = run_plan(plan, g, rel, udfs, options, trusted)
    except AUTOGRAD_SIGNALS:
        raise
    except Exception as err:  # noqa: BLE001 - the eager run below decides whose error it is
        failed = err
    else:
        return results
    deferral.settle_trusted(g)
    _gnnc_failure(failed, "plan run", kind, udfs, g, rel)
    for key in [k for k, v in _CACHE.items() if v is plan]:  # rebuilt next call: the failure may pass
        _CACHE.pop(key)
    return None


def _run_eagerly(kind, udfs, g, rel) -> None:
    """Run the call's UDFs eagerly on a scope of ``g`` (nothing kept): a user's own error is raised here."""
    with g.local_scope():  # the message UDF's edge writes
        msgs = eager.messages(g, udfs[0], rel)
    if kind != "update_all":
        return
    reduced = eager.reduce(g, udfs[1], msgs, rel)
    if len(udfs) > 2 and udfs[2] is not None:
        ntype = None if rel is None else g.ntype_id(g.index.etypes[rel][2])
        with g.local_scope():
            eager.write_nodes(g, ntype, reduced)
            eager.apply_nodes(g, udfs[2], ntype)


def plan_for(kind: str, udfs: Sequence, g: Graph, rel: int | None = None, **options: Any) -> Plan:
    """The (cached) plan of a call, for explain and tests."""
    return _plan(kind, udfs, g, rel, options)


__all__ = ["FallbackWarning", "Plan", "run", "plan_for", "clear_cache", "recording"]

"""``apply_edges`` / ``apply_nodes`` / ``update_all`` / ``multi_update_all``.

Checks the arguments, runs the block through the executor and writes the
results back: edge results in the user's edge order, node results over all
nodes (whole graph) or over the destination node type (one relation).
Arguments may also be passed under DGL's keyword names (``message_func``,
``reduce_func``, ``apply_node_func``, ``func``, ``etype_dict``).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .compiler import driver
from .failures import fell_back
from .function import BuiltinMessage, BuiltinReduce
from .graph import validate
from .graph.block import Block
from .graph.core import ALL, Graph
from .graph.frame import Deferred
from .graph.inference_safe import lasting
from .graph.message_passing_hook import register
from .runtime import eager
from .scoped import scoped

_COMPILING: contextvars.ContextVar[dict | None] = contextvars.ContextVar("gnnc_compiling", default=None)
UDF = Callable[..., dict]  # a message, reduce or node function: a batch -> {name: tensor}; or a built-in
EdgeType = str | tuple[str, str, str]
NodeIds = torch.Tensor | Sequence[int] | int | str  # str: ALL
EdgeIds = NodeIds | tuple[NodeIds, NodeIds]  # ids, or (u, v) naming one edge per pair


def graph_call(fn: Callable[..., None]) -> Callable[..., None]:
    """A message-passing entry point: ``lasting`` (what it caches with the graph is no inference tensor), and
    opaque to ``torch.compile``: dynamo breaks its graph there and calls it as is (gnnc compiles the call
    itself, and dynamo cannot trace its numba kernels). The ``torch.compiler.disable`` wrappers are made once
    something has imported dynamo: making one imports it (and triton), 1.5 s that ``import gnnc`` should not
    pay. They are used from then on, so that a call dynamo runs as is (after a graph break, or past its
    recompile limit) does not have dynamo compile gnnc's frames one by one."""
    run = _ENTRY_POINTS[fn] = lasting(fn)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if "torch._dynamo" in sys.modules:
            return _opaque(fn)(*args, **kwargs)
        return run(*args, **kwargs)

    return call


_ENTRY_POINTS: dict = {}  # entry point -> its lasting run
_OPAQUE: dict = {}  # entry point -> torch.compiler.disable of its run, for all of them at once


def _opaque(fn):
    if not _OPAQUE:
        _OPAQUE.update({f: torch.compiler.disable(run) for f, run in _ENTRY_POINTS.items()})
    return _OPAQUE[fn]


def compiling(options: dict[str, Any]) -> contextlib.AbstractContextManager[None]:
    """Context manager: inside it every message-passing call goes through the compiler."""
    return scoped(_COMPILING, dict(options))


def _compile_options(flag):
    """Options when this call is compiled (explicit flag or an active gnnc.compile), else None."""
    if flag is False:
        return None
    active = _COMPILING.get()
    if flag is True:
        return active or {}
    return active


def _messages_reduced(g, message, reduce, update_fn, rel, flag):
    """Reduce results of one block, or with ``update_fn`` its update's results only (as DGL writes): compiled
    when asked and possible, else eager. A reduce UDF is never called on a block without edges (as DGL, so
    nothing is written but the update's results), and such a call has nothing to compile."""
    options = _compile_options(flag)
    lo, hi = eager.edge_block(g, rel)
    builtin = isinstance(reduce, BuiltinReduce)
    if options is not None and not builtin and g.initializers["node"]:
        _warn_eager("a reduce UDF on a graph with a node initializer (set_n_initializer)")
    elif options is not None and (hi > lo or builtin):
        out = driver.run("update_all", (message, reduce, update_fn), g, rel, options)
        if out is not None:
            return out
    reduced = eager.reduce(g, reduce, eager.messages(g, message, rel), rel)
    if update_fn is None:
        return reduced
    t = None if rel is None else g.ntype_id(g.index.etypes[rel][2])
    with g.local_scope():
        eager.receive(g, t, reduced)
        return _updated(g, update_fn, t)


def _updated(g, update_fn, t) -> dict:
    """``update_fn``'s results on the nodes of type ``t`` (every node when None), reading what a reduce reads;
    on a block it runs on the destination nodes only, as DGL's (other rows zeros, never stored)."""
    if not g.is_block:
        return eager.apply_nodes(g, update_fn, t, side="dst")
    nodes = g.receivers(t)
    rows = g.index.num_nodes if t is None else g.index.ntype_counts[t]
    return {
        k: v.new_zeros((rows,) + tuple(v.shape[1:])).index_copy(0, nodes, v)
        for k, v in eager.apply_nodes(g, update_fn, t, nodes, side="dst").items()
    }


def _check_callable(fn, role: str):
    if not callable(fn):
        raise TypeError(f"{role} function must be callable, got {type(fn).__name__}")
    if (role == "message" and isinstance(fn, BuiltinReduce)) or (role == "reduce" and isinstance(fn, BuiltinMessage)):
        raise TypeError(
            f"{fn.name} is a {'reduce' if role == 'message' else 'message'} function but was "
            f"passed as the {role} function: update_all(message, reduce)"
        )


def _arguments(call: str, dgl_kwargs: dict, aliases: dict, required, **given) -> tuple:
    """``given`` (gnnc name -> value, None when not passed) completed from DGL keywords, in order.

    ``aliases`` maps the DGL names ``call`` accepts to gnnc's. TypeError names
    an unknown keyword, an argument passed under both names, or a missing
    ``required`` one.
    """
    for name, value in dgl_kwargs.items():
        if name not in aliases:
            raise TypeError(f"{call}() got an unexpected keyword argument {name!r}")
        ours = aliases[name]
        if given[ours] is not None:
            raise TypeError(f"{call}() got {ours!r} twice: as {ours!r} (or positionally) and as DGL's {name!r}")
        given[ours] = value
    for name in required:
        if given[name] is None:
            dgl = [d for d, o in aliases.items() if o == name]
            raise TypeError(f"{call}() missing required argument {name!r}" + (f" (DGL: {dgl[0]!r})" if dgl else ""))
    return tuple(given.values())


@graph_call
def apply_edges(
    g: Graph,
    message: UDF | None = None,
    edges: EdgeIds | None = None,
    etype: EdgeType | None = None,
    compile: bool | None = None,  # noqa: A002 - the public keyword: update_all(..., compile=True)
    **dgl_kwargs: Any,
) -> None:
    (message,) = _arguments("apply_edges", dgl_kwargs, {"func": "message"}, ["message"], message=message)
    _check_callable(message, "message")
    if etype is None and edges is None and _per_relation(g, message):
        for key in g.canonical_etypes:
            apply_edges(g, message, None, key, compile)
        return
    rel = _relation(g, etype)
    lo, hi = eager.edge_block(g, rel)
    subset = _edge_subset(g, edges, rel, hi - lo, "apply_edges(edges=...)")
    store = g.edata_all if rel is None else g.edges[g.canonical_etypes[rel]].data
    options = _compile_options(compile)
    if subset is None:
        store.update(_edge_results(g, message, rel, options))
    elif options is not None and (rel is not None or len(g.canonical_etypes) == 1):
        part = _compute_graph(g, 0 if rel is None else rel, subset)
        out = _edge_results(part, message, 0, options)
        _write_rows(
            g,
            "edge",
            store,
            subset,
            hi - lo,
            {k: v.materialize() if isinstance(v, Deferred) else v for k, v in out.items()},
        )
    else:
        if options is not None:
            _warn_eager("apply_edges on chosen edges of several relations")
        _write_rows(g, "edge", store, subset, hi - lo, eager.messages(g, message, rel, subset))


def _edge_results(g, message, rel, options) -> dict:
    """``message``'s results on every edge of the block, in user edge order: compiled when ``options`` (a
    deferred result is put in user order when read), else eager."""
    if options is not None:
        out = driver.run("apply_edges", (message,), g, rel, options)
        if out is not None:
            return out
    return eager.messages(g, message, rel, user_order=True)


def apply_nodes(g: Graph, func: UDF, v: NodeIds | None = None, ntype: str | None = None) -> None:
    _check_callable(func, "node")
    t = None if ntype is None else g.ntype_id(ntype)
    if v is None:
        eager.write_nodes(g, t, eager.apply_nodes(g, func, t))
        return
    lo, hi = (0, g.index.num_nodes) if t is None else g.index.ntype_range(t)
    subset = _subset(v, hi - lo, "apply_nodes(v=...)", "node", g.device)
    store = g.ndata_all if t is None else g.nodes[g.ntypes[t]].data
    _write_rows(g, "node", store, subset, hi - lo, eager.apply_nodes(g, func, t, subset))


def _edge_subset(g, edges, rel, count: int, what: str):
    """DGL's ``edges`` argument (edge ids, or a (u, v) pair of node id sequences naming one edge per pair) as
    int64 ids of relation ``rel`` (None: the whole graph), or None for all."""
    if isinstance(edges, tuple) and len(edges) == 2:
        u, v = edges
        edges = g.edge_ids(u, v, etype=g.canonical_etypes[0 if rel is None else rel])
    return _subset(edges, count, what, "edge", g.device)


def _subset(ids, count: int, what: str, noun: str, device):
    """DGL's ``edges`` / ``v`` argument as int64 ids in [0, count), or None for all (None or DGL's ``ALL``)."""
    if ids is None or (isinstance(ids, str) and ids == ALL):
        return None
    t = ids.reshape(-1) if isinstance(ids, torch.Tensor) else torch.as_tensor(ids).reshape(-1)
    t = validate.as_ids(t, what, noun).to(device)
    validate.check_range(t, count, what, noun)
    return t


def _write_rows(g, kind: str, store, subset, count: int, out: dict) -> None:
    """Set rows ``subset`` (None: all ``count``) of each ``store[k]`` to ``out[k]``; a new feature's other rows
    come from its initializer (``g.set_n_initializer``; zeros by default)."""
    for k, value in out.items():
        if k in store:
            old = store[k]
            if old.shape[1:] != value.shape[1:] or old.dtype != value.dtype:
                raise ValueError(
                    f"feature {k!r} holds {tuple(old.shape[1:])} {old.dtype} per row, but the function "
                    f"returned {tuple(value.shape[1:])} {value.dtype} rows for some of them"
                )
        elif subset is not None:
            old = g.initial_rows(kind, k, count, value)
        store[k] = value if subset is None else old.index_put((subset,), value)


def _warn_eager(what: str) -> None:
    fell_back(f"gnnc runs {what} eagerly: compiled calls do not cover it yet")


_FUNC_ALIASES = {"message_func": "message", "reduce_func": "reduce", "apply_node_func": "update"}  # DGL's names


@graph_call
def update_all(
    g: Graph,
    message: UDF | None = None,
    reduce: UDF | None = None,
    update: UDF | None = None,
    etype: EdgeType | None = None,
    compile: bool | None = None,  # noqa: A002 - the public keyword: update_all(..., compile=True)
    **dgl_kwargs: Any,
) -> None:
    message, reduce, update = _arguments(
        "update_all", dgl_kwargs, _FUNC_ALIASES, ["message", "reduce"], message=message, reduce=reduce, update=update
    )
    _check_callable(message, "message")
    _check_callable(reduce, "reduce")
    if update is not None:
        _check_callable(update, "update")
    if etype is None and isinstance(reduce, BuiltinReduce) and _per_relation(g, message, reduce):
        if reduce.op == "mean":
            raise NotImplementedError(
                "update_all over several relations cannot reduce 'mean' both within and "
                "across relations (as DGL); use multi_update_all"
            )
        multi_update_all(g, {key: (message, reduce) for key in g.canonical_etypes}, reduce.op, update, compile)
        return
    rel = _relation(g, etype)
    t = None if rel is None else g.ntype_id(g.index.etypes[rel][2])
    eager.receive(g, t, _messages_reduced(g, message, reduce, update, rel, compile))


def _relation(g, etype) -> int | None:
    """The block of a whole-graph call: relation ``etype``, else ``g.default_relation()`` (a bipartite
    relation's node types need not share features), else the whole graph (None)."""
    return g.default_relation() if etype is None else g.etype_id(etype)


def _per_relation(g, *funcs) -> bool:
    """Whether a call without etype on a graph of several relations runs as DGL's built-ins do there: relation
    by relation, across relations reduced by the same reducer (gnnc runs UDFs over the whole graph, where
    DGL refuses them)."""
    return len(g.canonical_etypes) > 1 and all(isinstance(f, (BuiltinMessage, BuiltinReduce)) for f in funcs)


@graph_call
def send_and_recv(
    g: Graph,
    edges: EdgeIds,
    message: UDF | None = None,
    reduce: UDF | None = None,
    update: UDF | None = None,
    etype: EdgeType | None = None,
    **dgl_kwargs: Any,
) -> None:
    funcs, rel, _ = _partial_call("send_and_recv", g, etype, dgl_kwargs, message, reduce, update)
    lo, hi = g.index.rel_range(rel)
    eids = _edge_subset(g, edges, rel, hi - lo, "send_and_recv(edges=...)")
    eids = torch.arange(hi - lo, device=g.device) if eids is None else eids
    _receive(g, rel, eids, None, *funcs)


@graph_call
def pull(
    g: Graph,
    v: NodeIds,
    message: UDF | None = None,
    reduce: UDF | None = None,
    update: UDF | None = None,
    etype: EdgeType | None = None,
    **dgl_kwargs: Any,
) -> None:
    funcs, rel, key = _partial_call("pull", g, etype, dgl_kwargs, message, reduce, update)
    nodes = _subset(v, g.num_dst_nodes(key[2]), "pull(v=...)", "node", g.device)
    _receive(g, rel, g.in_edges(nodes, form="eid", etype=key), nodes.unique(), *funcs)


@graph_call
def push(
    g: Graph,
    u: NodeIds,
    message: UDF | None = None,
    reduce: UDF | None = None,
    update: UDF | None = None,
    etype: EdgeType | None = None,
    **dgl_kwargs: Any,
) -> None:
    funcs, rel, key = _partial_call("push", g, etype, dgl_kwargs, message, reduce, update)
    nodes = _subset(u, g.num_src_nodes(key[0]), "push(u=...)", "node", g.device)
    _receive(g, rel, g.out_edges(nodes, form="eid", etype=key), None, *funcs)


def _partial_call(call: str, g, etype, dgl_kwargs, message, reduce, update):
    """((message, reduce, update), relation index, its key) of a send_and_recv / pull / push call."""
    funcs = _arguments(
        call, dgl_kwargs, _FUNC_ALIASES, ["message", "reduce"], message=message, reduce=reduce, update=update
    )
    rel = g.relation_of_call(etype, call)
    return funcs, rel, g.canonical_etypes[rel]


def _receive(g, rel, eids, receivers, message, reduce, update) -> None:
    """Message on edges ``eids`` of relation ``rel``, reduce at ``receivers`` (their destinations when None;
    a receiver without one of those edges gets its initializer's rows, zeros by default), then ``update`` on
    the receivers only. Other nodes keep their features (zeros for a new one), as DGL. The edges form a graph
    of their own (DGL's compute graph), so under ``gnnc.compile`` the call runs that graph's compiled plan."""
    _check_callable(message, "message")
    _check_callable(reduce, "reduce")
    if update is not None:
        _check_callable(update, "update")
    key = g.canonical_etypes[rel]
    part = _compute_graph(g, rel, eids)
    receivers = part.index.receivers(0) if receivers is None else receivers
    reduced = _messages_reduced(part, message, reduce, None, 0, None)
    t, count = g.ntype_id(key[2]), g.num_dst_nodes(key[2])
    store = g.dstnodes[key[2]].data
    if receivers.numel() == count:  # every node receives (the receivers are distinct): whole rows, no copies
        rows, receivers = reduced, None
    else:
        rows = {k: value.index_select(0, receivers) for k, value in reduced.items()}
    if update is not None:  # as DGL: the update sees the reduced features; only its results are kept
        with g.local_scope():
            _write_rows(g, "node", store, receivers, count, rows)
            rows = eager.apply_nodes(g, update, t, receivers, side="dst")
    _write_rows(g, "node", store, receivers, count, rows)


def _compute_graph(g, rel: int, eids):
    """DGL's compute graph of a partial call: the edges ``eids`` of relation ``rel`` (in that order) over all
    of ``g``'s nodes, with ``g``'s node features, those edges' features and ``g``'s initializers."""
    key, eids = g.canonical_etypes[rel], eids.long()

    def build():
        src, dst = (t.long() for t in g.find_edges(key))
        return Graph._build(g.index.ntypes, list(g.index.ntype_counts), [(key, src[eids], dst[eids])], g.device).index

    part = Graph(g.index.subset(rel, eids, build))
    if g.is_block:  # with both sides of its node features
        part = Block(
            part.index,
            g.src_ids,
            g.num_dst_per_type,
            g.parent_eids[g.index.rel_offsets[rel] + eids],
            num_src_per_type=g.num_src_per_type,
            side_types=g.side_types,
        )
    part._nstore = g._nstore.copy()
    part.initializers = g.initializers
    part.parent_eid = eids if g.parent_eid is None else g.parent_eid.index_select(0, eids)
    for name, value in g.edges[key].data.items():
        part.edges[key].data[name] = value[eids]
    return part


@graph_call
def multi_update_all(
    g: Graph,
    funcs: dict[EdgeType, tuple] | None = None,
    cross_reducer: str = "sum",
    update: UDF | None = None,
    compile: bool | None = None,  # noqa: A002 - the public keyword: update_all(..., compile=True)
    **dgl_kwargs: Any,
) -> None:
    funcs, update = _arguments(
        "multi_update_all",
        dgl_kwargs,
        {"etype_dict": "funcs", "apply_node_func": "update"},
        ["funcs"],
        funcs=funcs,
        update=update,
    )
    if update is not None:
        _check_callable(update, "update")
    if cross_reducer not in eager.CROSS_REDUCERS:
        raise ValueError(f"unknown cross reducer {cross_reducer!r}; use one of {eager.CROSS_REDUCERS}")
    if not isinstance(funcs, dict) or not funcs:
        raise TypeError("multi_update_all expects a non-empty dict {relation: (message, reduce)}")
    per_type: dict[int, list[tuple[tuple[str, str, str], dict]]] = {}
    for etype, pair in funcs.items():
        if not isinstance(pair, (tuple, list)) or len(pair) not in (2, 3):
            raise TypeError(f"multi_update_all[{etype!r}] must be (message, reduce) or (message, reduce, update)")
        message, reduce, relation_update = (*pair, None)[:3]
        _check_callable(message, "message")
        _check_callable(reduce, "reduce")
        if relation_update is not None:
            _check_callable(relation_update, "update")
        rel = g.etype_id(etype)
        out = _messages_reduced(g, message, reduce, relation_update, rel, compile)
        per_type.setdefault(g.ntype_id(g.index.etypes[rel][2]), []).append((g.canonical_etypes[rel], out))
    for t, results in per_type.items():
        results.sort(key=lambda item: g.etype_id(item[0]))  # DGL merges (and stacks) in relation order
        merged = {}
        for k in dict.fromkeys(k for _, out in results for k in out):  # as DGL: the relations that produced k
            shapes = {rel: tuple(out[k].shape) for rel, out in results if k in out}
            if len(set(shapes.values())) > 1:
                raise ValueError(
                    f"multi_update_all {cross_reducer!r}: relations into node type {g.ntypes[t]!r} "
                    f"produced {k!r} of different shapes: {shapes}"
                )
            merged[k] = eager.cross_reduce([out[k] for _, out in results if k in out], cross_reducer)
        eager.receive(g, t, merged)
        if update is not None:
            eager.receive(g, t, _updated(g, update, t))


register(sys.modules[__name__])  # the graph's methods delegate here (gnnc.graph.message_passing_hook)

"""``apply_edges`` / ``apply_nodes`` / ``update_all`` / ``multi_update_all``.

Checks the arguments, runs the block through the executor and writes the
results back: edge results in the user's edge order, node results over all
nodes (whole graph) or over the destination node type (one relation).
Arguments may also be passed under DGL's keyword names (``message_func``,
``reduce_func``, ``apply_node_func``, ``func``, ``etype_dict``).
"""
from __future__ import annotations

import contextvars
import functools
import sys
import warnings

import torch

from ..function import BuiltinMessage, BuiltinReduce
from ..graph import validate
from ..graph.core import Graph
from ..graph.frame import Deferred
from ..graph.lasting import lasting
from ..runtime import deferred, eager
from ..scoped import scoped

_COMPILING = contextvars.ContextVar("gnnc_compiling", default=None)


def graph_call(fn):
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


def compiling(options: dict):
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
    """Reduce (and update) results of one block: compiled when asked and possible, else eager."""
    options = _compile_options(flag)
    if options is not None:
        from ..runtime import compiled

        out = compiled.run("update_all", (message, reduce, update_fn), g, rel, options)
        if out is not None:
            return out, True
    return eager.reduce(g, reduce, eager.messages(g, message, rel), rel), False


def _check_callable(fn, role: str):
    if not callable(fn):
        raise TypeError(f"{role} function must be callable, got {type(fn).__name__}")
    other = {"message": BuiltinReduce, "reduce": BuiltinMessage}.get(role)
    if other is not None and isinstance(fn, other):
        raise TypeError(f"{fn.name} is a {'reduce' if other is BuiltinReduce else 'message'} function but was "
                        f"passed as the {role} function: update_all(message, reduce)")


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
def apply_edges(g, message=None, edges=None, etype=None, compile=None, **dgl_kwargs) -> None:
    (message,) = _arguments("apply_edges", dgl_kwargs, {"func": "message"}, ["message"], message=message)
    _check_callable(message, "message")
    rel = None if etype is None else g.etype_id(etype)
    lo, hi = eager.edge_block(g, rel)
    subset = _subset(edges, hi - lo, "apply_edges(edges=...)", "edge", g.device)
    store = g.edata if rel is None else g.edges[g.canonical_etypes[rel]].data
    options = _compile_options(compile)
    if subset is not None:
        if options is not None:
            _warn_eager("apply_edges on chosen edges")
        _write_rows(store, subset, hi - lo, eager.messages(g, message, rel, subset))
        return
    out = None
    if options is not None:
        from ..runtime import compiled

        out = compiled.run("apply_edges", (message,), g, rel, options)
    if out is None:
        store.update(eager.messages(g, message, rel, user_order=True))
        return
    for k, v in out.items():
        if not isinstance(v, Deferred):  # a deferred result is put in user order when read
            v = deferred.in_user_order(g, v, rel, lo, hi)
        store[k] = v


def apply_nodes(g, func, v=None, ntype=None) -> None:
    _check_callable(func, "node")
    t = None if ntype is None else g.ntype_id(ntype)
    if v is None:
        eager.write_nodes(g, t, eager.apply_nodes(g, func, t))
        return
    lo, hi = (0, g.index.num_nodes) if t is None else g.index.ntype_range(t)
    subset = _subset(v, hi - lo, "apply_nodes(v=...)", "node", g.device)
    store = g.ndata if t is None else g.nodes[g.ntypes[t]].data
    _write_rows(store, subset, hi - lo, eager.apply_nodes(g, func, t, subset))


def _subset(ids, count: int, what: str, noun: str, device):
    """DGL's ``edges`` / ``v`` argument as int64 ids in [0, count), or None for all (None or DGL's ``ALL``)."""
    if ids is None or (isinstance(ids, str) and ids == "__ALL__"):
        return None
    if isinstance(ids, tuple) and len(ids) == 2 and all(isinstance(x, torch.Tensor) for x in ids):
        raise TypeError(f"{what}: (u, v) node pairs are not supported; pass edge ids")
    t = ids.reshape(-1) if isinstance(ids, torch.Tensor) else torch.as_tensor(ids).reshape(-1)
    t = validate.as_ids(t, what, noun).to(device)
    validate.check_range(t, count, what, noun)
    return t


def _write_rows(store, subset, count: int, out: dict) -> None:
    """Set rows ``subset`` of each ``store[k]`` to ``out[k]``; a new feature starts as zeros (DGL's default)."""
    for k, value in out.items():
        if k in store:
            old = store[k]
            if old.shape[1:] != value.shape[1:] or old.dtype != value.dtype:
                raise ValueError(f"feature {k!r} holds {tuple(old.shape[1:])} {old.dtype} per row, but the function "
                                 f"returned {tuple(value.shape[1:])} {value.dtype} rows for some of them")
        else:
            old = value.new_zeros((count,) + tuple(value.shape[1:]))
        store[k] = old.index_put((subset,), value)


def _warn_eager(what: str) -> None:
    from ..runtime.compiled import FallbackWarning

    warnings.warn(f"gnnc runs {what} eagerly: compiled calls cover whole graphs or relations", FallbackWarning,
                  stacklevel=4)


_FUNC_ALIASES = {"message_func": "message", "reduce_func": "reduce", "apply_node_func": "update"}  # DGL's names


@graph_call
def update_all(g, message=None, reduce=None, update=None, etype=None, compile=None, **dgl_kwargs) -> None:
    message, reduce, update = _arguments("update_all", dgl_kwargs, _FUNC_ALIASES, ["message", "reduce"],
                                         message=message, reduce=reduce, update=update)
    _check_callable(message, "message")
    _check_callable(reduce, "reduce")
    if update is not None:
        _check_callable(update, "update")
    rel = None if etype is None else g.etype_id(etype)
    t = None if rel is None else g.ntype_id(g.index.etypes[rel][2])
    out, updated = _messages_reduced(g, message, reduce, update, rel, compile)
    eager.write_nodes(g, t, out)
    if update is not None and not updated:
        eager.write_nodes(g, t, eager.apply_nodes(g, update, t))


@graph_call
def send_and_recv(g, edges, message=None, reduce=None, update=None, etype=None, **dgl_kwargs) -> None:
    funcs, rel, _ = _partial_call("send_and_recv", g, etype, dgl_kwargs, message, reduce, update)
    lo, hi = g.index.rel_range(rel)
    eids = _subset(edges, hi - lo, "send_and_recv(edges=...)", "edge", g.device)
    eids = torch.arange(hi - lo, device=g.device) if eids is None else eids
    _receive(g, rel, eids, None, *funcs, "send_and_recv")


@graph_call
def pull(g, v, message=None, reduce=None, update=None, etype=None, **dgl_kwargs) -> None:
    funcs, rel, key = _partial_call("pull", g, etype, dgl_kwargs, message, reduce, update)
    nodes = _subset(v, g.num_nodes(key[2]), "pull(v=...)", "node", g.device)
    _receive(g, rel, g.in_edges(nodes, form="eid", etype=key), nodes.unique(), *funcs, "pull")


@graph_call
def push(g, u, message=None, reduce=None, update=None, etype=None, **dgl_kwargs) -> None:
    funcs, rel, key = _partial_call("push", g, etype, dgl_kwargs, message, reduce, update)
    nodes = _subset(u, g.num_nodes(key[0]), "push(u=...)", "node", g.device)
    _receive(g, rel, g.out_edges(nodes, form="eid", etype=key), None, *funcs, "push")


def _partial_call(call: str, g, etype, dgl_kwargs, message, reduce, update):
    """((message, reduce, update), relation index, its key) of a send_and_recv / pull / push call."""
    funcs = _arguments(call, dgl_kwargs, _FUNC_ALIASES, ["message", "reduce"], message=message, reduce=reduce,
                       update=update)
    rel = g.relation_of_call(etype, call)
    return funcs, rel, g.canonical_etypes[rel]


def _receive(g, rel, eids, receivers, message, reduce, update, call: str) -> None:
    """Message on edges ``eids`` of relation ``rel``, reduce at ``receivers`` (their destinations when None;
    a receiver without one of those edges gets zeros), then ``update`` on the receivers only. Other nodes
    keep their features (zeros for a new one), as DGL. Eager: a compiled call covers whole graphs."""
    _check_callable(message, "message")
    _check_callable(reduce, "reduce")
    if update is not None:
        _check_callable(update, "update")
    if _compile_options(None) is not None:
        _warn_eager(call)
    key = g.canonical_etypes[rel]
    src, dst = g.find_edges(key)
    part = Graph._build(g.ntypes, [g.num_nodes(t) for t in g.ntypes], [(key, src[eids], dst[eids])], g.device)
    part._nstore = g._nstore.copy()
    for name, value in g.edges[key].data.items():
        part.edges[key].data[name] = value[eids]
    receivers = dst[eids].unique() if receivers is None else receivers
    reduced = eager.reduce(part, reduce, eager.messages(part, message, 0), 0)
    t, count = g.ntype_id(key[2]), g.num_nodes(key[2])
    store = g.nodes[key[2]].data
    _write_rows(store, receivers, count, {k: value.index_select(0, receivers) for k, value in reduced.items()})
    if update is not None:
        _write_rows(store, receivers, count, eager.apply_nodes(g, update, t, receivers))


@graph_call
def multi_update_all(g, funcs=None, cross_reducer: str = "sum", update=None, compile=None, **dgl_kwargs) -> None:
    funcs, update = _arguments("multi_update_all", dgl_kwargs, {"etype_dict": "funcs", "apply_node_func": "update"},
                               ["funcs"], funcs=funcs, update=update)
    if update is not None:
        _check_callable(update, "update")
    if cross_reducer not in eager.CROSS_REDUCERS:
        raise ValueError(f"unknown cross reducer {cross_reducer!r}; use one of {eager.CROSS_REDUCERS}")
    if not isinstance(funcs, dict) or not funcs:
        raise TypeError("multi_update_all expects a non-empty dict {relation: (message, reduce)}")
    per_type: dict[int, list[dict]] = {}
    for etype, pair in funcs.items():
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"multi_update_all[{etype!r}] must be a (message, reduce) pair")
        message, reduce = pair
        _check_callable(message, "message")
        _check_callable(reduce, "reduce")
        rel = g.etype_id(etype)
        out, _ = _messages_reduced(g, message, reduce, None, rel, compile)
        per_type.setdefault(g.ntype_id(g.index.etypes[rel][2]), []).append((g.canonical_etypes[rel], out))
    for t, results in per_type.items():
        outs = [out for _, out in results]
        keys = set().union(*outs)
        for k in keys:
            if any(k not in o for o in outs):
                raise ValueError(f"multi_update_all: relations into node type {g.ntypes[t]!r} produced "
                                 f"{k!r} for some relations but not others")
            shapes = {rel: tuple(out[k].shape) for rel, out in results}
            if len(set(shapes.values())) > 1:
                raise ValueError(f"multi_update_all {cross_reducer!r}: relations into node type {g.ntypes[t]!r} "
                                 f"produced {k!r} of different shapes: {shapes}")
        eager.write_nodes(g, t, {k: eager.cross_reduce([o[k] for o in outs], cross_reducer) for k in keys})
        if update is not None:
            eager.write_nodes(g, t, eager.apply_nodes(g, update, t))

"""Whole-forward capture: a compiled model's ``forward`` as one torch.fx graph, so that passes see the user's
code between message-passing calls (``gnnc.forward.passes.FORWARD_PASSES``).

The model is traced with every tensor and graph argument a proxy. What the forward does with a graph
(``g.ndata[k] = v``, ``g.apply_edges(f)``, ``g.update_all(f, r)``, ``with g.local_scope():``, reads and
``pop``) is recorded in order and replayed on the real graph, where each message-passing call compiles as
it does without capture. Parameters, buffers, tensor attributes and submodules are read from the live
model at every replay; UDFs are kept as the objects passed (bound methods of the model's modules, or
functions that reach no tensor of their own).

Capture is all or nothing, and refused (the forward then runs as written) where replaying could differ from
running the code: Python branching on a tensor or graph value, a tensor made while tracing, a closure or
default holding a tensor or a traced value, module hooks, a graph attribute outside the recorded ones,
grad-mode, autocast, checkpoint or random-state code, and a forward that changes the model's state. A
capture is keyed by the reach fingerprint of the model and of every forward's code (``gnnc.runtime.reach``),
the grad mode, and the kinds, dtypes and devices of the arguments (constants by value); it is used only
when a forward pass changed it.

``Forwards`` is the forward's failure boundary (``gnnc.failures``): an exception in capture, in a forward
pass, or while a capture is replayed (the passes' run-time parts included) runs the forward as written, which
raises the user's own error as it would have; where that succeeds, one ``FallbackWarning`` names the stage and
the user's line, and the forward runs as written from then on. A failed replay first puts the graphs' features
back as they were before it, so that the forward as written reads what it would have read.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import operator
import types

import numpy as np
import torch
import torch.fx as fx
from torch import nn

from ..compiler.exclusive import TRACING, Tracer
from ..compiler.out_of_place import AUGMENTED
from ..compiler.trace import LiftReached, factories_recorded, first_line, torch_scalar
from ..failures import blame, failure, fell_back, stage
from ..function import BuiltinMessage, BuiltinReduce
from ..graph.core import Graph
from ..runtime import reach
from ..runtime.plan import AUTOGRAD_SIGNALS
from ..scoped import scoped
from ..stage_timings import timed

FRAMES = frozenset({"ndata", "edata", "srcdata", "dstdata", "ndata_all", "edata_all"})
EDGE_FRAMES = frozenset({"edata", "edata_all"})
GRAPH_API = FRAMES | frozenset(
    {
        "local_scope",
        "apply_edges",
        "apply_nodes",
        "update_all",
        "multi_update_all",
        "in_degrees",
        "out_degrees",
        "num_nodes",
        "num_edges",
        "number_of_nodes",
        "number_of_edges",
    }
)
MESSAGE_PASSING = frozenset({"apply_edges", "apply_nodes", "update_all", "multi_update_all"})
# Names whose presence in traced code means replay could differ: state the trace does not record.
_STATEFUL_NAMES = frozenset(
    {
        "no_grad",
        "enable_grad",
        "set_grad_enabled",
        "inference_mode",
        "autocast",
        "manual_seed",
        "seed",
        "random",
        "checkpoint",
        "set_rng_state",
        "get_rng_state",
    }
)
_SCALARS = (str, int, float, complex, bool, type(None), torch.dtype, torch.device)
_NUMPY_SCALARS = (np.number, np.bool_)
_MOST = 32  # captures kept per compiled model


class CaptureFailure(Exception):
    """The forward cannot be captured soundly; it runs as written."""


class _Writes:
    """What fx's proxies lack: item assignment and ``with``, recorded as calls (replayed in order)."""

    def __setitem__(self, key, value):
        self.tracer.create_proxy("call_function", operator.setitem, (self, key, value), {})

    def __enter__(self):
        return self.tracer.create_proxy("call_function", enter_scope, (self,), {})

    def __exit__(self, *exc):
        self.tracer.create_proxy("call_function", exit_scope, (self,), {})
        return False

    def __getattr__(self, k):
        if k.startswith("__"):
            raise AttributeError(k)
        return _Attribute(self, k)


class _Proxy(_Writes, fx.Proxy):
    __array_ufunc__ = None  # numpy defers to it as to a tensor: ``np.float32(2) * h`` is ``h.__rmul__``


class _Attribute(_Writes, fx.proxy.Attribute):
    pass


for _augmented in AUGMENTED:  # eager's ``x += y`` writes into x; fx's proxy would rebind x
    setattr(
        _Proxy,
        f"__{_augmented.__name__}__",
        lambda self, other, op=_augmented: self.tracer.create_proxy("call_function", op, (self, other), {}),
    )


class _GraphProxy(_Proxy):
    """A graph argument: only the recorded API, and ``isinstance`` answers as for a graph."""

    @property
    def __class__(self):
        return Graph

    def __getattr__(self, k):
        if k not in GRAPH_API:
            if k.startswith("__"):
                raise AttributeError(k)
            raise CaptureFailure(f"the forward uses graph attribute {k!r}, which capture does not record")
        return _Attribute(self, k)


def enter_scope(cm):
    """Replay of ``with cm:`` (entry); the scope is left by :func:`exit_scope`, or on failure."""
    value = cm.__enter__()
    _SCOPES.get().append(cm)
    return value


def exit_scope(cm) -> None:
    _SCOPES.get().remove(cm)
    cm.__exit__(None, None, None)


_SCOPES: contextvars.ContextVar = contextvars.ContextVar("gnnc_replay_scopes")


def graph_frame(n: fx.Node) -> bool:
    """Whether node ``n`` is a graph's feature frame (``g.ndata``): item writes there are graph writes."""
    return n.op == "call_function" and n.target is getattr and n.args[1] in FRAMES


def copied(graph: fx.Graph) -> tuple[fx.Graph, dict]:
    """A copy of ``graph`` for a forward pass to rewrite, and the map from its nodes to the copy's."""
    new = fx.Graph()
    env: dict = {}
    new.output(new.graph_copy(graph, env))
    return new, env


def message_passing_call(n: fx.Node) -> bool:
    """Whether node ``n`` of a captured forward is a message-passing call on a graph (``g.update_all(...)``)."""
    return n.op == "call_method" and n.target in MESSAGE_PASSING


def writes_in_place(n: fx.Node) -> bool:
    """Whether node ``n`` of a captured forward writes into a tensor (forward passes that move or merge
    computations refuse graphs with such writes, which could alias what they move)."""
    if n.op == "call_function" and n.target is operator.setitem:
        return not graph_frame(n.args[0])
    if n.op == "call_method":
        return n.target.endswith("_") and not n.target.startswith("_")
    if n.op == "call_function":
        name = getattr(n.target, "__name__", "")
        return (
            n.target in AUGMENTED
            or n.kwargs.get("inplace") is True
            or (name.endswith("_") and not name.startswith("_"))
        )
    return n.meta.get("in_place", False)  # a module called with inplace=True (marked by the capture)


def live_attribute(root, target: str):
    """The model's attribute at dotted ``target`` now (parameters rebound by the user are read anew)."""
    return functools.reduce(getattr, target.split("."), root)


def call_live_module(root, target: str, *args, **kwargs):
    return live_attribute(root, target)(*args, **kwargs)


def reached_value(root, path: tuple):
    """The tensor at reach ``path`` from (model, its modules' forwards) now (``gnnc.runtime.reach``)."""
    return reach.resolve((root.model, _codes(root.model)), path)


_REACHED = "_gnnc_reached"


class _Tracer(Tracer):
    def __init__(self, walked: reach.Reach, graph_slots: set):
        super().__init__()
        self._persistent = walked.objects  # id -> object reachable from the model (kept alive by the caller)
        self._reached = walked.tensors  # id -> path from (model, forwards): lists of tensors, globals
        self._graph_slots = graph_slots
        self.constants: dict[str, object] = {}
        self.reached: dict[str, tuple] = {}  # get_attr target -> reach path of a tensor in a list or global
        self._constant_ids: dict[int, str] = {}

    def proxy(self, node: fx.Node) -> fx.Proxy:
        graph_like = (node.op == "placeholder" and node.target in self._graph_slots) or (
            node.target is enter_scope and node.args[0].meta.get("scope_of_graph")
        )
        if node.op == "call_method" and node.target == "local_scope":
            node.meta["scope_of_graph"] = True
        if graph_like:
            node.meta["graph_argument"] = True
        return (_GraphProxy if graph_like else _Proxy)(node, self)

    def create_arg(self, a):
        if isinstance(a, _NUMPY_SCALARS):  # ``h * np.float32(2)``: the number torch reads
            return super().create_arg(torch_scalar(a))
        if isinstance(a, fx.Proxy) or isinstance(a, _SCALARS) or isinstance(a, (slice, range, type(Ellipsis))):
            return super().create_arg(a)
        if isinstance(a, torch.Tensor):
            name = self._tensor_name(a)
            if name is None:
                raise CaptureFailure(
                    "the forward uses a tensor made outside the traced values (a constant, a "
                    "global, or one made from no argument), which replay would freeze"
                )
            return self.create_node("get_attr", name, (), {})
        if isinstance(a, (tuple, list, dict)):
            return super().create_arg(a)
        if isinstance(a, (BuiltinMessage, BuiltinReduce)) or callable(a) or isinstance(a, nn.Module):
            return self._constant(a)
        return super().create_arg(a)

    def _tensor_name(self, a):
        for name, t in (*self.root.named_parameters(), *self.root.named_buffers()):
            if t is a:
                return name
        if a in self.tensor_attrs:
            return self.tensor_attrs[a]
        path = self._reached.get(id(a))
        if path is None:
            return None
        name = f"{_REACHED}{list(self._reached).index(id(a))}"  # one name per tensor
        self.reached[name] = path
        return name

    def iter(self, obj):
        """``for part in torch.split(x, [w1, w2, ...])``: as many parts as widths (other lengths are unknown)."""
        n, widths = obj.node, None
        if (
            n.op == "call_function" and n.target is torch.split or n.op == "call_method" and n.target == "split"
        ) and len(n.args) > 1:
            widths = n.args[1]
        if isinstance(widths, (list, tuple)) and all(isinstance(w, int) for w in widths):
            return iter([obj[i] for i in range(len(widths))])
        return super().iter(obj)

    def is_live(self, a) -> bool:
        """Whether ``a`` is a tensor of the model's (read live at replay, so never frozen)."""
        return isinstance(a, torch.Tensor) and not isinstance(a, fx.Proxy) and self._tensor_name(a) is not None

    def lift(self, a):
        return _Proxy(self.create_arg(a), self) if self.is_live(a) else a

    def _constant(self, a) -> fx.Node:
        if not _persistent(a, self._persistent):
            raise CaptureFailure(
                f"the forward passes {type(a).__name__} {getattr(a, '__name__', '')!s} holding a "
                "tensor or traced value (a closure made in forward, or its default): replay would "
                "keep the first call's"
            )
        if id(a) not in self._constant_ids:
            name = f"_gnnc_constant{len(self.constants)}"
            self.constants[name] = a
            self._constant_ids[id(a)] = name
        return self.create_node("get_attr", self._constant_ids[id(a)], (), {})


def _persistent(obj, known: dict, depth: int = 0) -> bool:
    """Whether replaying with ``obj`` (a UDF passed to the graph) is as good as the forward's new one: it is
    the model's own, or reaches nothing but scalars and the model's own objects. A tensor it holds is never
    as good, the model's own included: a function made in forward holds the tensor the attribute named then,
    and the user may rebind the attribute (a plain tensor weight after an optimizer step)."""
    if isinstance(obj, fx.Proxy) or isinstance(obj, torch.Tensor) or depth > 4:
        return False
    if isinstance(obj, (*_SCALARS, *_NUMPY_SCALARS, BuiltinMessage, BuiltinReduce)) or id(obj) in known:
        return True
    if isinstance(obj, types.MethodType):
        return _persistent(obj.__self__, known, depth + 1) and _persistent(obj.__func__, known, depth + 1)
    if isinstance(obj, types.FunctionType):
        cells = [c.cell_contents for c in obj.__closure__ or () if _bound(c)]
        values = cells + list(obj.__defaults__ or ()) + list((obj.__kwdefaults__ or {}).values())
        return all(_persistent(v, known, depth + 1) for v in values)
    if isinstance(obj, functools.partial):
        return all(_persistent(v, known, depth + 1) for v in (obj.func, *obj.args, *obj.keywords.values()))
    if isinstance(obj, (tuple, list)):
        return all(_persistent(v, known, depth + 1) for v in obj)
    return False


def _bound(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


class _Wrapper(nn.Module):
    """The traced root: holds the model, calls it with the arguments rebuilt from the proxies."""

    def __init__(self, model: nn.Module, rebuild):
        super().__init__()
        self.model = model
        self._rebuild = rebuild

    def run(self, *slots):
        args, kwargs = self._rebuild(slots)
        return self.model(*args, **kwargs)


def _slots(args, kwargs):
    """(signature part of the key, slot kinds) of a call; CaptureFailure for an argument capture cannot take."""
    sig, kinds = [], []
    for value in (*args, *kwargs.values()):
        if isinstance(value, Graph):
            sig.append(("graph", type(value), tuple(value.ntypes), tuple(value.canonical_etypes), str(value.device)))
            kinds.append("graph")
        elif isinstance(value, torch.Tensor):
            sig.append(("tensor", type(value), value.dtype, value.device.type, value.requires_grad))
            kinds.append("tensor")
        elif isinstance(value, _SCALARS):
            sig.append(("value", type(value), value))
            kinds.append("value")
        else:
            raise CaptureFailure(f"an argument of type {type(value).__name__}")
    return (len(args), tuple(kwargs), tuple(sig)), kinds


def _codes(model: nn.Module):
    """Every forward of the model's modules (their code and the globals it reads are keyed)."""
    return tuple(type(m).forward for m in model.modules())


def _names_read(walked: reach.Reach) -> set:
    names = set()
    for obj in walked.objects.values():
        if isinstance(obj, types.FunctionType):
            names.update(reach.code_names(obj.__code__))
    return names


class Captured:
    """A captured forward: its fx graph after the forward passes, run by replay on the live model."""

    def __init__(self, module: fx.GraphModule, kinds: list, log: list):
        self.module, self.kinds, self.log = module, kinds, log

    def __call__(self, model, args, kwargs):
        """Replay on the live model; a failed replay leaves the graphs' features as they were before it."""
        slots = [v for v, kind in zip((*args, *kwargs.values()), self.kinds) if kind != "value"]
        saved = [(g, _features(g)) for g in slots if isinstance(g, Graph)]
        stack: list = []
        with scoped(_SCOPES, stack):
            try:
                return self.module(_LiveRoot(model), *slots)
            except BaseException as err:
                while stack:
                    stack.pop().__exit__(type(err), err, err.__traceback__)
                for g, features in saved:
                    _restore_features(g, features)
                raise


def _features(g: Graph) -> tuple:
    """What a graph's ``local_scope`` restores: its feature stores and type data."""
    return g._nstore.snapshot(), g._estore.snapshot(), dict(g.ntype_data.data), dict(g.etype_data.data)


def _restore_features(g: Graph, features: tuple) -> None:
    nodes, edges, g.ntype_data.data, g.etype_data.data = features
    g._nstore.restore(nodes)
    g._estore.restore(edges)


class _LiveRoot:
    """What the replay's ``live_attribute`` targets start from: ``model.<path>``, as traced on the wrapper."""

    def __init__(self, model):
        self.model = model


def trace(model: nn.Module, args: tuple, kwargs: dict) -> tuple[fx.Graph, list]:
    """(fx graph of ``model(*args, **kwargs)``, slot kinds); CaptureFailure where unsound.

    The graph's placeholders are the tensor and graph arguments in order; ``get_attr`` and ``call_module``
    nodes name the model's parameters and submodules as ``model.<path>``; other ``get_attr`` nodes are
    constants (the UDFs passed, or objects passes add), held in their ``meta['constant']``.
    """
    _, kinds = _slots(args, kwargs)
    for m in model.modules():  # (a module outside the model cannot be called in a trace: fx finds no path)
        if reach.has_hooks(m):
            raise CaptureFailure(f"module {type(m).__name__} has hooks")
    walked = reach.walk((model, _codes(model)))
    risky = _names_read(walked) & _STATEFUL_NAMES
    if risky:
        raise CaptureFailure(f"the forward's code names {sorted(risky)}: state a trace does not record")
    values = [*args, *kwargs.values()]
    names = [f"{'g' if kind == 'graph' else 'x'}{i}" for i, kind in enumerate(kinds) if kind != "value"]
    positions = [i for i, kind in enumerate(kinds) if kind != "value"]

    def rebuild(slots):
        filled = list(values)
        for i, v in zip(positions, slots):
            filled[i] = v
        return filled[: len(args)], dict(zip(kwargs, filled[len(args) :]))

    source = f"def forward(self, {', '.join(names)}):\n    return self.run({', '.join(names)})\n"
    namespace: dict = {}
    exec(compile(source, "<gnnc capture>", "exec"), namespace)  # noqa: S102 - fx reads the argument names
    wrapper = type("_Wrapper", (_Wrapper,), {"forward": namespace["forward"]})(model, rebuild)
    before = walked.fingerprint
    saved = _snapshot(walked)
    tracer = _Tracer(walked, {n for n, k in zip(names, [k for k in kinds if k != "value"]) if k == "graph"})
    try:
        with TRACING, LiftReached(tracer), factories_recorded(tracer):
            graph = tracer.trace(wrapper)
        for n in graph.nodes:
            if n.op == "call_module":  # what passes must know of a module call
                m = live_attribute(wrapper, n.target)
                n.meta["in_place"] = getattr(m, "inplace", False) is True
                if type(m) is nn.Linear:
                    n.meta["linear"] = (m.in_features, m.out_features, m.bias is not None)
                n.meta["dropout"] = type(m) is nn.Dropout
                if n.meta["dropout"]:  # whether it draws a mask (captures are kept per training flag and p)
                    n.meta["dropout_fires"] = m.training and 0 < m.p < 1
    except CaptureFailure:
        raise
    except Exception as err:  # whatever fx cannot trace runs as written
        raise CaptureFailure(f"{type(err).__name__}: {first_line(err)}") from err
    finally:
        after = reach.walk((model, _codes(model))).fingerprint
        if after != before:
            _restore(saved)
    if after != before:
        raise CaptureFailure("the forward changes the model's state (an attribute, list or dict it holds)")
    for n in graph.nodes:
        if n.op == "get_attr" and n.target in tracer.reached:
            n.meta["reach_path"] = tracer.reached[n.target]
        elif n.op == "get_attr" and n.target in tracer.constants:
            n.meta["constant"] = tracer.constants[n.target]  # what passes read, and what replay holds
    return graph, kinds


def _snapshot(walked: reach.Reach) -> list:
    saved = []
    for obj in walked.objects.values():
        if isinstance(obj, nn.Module):
            saved.append(
                (
                    obj,
                    copy.copy(obj.__dict__),
                    {k: dict(getattr(obj, k)) for k in ("_parameters", "_buffers", "_modules")},
                )
            )
        elif isinstance(obj, (list, dict)):
            saved.append((obj, copy.copy(obj), None))
    return saved


def _restore(saved: list) -> None:
    for obj, state, dicts in saved:
        if dicts is not None:
            obj.__dict__.clear()
            obj.__dict__.update(state)
            for k, d in dicts.items():
                getattr(obj, k).clear()
                getattr(obj, k).update(d)
        elif isinstance(obj, list):
            obj[:] = state
        else:
            obj.clear()
            obj.update(state)


def _live(graph: fx.Graph) -> None:
    """``get_attr`` / ``call_module`` on the model -> reads of the live model at every call."""
    root = next(iter(graph.nodes))
    with graph.inserting_before(root):
        live = graph.placeholder("gnnc_live_root")
    for n in list(graph.nodes):
        if n.op == "get_attr" and "reach_path" in n.meta:
            with graph.inserting_before(n):
                new = graph.call_function(reached_value, (live, n.meta["reach_path"]))
        elif n.op == "get_attr" and "constant" not in n.meta:
            with graph.inserting_before(n):
                new = graph.call_function(live_attribute, (live, n.target))
        elif n.op == "call_module":
            with graph.inserting_before(n):
                new = graph.call_function(call_live_module, (live, n.target, *n.args), dict(n.kwargs))
        else:
            continue
        new.meta.update(n.meta)
        n.replace_all_uses_with(new)
        graph.erase_node(n)


def capture(model: nn.Module, args: tuple, kwargs: dict, passes) -> tuple[Captured | None, list]:
    """(the captured forward after ``passes``, log) or (None, log) where capture is refused or no pass
    logged a rewrite. ``passes``: (name, ``forward.passes.contract.ForwardPass``); an exception in one leaves
    named ``forward pass <name>``."""
    try:
        with timed("forward capture"):
            graph, kinds = trace(model, args, kwargs)
    except CaptureFailure as err:
        return None, [f"forward not captured: {err}"]
    log: list = []
    for name, pass_fn in passes:
        with stage(f"forward pass {name}"):
            graph, _, lines = pass_fn(graph)
        log += lines
    if not log:
        return None, ["forward captured; no forward pass applies"]
    _live(graph)
    holder = nn.Module()
    for n in graph.nodes:
        if n.op == "get_attr" and "constant" in n.meta:
            object.__setattr__(holder, n.target, n.meta["constant"])
    return Captured(fx.GraphModule(holder, graph), kinds, log), log


class Forwards:
    """The captures of one compiled model, by key; calls the model as written where there is none, and where
    capturing or replaying failed (the failure boundary: see the module). ``passes``: (name, function)."""

    def __init__(self, passes):
        self.passes = passes
        self._cache: dict = {}
        self.log: list = []  # of the last call

    def __getstate__(self):  # a copy or a pickle of the model captures anew (captures hold the model's objects)
        return {"passes": self.passes, "_cache": {}, "log": []}

    def __call__(self, model: nn.Module, args: tuple, kwargs: dict):
        key, failed = None, None
        try:
            with timed("reach fingerprint"):
                key = self._key(model, args, kwargs)
            entry = self._cache.get(key)  # (read once: another thread's call may clear the cache)
            if entry is None:
                if len(self._cache) >= _MOST:
                    self._cache.clear()
                entry = self._cache[key] = capture(model, args, kwargs, self.passes)
        except CaptureFailure as err:
            self.log = [f"forward not captured: {err}"]
            return model(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - the forward as written decides whose error it is
            failed = err
        if failed is not None:
            return self._as_written(key, failed, "capture", model, args, kwargs)
        captured, self.log = entry
        if captured is None:
            return model(*args, **kwargs)
        try:
            return captured(model, args, kwargs)
        except AUTOGRAD_SIGNALS:  # meant for torch.utils.checkpoint, which stops a recomputation with them
            raise
        except Exception as err:  # noqa: BLE001 - the forward as written decides whose error it is
            failed = err
        return self._as_written(key, failed, "capture replay", model, args, kwargs)

    @staticmethod
    def _key(model: nn.Module, args: tuple, kwargs: dict) -> tuple:
        """What a capture is kept by (see the module); CaptureFailure for an argument capture cannot take."""
        sig, _ = _slots(args, kwargs)
        return (
            reach.walk((model, _codes(model))).fingerprint,
            sig,
            torch.is_grad_enabled(),
            torch.is_autocast_enabled(),
        )

    def _as_written(self, key, err, default_stage: str, model, args, kwargs):
        """After ``err`` in capturing or replaying: the forward run as written (the user's own error is raised
        there, outside the handler of ``err``, so that it is not chained to it); else one warning naming the
        stage, and the forward runs as written from now on (for ``key``, where it is known)."""
        out = model(*args, **kwargs)
        what = failure(err, default_stage)
        fell_back(f"gnnc runs the forward of {type(model).__name__} as written from now on: {what}{blame(err)}")
        self.log = [f"forward not captured: {what}"]
        if key is not None:
            self._cache[key] = (None, self.log)
        return out


__all__ = ["CaptureFailure", "Captured", "Forwards", "capture", "trace"]

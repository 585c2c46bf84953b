"""Trace a message / reduce / update UDF into a torch.fx graph.

The batch argument becomes a proxy; every ``batch.<space>[key]`` access
(``src``, ``dst``, ``data``, ``srctype``, ``dsttype``, ``type``, ``mailbox``)
becomes one placeholder named ``<space>.<key>``. Tensors and modules the UDF
reaches from outside are never baked in: ``gnnc.runtime.reach`` finds them
by path (bound ``self``, closures, defaults, globals, partial arguments,
attributes, container items). Parameters and buffers of the bound module
stay ``get_attr`` nodes on that live module; every other reached tensor
becomes a placeholder ``ext<i>`` whose path (``TracedUDF.externals``) is
read from the current UDF at every call; reached modules are called where
they live. Torch operations on reached tensors inside the UDF (``w[0]``,
``w.view(-1, F)``) are traced too, so nothing derived from them is frozen
either. Whatever tracing cannot express (data-dependent control flow, other
uses of the batch, a tensor that needs gradients reached by a path the walk
does not follow) raises :class:`TraceFailure` naming the operator and the
UDF source line. Given the graph's ``schema``, a trace is specialized on it:
``'norm' in edges.data`` and a feature's dtype, rank and trailing dims are
answered (DGL's RelGraphConv branches on them), each answer recorded as a
guard the runtime checks before reusing the trace on another graph. A
message UDF's ``edges.data[k] = v`` is read back by the UDF and recorded as
an edge write of the call (``TracedUDF.writes``), as eager's batch stores
it; writes into other spaces of the batch raise TraceFailure. numpy
keeps eager's meaning: a numpy scalar given to a torch operation is the
Python number torch reads it as (``torch_scalar``), a numpy ufunc of a traced
value is a call of it (``ufuncs_recorded``), and a numpy array combined with
a traced tensor (computed by numpy, without gradients) is refused.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import operator
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import FrameType
from typing import Protocol

import numpy as np
import torch
import torch.fx as fx
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

from ..runtime import reach
from ..runtime.deferred import settle_before_user_writes
from ..runtime.reach import function_of, udf_location
from .exclusive import TRACING, Tracer
from .out_of_place import AUGMENTED, InPlaceRefused, make_out_of_place

# The user's source line of the operator an interpreter of traced UDFs is running (None: read frames).
SOURCE_LINE: contextvars.ContextVar = contextvars.ContextVar("gnnc_udf_source_line", default=None)
SPACES = ("src", "dst", "data", "srctype", "dsttype", "type", "mailbox")
# Tensor metadata reads: their results are in the reach fingerprint, so tracing may use them as values.
_METADATA = {
    "shape",
    "dtype",
    "device",
    "ndim",
    "requires_grad",
    "is_cuda",
    "layout",
    "dim",
    "size",
    "__len__",
    "numel",
    "ndimension",
    "is_floating_point",
    "element_size",
    "get_device",
}


# What a tracer's TypeError means in the user's terms.
_HINTS = (
    (
        re.compile(
            r"takes \d+ positional argument|invalid combination of arguments|cannot be interpreted as an "
            r"integer"
        ),
        ": a value read from the batch (such as h.shape[0]) was given where a number is "
        "needed (a loop's range, torch.linspace's steps, torch.randn's sizes)",
    ),
    (
        re.compile(r"does not support item assignment"),
        ": writing into part of a tensor (x[mask] = ...) inside a UDF is not captured",
    ),
)


class TraceFailure(Exception):
    """Tracing could not capture the UDF; carries the operator and source line."""

    def __init__(self, what: str, where: str):
        super().__init__(f"{what} at {where}")
        self.what, self.where = what, where


@dataclass
class TracedUDF:
    """One UDF as an fx graph over accessor and external placeholders.

    ``externals`` maps each external placeholder's name to its path from the UDF (``reach.resolve``).
    ``writes``: the edge features a message UDF wrote (``edges.data[k] = v``), each key's last value, in the
    order of first writes; eager stores them in the graph when the batch is the whole block.
    """

    graph: fx.Graph
    root: nn.Module
    outputs: dict[str, fx.Node]
    accesses: list[tuple[str, str]] = field(default_factory=list)
    externals: dict[str, tuple] = field(default_factory=dict)
    name: str = ""
    writes: dict[str, fx.Node] = field(default_factory=dict)


class _Root(nn.Module):
    """Holds the UDF's bound module (``owner``) and the other modules it calls (``reached<i>``)."""

    def __init__(self, udf, schema=None, node_udf: bool = False):
        super().__init__()
        self._udf, self._schema, self._node_udf = udf, schema, node_udf
        self.guards: list[tuple] = []
        owner = getattr(udf, "__self__", None)
        if isinstance(owner, nn.Module):
            self.owner = owner

    def forward(self, batch):
        """The UDF's result and the edge features it wrote (``_SchemaSpace``): both are the graph's output,
        so that the rewrites after tracing keep the written values current."""
        written: dict = {}
        return self._udf(_SchemaBatch(batch, self._schema, self.guards, self._node_udf, written)), written


class _SchemaBatch:
    """The batch proxy of a trace: its spaces are ``_SchemaSpace``s. Specialized on the features the graph
    holds (``schema``: space -> {key: (dtype, trailing shape)}), ``key in edges.data`` is answered, and a
    feature read knows its dtype, rank and trailing dims, so DGL-style branches on them (``if h.dtype ==
    torch.int64``) are resolved. A message UDF's ``edges.data[k] = v`` is kept in ``written``."""

    def __init__(self, batch, schema: dict | None, guards: list, node_udf: bool, written: dict):
        self._batch, self._schema, self._guards, self._node_udf = batch, schema, guards, node_udf
        self._written = written

    def __getattr__(self, name):
        proxy = getattr(self._batch, name)
        if name not in SPACES:
            return proxy
        key = (NODE_SPACES if self._node_udf else {}).get(name, name)
        schema = self._schema or {}
        what = f"{'nodes' if self._node_udf else 'edges'}.{name}"
        written = self._written if what == "edges.data" else None
        return _SchemaSpace(
            proxy, key, schema.get(key), self._guards, schema.get(PRODUCED, {}).get(key, ()), what, written
        )


# Where a node UDF's spaces are in a feature schema (``nodes.data`` is node data, not the edges' ``data``).
NODE_SPACES = {"data": "node_data", "type": "node_type"}
# A schema's entry {space: feature names} of features the call itself writes before the UDF runs (an update
# function sees its reduce's results): present whatever the graph holds, so no guard records them.
PRODUCED = "produced"


class _SchemaSpace:
    """One space ``what`` of a ``_SchemaBatch``. With the graph's ``features`` of the space, every answer it
    gives is recorded as a guard (``schema_guards``); without (None), only reads are traced. As eager's
    batch, a message UDF's ``edges.data[k] = v`` (``written`` given) is read back by the UDF and is an edge
    output of the call (``TracedUDF.writes``); other spaces refuse writes."""

    def __init__(
        self,
        proxy,
        space: str,
        features: dict | None,
        guards: list,
        produced=(),
        what: str = "",
        written: dict | None = None,
    ):
        self._proxy, self._space, self._features, self._guards = proxy, space, features, guards
        self._produced, self._what, self._written = tuple(produced), what, written

    def __getitem__(self, key):
        if self._written is not None and key in self._written:
            return self._written[key]
        found = self._proxy[key]
        meta = (
            self._features.get(key)
            if self._features is not None and isinstance(key, str) and key not in self._produced
            else None
        )
        if meta is None:
            return found
        self._guards.append((self._space, "feature", key, meta))
        return _KnownProxy(found, *meta)

    def __setitem__(self, key, value):
        if self._written is None:
            why = (
                "eager keeps a node UDF's write in its batch only; gnnc does not compile it"
                if self._what == "nodes.data"
                else "this space of a UDF's batch is read-only"
            )
            raise TraceFailure(f"{self._what}[{key!r}] = ...: {why}; return the value in the UDF's dict instead", "?")
        if isinstance(value, torch.Tensor):
            value = self._proxy.tracer.lift(value)
        if not isinstance(key, str) or not isinstance(value, fx.Proxy):
            raise TraceFailure(
                f"{self._what}[{key!r}] = ...: only a tensor computed in the UDF (or reached by it) "
                "is compiled as a written edge feature",
                "?",
            )
        self._written[key] = value

    def update(self, other=(), **more) -> None:
        """``dict.update``'s forms (DGL's frames take them), each item written as ``self[key] = value``."""
        for key, value in dict(other, **more).items():
            self[key] = value

    def __contains__(self, key) -> bool:
        if key in self._produced or (self._written is not None and key in self._written):
            return True
        if self._features is None:
            return key in self._proxy
        self._guards.append((self._space, "present", key, key in self._features))
        return key in self._features

    def keys(self):
        written = [] if self._written is None else list(self._written)
        if self._features is None:
            return self._proxy.keys()
        self._guards.append((self._space, "keys", None, tuple(sorted(self._features))))
        return list(dict.fromkeys([*self._features, *self._produced, *written]))

    def items(self):
        """``(key, value)`` of every feature, each read as ``self[key]`` (DGL's frames are mappings: UDFs
        loop over ``nodes.data.items()``)."""
        return [(key, self[key]) for key in self.keys()]

    def values(self):
        return [self[key] for key in self.keys()]

    def __iter__(self):
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())


def schema_guards_hold(guards: Iterable[tuple], schema: dict) -> bool:
    """Whether a trace specialized under ``guards`` (``_SchemaSpace``'s record) is valid for ``schema``."""
    for space, kind, key, answer in guards:
        features = schema.get(space, {})
        now = {
            "feature": lambda: features.get(key),
            "present": lambda: key in features,
            "keys": lambda: tuple(sorted(features)),
        }[kind]()
        if now != answer:
            return False
    return True


class _Proxy(fx.Proxy):
    """fx's proxy, with augmented assignments traced as such: eager's ``x += y`` writes into the tensor x
    (``gnnc.compiler.out_of_place`` decides what that means), fx's own proxy would rebind x to ``x + y``.
    numpy defers to it as to a tensor (``np.float32(2) * h`` is ``h.__rmul__``); without the marker numpy
    would read ``__array_struct__`` off the proxy (a traced attribute) and fail."""

    __array_ufunc__ = None


for _augmented in AUGMENTED:
    setattr(
        _Proxy,
        f"__{_augmented.__name__}__",
        lambda self, other, op=_augmented: self.tracer.create_proxy("call_function", op, (self, other), {}),
    )


class _KnownProxy(_Proxy):
    """A feature read whose dtype and trailing dims are known (rows stay symbolic)."""

    _known: tuple[torch.dtype, tuple]

    def __init__(self, proxy: fx.Proxy, dtype: torch.dtype, trailing: tuple):
        super().__init__(proxy.node, proxy.tracer)
        self.__dict__["_known"] = (dtype, tuple(trailing))

    @property
    def dtype(self):
        return self._known[0]

    @property
    def ndim(self) -> int:
        return 1 + len(self._known[1])

    def dim(self) -> int:
        return self.ndim

    ndimension = dim

    def is_floating_point(self) -> bool:
        return self._known[0].is_floating_point

    @property
    def shape(self):
        return (fx.Proxy.__getattr__(self, "size")(0),) + self._known[1]

    def size(self, dim=None):
        if dim is None:
            return self.shape
        rank = self.ndim
        if isinstance(dim, int) and -rank < dim < rank and dim % rank != 0:
            return self._known[1][dim % rank - 1]
        return fx.Proxy.__getattr__(self, "size")(dim)


def _is_metadata(func) -> bool:
    name = getattr(func, "__name__", "")
    if name == "__get__":
        name = getattr(getattr(func, "__self__", None), "__name__", "")
    return name in _METADATA


def _writes(func, kwargs) -> bool:
    """Whether the torch operation ``func`` writes into a tensor argument (in place, or through ``out=``)."""
    name = getattr(func, "__name__", "")
    return (
        (name.endswith("_") and not name.startswith("_")) or name in _WRITING_DUNDERS or kwargs.get("out") is not None
    )


_WRITING_DUNDERS = frozenset({"__setitem__"} | {f"__i{op.__name__.strip('_')}__" for op in AUGMENTED.values()})


# Random draws; made from no traced value while tracing, they would run once and stay a constant.
_RANDOM = frozenset(
    {
        torch.rand,
        torch.randn,
        torch.randint,
        torch.randperm,
        torch.bernoulli,
        torch.normal,
        torch.multinomial,
        torch.poisson,
        torch.rand_like,
        torch.randn_like,
        torch.randint_like,
        torch.nn.functional.dropout,
        torch.dropout,
    }
)


class ReachingTracer(Protocol):
    """A tracer that knows the tensors its UDF reaches from outside."""

    def is_live(self, a: object) -> bool:
        """Whether ``a`` is a tensor the UDF reached (a run-time input, never frozen into the graph)."""
        ...

    def lift(self, a: object) -> object:
        """``a`` as a graph value when it is live, else ``a``."""
        ...

    def create_proxy(self, kind: str, target: fx.node.Target, args: tuple, kwargs: dict) -> fx.Proxy:
        """fx's: a graph node, as a proxy."""
        ...


class LiftReached(TorchFunctionMode):
    """While tracing: a torch operation on reached tensors (and no proxy) becomes a graph node. ``tracer``
    says which tensors are reached (``is_live``) and makes them nodes (``lift``)."""

    def __init__(self, tracer: ReachingTracer):
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        leaves, _ = tree_flatten((args, kwargs))
        if func in _RANDOM and not any(isinstance(a, fx.Proxy) or self.tracer.is_live(a) for a in leaves):
            raise TraceFailure(
                f"{getattr(func, '__name__', func)} draws random numbers from no traced value: "
                "the trace would keep the first draw",
                "?",
            )
        if _is_metadata(func) or not any(self.tracer.is_live(a) for a in leaves):
            if _writes(func, kwargs):  # into a real tensor, now: user code's write, run while tracing
                settle_before_user_writes()
            return func(*args, **kwargs)
        args, kwargs = tree_map(self.tracer.lift, (args, kwargs))
        if getattr(func, "__name__", "") == "__get__":  # a tensor property (``w.T``)
            return self.tracer.create_proxy("call_function", getattr, (args[0], func.__self__.__name__), {})
        return fx.Proxy.__torch_function__(func, types_, args, kwargs)


class _Tracer(Tracer):
    """fx tracer whose reached tensors are run-time inputs and reached modules are called in place."""

    def __init__(self, udf, root: _Root):
        super().__init__()
        fn = function_of(udf)
        self._udf_file = getattr(getattr(fn, "__code__", None), "co_filename", None)
        self._reach = reach.walk(udf)
        self._root_tensors = {id(t) for t in (*root.parameters(), *root.buffers())}
        self._nodes: dict[int, fx.Node] = {}
        self.externals: dict[str, tuple] = {}
        self._aliases: list[nn.Module] = []

    def reached_objects(self):
        return self._reach.objects.values()

    def is_live(self, a) -> bool:
        """Whether ``a`` is a tensor read from the UDF's surroundings (so it must not be frozen)."""
        return isinstance(a, torch.Tensor) and (id(a) in self._reach.tensors or id(a) in self._root_tensors)

    def lift(self, a):
        return fx.Proxy(self.create_arg(a), self) if self.is_live(a) else a

    def create_node(self, *args, **kwargs):
        """fx's node, with ``meta['udf_line']``: the innermost caller line in the UDF's file.

        (fx's own ``record_stack_traces`` symbolizes whole tracebacks through
        torch's profiler for every node, and its first use imports
        torch._inductor with networkx: ~20 MiB more per process.)
        """
        node = super().create_node(*args, **kwargs)
        line = SOURCE_LINE.get()
        if line is not None:  # a UDF run by an interpreter of traced UDFs (``forward.heads``): their line
            node.meta["udf_line"] = line
            return node
        frame: FrameType | None = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename != self._udf_file:
            frame = frame.f_back
        if frame is not None:
            node.meta["udf_line"] = f"{frame.f_code.co_filename}:{frame.f_lineno}"
        return node

    def create_arg(self, a):
        if isinstance(a, (np.number, np.bool_)):
            return super().create_arg(torch_scalar(a))
        if isinstance(a, np.ndarray):
            raise TraceFailure(
                "the UDF combines a traced tensor with a numpy array, which numpy computes (in its "
                "dtypes, without gradients); torch.from_numpy(array) or torch.tensor(array) compiles",
                "?",
            )
        if isinstance(a, torch.Tensor) and id(a) not in self._root_tensors:
            path = self._reach.tensors.get(id(a))
            if path is not None:
                return self._external(a, path)
            if a.requires_grad:
                raise TraceFailure(
                    "the UDF uses a tensor that requires grad but is reached by a path gnnc "
                    "does not follow; compiling would freeze it",
                    "?",
                )
        return super().create_arg(a)

    def _external(self, a, path) -> fx.Node:
        if id(a) not in self._nodes:
            name = f"ext{len(self.externals)}"
            self.externals[name] = path
            self._nodes[id(a)] = self.create_node("placeholder", name, (), {}, name=name)
            self._nodes[id(a)].meta["reach_path"] = path
        return self._nodes[id(a)]

    def proxy(self, node: fx.Node) -> fx.Proxy:
        return _Proxy(node, self)

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        """torch's modules are called whole, except in-place ones (``nn.ReLU(inplace=True)``): traced
        through, their in-place functional call is then made out of place like the UDF's own."""
        return super().is_leaf_module(m, qualname) and getattr(m, "inplace", False) is not True

    def call_module(self, m: nn.Module, forward, args, kwargs):
        if self.here() and reach.has_hooks(m):
            raise TraceFailure(
                f"the UDF calls a module with hooks ({type(m).__name__}: weight_norm, spectral_norm, "
                "pruning or user hooks), which the compiled plan would not run as written",
                "?",
            )
        return super().call_module(m, forward, args, kwargs)

    def path_of_module(self, mod: nn.Module) -> str:
        try:
            return super().path_of_module(mod)
        except NameError:
            if id(mod) not in self._reach.modules:
                raise TraceFailure(
                    f"the UDF calls a module ({type(mod).__name__}) gnnc cannot find from the "
                    "UDF (keep it on the module, in a closure or in a global)",
                    "?",
                ) from None
        name = f"reached{len(self._aliases)}"
        self._aliases.append(mod)
        self.root.add_module(name, mod)
        if self.submodule_paths is not None:
            self.submodule_paths[mod] = name
        return name


def torch_scalar(a: np.generic) -> float | int | bool | complex:
    """The Python number torch reads a numpy scalar as (a ``np.bool_`` operand counts as a float: ``int32 *
    np.bool_(True)`` is float32); the graph holds it as a literal of its own type, not numpy's."""
    return float(a) if isinstance(a, np.bool_) else a.item()


def node_location(node: fx.Node, udf: Callable) -> str:
    """The UDF source line that produced ``node`` (falls back to the UDF itself)."""
    return node.meta.get("udf_line") or udf_location(udf)


def trace_udf(
    udf: Callable, schema: dict | None = None, guards: list | None = None, node_udf: bool = False
) -> TracedUDF:
    """Trace ``udf(batch) -> dict`` into a :class:`TracedUDF` (or raise TraceFailure); with ``schema``
    (space -> {key: (dtype, trailing shape)}), specialized on those features (``_SchemaBatch``), the
    answers the trace relied on appended to ``guards`` (``schema_guards_hold``), also when it fails."""
    root = _Root(udf, schema, node_udf)
    if guards is not None:
        root.guards = guards
    tracer = _Tracer(udf, root)
    try:
        with (
            TRACING,
            LiftReached(tracer),
            _custom_functions_refused(tracer),
            factories_recorded(tracer),
            ufuncs_recorded(tracer),
        ):
            graph = tracer.trace(root)
    except TraceFailure as err:
        if err.where != "?":
            raise
        raise TraceFailure(err.what, _error_location(err, udf)) from err
    except Exception as err:  # fx reports control flow, unsupported calls etc. as various errors
        hint = next((h for pattern, h in _HINTS if isinstance(err, TypeError) and pattern.search(str(err))), "")
        raise TraceFailure(
            f"cannot trace ({type(err).__name__}: {first_line(err)}){hint}", _error_location(err, udf)
        ) from err
    batch = next(n for n in graph.nodes if n.op == "placeholder" and n.target == "batch")
    accesses = []
    for use in list(batch.users):
        if not (use.op == "call_function" and use.target is getattr and use.args[1] in SPACES):
            raise TraceFailure(f"unsupported use of the batch argument: {_batch_use(use)}", node_location(use, udf))
        for item in list(use.users):
            if not (item.op == "call_function" and item.target is operator.getitem and isinstance(item.args[1], str)):
                raise TraceFailure(
                    f"{use.args[1]} must be indexed by a feature name ({item.format_node()})", node_location(item, udf)
                )
            key = (use.args[1], item.args[1])
            with graph.inserting_before(batch):
                ph = graph.placeholder(f"{key[0]}.{key[1]}")
            ph.meta["access"] = key
            item.replace_all_uses_with(ph)
            graph.erase_node(item)
            if key not in accesses:
                accesses.append(key)
        graph.erase_node(use)
    graph.erase_node(batch)
    try:
        make_out_of_place(graph, root)
    except InPlaceRefused as err:
        raise TraceFailure(str(err), node_location(err.node, udf)) from err
    _merge_duplicate_accesses(graph)
    out = next(n for n in graph.nodes if n.op == "output")
    result, written = out.args[0]
    if not isinstance(result, dict):
        raise TraceFailure("the UDF must return a dict of tensors", udf_location(udf))
    out.args = (result,)
    for n in graph.nodes:
        n.meta["source"] = node_location(n, udf)
    return TracedUDF(graph, root, dict(result), accesses, tracer.externals, udf_location(udf), dict(written))


# Tensor factories a forward or a UDF may give traced sizes (``torch.zeros(g.num_nodes(), d)``,
# ``torch.zeros(edges.src['h'].shape[0], d)``): torch's argument parser rejects a proxy where it needs a
# number before any override is consulted, so they are wrapped while tracing and recorded as calls, replayed
# with the sizes of each call. (In a UDF, ``gnnc.ir.rules`` decides which recorded factories compile.)
_FACTORIES = ("zeros", "ones", "empty", "full", "arange", "eye")
# numpy's ufuncs (np.log, np.sqrt, np.power, ...): given a traced value (``np.log(D + 1)`` of a mailbox's
# degree ``D = h.shape[-2]``), recorded as a call of the ufunc, run on each call's values as eager runs it.
_UFUNCS = tuple(name for name, value in vars(np).items() if isinstance(value, np.ufunc))


def factories_recorded(tracer: fx.Tracer) -> contextlib.AbstractContextManager[None]:
    return _calls_recorded(tracer, torch, _FACTORIES)


def ufuncs_recorded(tracer: fx.Tracer) -> contextlib.AbstractContextManager[None]:
    return _calls_recorded(tracer, np, _UFUNCS)


@contextlib.contextmanager
def _calls_recorded(tracer: fx.Tracer, module, names):
    """While tracing: ``module.<name>(...)`` given a traced value is a graph node calling the original."""
    originals = {name: getattr(module, name) for name in names}

    def recorded(original):
        @functools.wraps(original)
        def call(*args, **kwargs):
            if any(isinstance(a, fx.Proxy) for a in tree_flatten((args, kwargs))[0]):
                return tracer.create_proxy("call_function", original, args, kwargs)
            return original(*args, **kwargs)

        return call

    for name, original in originals.items():
        setattr(module, name, recorded(original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(module, name, original)


@contextlib.contextmanager
def _custom_functions_refused(tracer: _Tracer):
    """While tracing: a custom ``torch.autograd.Function`` applied to traced or reached values raises
    TraceFailure (fx would trace its forward and drop its backward)."""
    reached = next(
        (
            o
            for o in tracer.reached_objects()
            if isinstance(o, type) and issubclass(o, torch.autograd.Function) and not o.__module__.startswith("torch.")
        ),
        None,
    )
    if reached is not None:  # e.g. ``f = GradReverse.apply`` bound before the UDF runs
        raise TraceFailure(
            f"the UDF reaches a custom autograd.Function ({reached.__qualname__}), whose backward "
            "the compiled plan would not use",
            "?",
        )
    original = torch.autograd.Function.__dict__["apply"]

    def apply(cls, *args, **kwargs):
        if tracer.here() and any(isinstance(a, fx.Proxy) or tracer.is_live(a) for a in tree_flatten((args, kwargs))[0]):
            raise TraceFailure(
                f"the UDF applies a custom autograd.Function ({cls.__qualname__}), whose backward "
                "the compiled plan would not use",
                "?",
            )
        return original.__func__(cls, *args, **kwargs)

    setattr(torch.autograd.Function, "apply", classmethod(apply))  # setattr: mypy forbids assigning a method
    try:
        yield
    finally:
        setattr(torch.autograd.Function, "apply", original)


def _batch_use(use: fx.Node) -> str:
    """A use of the batch, in the UDF's terms (``batch.nodes()``; sizes and ids are not compiled)."""
    if use.op == "call_method":
        return f"batch.{use.target}() (ids and sizes of the batch are not compiled)"
    if use.op == "call_function" and use.target is getattr:
        return f"batch.{use.args[1]} (the batch's spaces are {', '.join(SPACES)})"
    return f"{use.op} {getattr(use.target, '__name__', use.target)} of the batch"


def _merge_duplicate_accesses(graph: fx.Graph) -> None:
    seen: dict = {}
    for n in list(graph.nodes):
        if n.op == "placeholder" and "access" in n.meta:
            key = n.meta["access"]
            if key in seen:
                n.replace_all_uses_with(seen[key])
                graph.erase_node(n)
            else:
                seen[key] = n


def first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [""])[0][:200]


def _error_location(err, udf) -> str:
    fn = function_of(udf)
    code = getattr(fn, "__code__", None)
    if code is not None:
        for frame in reversed(inspect.getinnerframes(err.__traceback__)):
            if frame.filename == code.co_filename:
                return f"{frame.filename}:{frame.lineno}"
    return udf_location(udf)

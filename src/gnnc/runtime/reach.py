"""What a UDF reaches from outside its arguments, by path: the state its trace depends on.

A UDF is a function, a bound method, a ``functools.partial``, a callable
object or an ``nn.Module``. From it a walk follows ``self``, closure cells,
default arguments, the globals its code (and nested code) names,
partial arguments, module submodules / parameters / buffers / plain
attributes, attributes of plain objects and items of lists, tuples and
dicts. Every object met gets a *path* (a tuple of steps), so tensors and
modules found while tracing can be read again from the current UDF at
every call (``resolve``), and the walk's *fingerprint* (code identities,
Python values, module identities and modes, tensor dtypes and shapes, and
which paths alias one object) keys the trace: when it is unchanged, so is
the traced program.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import types
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

_MAX_DEPTH = 8  # container / object nesting followed below a root
_MAX_ITEMS = 512  # items of one list / dict followed
_SCALARS = (str, int, float, complex, bool, type(None), bytes, torch.dtype, torch.device)
_MODULE_INTERNALS = frozenset(nn.Module().__dict__)  # torch's own state, walked through the three dicts
_LIBRARY_PREFIXES = ("torch", "gnnc", "numpy", "scipy", "numba", "builtins", "functools", "math", "operator")


@dataclass
class Reach:
    """The walk's result: a fingerprint (hashable) and the paths of tensors and modules met."""

    fingerprint: tuple
    tensors: dict = field(default_factory=dict)  # id -> path
    modules: dict = field(default_factory=dict)  # id -> path
    objects: dict = field(default_factory=dict)  # id -> object (kept alive while the Reach lives)


def has_hooks(m: nn.Module) -> bool:
    """Whether calling ``m`` runs hooks (its own or global module hooks) besides its forward."""
    from torch.nn.modules import module as torch_module

    own = (m._forward_hooks, m._forward_pre_hooks, m._backward_hooks, m._backward_pre_hooks)
    every = (
        torch_module._global_forward_hooks,
        torch_module._global_forward_pre_hooks,
        torch_module._global_backward_hooks,
        torch_module._global_backward_pre_hooks,
    )
    return any(len(hooks) for hooks in own + every)


def _is_library(fn) -> bool:
    module = getattr(fn, "__module__", None) or ""
    return module.split(".", 1)[0] in _LIBRARY_PREFIXES


def _frozen_value(obj) -> bool:
    """A frozen dataclass of scalars (e.g. a built-in message): compared by value."""
    params = getattr(type(obj), "__dataclass_params__", None)
    return (
        params is not None
        and params.frozen
        and not isinstance(obj, type)
        and all(isinstance(getattr(obj, f.name), _SCALARS) for f in dataclasses.fields(obj))
    )


def code_names(code, seen=None) -> list[str]:
    """Global names read by ``code`` and the code objects nested in it."""
    seen = set() if seen is None else seen
    if id(code) in seen:
        return []
    seen.add(id(code))
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names += code_names(const, seen)
    return names


class _Walker:
    def __init__(self):
        self.keys: list = []
        self.reach = Reach(())
        self._first_path: dict = {}  # id -> index of the first key naming the object

    def visit(self, obj, path: tuple, depth: int = 0) -> None:
        oid = id(obj)
        if isinstance(obj, np.generic):  # by type and bits: np.float32(2) is not 2.0 to torch.tensor, nor -0.0 0.0
            self.keys.append((path, ("numpy", type(obj), obj.tobytes())))
            return
        if isinstance(obj, _SCALARS) or obj is Ellipsis or _frozen_value(obj):
            self.keys.append((path, obj))
            return
        if oid in self._first_path:  # aliasing is part of the key: one object, two paths
            self.keys.append((path, ("alias", self._first_path[oid])))
            return
        self._first_path[oid] = len(self.keys)
        self.reach.objects[oid] = obj
        if isinstance(obj, torch.Tensor):
            self.reach.tensors.setdefault(oid, path)
            self.keys.append((path, ("tensor", obj.dtype, tuple(obj.shape), obj.device.type, obj.requires_grad)))
        elif isinstance(obj, nn.Module):
            self.reach.modules.setdefault(oid, path)
            self.keys.append((path, ("module", type(obj), oid, obj.training, has_hooks(obj))))
            self._attributes(obj, path, depth, module=True)
        elif isinstance(obj, types.MethodType):
            self.keys.append((path, ("method",)))
            self.visit(obj.__self__, path + (("self",),), depth)
            self.visit(obj.__func__, path + (("func",),), depth)
        elif isinstance(obj, types.FunctionType):
            self._function(obj, path, depth)
        elif isinstance(obj, functools.partial):
            self.keys.append((path, ("partial", len(obj.args), tuple(obj.keywords))))
            self.visit(obj.func, path + (("func",),), depth)
            for i, a in enumerate(obj.args):
                self.visit(a, path + (("arg", i),), depth + 1)
            for k, v in obj.keywords.items():
                self.visit(v, path + (("kw", k),), depth + 1)
        elif isinstance(obj, (list, tuple)):
            self.keys.append((path, (type(obj), len(obj))))
            if depth < _MAX_DEPTH:
                for i, item in enumerate(obj[:_MAX_ITEMS]):
                    self.visit(item, path + (("item", i),), depth + 1)
        elif isinstance(obj, np.ndarray):
            self._array(obj, path, depth)
        elif isinstance(obj, dict):
            keys = list(obj)[:_MAX_ITEMS]
            self.keys.append((path, (type(obj), tuple(k if isinstance(k, _SCALARS) else id(k) for k in keys))))
            if depth < _MAX_DEPTH:
                for k in keys:
                    self.visit(obj[k], path + (("item", k),), depth + 1)
        elif isinstance(obj, (type, types.ModuleType, types.BuiltinFunctionType)) or _is_library(type(obj)):
            self.keys.append((path, ("id", oid)))
        else:
            self._object(obj, path, depth)

    def _function(self, fn, path, depth) -> None:
        if _is_library(fn) or depth > _MAX_DEPTH:
            self.keys.append((path, ("id", id(fn))))
            return
        code = fn.__code__
        self.keys.append((path, ("code", code)))
        for i, cell in enumerate(fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:  # a cell not yet bound
                self.keys.append((path + (("cell", i),), ("empty",)))
                continue
            self.visit(value, path + (("cell", i),), depth + 1)
        for i, value in enumerate(fn.__defaults__ or ()):
            self.visit(value, path + (("default", i),), depth + 1)
        for k, value in (fn.__kwdefaults__ or {}).items():
            self.visit(value, path + (("kwdefault", k),), depth + 1)
        for name in dict.fromkeys(code_names(code)):
            if name in fn.__globals__:
                self.visit(fn.__globals__[name], path + (("global", name),), depth + 1)

    def _array(self, arr, path, depth) -> None:
        """A numpy array, keyed by content: a trace holds what it computed from one as a constant (and
        ``torch.from_numpy`` shares its memory), so an array changed in place must retrace."""
        if arr.dtype.hasobject:
            self.visit(arr.tolist(), path, depth)
            return
        digest = hashlib.blake2b(arr.tobytes(), digest_size=16).digest()
        self.keys.append((path, ("ndarray", arr.dtype.str, arr.shape, digest)))

    def _object(self, obj, path, depth) -> None:
        """A callable or plain object: its type's ``__call__`` and its attributes."""
        self.keys.append((path, ("object", type(obj))))
        call = getattr(type(obj), "__call__", None)
        if isinstance(call, types.FunctionType):
            self.visit(call, path + (("call",),), depth)
        if depth < _MAX_DEPTH:
            self._attributes(obj, path, depth, module=False)

    def _attributes(self, obj, path, depth, module: bool) -> None:
        state = getattr(obj, "__dict__", None)
        if not isinstance(state, dict):
            return
        if module:
            entries = [*obj._parameters.items(), *obj._buffers.items(), *obj._modules.items()]
            entries += [(k, v) for k, v in state.items() if k not in _MODULE_INTERNALS]
        else:
            entries = list(state.items())
        for k, v in entries:
            self.visit(v, path + (("attr", k),), depth + (0 if module and isinstance(v, nn.Module) else 1))


def walk(udf) -> Reach:
    """The reach of ``udf``: its fingerprint and the paths of the tensors and modules it can get to."""
    w = _Walker()
    w.visit(udf, ())
    w.reach.fingerprint = tuple(w.keys)
    return w.reach


def resolve(udf, path: tuple):
    """The object at ``path`` from ``udf`` now (the UDF's current closure, globals and attributes)."""
    obj = udf
    for step in path:
        kind = step[0]
        if kind == "self":
            obj = obj.__self__
        elif kind == "func":
            obj = obj.func if isinstance(obj, functools.partial) else obj.__func__
        elif kind == "cell":
            obj = obj.__closure__[step[1]].cell_contents
        elif kind == "default":
            obj = obj.__defaults__[step[1]]
        elif kind == "kwdefault":
            obj = obj.__kwdefaults__[step[1]]
        elif kind == "global":
            obj = obj.__globals__[step[1]]
        elif kind == "arg":
            obj = obj.args[step[1]]
        elif kind == "kw":
            obj = obj.keywords[step[1]]
        elif kind == "call":
            obj = type(obj).__call__
        elif kind == "attr":
            obj = getattr(obj, step[1])
        else:  # item
            obj = obj[step[1]]
    return obj


def describe(path: tuple) -> str:
    """A path as Python-like text, for messages and explain: ``self.W[2]``, ``<global W>``."""
    text = "udf"
    for step in path:
        kind = step[0]
        if kind in ("self", "func", "call"):
            text = {"self": "self", "func": text, "call": f"{text}.__call__"}[kind]
        elif kind in ("cell", "default", "kwdefault", "global"):
            text = f"<{'closure' if kind == 'cell' else kind} {step[1]}>"
        elif kind in ("arg", "kw"):
            text = f"<partial {kind} {step[1]}>"
        elif kind == "attr":
            text = f"{text}.{step[1]}"
        else:
            text = f"{text}[{step[1]!r}]"
    return text


__all__ = ["Reach", "walk", "resolve", "describe"]


def function_of(udf):
    """The Python function whose code runs when ``udf`` is called (for locations), or None."""
    for _ in range(8):
        if isinstance(udf, types.FunctionType):
            return udf
        if isinstance(udf, types.MethodType):
            udf = udf.__func__
        elif hasattr(udf, "func") and callable(udf.func) and hasattr(udf, "keywords"):  # functools.partial
            udf = udf.func
        elif isinstance(udf, nn.Module):
            udf = type(udf).forward
        else:
            udf = getattr(type(udf), "__call__", None)
    return None


def udf_location(udf) -> str:
    """``file:line (name)`` of a UDF, for messages (of the user's UDF for one that interprets user UDFs)."""
    described = getattr(getattr(udf, "__self__", None), "gnnc_udf_location", None)
    if isinstance(described, str):
        return described
    fn = function_of(udf)
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__qualname__", type(udf).__name__)
    if code is None:
        return name
    return f"{code.co_filename}:{code.co_firstlineno} ({name})"

"""Trace a message / reduce / update UDF into a torch.fx graph.

The batch argument becomes a proxy; every ``batch.<space>[key]`` access
(``src``, ``dst``, ``data``, ``srctype``, ``dsttype``, ``type``, ``mailbox``)
becomes one placeholder named ``<space>.<key>``. Tensors the UDF reaches
from outside are never baked in: parameters and buffers of the bound module
(``self``) stay ``get_attr`` nodes on that live module, and tensors held in
closure cells or globals become placeholders ``cell.<i>`` / ``global.<name>``
read from the UDF's current closure / globals at every call. Whatever tracing cannot express (data-dependent
control flow, other uses of the batch) raises :class:`TraceFailure` naming
the operator and the UDF source line.
"""
from __future__ import annotations

import inspect
import operator
import sys
from dataclasses import dataclass, field

import torch
import torch.fx as fx
from torch import nn

SPACES = ("src", "dst", "data", "srctype", "dsttype", "type", "mailbox")


class TraceFailure(Exception):
    """Tracing could not capture the UDF; carries the operator and source line."""

    def __init__(self, what: str, where: str):
        super().__init__(f"{what} at {where}")
        self.what, self.where = what, where


@dataclass
class TracedUDF:
    """One UDF as an fx graph over accessor and closure placeholders."""

    graph: fx.Graph
    root: nn.Module
    outputs: dict[str, fx.Node]
    accesses: list[tuple[str, str]] = field(default_factory=list)
    externals: list[str] = field(default_factory=list)
    name: str = ""


class _Root(nn.Module):
    """Holds the UDF's bound module and closure modules so fx can name their parameters."""

    def __init__(self, udf):
        super().__init__()
        self._udf = udf
        owner = getattr(udf, "__self__", None)
        if isinstance(owner, nn.Module):
            self.owner = owner
        for i, cell in enumerate(getattr(udf, "__closure__", None) or ()):
            value = _cell_value(cell)
            if isinstance(value, nn.Module):
                self.add_module(f"cell{i}", value)

    def forward(self, batch):
        return self._udf(batch)


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:  # empty cell
        return None


class _Tracer(fx.Tracer):
    """fx tracer that turns closure and global tensors into run-time inputs."""

    def __init__(self, udf):
        super().__init__()
        fn = getattr(udf, "__func__", udf)
        self._udf_file = getattr(getattr(fn, "__code__", None), "co_filename", None)
        self._externals = {}
        for i, cell in enumerate(getattr(fn, "__closure__", None) or ()):
            value = _cell_value(cell)
            if isinstance(value, torch.Tensor):
                self._externals[id(value)] = f"cell.{i}"
        for name in getattr(getattr(fn, "__code__", None), "co_names", ()):
            value = getattr(fn, "__globals__", {}).get(name)
            if isinstance(value, torch.Tensor):
                self._externals[id(value)] = f"global.{name}"
        self.used_externals: list[str] = []

    def create_node(self, *args, **kwargs):
        """fx's node, with ``meta['udf_line']``: the innermost caller line in the UDF's file.

        (fx's own ``record_stack_traces`` symbolizes whole tracebacks through
        torch's profiler for every node, and its first use imports
        torch._inductor with networkx: ~20 MiB more per process.)
        """
        node = super().create_node(*args, **kwargs)
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename != self._udf_file:
            frame = frame.f_back
        if frame is not None:
            node.meta["udf_line"] = f"{frame.f_code.co_filename}:{frame.f_lineno}"
        return node

    def create_arg(self, a):
        if isinstance(a, torch.Tensor) and id(a) in self._externals:
            name = self._externals[id(a)]
            if name not in self.used_externals:
                self.used_externals.append(name)
            return self.create_node("placeholder", name, (), {}, name=name.replace(".", "_"))
        return super().create_arg(a)


def udf_location(udf) -> str:
    """``file:line (name)`` of a UDF, for messages."""
    fn = getattr(udf, "__func__", udf)
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__qualname__", type(udf).__name__)
    if code is None:
        return name
    return f"{code.co_filename}:{code.co_firstlineno} ({name})"


def node_location(node: fx.Node, udf) -> str:
    """The UDF source line that produced ``node`` (falls back to the UDF itself)."""
    return node.meta.get("udf_line") or udf_location(udf)


def trace_udf(udf) -> TracedUDF:
    """Trace ``udf(batch) -> dict`` into a :class:`TracedUDF` (or raise TraceFailure)."""
    root = _Root(udf)
    tracer = _Tracer(udf)
    try:
        graph = tracer.trace(root)
    except TraceFailure:
        raise
    except Exception as err:  # fx reports control flow, unsupported calls etc. as various errors
        raise TraceFailure(f"cannot trace ({type(err).__name__}: {_first_line(err)})",
                           _error_location(err, udf)) from err
    batch = next(n for n in graph.nodes if n.op == "placeholder" and n.target == "batch")
    accesses = []
    for use in list(batch.users):
        if not (use.op == "call_function" and use.target is getattr and use.args[1] in SPACES):
            raise TraceFailure(f"unsupported use of the batch argument ({use.format_node()})",
                               node_location(use, udf))
        for item in list(use.users):
            if not (item.op == "call_function" and item.target is operator.getitem and isinstance(item.args[1], str)):
                raise TraceFailure(f"{use.args[1]} must be indexed by a feature name ({item.format_node()})",
                                   node_location(item, udf))
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
    _merge_duplicate_accesses(graph)
    out = next(n for n in graph.nodes if n.op == "output")
    result = out.args[0]
    if not isinstance(result, dict):
        raise TraceFailure("the UDF must return a dict of tensors", udf_location(udf))
    for n in graph.nodes:
        n.meta["source"] = node_location(n, udf)
    return TracedUDF(graph, root, dict(result), accesses, tracer.used_externals, udf_location(udf))


def _merge_duplicate_accesses(graph: fx.Graph) -> None:
    seen = {}
    for n in list(graph.nodes):
        if n.op == "placeholder" and "access" in n.meta:
            key = n.meta["access"]
            if key in seen:
                n.replace_all_uses_with(seen[key])
                graph.erase_node(n)
            else:
                seen[key] = n


def _first_line(err) -> str:
    return (str(err).strip().splitlines() or [""])[0][:200]


def _error_location(err, udf) -> str:
    fn = getattr(udf, "__func__", udf)
    code = getattr(fn, "__code__", None)
    if code is not None:
        for frame in reversed(inspect.getinnerframes(err.__traceback__)):
            if frame.filename == code.co_filename:
                return f"{frame.filename}:{frame.lineno}"
    return udf_location(udf)

"""Human-readable MP-DFG listings, cost estimates and Graphviz dot."""
from __future__ import annotations

import operator

import torch
import torch.fx as fx
from torch import nn

from . import ops
from .mpdfg import MPDFG

_MATMULS = {torch.matmul, torch.bmm, operator.matmul, torch.nn.functional.linear, ops.shared_dot}


def _label(n: fx.Node) -> str:
    if n.op == "placeholder":
        kind, name = n.meta.get("input", ("?", n.target))
        return "context" if kind == "ctx" else f"input {kind}[{name!r}]"
    if n.op == "get_attr":
        return f"param {n.target}"
    if n.op == "call_method":
        return f".{n.target}"
    if n.op == "call_module":
        return f"module {n.target}"
    return getattr(n.target, "__name__", str(n.target))


def _arg_names(n: fx.Node) -> str:
    names = [a.name for a in n.all_input_nodes if a.meta.get("input", (None,))[0] != "ctx"]
    return ", ".join(names)


def format_dfg(dfg: MPDFG) -> str:
    """One line per operator: name, operator, inputs, residency, movement, shape, UDF line."""
    lines = []
    for n in dfg.graph.nodes:
        if n.op == "output":
            outs = ", ".join(f"{k}={v.name}" for k, v in dfg.outputs.items())
            lines.append(f"  return {{{outs}}}")
            continue
        if n.meta.get("input", (None,))[0] == "ctx":
            continue
        shape = n.meta.get("shape")
        shape_s = "x".join(str(d) for d in shape) if shape is not None else "-"
        lines.append(f"  %{n.name:<22} {_label(n):<28} ({_arg_names(n)})".ljust(90)
                     + f" {n.meta.get('res', '?'):<2} {n.meta.get('move', '?'):<24} {shape_s:<16}"
                     + f" {_short(n.meta.get('source', ''))}")
    return "\n".join(lines)


def _short(source: str) -> str:
    return source.rsplit("/", 1)[-1] if source else ""


def estimate(dfg: MPDFG) -> dict:
    """Approximate FLOPs and bytes of intermediate tensors (from annotated shapes)."""
    flops = inter = 0
    for n in dfg.graph.nodes:
        if n.op in ("placeholder", "get_attr", "output") or "shape" not in n.meta:
            continue
        numel = 1
        for d in n.meta["shape"]:
            numel *= d
        inter += numel * torch.empty((), dtype=n.meta["dtype"]).element_size()
        flops += numel * _flops_per_output(dfg, n)
    return {"flops": flops, "intermediate_bytes": inter}


def _flops_per_output(dfg: MPDFG, n: fx.Node) -> int:
    """2 * the contracted length for matmuls and linear layers, else 1."""
    if n.op == "call_module" and isinstance(dfg.root.get_submodule(n.target), nn.Linear):
        return 2 * dfg.root.get_submodule(n.target).in_features
    if n.op == "call_function" and n.target in _MATMULS:
        a = n.args[0].meta.get("shape") if isinstance(n.args[0], fx.Node) else None
        return 2 * (a[-1] if a else 1)
    if n.op == "call_function" and n.target in _TYPED_MATMULS:  # x's position: its width is contracted
        x = n.args[_TYPED_MATMULS[n.target]]
        a = x.meta.get("shape") if isinstance(x, fx.Node) else None
        return 2 * (a[-1] if a else 1)
    return 1


_TYPED_MATMULS = {ops.ntype_matmul: 1, ops.dst_ntype_matmul: 1, ops.etype_gather_matmul: 1,
                  ops.index_gather_matmul: 1, ops.index_matmul: 0}


def to_dot(dfg: MPDFG, title: str = "MP-DFG") -> str:
    """Graphviz dot text of the graph, nodes coloured by residency."""
    colours = {"V": "lightblue", "E": "lightsalmon", "A": "palegreen", "R": "plum", "S": "lightgrey"}
    lines = [f'digraph "{title}" {{', "  rankdir=TB;", "  node [shape=box, style=filled];"]
    for n in dfg.graph.nodes:
        if n.op == "output" or n.meta.get("input", (None,))[0] == "ctx":
            continue
        label = f"{_label(n)}\\n{n.meta.get('res', '?')} {n.meta.get('move', '')}".replace('"', "'")
        lines.append(f'  {n.name} [label="{label}", fillcolor={colours.get(n.meta.get("res"), "white")}];')
        for a in n.all_input_nodes:
            if a.meta.get("input", (None,))[0] != "ctx":
                lines.append(f"  {a.name} -> {n.name};")
    lines.append("}")
    return "\n".join(lines)

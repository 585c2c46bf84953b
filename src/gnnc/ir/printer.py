"""Human-readable MP-DFG listings, cost estimates and Graphviz dot."""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING

import torch
import torch.fx as fx
from torch import nn

from . import cost
from . import operators as ops
from .calls import called_module
from .mpdfg import MPDFG

if TYPE_CHECKING:  # a block's context, built by the executors: named for types only
    from .context import GraphContext

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
        lines.append(
            f"  %{n.name:<22} {_label(n):<28} ({_arg_names(n)})".ljust(90)
            + f" {n.meta.get('res', '?'):<2} {n.meta.get('move', '?'):<24} {shape_s:<16}"
            + f" {_short(n.meta.get('source', ''))}"
        )
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
        if n.meta.get("pair_table"):  # a fused operator's own typed linear per pair (``fuse``)
            flops += 2 * _contracted(n) * math.prod(n.meta["pair_table"])
    return {"flops": flops, "intermediate_bytes": inter}


def _flops_per_output(dfg: MPDFG, n: fx.Node) -> int:
    """2 * the contracted length for matmuls and linear layers, else 1."""
    if n.op == "call_module" and isinstance(module := called_module(n, dfg.root), nn.Linear):
        return 2 * module.in_features
    if n.op == "call_function" and n.target in _MATMULS:
        a = n.args[0].meta.get("shape") if isinstance(n.args[0], fx.Node) else None
        return 2 * (a[-1] if a else 1)
    if n.op == "call_function" and n.target in _TYPED_MATMULS:  # x's position: its width is contracted
        return 2 * max(1, _contracted(n))
    return 1


_TYPED_MATMULS: dict[fx.node.Target, int] = {
    ops.ntype_matmul: 1,
    ops.dst_ntype_matmul: 1,
    ops.etype_gather_matmul: 1,
    ops.etype_gather_head_matmul: 1,
    ops.etype_pair_matmul: 1,
    ops.etype_pair_head_matmul: 1,
    ops.etype_spmm: 1,
    ops.index_spmm: 1,
    ops.index_gather_matmul: 1,
    ops.index_matmul: 0,
}


def cost_choices(dfg: MPDFG, ctx: GraphContext) -> list[str]:
    """What the cost model (``gnnc.ir.cost``) chose for each graph-dependent operator of ``dfg`` on the
    block ``ctx``: the candidates with their FLOPs and bytes, the chosen one marked ``*``."""
    lines, outer = [], ctx
    for n in dfg.graph.nodes:
        if n.op != "call_function" or n.target not in _CHOICES:
            continue
        block = n.args[0]  # the plan's context, or a block regrouped by a type feature (``passes.retype``)
        ctx = outer.last_retyped() or outer if block.op != "placeholder" or block.meta["input"][0] != "ctx" else outer
        k = _contracted(n) if n.target in _TYPED_MATMULS or n.target in _PAIR_TABLE_INPUT else 0
        m = n.meta.get("shape", (0, 0))[-1]
        itemsize = torch.empty((), dtype=n.meta.get("dtype", torch.float32)).element_size()
        if n.target is ops.etype_spmm:
            pairs = f"Ps {ctx.src_pairs.unique:,}, Pd {ctx.dst_pairs.unique:,}"
            w = n.args[3].meta.get("shape") if isinstance(n.args[3], fx.Node) else None
            candidates, chosen = ops.etype_spmm_choice(ctx, k, m, w, n.args[4], itemsize)
        elif n.target is ops.etype_bilinear_dot:
            pairs = f"Ps {ctx.src_pairs.unique:,}, Pd {ctx.dst_pairs.unique:,}"
            weight = n.args[2].meta.get("shape", (0, 0, 0, 0))
            candidates, chosen = ops.etype_bilinear_dot_choice(ctx, weight[1], weight[-1], itemsize)
        if n.target in (ops.etype_spmm, ops.etype_bilinear_dot):
            tuned = {v for key, v in ctx.__dict__.get("_autotuned", {}).items() if key[0] == n.target.__name__}
            chosen = tuned.pop() if len(tuned) == 1 else chosen  # autotune measured it on this graph
        else:
            side = (
                "src"
                if n.target in _PAIR_TABLE_INPUT
                else n.kwargs.get("side", n.args[3] if len(n.args) > 3 else "src")
            )
            pairs = f"{ctx.pairs(side).unique:,} ({side}) pairs"
            width = math.prod(n.meta.get("pair_table", n.meta.get("shape", (0, 1)))[1:])
            candidates, chosen = cost.pair_table(ctx.num_edges, ctx.pairs(side).unique, k, width, itemsize)
        lines += cost.describe(
            f"%{n.name} ({n.meta.get('source')}) on {ctx.num_edges:,} edges, {pairs}", candidates, chosen
        )
    return lines


def _contracted(n: fx.Node) -> int:
    x = n.args[_TYPED_MATMULS[n.target] if n.target in _TYPED_MATMULS else _PAIR_TABLE_INPUT[n.target]]
    shape = x.meta.get("shape") if isinstance(x, fx.Node) else None
    return shape[-1] if shape else 0


_CHOICES = (
    ops.etype_pair_matmul,
    ops.etype_pair_head_matmul,
    ops.etype_spmm,
    ops.etype_bilinear_dot,
    ops.etype_sddmm_softmax_aggregate,
)
# Fused operators computing a pair table of their own: the position of the x its typed linear reads.
_PAIR_TABLE_INPUT: dict[fx.node.Target, int] = {ops.etype_sddmm_softmax_aggregate: 6}


def to_dot(dfg: MPDFG, title: str = "MP-DFG") -> str:
    """Graphviz dot text of the graph, nodes coloured by residency."""
    colours = {
        "V": "lightblue",
        "E": "lightsalmon",
        "A": "palegreen",
        "R": "plum",
        "S": "lightgrey",
        "Ps": "khaki",
        "Pd": "khaki",
    }
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

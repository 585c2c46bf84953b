"""Common-subexpression elimination.

Pattern: two nodes with the same operator, target, arguments and keyword
arguments, neither random (dropout draws new masks each time); and
``dst_nodes(x)`` in a whole-graph block (all nodes are destinations).
Replacement: the later one's uses point at the earlier one; ``x``.
"""

from __future__ import annotations

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from ...ir import operators as ops
from ...ir.mpdfg import MPDFG

_RANDOM_FUNCTIONS = {
    F.dropout,
    torch.dropout,
    torch.rand,
    torch.randn,
    torch.rand_like,
    torch.randn_like,
    torch.bernoulli,
    torch.multinomial,
}


def _is_random(n: fx.Node, root) -> bool:
    if n.op == "call_function":
        return n.target in _RANDOM_FUNCTIONS
    if n.op == "call_module":
        return isinstance(root.get_submodule(n.target), nn.Dropout)
    return n.op == "call_method" and n.target in ("dropout", "bernoulli_", "uniform_", "normal_")


def _key(n: fx.Node):
    def freeze(a):
        if isinstance(a, (list, tuple)):
            return (type(a).__name__,) + tuple(freeze(x) for x in a)
        if isinstance(a, dict):
            return ("dict",) + tuple(sorted((k, freeze(v)) for k, v in a.items()))
        if isinstance(a, slice):
            return ("slice", freeze(a.start), freeze(a.stop), freeze(a.step))
        if isinstance(a, fx.Node):
            return ("node", a.name)
        return (type(a).__name__, repr(a))

    return (n.op, n.target if isinstance(n.target, str) else id(n.target), freeze(n.args), freeze(n.kwargs))


def cse(dfg: MPDFG) -> MPDFG:
    out = dfg.copy()
    seen, merged = {}, 0
    for n in list(out.graph.nodes):
        if n.op in ("placeholder", "output") or _is_random(n, out.root):
            continue
        if out.whole_graph and n.target is ops.dst_nodes:
            n.replace_all_uses_with(n.args[1])
            out.graph.erase_node(n)
            merged += 1
            continue
        key = _key(n)
        if key in seen:
            n.replace_all_uses_with(seen[key])
            out.graph.erase_node(n)
            merged += 1
        else:
            seen[key] = n
    if merged:
        out.log.append(f"cse: merged {merged} repeated operators")
    return out

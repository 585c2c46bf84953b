"""Recognising the operators passes rewrite: shared by the passes, private to none of them."""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from ...ir import operators as ops
from ...ir.rules import is_index_select
from ...runtime import reach

INDEX_DTYPES = (torch.int64, torch.int32)  # the dtypes of a type feature that indexes per-type tables

BINARY_OPS = {
    operator.add: "add",
    operator.sub: "sub",
    operator.mul: "mul",
    operator.truediv: "div",
    torch.add: "add",
    torch.sub: "sub",
    torch.mul: "mul",
    torch.div: "div",
}


def binary_op(n) -> str | None:
    """add, sub, mul or div when ``n`` is that operator on two operands (function or method), else None."""
    if not isinstance(n, fx.Node) or len(n.args) != 2 or n.kwargs:
        return None
    if n.op == "call_function":
        return BINARY_OPS.get(n.target)
    return n.target if n.op == "call_method" and n.target in BINARY_OPS.values() else None


def call_arg(n, pos: int, name: str, default=None):
    """Argument ``name`` of call ``n``, given by keyword or at position ``pos``; ``default`` when absent."""
    if name in n.kwargs:
        return n.kwargs[name]
    return n.args[pos] if len(n.args) > pos else default


def is_last_dim_sum(n) -> bool:
    """Whether node ``n`` is ``x.sum(-1)`` / ``torch.sum(x, dim=-1)`` (keepdim not checked)."""
    if n.op == "call_method" and n.target == "sum" or n.op == "call_function" and n.target is torch.sum:
        dim = n.kwargs.get("dim", n.args[1] if len(n.args) > 1 else None)
        return dim == -1
    return False


def leaky_slope(n: fx.Node, root) -> float | None:
    """The negative slope when ``n`` is leaky_relu or relu of its first argument (as function, method or
    module), else None."""
    if n.op == "call_module":
        module = root.get_submodule(n.target)
        if isinstance(module, nn.LeakyReLU) and len(n.args) == 1:
            return float(module.negative_slope)
        return 0.0 if isinstance(module, nn.ReLU) and len(n.args) == 1 else None
    if n.op == "call_function" and n.target is F.leaky_relu:
        slope = n.kwargs.get("negative_slope", n.args[1] if len(n.args) > 1 else 0.01)
        return float(slope) if isinstance(slope, (int, float)) and not isinstance(slope, bool) else None
    if (n.op == "call_function" and n.target in (F.relu, torch.relu)) or (n.op == "call_method" and n.target == "relu"):
        return 0.0 if len(n.args) == 1 and not n.kwargs.get("inplace") else None
    return None


def is_call(n, target) -> bool:
    """Whether ``n`` is an fx node calling the function ``target``."""
    return isinstance(n, fx.Node) and n.op == "call_function" and n.target is target


def unsqueezed_then_squeezed(m):
    """x when ``m`` is ``x.unsqueeze(-2).squeeze()`` of an [rows, width] x, width not one, each used once: the
    views ``index_typed`` keeps for eager's ``bmm(...).squeeze()``, which then give x's rows as they are."""
    if not (
        isinstance(m, fx.Node)
        and m.op == "call_method"
        and m.target == "squeeze"
        and len(m.args) == 1
        and len(m.users) == 1
    ):
        return None
    lifted, shape = m.args[0], m.meta.get("shape")
    if not (
        isinstance(lifted, fx.Node)
        and lifted.op == "call_method"
        and lifted.target == "unsqueeze"
        and tuple(lifted.args[1:]) == (-2,)
        and len(lifted.users) == 1
        and shape is not None
        and len(shape) == 2
        and shape[1] != 1
    ):
        return None
    return lifted.args[0]


def table_lookup(n):
    """(table, index) when ``n`` reads rows of ``table`` by a tensor ``index``: ``table[index]``,
    ``table.index_select(0, index)`` or ``torch.index_select(table, 0, index)``; else None."""
    if not isinstance(n, fx.Node) or n.op not in ("call_function", "call_method"):
        return None
    if (n.target is operator.getitem or n.target == "__getitem__") and len(n.args) == 2 and not n.kwargs:
        table, index = n.args
    elif is_index_select(n):
        args = list(n.args) + [n.kwargs.get("dim"), n.kwargs.get("index")][len(n.args) - 1 :]
        if len(args) != 3 or args[1] != 0:
            return None
        table, _, index = args
    else:
        return None
    return (table, index) if isinstance(table, fx.Node) and isinstance(index, fx.Node) else None


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


def is_random(n: fx.Node, root: nn.Module) -> bool:
    """Whether ``n`` draws random numbers (dropout, rand*, bernoulli...): never merged, moved or reordered."""
    if n.op == "call_function":
        return n.target in _RANDOM_FUNCTIONS
    if n.op == "call_module":
        return isinstance(root.get_submodule(n.target), nn.Dropout)
    return n.op == "call_method" and n.target in ("dropout", "bernoulli_", "uniform_", "normal_")


def node_key(n: fx.Node) -> tuple:
    """What ``n`` computes, as a hashable key: op, target and arguments (operand nodes by name)."""

    def freeze(a):
        if isinstance(a, (list, tuple)):
            return (type(a).__name__,) + tuple(freeze(x) for x in a)
        if isinstance(a, dict):
            return ("dict",) + tuple(sorted((freeze(k), freeze(v)) for k, v in a.items()))  # keys: str or tuple
        if isinstance(a, slice):
            return ("slice", freeze(a.start), freeze(a.stop), freeze(a.step))
        if isinstance(a, fx.Node):
            return ("node", a.name)
        return (type(a).__name__, repr(a))

    return (n.op, n.target if isinstance(n.target, str) else id(n.target), freeze(n.args), freeze(n.kwargs))


def inactive_dropout(n: fx.Node, root: nn.Module) -> bool:
    """Whether ``n`` is a dropout that cannot fire: an ``nn.Dropout`` in eval mode or with p = 0, or
    ``F.dropout(..., training=False)`` / ``p=0``."""
    if n.op == "call_module":
        module = root.get_submodule(n.target)
        return isinstance(module, nn.Dropout) and (not module.training or module.p == 0)
    if n.op == "call_function" and n.target is F.dropout:
        training = n.kwargs.get("training", n.args[2] if len(n.args) > 2 else True)
        p = n.kwargs.get("p", n.args[1] if len(n.args) > 1 else 0.5)
        return training is False or p == 0
    return False


def type_feature_name(types: fx.Node) -> str:
    """How the user wrote a type index (``edges.data['rel_type']``, ...), for log lines and error messages."""
    kind, name = types.meta.get("input", (None, None))
    if kind == "edata":
        return f"edges.data[{name!r}]"
    if kind == "external" and "reach" in types.meta:
        return f"{reach.describe(types.meta['reach'][1])} (one per edge id)"
    views = {ops.dst_nodes: "nodes.data", ops.gather_src: "edges.src", ops.gather_dst: "edges.dst"}
    if types.op == "call_function" and types.target in views and isinstance(types.args[1], fx.Node):
        kind, name = types.args[1].meta.get("input", (None, None))
        if kind == "ndata":
            return f"{views[types.target]}[{name!r}]"
    return f"the index at {types.meta.get('source', '?')}"

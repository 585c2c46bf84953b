"""Building replacement nodes inside a pass, and recognising the operators passes rewrite."""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from ...ir.rules import is_index_select

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


def new_node(g, like, target, args, *, op: str = "call_function", kwargs=None):
    """A node ``op``/``target`` in graph ``g`` at the insertion point, with ``like``'s stage and UDF source line."""
    node = g.create_node(op, target, tuple(args), kwargs or {})
    node.meta.update(stage=like.meta.get("stage"), source=like.meta.get("source"))
    return node


def same_value(new, old):
    """``new`` replaces ``old`` by the same value: it takes ``old``'s shape and dtype annotations (so later
    rewrites in the same pass can match on them), and is returned."""
    new.meta.update({k: old.meta[k] for k in ("shape", "dtype") if k in old.meta})
    return new


def is_last_dim_sum(n) -> bool:
    """Whether node ``n`` is ``x.sum(-1)`` / ``torch.sum(x, dim=-1)`` (keepdim not checked)."""
    if n.op == "call_method" and n.target == "sum" or n.op == "call_function" and n.target is torch.sum:
        dim = n.kwargs.get("dim", n.args[1] if len(n.args) > 1 else None)
        return dim == -1
    return False


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

"""Softmaxes written out in a reduce UDF, recognised so they lower to the fused softmax aggregation.

Each form below, over the degree dim (dim 1) of a reduce UDF's graph, equals ``softmax(l, 1)``:

- ``p / p.sum(1, keepdim=True)`` (or ``.sum(1).unsqueeze(1)``) with ``p = exp(l - l.max(1,
  keepdim=True).values)`` (``[0]``, ``torch.max``, ``amax`` alike), as DGL-era GAT code writes it;
- the same with ``p = exp(l)``: no max subtracted;
- ``exp(log_softmax(l, 1))``.

Statements may be split any way (the traced graph is the same). The max subtraction changes nothing
mathematically; it only keeps eager's ``exp`` from overflowing. The fused kernels subtract each
destination's largest logit before exponentiating, whatever the UDF wrote, so the form without the
subtraction gives finite weights where eager's ``exp`` overflows (``inf / inf`` is NaN there), and
where eager's weights are finite the fused ones equal them up to rounding (DECISIONS: "Compile by
default and randomness"). Integer logits, and logits whose dtype the UDF probe did not see, are left
to the general lowering.
"""

from __future__ import annotations

import operator

import torch
import torch.nn.functional as F
from torch import fx

from .patterns import call_arg as _arg

_EXP = {torch.exp}
_DIV = {operator.truediv, torch.div}
_SUB = {operator.sub, torch.sub}
_SUM = {torch.sum}
_LOG_SOFTMAX = {torch.log_softmax, F.log_softmax}


def softmax_forms(graph: fx.Graph, shapes: dict, dtypes: dict) -> tuple[dict, set]:
    """``(softmax_of, internal)``: ``softmax_of`` maps each node of ``graph`` equal to ``softmax(l, 1)``
    to ``l``; ``internal`` holds the nodes that only compute those softmaxes (the lowering skips them).
    ``shapes`` and ``dtypes`` map node names to a probe run's values (empty when the UDF could not run)."""
    softmax_of = {}
    for n in graph.nodes:
        logits = _exp_of_log_softmax(n, shapes) or _divided_softmax(n, shapes)
        if isinstance(logits, fx.Node) and logits.name in dtypes and dtypes[logits.name].is_floating_point:
            softmax_of[n] = logits
    return softmax_of, _internal(graph, softmax_of)


def _internal(graph: fx.Graph, softmax_of: dict) -> set:
    """The nodes feeding a recognised softmax (its logits excluded) whose every user is such a softmax
    or another such node."""
    inside = set(softmax_of)
    logits = set(softmax_of.values())
    for n in reversed(graph.nodes):
        if n in inside or n in logits or n.op in ("placeholder", "get_attr", "output") or not n.users:
            continue
        if all(u in inside for u in n.users) and _feeds(n, softmax_of):
            inside.add(n)
    return inside - set(softmax_of)


def _feeds(n: fx.Node, softmax_of: dict) -> bool:
    """Whether ``n`` lies on a path from some recognised softmax's logits to that softmax."""
    return any(_depends_on(softmax, n) and _depends_on(n, logits) for softmax, logits in softmax_of.items())


def _depends_on(n: fx.Node, target: fx.Node) -> bool:
    seen, todo = set(), [n]
    while todo:
        m = todo.pop()
        if m is target:
            return True
        if m not in seen:
            seen.add(m)
            todo += m.all_input_nodes
    return False


def _divided_softmax(n: fx.Node, shapes: dict):
    """``l`` when ``n`` is ``p / p.sum(1, keepdim=True)`` with ``p = exp(l - max_1(l))`` or ``exp(l)``."""
    if not (_is(n, _DIV, "div") and len(n.args) == 2 and not n.kwargs):
        return None
    p, total = n.args
    if not (isinstance(p, fx.Node) and _is(p, _EXP, "exp") and len(p.args) == 1 and not p.kwargs):
        return None
    if _summed_over_degrees(total, shapes) is not p:
        return None
    shifted = p.args[0]
    if _is(shifted, _SUB, "sub") and len(shifted.args) == 2 and not shifted.kwargs:
        logits, top = shifted.args
        if _max_over_degrees(top, shapes) is logits:
            return logits
    return shifted


def _exp_of_log_softmax(n: fx.Node, shapes: dict):
    """``l`` when ``n`` is ``exp(log_softmax(l, 1))``."""
    if not (_is(n, _EXP, "exp") and len(n.args) == 1 and not n.kwargs):
        return None
    inner = n.args[0]
    if not (
        _is(inner, _LOG_SOFTMAX, "log_softmax")
        and len(inner.args) <= 2
        and set(inner.kwargs) <= {"dim", "_stacklevel", "dtype"}
        and inner.kwargs.get("dtype") is None
    ):
        return None
    logits = inner.args[0]
    return logits if _degree_dim(logits, _arg(inner, 1, "dim"), shapes) else None


def _summed_over_degrees(total, shapes: dict):
    """``x`` when ``total`` is ``x.sum(1, keepdim=True)`` or ``x.sum(1).unsqueeze(1)``."""
    if _is(total, set(), "unsqueeze") and len(total.args) == 2 and not total.kwargs and total.args[1] == 1:
        inner = total.args[0]
        return _reduced(inner, _SUM, "sum", False, shapes)
    return _reduced(total, _SUM, "sum", True, shapes)


def _max_over_degrees(top, shapes: dict):
    """``x`` when ``top`` is ``x.max(1, keepdim=True).values`` (or ``[0]``) or ``x.amax(1, keepdim=True)``."""
    if _is(top, {torch.amax}, "amax"):
        return _reduced(top, {torch.amax}, "amax", True, shapes)
    if (
        isinstance(top, fx.Node)
        and top.op == "call_function"
        and len(top.args) == 2
        and (
            (top.target is getattr and top.args[1] == "values") or (top.target is operator.getitem and top.args[1] == 0)
        )
    ):
        return _reduced(top.args[0], {torch.max}, "max", True, shapes)
    return None


def _reduced(n, functions, method, keepdim: bool, shapes: dict):
    """``x`` when ``n`` reduces ``x`` over dim 1 by ``functions`` / ``method`` with that ``keepdim``."""
    if not (_is(n, functions, method) and len(n.args) <= 3 and set(n.kwargs) <= {"dim", "keepdim"}):
        return None
    x = n.args[0]
    if not (_degree_dim(x, _arg(n, 1, "dim"), shapes) and bool(_arg(n, 2, "keepdim", False)) == keepdim):
        return None
    return x


def _degree_dim(x, dim, shapes: dict) -> bool:
    """Whether ``dim`` names dim 1 of ``x`` (a negative dim only where the probe knows x's rank)."""
    if type(dim) is not int or not isinstance(x, fx.Node):
        return False
    if dim < 0 and x.name in shapes:
        dim += len(shapes[x.name])
    return dim == 1


def _is(n, functions, method: str) -> bool:
    if not isinstance(n, fx.Node):
        return False
    return (n.op == "call_function" and n.target in functions) or (n.op == "call_method" and n.target == method)

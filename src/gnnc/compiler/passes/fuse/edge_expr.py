"""The rule that moves an edge-wise elementwise chain into the aggregation that sums it.

- ``segment_reduce(m, sum | mean)``, ``m`` an elementwise expression over gathered node rows, edge data
  and shared tensors -> ``edge_expr_aggregate(program, sides, operands, reduce)``
- ``spmm(x, w, mul, sum | mean)`` by source, ``w`` such an expression (MoNet's Gaussian weights) ->
  the same with the message ``w * gather_src(x)``

The expression is every operator reachable from the message through the supported set (add, sub, mul,
div, neg, exp, pow by a constant, square, (leaky) ReLU, sigmoid, tanh, a last-dim sum, unsqueeze, squeeze
of a dim, and the SDDMMs ``u_op_v`` of a source and a destination row) whose value is read by nothing
outside the expression, with edge values as its results; everything else it reads becomes an operand
(gathered rows are read through their gather, so no [E, ...] copy is made). Python numbers are constants.
Nothing is fused unless every value is of the message's floating dtype, the shapes check
(``gnnc.backend.pytorch.edge_expr.shapes``) and the expression does some arithmetic (for an spmm, its weight does:
a reshaped edge value times source rows stays the spmm).
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from ....backend.pytorch.edge_expr import shapes
from ....ir import operators as ops
from ....ir.mpdfg import MPDFG
from ..nodes import new_node, same_value
from ..patterns import binary_op, is_call, is_last_dim_sum, leaky_slope
from .operands import float_dtype, sddmm_slope

_GATHERS = {ops.gather_src: "src", ops.gather_dst: "dst", ops.gather_dst_local: "dst_local"}
_UNARY_FUNCTIONS = {
    operator.neg: "neg",
    torch.neg: "neg",
    torch.exp: "exp",
    torch.sigmoid: "sigmoid",
    torch.tanh: "tanh",
}
_UNARY_METHODS = {"neg", "exp", "sigmoid", "tanh"}
_ARITHMETIC = {"add", "sub", "mul", "div", "neg", "exp", "sigmoid", "tanh", "pow", "leaky_relu", "sum"}


def edge_expression(out: MPDFG) -> None:
    """Every sum or mean of an edge-wise expression (as a ``segment_reduce`` or as an ``spmm``'s weight) as
    one ``edge_expr_aggregate``."""
    g = out.graph
    for red in [n for n in g.nodes if is_call(n, ops.segment_reduce) or is_call(n, ops.spmm)]:
        found = _match(red, out.root)
        if found is None:
            continue
        program, sides, operands, reduce = found
        with g.inserting_before(red):
            new = same_value(
                new_node(g, red, ops.edge_expr_aggregate, (red.args[0], program, sides, tuple(operands), reduce)), red
            )
        red.replace_all_uses_with(new)
        g.erase_node(red)
        arithmetic = sum(step[0] in _ARITHMETIC for step in program)
        out.log.append(
            f"fuse: {red.meta.get('source')}: {arithmetic} edge-wise operators + {reduce} -> edge_expr_aggregate "
            "(generated loop, no [E, ...] message)"
        )


def _match(red: fx.Node, root):
    """(program, sides, operands, reduce) when ``red`` reduces a fusable expression, else None."""
    dtype = float_dtype(red)
    if dtype is None:
        return None
    if red.target is ops.segment_reduce:
        _, message, reduce = red.args
        weight, x = message, None
    else:
        _, x, weight, op, reduce, *side = red.args
        if op != "mul" or tuple(side) not in ((), ("src",)) or not isinstance(x, fx.Node):
            return None
    if reduce not in ("sum", "mean") or not isinstance(weight, fx.Node) or _operator(weight, root) is None:
        return None
    expression = _Expression(root, dtype, weight)
    top = expression.build(weight)
    if top is None:
        return None
    # arithmetic in the message (for an spmm: in its weight) or the static kernels are as good: a weight
    # that is edge data, only reshaped, stays the spmm it is
    if not any(step[0] in _ARITHMETIC for step in expression.steps):
        return None
    if x is not None:
        top = expression.add_step(("mul", top, expression.operand(x, "src")))
    program = tuple(expression.steps)
    if None in expression.operands:
        return None
    try:
        message = shapes(
            program, tuple(_kind(s) for s in expression.sides), [o.meta["shape"] for o in expression.operands]
        )[-1]
    except (ValueError, IndexError):
        return None
    if red.meta.get("shape") is None or tuple(message[1:]) != tuple(red.meta["shape"][1:]):
        return None
    return program, tuple(expression.sides), expression.operands, reduce


def _kind(side: str) -> str:
    return "dst" if side == "dst_local" else side


class _Expression:
    """The program of the expression rooted at ``top``: its operators are the nodes ``_operator`` accepts
    that nothing outside it reads (found by shrinking until that holds)."""

    def __init__(self, root, dtype, top: fx.Node):
        self.root, self.dtype, self.top = root, dtype, top
        self.inner = self._inner(top)
        self.steps: list[tuple] = []
        self.sides: list[str] = []
        self.operands: list = []
        self._memo: dict = {}

    def _inner(self, top: fx.Node) -> set:
        inner: set = set()
        frontier = [top]
        while frontier:
            n = frontier.pop()
            if n in inner or not self._fusable(n):
                continue
            inner.add(n)
            frontier += [a for a in _operator(n, self.root)[1] if isinstance(a, fx.Node)]
        while True:  # a value something outside reads stays an operand (it is written anyway)
            outside = {n for n in inner if n is not top and any(u not in inner for u in n.users)}
            if not outside:
                return inner
            inner -= outside

    def _fusable(self, n: fx.Node) -> bool:
        return _operator(n, self.root) is not None and n.meta.get("res") == "E" and n.meta.get("dtype") == self.dtype

    def add_step(self, step: tuple) -> int:
        self.steps.append(step)
        return len(self.steps) - 1

    def operand(self, node: fx.Node, side: str) -> int:
        key = (node, side)
        if key not in self._memo:
            ok = node.meta.get("dtype") == self.dtype and node.meta.get("shape") is not None
            self.operands.append(node if ok else None)
            self.sides.append(side)
            self._memo[key] = self.add_step(("operand", len(self.operands) - 1))
        return self._memo[key]

    def build(self, n) -> int | None:
        """The step computing ``n`` (added with its operands' steps), or None where ``n`` cannot be read."""
        if isinstance(n, _Gathered):
            return self.operand(n.node, n.side) if isinstance(n.node, fx.Node) else None
        if isinstance(n, bool) or not isinstance(n, (int, float, fx.Node)):
            return None
        if not isinstance(n, fx.Node):
            return self.add_step(("const", float(n)))
        if n in self._memo:
            return self._memo[n]
        if n not in self.inner:
            step = self._leaf(n)
        else:
            op, args, extra = _operator(n, self.root)
            steps = [self.build(a) for a in args]
            if any(s is None for s in steps):
                return None
            step = self._compose(op, steps, extra)
        self._memo[n] = step
        return step

    def _compose(self, op: str, steps: list, extra) -> int:
        if op == "u_op_v":
            kind, slope = extra
            if kind == "dot":
                return self.add_step(("sum", self.add_step(("mul", *steps)), True))
            step = self.add_step((kind, *steps))
            return step if slope is None else self.add_step(("leaky_relu", step, slope))
        return self.add_step((op, *steps, *extra))

    def _leaf(self, n: fx.Node) -> int | None:
        if n.op == "call_function" and n.target in _GATHERS and isinstance(n.args[1], fx.Node):
            return self.operand(n.args[1], _GATHERS[n.target])
        res = n.meta.get("res")
        if res in ("E", "S"):
            return self.operand(n, "edge" if res == "E" else "shared")
        return None


def _operator(n: fx.Node, root):
    """(operator, operands, extra arguments) of a node the program can compute, else None."""
    if not isinstance(n, fx.Node) or n.op not in ("call_function", "call_method", "call_module"):
        return None
    if n.kwargs.get("inplace") or n.op == "call_module" and getattr(root.get_submodule(n.target), "inplace", False):
        return None
    binary = binary_op(n)
    if binary is not None:
        return binary, list(n.args), ()
    slope = leaky_slope(n, root) if n.args and isinstance(n.args[0], fx.Node) else None
    if slope is not None:
        return "leaky_relu", [n.args[0]], (slope,)
    if _is_sum(n):
        return "sum", [n.args[0]], (bool(n.kwargs.get("keepdim", False)),)
    if n.kwargs or n.op == "call_module":
        return None
    if n.op == "call_function" and n.target in _UNARY_FUNCTIONS and len(n.args) == 1:
        return _UNARY_FUNCTIONS[n.target], [n.args[0]], ()
    if n.op == "call_method" and n.target in _UNARY_METHODS and len(n.args) == 1:
        return n.target, [n.args[0]], ()
    if (n.op == "call_function" and n.target is torch.square or n.op == "call_method" and n.target == "square") and len(
        n.args
    ) == 1:
        return "pow", [n.args[0]], (2.0,)
    if _is_pow(n):
        return "pow", [n.args[0]], (float(n.args[1]),)
    return _view(n) or _sddmm(n)


def _is_pow(n: fx.Node) -> bool:
    pows = (
        n.op == "call_function" and n.target in (operator.pow, torch.pow) or n.op == "call_method" and n.target == "pow"
    )
    return (
        pows
        and len(n.args) == 2
        and isinstance(n.args[0], fx.Node)
        and isinstance(n.args[1], (int, float))
        and not isinstance(n.args[1], bool)
    )


def _is_sum(n: fx.Node) -> bool:
    return (
        is_last_dim_sum(n)
        and len(n.args) <= 2
        and set(n.kwargs) <= {"dim", "keepdim"}
        and isinstance(n.kwargs.get("keepdim", False), bool)
        and isinstance(n.args[0], fx.Node)
    )


def _view(n: fx.Node):
    """unsqueeze / squeeze of one dim, as (op, [operand], (dim counted from 0,))."""
    if n.op not in ("call_method", "call_function") or len(n.args) != 2 or not isinstance(n.args[1], int):
        return None
    target = n.target if n.op == "call_method" else getattr(n.target, "__name__", None)
    if n.op == "call_function" and n.target not in (torch.unsqueeze, torch.squeeze):
        return None
    x, dim = n.args
    rank = len(n.meta.get("shape") or ())
    if target == "unsqueeze":
        return "unsqueeze", [x], (dim + rank if dim < 0 else dim,)
    if target == "squeeze":
        return "squeeze", [x], (dim + rank + 1 if dim < 0 else dim,)
    return None


def _sddmm(n: fx.Node):
    """``u_op_v`` of a source row and a destination row, as ("u_op_v", [gathered a, gathered b], (op, slope))."""
    if not is_call(n, ops.u_op_v) or (n.args[6] if len(n.args) > 6 else "src") != "src":
        return None
    _, a, b, op, b_side = n.args[:5]
    if op not in ("add", "sub", "mul", "div", "dot") or b_side not in ("dst", "dst_local"):
        return None
    return "u_op_v", [_Gathered(a, "src"), _Gathered(b, b_side)], (op, sddmm_slope(n))


class _Gathered:
    """A node's rows read at each edge's source or destination (a ``u_op_v`` operand)."""

    def __init__(self, node, side):
        self.node, self.side = node, side

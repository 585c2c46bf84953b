"""Edge expressions: an elementwise program over gathered node rows, edge data and shared tensors,
summed (or averaged) into destinations (``edge_expr_aggregate``). The torch backend's version, which is
the reference: it builds the edge tensors the program names and reduces them.

A program is a tuple of steps, each a tuple ``(op, *arguments)``; an argument that names a value is the
index of an earlier step, and the last step is the message. Steps:

- ``("operand", k)``: operand k, read by its kind (``kinds[k]``): ``src`` (node rows, the edge's source
  row), ``dst`` (destination rows of the block, the edge's destination), ``edge`` (one row per edge,
  the block's edge order) or ``shared`` (one tensor for all edges, broadcast as torch broadcasts it
  against the edge tensors: a dim aligned with the edge dim must be 1);
- ``("const", value)``: a Python number;
- ``("add" | "sub" | "mul" | "div", a, b)``: torch's binary operator, broadcasting;
- ``("neg" | "exp" | "sigmoid" | "tanh", a)``; ``("pow", a, exponent)`` with a constant exponent;
  ``("leaky_relu", a, slope)`` (slope 0: relu);
- ``("sum", a, keepdim)``: the sum over a's last dim (never the edge dim);
- ``("unsqueeze", a, dim)`` and ``("squeeze", a, dim)``: views, dims counted from 0 in a's (resp. the
  result's) full shape, never the edge dim.

Gradients are torch's own here (autograd through the built tensors).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .segment import segment_reduce

KINDS = ("src", "dst", "edge", "shared")
BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}
UNARY = {"neg": torch.neg, "exp": torch.exp, "sigmoid": torch.sigmoid, "tanh": torch.tanh}
REDUCES = ("sum", "mean")
ROW = -1  # the edge dim in a step's shape (``shapes``)


def edge_expr_aggregate(
    program: tuple,
    kinds: tuple[str, ...],
    operands: tuple[torch.Tensor, ...],
    src: torch.Tensor,
    dst: torch.Tensor,
    num_dst: int,
    reduce: str,
) -> torch.Tensor:
    """out[v] = reduce over e = u->v (``src[e]`` = u, ``dst[e]`` = v, destinations numbered from 0) of the
    message ``program`` computes for edge e; 0 where no edge arrives. ``reduce`` sum or mean."""
    check_edge_expr(program, kinds, operands, reduce)
    index = {"src": src, "dst": dst}
    leaves = [t.index_select(0, index[k]) if k in index else t for t, k in zip(operands, kinds)]
    return segment_reduce(evaluate(program, leaves), dst, num_dst, reduce)


def evaluate(program: tuple, leaves) -> torch.Tensor:
    """The value of ``program``'s last step, with operand k's values ``leaves[k]`` (edge rows: gathered)."""
    values: list = []
    for step in program:
        op, args = step[0], step[1:]
        if op == "operand":
            values.append(leaves[args[0]])
        elif op == "const":
            values.append(args[0])
        elif op in BINARY:
            values.append(BINARY[op](values[args[0]], values[args[1]]))
        elif op in UNARY:
            values.append(UNARY[op](values[args[0]]))
        elif op == "pow":
            values.append(torch.pow(values[args[0]], args[1]))
        elif op == "leaky_relu":
            x = values[args[0]]
            values.append(torch.relu(x) if args[1] == 0 else F.leaky_relu(x, args[1]))
        elif op == "sum":
            values.append(values[args[0]].sum(-1, keepdim=args[1]))
        elif op == "unsqueeze":
            values.append(values[args[0]].unsqueeze(args[1]))
        elif op == "squeeze":
            values.append(values[args[0]].squeeze(args[1]))
        else:
            raise ValueError(f"edge expression: unknown step {step!r}")
    return values[-1]


def shapes(program: tuple, kinds: tuple[str, ...], operand_shapes) -> list[tuple[int, ...]]:
    """Every step's shape, the edge dim written ``ROW`` (a constant: ``()``); ValueError naming the step
    where the program does not describe one message per edge."""
    out: list[tuple[int, ...]] = []
    for i, step in enumerate(program):
        op, args = step[0], step[1:]
        if op == "operand":
            shape = tuple(operand_shapes[args[0]])
            shape = shape if kinds[args[0]] == "shared" else (ROW,) + shape[1:]
        elif op == "const":
            shape = ()
        elif op in BINARY:
            shape = _broadcast(out[args[0]], out[args[1]], step)
        elif op == "sum":
            a = out[args[0]]
            if not a or a[-1] == ROW:
                raise ValueError(f"edge expression step {i} {step!r}: sums over the edge dim")
            shape = a[:-1] + ((1,) if args[1] else ())
        elif op == "unsqueeze":
            a = out[args[0]]
            if not 0 <= args[1] <= len(a) or (ROW in a and args[1] == 0):
                raise ValueError(f"edge expression step {i} {step!r}: dim out of range or before the edge dim")
            shape = a[: args[1]] + (1,) + a[args[1] :]
        elif op == "squeeze":
            a = out[args[0]]
            if not 0 <= args[1] < len(a) or a[args[1]] != 1:
                raise ValueError(f"edge expression step {i} {step!r}: squeezes a dim that is not 1")
            shape = a[: args[1]] + a[args[1] + 1 :]
        else:
            shape = out[args[0]]
        out.append(shape)
    if not out or out[-1][:1] != (ROW,):
        raise ValueError("edge expression: the last step is not one value per edge")
    return out


def _broadcast(a, b, step) -> tuple[int, ...]:
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + a, (1,) * (rank - len(b)) + b
    dims = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            dims.append(x)
        elif x == 1:
            dims.append(y)
        else:
            raise ValueError(f"edge expression step {step!r}: shapes do not broadcast ({a} and {b})")
    return tuple(dims)


def check_edge_expr(program: tuple, kinds: tuple[str, ...], operands, reduce: str) -> list[tuple[int, ...]]:
    """Validate the arguments of ``edge_expr_aggregate`` (errors name the culprit); returns ``shapes``."""
    if reduce not in REDUCES:
        raise ValueError(f"edge_expr_aggregate: reduce {reduce!r} is not one of {REDUCES}")
    if len(kinds) != len(operands) or any(k not in KINDS for k in kinds):
        raise ValueError(
            f"edge_expr_aggregate: kinds {kinds!r} do not name each of {len(operands)} operands in {KINDS}"
        )
    for k, (t, kind) in enumerate(zip(operands, kinds)):
        if kind != "shared" and t.dim() == 0:
            raise ValueError(f"edge_expr_aggregate: operand {k} ({kind}) has no rows")
    return shapes(program, kinds, [tuple(t.shape) for t in operands])

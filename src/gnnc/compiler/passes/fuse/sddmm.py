"""Rules that build and extend generalized SDDMMs (``u_op_v``): an edge value from a source and a
destination row without materialising either gathered operand.

- ``gather_src(a) op gather_dst(b)`` (op add, sub, mul, div; the gathers
  used nowhere else) -> ``u_op_v(a, b, op)``: one generalized SDDMM writes the
  edge result without materialising either gathered operand
- ``leaky_relu(u_op_v(a, b, op))`` (also relu, ``nn.LeakyReLU``, ``nn.ReLU``;
  the SDDMM used nowhere else) -> ``u_op_v(a, b, op, negative_slope)``: the
  activation is applied as the SDDMM writes (GAT's attention logits)
- ``sum(u_op_v(a, b, mul), -1)`` (a, b of the product's shape) -> ``u_op_v(a, b, dot).squeeze(-1)``:
  a per-head dot product of a source row and a destination row (HGT's
  attention) without its [E, H, F] product.
"""

from __future__ import annotations

import torch.fx as fx

from ....ir import operators as ops
from ....ir.mpdfg import MPDFG
from ..nodes import new_node, same_value
from ..patterns import BINARY_OPS, is_call, is_last_dim_sum, leaky_slope
from .operands import DESTINATION_SIDES, as_dtype, float_dtype, sddmm_slope, source_side


def build_sddmm(out: MPDFG) -> None:
    """Every ``gather_src(a) op gather_dst(b)`` (gathers used once) as ``u_op_v``."""
    g = out.graph
    for n in list(g.nodes):
        if not (n.op == "call_function" and n.target in BINARY_OPS and len(n.args) == 2 and not n.kwargs):
            continue
        a, b = n.args
        a_side = source_side(a)
        b_side = DESTINATION_SIDES.get(b.target) if isinstance(b, fx.Node) and b.op == "call_function" else None
        dtype = float_dtype(n)
        if a_side is None or b_side is None or len(a.users) != 1 or len(b.users) != 1 or dtype is None:
            continue
        with g.inserting_before(n):
            x, y = (as_dtype(g, n, v.args[1], dtype) for v in (a, b))
            new = same_value(
                new_node(g, n, ops.u_op_v, (a.args[0], x, y, BINARY_OPS[n.target], b_side, None, a_side)), n
            )
        n.replace_all_uses_with(new)
        g.erase_node(n)
        out.log.append(
            f"fuse: {n.meta.get('source')}: {a.target.__name__} {BINARY_OPS[n.target]} {b.target.__name__} "
            "-> u_op_v (SDDMM)"
        )


def sum_to_dot(out: MPDFG) -> None:
    """Every last-dim sum of a ``u_op_v`` product as a ``u_op_v`` dot product."""
    g = out.graph
    for sddmm in [n for n in g.nodes if is_call(n, ops.u_op_v)]:
        if sddmm.args[3] != "mul" or sddmm_slope(sddmm) is not None or len(sddmm.users) != 1:
            continue
        total = next(iter(sddmm.users))
        shape = sddmm.meta.get("shape")
        if not (
            is_last_dim_sum(total)
            and total.args[0] is sddmm
            and not total.kwargs.get("keepdim", False)
            and len(total.args) <= 2
            and shape
            and len(shape) >= 2
            and all(x.meta.get("shape") and tuple(x.meta["shape"][1:]) == tuple(shape[1:]) for x in sddmm.args[1:3])
        ):
            continue
        with g.inserting_before(total):
            args = list(sddmm.args)
            args[3] = "dot"
            dot = new_node(g, total, ops.u_op_v, tuple(args))
            new = same_value(new_node(g, total, "squeeze", (dot, -1), op="call_method"), total)
        total.replace_all_uses_with(new)
        g.erase_node(total)
        out.log.append(
            f"fuse: {total.meta.get('source')}: sum of a source-destination product -> u_op_v dot "
            "(no [E, ..., F] product)"
        )


def activation_into_sddmm(out: MPDFG) -> None:
    """Every (leaky) ReLU of a ``u_op_v`` applied inside it (its negative slope)."""
    g = out.graph
    for sddmm in [n for n in g.nodes if is_call(n, ops.u_op_v)]:
        if sddmm_slope(sddmm) is not None or sddmm.args[3] == "dot" or len(sddmm.users) != 1:
            continue
        act = next(iter(sddmm.users))
        slope = leaky_slope(act, out.root) if act.args and act.args[0] is sddmm else None
        if slope is None:
            continue
        with g.inserting_before(act):
            new = same_value(new_node(g, act, ops.u_op_v, sddmm.args[:5] + (slope,) + sddmm.args[6:]), act)
        act.replace_all_uses_with(new)
        out.log.append(f"fuse: {act.meta.get('source')}: leaky_relu applied inside u_op_v (slope {slope:g})")

"""The rule that computes SDDMM attention logits inside the softmax aggregation that reads them.

- ``edge_softmax_aggregate(u_op_v(a, b, op, negative_slope), x)`` (also
  through the ``squeeze(-1)`` above; a, b of the SDDMM's shape, the SDDMM
  used nowhere else) -> ``sddmm_softmax_aggregate(a, b, op, negative_slope,
  x)``: the logits are computed where the softmax reads them and never
  written (GAT: the attention scores of ``apply_edges`` reach here as a
  deferred SDDMM, see ``gnnc.runtime.deferred``).
"""

from __future__ import annotations

import torch.fx as fx

from ....ir import operators as ops
from ....ir.mpdfg import MPDFG
from ..nodes import new_node
from ..patterns import is_call
from .operands import sddmm_slope


def softmax_logits(out: MPDFG) -> None:
    """Every ``edge_softmax_aggregate`` of SDDMM logits as ``sddmm_softmax_aggregate``."""
    g = out.graph
    for agg in [n for n in g.nodes if is_call(n, ops.edge_softmax_aggregate)]:
        ctx, logits, x = agg.args[:3]
        x_side = agg.args[3] if len(agg.args) > 3 else "src"
        found = _sddmm_logits(logits)
        if found is None or (found[0].args[6] if len(found[0].args) > 6 else "src") != x_side:
            continue
        sddmm, squeezed = found
        _, a, b, op, side = sddmm.args[:5]
        with g.inserting_before(agg):
            if squeezed:
                a, b = (new_node(g, agg, "squeeze", (t, -1), op="call_method") for t in (a, b))
            new = new_node(g, agg, ops.sddmm_softmax_aggregate, (ctx, a, b, op, side, sddmm_slope(sddmm), x, x_side))
        agg.replace_all_uses_with(new)
        g.erase_node(agg)
        out.log.append(
            f"fuse: {agg.meta.get('source')}: SDDMM logits computed inside the softmax aggregation "
            "-> sddmm_softmax_aggregate"
        )


def _sddmm_logits(logits):
    """(u_op_v node, squeezed) when ``logits`` is an elementwise SDDMM or its squeeze(-1), each used once,
    whose operands have its shape; else None."""
    squeezed = (
        isinstance(logits, fx.Node)
        and logits.op == "call_method"
        and logits.target == "squeeze"
        and tuple(logits.args[1:]) == (-1,)
        and len(logits.users) == 1
    )
    sddmm = logits.args[0] if squeezed else logits
    if not (
        is_call(sddmm, ops.u_op_v)
        and sddmm.args[3] != "dot"
        and len(sddmm.users) == 1
        and sddmm.args[4] in ("dst", "dst_local", "dst_pair")
    ):
        return None
    shape = sddmm.meta.get("shape")
    if shape is None or any(
        x.meta.get("shape") is None or tuple(x.meta["shape"][1:]) != tuple(shape[1:]) for x in sddmm.args[1:3]
    ):
        return None
    return sddmm, squeezed

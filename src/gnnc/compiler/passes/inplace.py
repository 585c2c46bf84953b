"""Write elementwise results into an operand nothing else reads (no fresh buffer, no page faults).

Pattern: a binary elementwise operator (``+ - * /``) whose left operand (or
either operand of ``+`` and ``*``) is computed in the plan by an operator
that returns a tensor of its own (an aggregation, or another elementwise
result) and is read by nothing else: the post-aggregation factor of GCN's
norm, a bias or gate after a reduction, a chain of arithmetic on edge
values. On CPU a new output the size of a node or
edge table costs a page fault per 4 KiB on every call.

Replacement: ``in_place(op, a, b, unsaved)``, which runs ``a.<op>_(b)`` when
the result keeps ``a``'s shape and dtype and autograd records nothing for
the operator, or records an add or subtract into an ``a`` no backward keeps
(``unsaved``: an aggregation, another binary result), and ``a op b``
otherwise (``gnnc.ir.operators.in_place``). It runs after ``recompute``: the
chains that pass copies stay out of place.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
import torch.nn.functional as F

from ...ir import operators as ops
from ...ir.mpdfg import MPDFG
from .contract import PassResult, rewrote
from .nodes import new_node
from .patterns import binary_op

# Operators (besides the binary ones) whose result is a tensor of their own (never a view of an input), so
# writing into it when no other node reads it changes nothing else.
_OWN_RESULT = {
    torch.exp,
    torch.sigmoid,
    torch.tanh,
    torch.relu,
    torch.neg,
    operator.neg,
    F.relu,
    F.gelu,
    F.elu,
    F.silu,
    F.leaky_relu,
    ops.spmm,
    ops.scaled_spmm,
    ops.etype_spmm,
    ops.index_spmm,
    ops.segment_reduce,
    ops.edge_softmax_aggregate,
    ops.sddmm_softmax_aggregate,
    ops.etype_sddmm_softmax_aggregate,
    ops.zero_unreached,
    ops.shared_dot,
    ops.in_place,
}
# Of those, the ones no backward keeps (they save their inputs, or nothing): an add or subtract may write
# into them while autograd records (R-GCN's self-loop and bias after its sum: no third [N, F] buffer).
_UNSAVED_RESULT = {
    torch.neg,
    operator.neg,
    ops.spmm,
    ops.scaled_spmm,
    ops.etype_spmm,
    ops.index_spmm,
    ops.segment_reduce,
    ops.zero_unreached,
    ops.shared_dot,
    ops.in_place,
}
_COMMUTATIVE = {"add", "mul"}  # exactly, in floating point too


def _writable(n) -> bool:
    """Whether ``n`` is a result of its own that no other node reads (an activation traced with
    ``inplace=True``, which the tracer always passes by keyword, returns its input)."""
    own = binary_op(n) is not None or (
        isinstance(n, fx.Node) and n.op == "call_function" and n.target in _OWN_RESULT and not n.kwargs.get("inplace")
    )
    return own and len(n.users) == 1


def inplace(dfg: MPDFG) -> PassResult:
    out = dfg.copy()
    g = out.graph
    rewritten = 0
    for n in list(g.nodes):
        op = binary_op(n)
        if op is None:
            continue
        a, b = n.args
        if op in _COMMUTATIVE and not _writable(a) and _writable(b):
            a, b = b, a  # 2 * x, bias + h: written into the right operand
        if not _writable(a) or b is a:
            continue
        unsaved = binary_op(a) is not None or a.target in _UNSAVED_RESULT
        with g.inserting_before(n):
            new = new_node(g, n, ops.in_place, (op, a, b, unsaved))
        new.meta.update({k: v for k, v in n.meta.items() if k not in new.meta or new.meta[k] is None})
        n.replace_all_uses_with(new)
        g.erase_node(n)
        rewritten += 1
    if rewritten:
        out.log.append(f"inplace: {rewritten} elementwise operators write into an operand nothing else reads")
    return rewrote(dfg, out)

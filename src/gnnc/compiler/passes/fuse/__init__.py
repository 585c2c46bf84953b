"""Broadcast fusion: gather-compute-reduce chains become one fused primitive.

The pass is a table of rewrite rules, one family per module, each stating its pattern and replacement:
``destination_side`` (factors and terms of the destination row moved past a reduction), then dead code
removed so that nothing below fuses the moved operands, then ``sddmm`` (source-destination products,
their dot products and activations), ``aggregate`` (reductions of gathered rows: spmm, softmax
aggregation), ``softmax_logits`` and ``typed`` (typed linear layers under an aggregation), and last
``edge_expr`` (an elementwise chain over edges generated inside the sum that reads it). Rules run in
table order, each once over the graph: a later rule matches what an earlier one built.

Every ``gather_src`` in a pattern may also be a ``gather_src_pair`` of (relation, source) pair rows
(``compact``), and ``gather_dst`` a ``gather_dst_pair`` where the destination row is not hoisted: the fused
operator then reads that table through the pair index (its ``x_side`` / ``a_side`` / ``b_side``). The
logits of ``sddmm_softmax_aggregate`` need ``a`` and ``x`` on one source index; ``b`` may be by destination
node or pair. The producers stay when something else uses them; DCE removes them otherwise. Dtypes: see
``operands``.
"""

from __future__ import annotations

from collections.abc import Callable

from ....ir.mpdfg import MPDFG
from ..contract import PassResult, rewrote
from ..dce import dce
from .aggregate import aggregate
from .destination_side import hoist_dst_terms, postpone_dst_factors
from .edge_expr import edge_expression
from .sddmm import activation_into_sddmm, build_sddmm, sum_to_dot
from .softmax_logits import softmax_logits
from .typed import index_typed_aggregation, typed_aggregation, typed_softmax_aggregation

Rule = Callable[[MPDFG], None]  # rewrites every match in the MP-DFG in place, one log line per rewrite

BEFORE_DEAD_CODE: tuple[tuple[str, Rule], ...] = (
    ("postpone destination factors", postpone_dst_factors),
    ("hoist destination terms", hoist_dst_terms),
)
RULES: tuple[tuple[str, Rule], ...] = (
    ("sddmm", build_sddmm),
    ("dot", sum_to_dot),  # on the SDDMMs just built
    ("activation", activation_into_sddmm),
    ("aggregate", aggregate),
    ("softmax logits", softmax_logits),  # on the softmax aggregations just built
    ("typed softmax aggregation", typed_softmax_aggregation),  # on the SDDMM softmax aggregations just built
    ("typed aggregation", typed_aggregation),
    ("index typed aggregation", index_typed_aggregation),
    ("edge expression", edge_expression),  # last: what the rules above fuse keeps their kernels
)


def fuse(dfg: MPDFG) -> PassResult:
    """``dfg`` with every rule of ``BEFORE_DEAD_CODE``, then dead code removed, then every rule of ``RULES``."""
    out = dfg.copy()
    for _, rule in BEFORE_DEAD_CODE:
        rule(out)
    out = dce(out).dfg  # the hoisted sums' old terms: nothing below should fuse them
    for _, rule in RULES:
        rule(out)
    return rewrote(dfg, out)


__all__ = ["fuse", "RULES", "BEFORE_DEAD_CODE"]

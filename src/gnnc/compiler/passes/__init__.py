"""Optimization passes over one call's MP-DFG: pure functions MPDFG -> MPDFG, one per file.

``optimize`` runs the default pipeline; ``gnnc.compile(model, <pass>=False)``
switches a pass off by name.
"""

from __future__ import annotations

from ...failures import stage
from ...ir.mpdfg import MPDFG
from .align import align
from .compact import compact
from .cse import cse
from .dce import dce
from .distribute_linear import distribute
from .fuse import fuse
from .index_typed import index_typed
from .inplace import inplace
from .keywords import canonical_keywords
from .linear_reorder import linear_reorder
from .lower_aggregation import lower_aggregation
from .node_scales import node_scales
from .recompute import recompute
from .reorder import reorder
from .retype import retype
from .shared_dot import shared_dot
from .split_concat import split_concat
from .typed_linear import typed_linear

PIPELINE = (
    ("align", align),
    ("lower_aggregation", lower_aggregation),
    ("dce", dce),
    ("typed_linear", typed_linear),
    ("index_typed", index_typed),  # weight[edges.data[...]]: typed linear with the types from a feature
    ("retype", retype),  # ... and the whole plan on the block regrouped by that feature: typed operators
    ("split_concat", split_concat),
    ("distribute", distribute),  # after split_concat: its halves are often linear maps of differences
    ("reorder", reorder),
    ("typed_linear", typed_linear),  # again: reordering exposes per-head relation matmuls
    ("index_typed", index_typed),  # again: reorder may have moved the unsqueeze before the gather
    ("retype", retype),
    ("compact", compact),  # per-edge typed linear -> once per (relation, node) pair
    ("reorder", reorder),  # again: moves what follows the pair gathers to the pairs
    ("linear_reorder", linear_reorder),  # on the pairs: (x W_r) . a_r -> x (W_r a_r)
    ("fuse", fuse),
    ("reorder", reorder),  # again: postponed factors leave products of source-side gathers
    ("fuse", fuse),
    ("node_scales", node_scales),  # after fuse: GCN's norm factors, postponed and merged, scale its spmm
    ("cse", cse),  # merges a linear map applied to the same rows twice (source and destination side)
    ("shared_dot", shared_dot),  # last: reorder and fuse match the product and sum it replaces
    ("cse", cse),
    ("recompute", recompute),  # marks the final plan's values; the chains it copies must not change
    ("inplace", inplace),  # after recompute: its recipes keep their own out-of-place copies
)


def optimize(dfg: MPDFG, annotate=None, **options) -> MPDFG:
    """Run every pipeline pass not switched off in ``options`` (``name=False``).

    Keyword aliases are made canonical first (``keywords``). ``annotate(dfg)`` refreshes shapes and
    residencies after each pass, so every pass sees a fully annotated graph; dead code is removed at the
    end. An exception leaves named by its pass (``gnnc.failures.stage``).
    """
    unknown = set(options) - {name for name, _ in PIPELINE}
    if unknown:
        raise TypeError(f"unknown compile options {sorted(unknown)}; passes: {[n for n, _ in PIPELINE]}")
    with stage("pass canonical_keywords"):  # not optional: the passes read dim / keepdim by these names
        dfg = canonical_keywords(dfg)
    for name, pass_fn in PIPELINE:
        if options.get(name, True):
            with stage(f"pass {name}"):  # a failure, in the pass or in what it left, is reported as the pass's
                dfg = pass_fn(dfg)
                if annotate is not None:
                    annotate(dfg)
    with stage("pass dce"):
        return dce(dfg)


__all__ = [
    "optimize",
    "PIPELINE",
    "align",
    "compact",
    "cse",
    "dce",
    "distribute",
    "fuse",
    "index_typed",
    "inplace",
    "linear_reorder",
    "lower_aggregation",
    "node_scales",
    "recompute",
    "reorder",
    "retype",
    "shared_dot",
    "split_concat",
    "typed_linear",
]

"""Optimization passes over one call's MP-DFG, one per file, each ``MPDFG -> PassResult`` (``contract``).

``optimize`` runs the default pipeline (``pipeline.PIPELINE``, declared as data); ``gnnc.compile(model,
<pass>=False)`` switches a pass off by name. Shared recognisers live in ``patterns``, node builders in
``nodes``; ``verify`` is the debug-mode check after each pass.
"""

from __future__ import annotations

from .align import align
from .compact import compact
from .contract import MPDFGPass, PassResult
from .cse import cse
from .dce import dce
from .distribute_linear import distribute
from .fuse import fuse
from .index_typed import index_typed
from .inplace import inplace
from .linear_reorder import linear_reorder
from .lower_aggregation import lower_aggregation
from .node_scales import node_scales
from .pipeline import PASSES, PIPELINE, FixedPoint, describe_pipeline, optimize, pass_names
from .recompute import recompute
from .reorder import reorder
from .retype import retype
from .shared_dot import shared_dot
from .split_concat import split_concat
from .typed_linear import typed_linear

__all__ = [
    "optimize",
    "pass_names",
    "describe_pipeline",
    "FixedPoint",
    "MPDFGPass",
    "PassResult",
    "PASSES",
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

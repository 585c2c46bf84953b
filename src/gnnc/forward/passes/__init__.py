"""Passes over a captured forward (``gnnc.forward.capture``), one per file, each ``fx.Graph -> ForwardPassResult``
(``contract``), run once each in ``FORWARD_PASSES`` order."""

from __future__ import annotations

from .batch_heads import batch_heads
from .contract import ForwardPass, ForwardPassResult
from .fast_dropout import fast_dropout
from .graph_reads import graph_reads
from .merge_linears import merge_linears
from .release_features import release_features
from .scope_deferral import scope_deferral
from .type_masks import type_masks

FORWARD_PASSES: tuple[tuple[str, ForwardPass], ...] = (
    ("graph_reads", graph_reads),  # one read of a feature read again unchanged (logs nothing of its own)
    ("type_masks", type_masks),  # per-type mask gathers and writes -> one split, one index_put
    ("merge_linears", merge_linears),  # after type_masks: it removes the writes that block merging
    ("batch_heads", batch_heads),  # after merge_linears: the heads' values are then columns of one product
    ("release_features", release_features),  # after the passes that match graph operations: it adds some
    ("scope_deferral", scope_deferral),  # after release_features, which refuses a scope whose graph code follows
    ("fast_dropout", fast_dropout),  # last: the passes before it know torch's dropout as random code
)

__all__ = [
    "FORWARD_PASSES",
    "ForwardPass",
    "ForwardPassResult",
    "batch_heads",
    "fast_dropout",
    "graph_reads",
    "merge_linears",
    "release_features",
    "scope_deferral",
    "type_masks",
]

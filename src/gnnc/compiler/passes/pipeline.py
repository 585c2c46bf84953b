"""The default pass pipeline, declared as data, and ``optimize``, which runs it.

``PIPELINE`` lists steps: a pass name, or a ``FixedPoint`` group of passes whose order among themselves is
not essential, run in turn until none of them changes the MP-DFG. A name may appear more than once (a pass
that a later rewrite gives more to match); ``gnnc.compile(model, <name>=False)`` switches it off everywhere.
Every pass follows ``contract``: ``MPDFG -> PassResult``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...failures import stage
from ...ir.mpdfg import MPDFG
from . import verify
from .align import align
from .compact import compact
from .contract import MPDFGPass
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


@dataclass(frozen=True)
class FixedPoint:
    """Passes repeated in this order until a whole round changes nothing; more than ``rounds`` rounds is a
    bug (two rewrites undoing each other) and raises ``FixedPointNotReached``."""

    passes: tuple[str, ...]
    rounds: int = 8


class FixedPointNotReached(RuntimeError):
    """A ``FixedPoint`` group still changed the MP-DFG after its bound of rounds."""


PASSES: dict[str, MPDFGPass] = {
    "align": align,
    "lower_aggregation": lower_aggregation,
    "dce": dce,
    "typed_linear": typed_linear,
    "index_typed": index_typed,
    "retype": retype,
    "split_concat": split_concat,
    "distribute": distribute,
    "reorder": reorder,
    "compact": compact,
    "linear_reorder": linear_reorder,
    "fuse": fuse,
    "node_scales": node_scales,
    "cse": cse,
    "shared_dot": shared_dot,
    "recompute": recompute,
    "inplace": inplace,
}

_TYPED = ("typed_linear", "index_typed", "retype")  # each can expose what the next two match

PIPELINE: tuple[str | FixedPoint, ...] = (
    "align",
    "lower_aggregation",
    "dce",
    # weight[edges.data[...]]: typed linear with the types from a feature, and the whole plan on the block
    # regrouped by that feature: typed operators
    FixedPoint(_TYPED),
    "split_concat",
    "distribute",  # after split_concat: its halves are often linear maps of differences
    "reorder",
    FixedPoint(_TYPED),  # again: reordering exposes per-head relation matmuls and moves unsqueezes before gathers
    "compact",  # per-edge typed linear -> once per (relation, node) pair
    "reorder",  # again: moves what follows the pair gathers to the pairs
    "linear_reorder",  # on the pairs: (x W_r) . a_r -> x (W_r a_r)
    FixedPoint(("fuse", "reorder")),  # reorder again: postponed factors leave products of source-side gathers
    "node_scales",  # after fuse: GCN's norm factors, postponed and merged, scale its spmm
    # cse, shared_dot, cse stay three steps: repeated to a fixed point they change a plan (udf_fuzz seed 7000078)
    "cse",  # merges a linear map applied to the same rows twice (source and destination side)
    "shared_dot",  # last: reorder and fuse match the product and sum it replaces
    "cse",
    "recompute",  # marks the final plan's values; the chains it copies must not change
    "inplace",  # after recompute: its recipes keep their own out-of-place copies
)


def pass_names() -> list[str]:
    """The names ``gnnc.compile`` accepts to switch a pass off, in pipeline order, each once."""
    names: dict[str, None] = {}
    for step in PIPELINE:
        names.update(dict.fromkeys(step.passes if isinstance(step, FixedPoint) else (step,)))
    return list(names)


def describe_pipeline() -> str:
    """The pipeline in one line: ``a -> b -> (c -> d)* -> ...``, a starred group repeated to a fixed point."""
    return " -> ".join(f"({' -> '.join(step.passes)})*" if isinstance(step, FixedPoint) else step for step in PIPELINE)


def optimize(dfg: MPDFG, annotate: Callable[[MPDFG], None] | None = None, **options: bool) -> MPDFG:
    """Run every pipeline pass not switched off in ``options`` (``name=False``).

    Keyword aliases are made canonical first (``keywords``). ``annotate(dfg)`` refreshes shapes and
    residencies after each pass that changed it, so every pass sees a fully annotated graph; dead code is
    removed at the end. An exception leaves named by its pass (``gnnc.failures.stage``). With
    ``GNNC_VERIFY_PASSES`` set, the MP-DFG is checked after every pass (``verify``).
    """
    unknown = set(options) - set(pass_names())
    if unknown:
        raise TypeError(f"unknown compile options {sorted(unknown)}; passes: {pass_names()}")
    with stage("pass canonical_keywords"):  # not optional: the passes read dim / keepdim by these names
        dfg, renamed = canonical_keywords(dfg)
        if annotate is not None and renamed:
            annotate(dfg)
    run = _Runner(options, annotate, frozenset(dfg.outputs) if verify.verifying() else None)
    for step in PIPELINE:
        dfg = run.group(step, dfg) if isinstance(step, FixedPoint) else run.step(step, dfg)[0]
    with stage("pass dce"):
        return dce(dfg).dfg


@dataclass
class _Runner:
    options: dict
    annotate: Callable[[MPDFG], None] | None
    outputs: frozenset | None  # the keys to check after each pass; None: no check

    def step(self, name: str, dfg: MPDFG) -> tuple[MPDFG, bool]:
        """``dfg`` after pass ``name`` (unless switched off), annotated and checked; and whether it changed.

        A pass that changed no operator is not annotated again: it copied the annotations of its input,
        which depend only on the operators and on the placeholders' marks, which passes change only along
        with an operator (shape propagation after every pass was most of a first call's pass time)."""
        if not self.options.get(name, True):
            return dfg, False
        with stage(f"pass {name}"):  # a failure, in the pass or in what it left, is reported as the pass's
            dfg, changed = PASSES[name](dfg)
            if self.annotate is not None and changed:
                self.annotate(dfg)
            if self.outputs is not None:
                verify.check(dfg, name, self.outputs, annotated=self.annotate is not None)
        return dfg, changed

    def group(self, group: FixedPoint, dfg: MPDFG) -> MPDFG:
        """``dfg`` after ``group``'s passes, repeated until a round changes nothing."""
        for _ in range(group.rounds):
            changed = []
            for name in group.passes:
                dfg, did = self.step(name, dfg)
                changed += [name] * did
            if not changed:
                return dfg
        raise FixedPointNotReached(
            f"passes {list(group.passes)} still change the MP-DFG after {group.rounds} rounds "
            f"(the last round: {changed}); two rewrites may undo each other"
        )

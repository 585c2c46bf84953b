"""Dropping a graph's features inside a local scope (``gnnc.forward.passes.release_features`` places the calls).

``arm_drop(g, kept)`` before a scope's last message-passing call lets that call's compiled plan drop, once
its inputs are bound and before it runs, every feature neither it nor ``kept`` names; ``drop_features(g,
kept)`` after the call drops the rest (the call's own results nobody reads) and disarms.
"""

from __future__ import annotations

import contextvars

from ..failures import stage

_ARMED: contextvars.ContextVar = contextvars.ContextVar("gnnc_armed_drop", default=None)
_SINGLE_RUN = frozenset({"apply_edges", "update_all"})  # calls that run one plan per whole-graph call
_RUN_TIME = stage("forward pass release_features at run time")  # what a failure in the pass's drops is named


def _keep_only(graph, kept) -> None:
    nodes, edges = kept
    graph._nstore.keep_only(nodes)
    graph._estore.keep_only(edges)


def arm_drop(graph, kept: tuple) -> None:
    """Let the next compiled whole-graph plan on ``graph`` drop what it does not read (see the module)."""
    _ARMED.set((graph, kept))


@_RUN_TIME
def drop_features(graph, kept: tuple) -> None:
    """Remove every node feature of ``graph`` not named in ``kept[0]`` and every edge feature not named in
    ``kept[1]``, and disarm. Only for a graph inside ``local_scope``, whose end restores them."""
    _ARMED.set(None)
    _keep_only(graph, kept)


@_RUN_TIME
def drop_feature(graph, edge: bool, key: str) -> None:
    """Remove edge (``edge``) or node feature ``key`` of ``graph`` if present (see ``drop_features``)."""
    (graph._estore if edge else graph._nstore).discard(key)


@_RUN_TIME
def drop_before_run(kind: str, graph, rel, read) -> None:
    """Called by a compiled plan with its inputs bound: where ``graph`` is armed and this whole-graph call
    is the armed one, drop the features neither the plan (``read()``: the node and the edge feature names it
    binds, asked only then) nor the forward after it reads, and disarm."""
    armed = _ARMED.get()
    if armed is None or armed[0] is not graph:
        return
    _ARMED.set(None)
    if rel is None and kind in _SINGLE_RUN:
        nodes, edges = read()
        _keep_only(graph, (armed[1][0] | nodes, armed[1][1] | edges))

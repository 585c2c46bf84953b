"""release_features (a forward pass): a local scope's features nothing reads again are dropped after its last
message-passing call, not held until the scope ends.

DGL-style layers keep every intermediate in the graph inside ``with g.local_scope():``, as DGL's HGT
example does (``ndata['k'], ['q'], ['v']``, then ``apply_edges`` writes ``edata['a'], ['v']``, then
``update_all`` writes ``ndata['t']``); the scope drops them only when it ends, so the per-type update that
follows the last call runs while [N, d] node and [E, H] edge intermediates are still held. gnnc's own layers
free theirs when their plan ends.

Pattern, in a captured forward's fx graph: a scope ``with G.local_scope():`` on a graph argument ``G``
(entered and left in the forward), its last message-passing call on ``G``, and after it, up to the scope's
end, only feature reads, pops and writes with constant keys and the graph's counts and degrees (nothing else
uses ``G`` or its frames, and no scope starts or ends there); the forward wrote a feature in the scope
before that call that nothing reads after it. Replacement: ``drop_features(G, kept)`` right after the
call, dropping every node and edge feature not named in ``kept`` (the keys read or popped after the call, per
node and edge frames) without computing a deferred one; ``drop_feature(G, edge, key)`` after the last read of
each kept one (the value read then lives only as long as the code using it, as in gnnc's own layers, whose
plans hold no graph feature); and ``arm_drop(G, kept)`` right before the call, so that its compiled plan, once
it has bound its inputs, drops first what neither it nor ``kept`` names (a one-plan call, ``apply_edges`` or
``update_all`` on the whole graph; ``gnnc.runtime.feature_release``). Exact: nothing reads a dropped feature
before the scope ends, and the scope's end restores the features as they were when it began, dropped ones
included.
"""

from __future__ import annotations

import operator

import torch.fx as fx

from ...runtime.feature_release import arm_drop, drop_feature, drop_features
from ..capture import EDGE_FRAMES, copied, enter_scope, exit_scope, graph_frame, message_passing_call
from .contract import ForwardPassResult, unchanged

_COUNTS = frozenset({"num_nodes", "num_edges", "number_of_nodes", "number_of_edges", "in_degrees", "out_degrees"})


def _scope_graph(enter: fx.Node) -> fx.Node | None:
    """``G`` when ``enter`` enters ``G.local_scope()`` on a graph argument."""
    cm = enter.args[0] if enter.args else None
    if (
        isinstance(cm, fx.Node)
        and cm.op == "call_method"
        and cm.target == "local_scope"
        and len(cm.args) == 1
        and not cm.kwargs
        and isinstance(cm.args[0], fx.Node)
        and cm.args[0].meta.get("graph_argument")
    ):
        return cm.args[0]
    return None


def _keyed_use(n: fx.Node, frame: fx.Node):
    """(kind, key) when ``n`` reads (``read``), pops (``pop``) or writes (``write``) ``frame[key]`` with a
    constant string key; None for any other use of ``frame``."""
    if (
        n.op == "call_function"
        and n.target is operator.getitem
        and len(n.args) == 2
        and n.args[0] is frame
        and isinstance(n.args[1], str)
    ):
        return "read", n.args[1]
    if (
        n.op == "call_function"
        and n.target is operator.setitem
        and n.args[0] is frame
        and isinstance(n.args[1], str)
        and n.args[2] is not frame
    ):
        return "write", n.args[1]
    if (
        n.op == "call_method"
        and n.target == "pop"
        and len(n.args) == 2
        and not n.kwargs
        and n.args[0] is frame
        and isinstance(n.args[1], str)
    ):
        return "pop", n.args[1]
    return None


def _after_last_call(body: list, g: fx.Node):
    """(last call on ``g`` in ``body``, keys read or popped after it, the last read of each) or None where
    something else uses ``g`` or its frames after that call."""
    calls = [i for i, n in enumerate(body) if message_passing_call(n) and n.args and n.args[0] is g]
    if not calls:
        return None
    kept = {"node": set(), "edge": set()}
    last_reads = {}  # (edge feature?, key) -> its last read
    order = {n: i for i, n in enumerate(body)}
    for n in body[calls[-1] + 1 :]:
        if n.op == "call_function" and n.target in (enter_scope, exit_scope):
            return None
        if graph_frame(n) and n.args[0] is g:
            for use in n.users:
                found = _keyed_use(use, n)
                if found is None:
                    return None
                if found[0] != "write":
                    kept["edge" if n.args[1] in EDGE_FRAMES else "node"].add(found[1])
                if found[0] == "read":
                    site = (n.args[1] in EDGE_FRAMES, found[1])
                    if site not in last_reads or order.get(use, -1) > order.get(last_reads[site], -1):
                        last_reads[site] = use
        elif n.op == "call_method" and n.target in _COUNTS and n.args and n.args[0] is g:
            continue
        elif any(a is g for a in (*n.args, *n.kwargs.values())):
            return None
    return body[calls[-1]], (frozenset(kept["node"]), frozenset(kept["edge"])), last_reads


def _dropped(body: list, g: fx.Node, until: fx.Node, kept: tuple) -> list:
    """Features the forward writes into ``g``'s frames in ``body`` before ``until`` and ``kept`` lacks."""
    keys = set()
    for n in body[: body.index(until)]:
        if graph_frame(n) and n.args[0] is g:
            edge = n.args[1] in EDGE_FRAMES
            keys.update(
                f"{n.args[1]}[{found[1]!r}]"
                for use in n.users
                if (found := _keyed_use(use, n)) and found[0] == "write" and found[1] not in kept[edge]
            )
    return sorted(keys)


def scope_bodies(graph: fx.Graph):
    """(``G``, the nodes inside, the node leaving it) of every ``G.local_scope()`` on a graph argument that the
    forward enters and leaves."""
    nodes = list(graph.nodes)
    for i, enter in enumerate(nodes):
        if not (enter.op == "call_function" and enter.target is enter_scope) or (g := _scope_graph(enter)) is None:
            continue
        ends = [
            j
            for j in range(i + 1, len(nodes))
            if nodes[j].op == "call_function" and nodes[j].target is exit_scope and nodes[j].args[0] is enter.args[0]
        ]
        if ends:
            yield g, nodes[i + 1 : ends[0]], nodes[ends[0]]


def release_features(graph: fx.Graph) -> ForwardPassResult:
    """The rewritten copy of ``graph`` and one log line per scope released early (none: ``graph`` itself)."""
    sites = []
    for g, body, _ in scope_bodies(graph):
        found = _after_last_call(body, g)
        if found is None:
            continue
        call, kept, last_reads = found
        dropped = _dropped(body, g, call, kept)
        if dropped:
            sites.append((g, call, kept, dropped, last_reads))
    if not sites:
        return unchanged(graph)
    new, env = copied(graph)
    log = []
    for g, call, kept, dropped, last_reads in sites:
        with new.inserting_before(env[call]):
            new.call_function(arm_drop, (env[g], kept))
        with new.inserting_after(env[call]):
            new.call_function(drop_features, (env[g], kept))
        for (edge, key), read in last_reads.items():
            with new.inserting_after(env[read]):
                new.call_function(drop_feature, (env[g], edge, key))
        log.append(
            f"release_features: around {call.target} on {g.name}, features nothing reads again in its "
            f"local scope are dropped ({', '.join(dropped)} written by the forward; kept: node "
            f"{sorted(kept[0])}, edge {sorted(kept[1])})"
        )
    new.lint()
    return ForwardPassResult(new, True, log)


__all__ = ["release_features", "scope_bodies"]

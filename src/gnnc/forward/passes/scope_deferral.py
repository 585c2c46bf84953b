"""scope_deferral (a forward pass): in a local scope of a forward that writes into no tensor, an apply_edges
result may stay unwritten even where it holds the call's inputs.

A compiled whole-graph ``apply_edges`` leaves an SDDMM or gather result unwritten for the next compiled call to
fuse (``gnnc.runtime.deferred``), unless the result holds one of the call's inputs, such as DGL's HGT scores
``(k W_r) . q`` of ``ndata['k']`` and ``ndata['q']``: user code could write into those before the value is
read, so it is computed at once, [E, H] at the call, and the node features it reads stay needed through it.
A captured forward shows all the code until the graph's next call.

Pattern, in a captured forward's fx graph with no write into a tensor anywhere: an ``apply_edges`` on a graph
argument ``G`` inside ``with G.local_scope():`` (entered and left in the forward), after which every call on
``G`` in the scope is a whole-graph ``apply_edges`` or ``update_all`` given only its functions (no edge subset,
relation or ``compile=False``: each goes through a compiled call first). Replacement:
``trust_next_apply_edges(G)`` before that call, and ``forget_trusted(G)`` before the scope ends. Exact: the
operands cannot change before the value is read, since nothing writes into a tensor, and a call that runs
user code eagerly computes the still deferred values first (``settle_trusted``).
"""

from __future__ import annotations

import torch.fx as fx

from ...runtime.deferred import forget_trusted, trust_next_apply_edges
from ..capture import copied, message_passing_call, writes_in_place
from .contract import ForwardPassResult, unchanged
from .release_features import scope_bodies

_FUNCTIONS = frozenset({"message", "func", "message_func", "reduce", "reduce_func", "update", "apply_node_func"})
_MOST_POSITIONAL = {"apply_edges": 2, "update_all": 4}  # the graph, then the functions only


def _plain_call(n: fx.Node) -> bool:
    """Whether ``n`` is a whole-graph apply_edges or update_all given only its functions."""
    return (
        n.target in _MOST_POSITIONAL
        and len(n.args) <= _MOST_POSITIONAL[n.target]
        and all(k in _FUNCTIONS or (k == "compile" and v in (None, True)) for k, v in n.kwargs.items())
    )


def scope_deferral(graph: fx.Graph) -> ForwardPassResult:
    """The rewritten copy of ``graph`` and one log line per trusted call (none: ``graph`` itself)."""
    if any(writes_in_place(n) for n in graph.nodes):
        return unchanged(graph)
    sites = []
    for g, body, end in scope_bodies(graph):
        calls = [n for n in body if message_passing_call(n) and n.args and n.args[0] is g]
        trusted = [c for i, c in enumerate(calls) if c.target == "apply_edges" and all(map(_plain_call, calls[i:]))]
        if trusted:
            sites.append((g, trusted, end))
    if not sites:
        return unchanged(graph)
    new, env = copied(graph)
    log = []
    for g, trusted, end in sites:
        for call in trusted:
            with new.inserting_before(env[call]):
                new.call_function(trust_next_apply_edges, (env[g],))
        with new.inserting_before(env[end]):
            new.call_function(forget_trusted, (env[g],))
        log.append(
            f"scope_deferral: {len(trusted)} apply_edges on {g.name} may leave results that hold their "
            "inputs unwritten for the next call (no write into a tensor until the scope ends)"
        )
    new.lint()
    return ForwardPassResult(new, True, log)


__all__ = ["scope_deferral"]

"""graph_reads (a forward pass): repeated reads of one graph feature -> one read.

``mask = g.ndata_all['ntype'] == t`` inside a loop reads the feature once per iteration; the forward passes
that group per-type code (``type_masks``) need to see one tensor. Pattern, in a captured forward's fx
graph: ``G.<frame>[key]`` read again with no graph operation in between (a write, ``pop``, a message-passing
call, a scope entered or left). Replacement: the later reads use the first. The same tensor (or, for a
deferred edge result, the same values). Enables other passes; logs nothing of its own.
"""

from __future__ import annotations

import operator

import torch.fx as fx

from ..capture import enter_scope, exit_scope, graph_frame
from .contract import ForwardPassResult, unchanged


def _read(n: fx.Node):
    """(graph, frame, key) when ``n`` reads a feature of a graph argument."""
    if (
        n.op == "call_function"
        and n.target is operator.getitem
        and isinstance(n.args[0], fx.Node)
        and graph_frame(n.args[0])
        and isinstance(n.args[0].args[0], fx.Node)
        and n.args[0].args[0].meta.get("graph_argument")
        and isinstance(n.args[1], str)
    ):
        frame = n.args[0]
        return frame.args[0], frame.args[1], n.args[1]
    return None


def _graph_operation(n: fx.Node, graphs: set) -> bool:
    """Whether ``n`` may change a graph's features: anything using a graph or a frame but a read."""
    if graph_frame(n) or _read(n) is not None:
        return False
    return (
        any(isinstance(a, fx.Node) and (a in graphs or graph_frame(a)) for a in (*n.args, *n.kwargs.values()))
        or n.op == "call_function"
        and n.target in (enter_scope, exit_scope)
    )


def graph_reads(graph: fx.Graph) -> ForwardPassResult:
    """The copy of ``graph`` with repeated feature reads merged (``graph`` itself when there are none)."""
    graphs = {n for n in graph.nodes if n.meta.get("graph_argument")}
    first: dict = {}
    repeats: dict = {}
    for n in graph.nodes:
        if _graph_operation(n, graphs):
            first.clear()
        elif (key := _read(n)) is not None:
            if key in first:
                repeats[n] = first[key]
            else:
                first[key] = n
    if not repeats:
        return unchanged(graph)
    new = fx.Graph()
    env: dict = {}
    new.output(new.graph_copy(graph, env))
    for later, earlier in repeats.items():
        env[later].replace_all_uses_with(env[earlier])
    for later, earlier in repeats.items():
        frame = env[later].args[0]
        new.erase_node(env[later])
        if not frame.users:
            new.erase_node(frame)
    return ForwardPassResult(new, True, [])

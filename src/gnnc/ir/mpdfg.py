"""The message-passing data-flow graph (MP-DFG): one call's fx graph and the names its inputs and outputs use.

An ``MPDFG`` is one torch.fx graph for one message-passing call: its
placeholders are the block's ``GraphContext`` and the data the UDFs read
(node / edge features, node-type / relation data, closure tensors), its
body is the message, reduce and update UDFs joined by explicit movement
operators (``gnnc.ir.operators``), and it returns a dict of results, the edge
features the message UDF wrote among them, keyed ``(EDGE_WRITE, name)``
(the caller stores those in the graph, as eager does). Every node
carries ``meta['stage']`` and ``meta['source']`` (UDF line); inference adds
``meta['res']`` and ``meta['move']``. The graph as built is executable and
means exactly what the eager executor does (a reduce UDF runs on degree
buckets); passes rewrite it into cheaper graphs with the same meaning.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch.fx as fx
from torch import nn

# Placeholder kind of an operand of an earlier call's deferred SDDMM (``gnnc.runtime.deferred``): node rows,
# named "<edge feature>.a" / "<edge feature>.b".
DEFERRED_INPUT = "deferred"
# Output key space of the edge features a message UDF wrote (``edges.data[k] = v``): key (EDGE_WRITE, k).
EDGE_WRITE = "edges.data"


@dataclass
class MPDFG:
    """One call's data-flow graph plus the modules its get_attr nodes name.

    ``kind`` is ``update_all`` (results are destination-node data) or
    ``apply_edges`` (results are edge data). ``log`` records which pass
    rewrote what, for ``explain``; ``whole_graph`` is set when the plan is
    for a whole-graph block, where ``dst_nodes`` is the identity.
    """

    graph: fx.Graph
    root: nn.Module
    kind: str
    log: list[str] = field(default_factory=list)
    whole_graph: bool = False  # the block is the whole graph: its destination rows are all rows

    def copy(self) -> MPDFG:
        graph = fx.Graph()
        out = graph.graph_copy(self.graph, {})
        graph.output(out)
        for old, new in zip(self.graph.nodes, graph.nodes):
            new.meta = dict(old.meta)
        return MPDFG(graph, self.root, self.kind, list(self.log), self.whole_graph)

    @property
    def output_node(self) -> fx.Node:
        return next(n for n in reversed(self.graph.nodes) if n.op == "output")

    @property
    def outputs(self) -> dict:
        outputs = self.output_node.args[0]
        assert isinstance(outputs, dict), "an MP-DFG returns {name: value}"
        return outputs

    def inputs(self) -> list[fx.Node]:
        return [n for n in self.graph.nodes if n.op == "placeholder"]

    def module(self) -> fx.GraphModule:
        return live_module(self.root, self.graph)


def live_module(root: nn.Module, graph: fx.Graph) -> fx.GraphModule:
    """``fx.GraphModule(root, graph)`` that reads the attributes of ``root``'s children when it runs.

    fx copies each ``get_attr`` target into a skeleton of the module tree; a
    parameter the user later rebinds would then be read stale. Putting the
    live children back makes every access go through the user's modules.
    """
    gm = fx.GraphModule(root, graph)
    for name, child in root.named_children():
        if hasattr(gm, name):
            setattr(gm, name, child)
    return gm

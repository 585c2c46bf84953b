"""merge_linears (a forward pass): ``nn.Linear`` modules applied to the same tensor -> one wider matmul.

Users write one linear per head (DGL's GAT tutorial: a ``GATLayer`` per head, each ``self.fc(h)``) or per
role (HGT's K, Q and V linears on the same rows). Each reads the whole input: k narrow products move the
input k times and run at a fraction of the machine's matmul speed.

Pattern, in a captured forward's fx graph (``gnnc.forward.capture``): two or more calls of ``nn.Linear``
modules (``meta['linear']``, set by the capture) on the same input node, with the same input width and
all with or all without bias. Replacement, at the first call: ``torch.cat`` of their (live) weights and
biases, one ``F.linear``, and a split by columns; each call reads its columns. The same products summed
in one matmul (equal up to the matmul's rounding). Nothing is merged when the forward writes into a tensor
anywhere (the input could change between the calls).
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
import torch.nn.functional as F

from ..capture import writes_in_place
from .contract import ForwardPassResult, unchanged


def merge_linears(graph: fx.Graph) -> ForwardPassResult:
    """The rewritten copy of ``graph`` and one log line per merged group (none: ``graph`` unchanged)."""
    if any(writes_in_place(n) for n in graph.nodes):
        return unchanged(graph)
    groups: dict = {}
    for n in graph.nodes:
        if (
            n.op == "call_module"
            and "linear" in n.meta
            and len(n.args) == 1
            and not n.kwargs
            and isinstance(n.args[0], fx.Node)
        ):
            in_features, _, bias = n.meta["linear"]
            groups.setdefault((n.args[0], in_features, bias), []).append(n)
    groups = {key: calls for key, calls in groups.items() if len(calls) > 1}
    if not groups:
        return unchanged(graph)
    new = fx.Graph()
    env: dict = {}
    new.output(new.graph_copy(graph, env))
    log = []
    for (source, _, bias), calls in groups.items():
        calls = [env[c] for c in calls]
        widths = [c.meta["linear"][1] for c in calls]
        with new.inserting_before(calls[0]):
            weight = new.call_function(torch.cat, ([new.get_attr(f"{c.target}.weight") for c in calls], 0))
            b = new.call_function(torch.cat, ([new.get_attr(f"{c.target}.bias") for c in calls], 0)) if bias else None
            merged = new.call_function(F.linear, (env[source], weight, b))
            parts = new.call_function(torch.split, (merged, widths, -1))
        for i, c in enumerate(calls):
            with new.inserting_before(c):
                part = new.call_function(operator.getitem, (parts, i))
            part.meta.update(c.meta)
            c.replace_all_uses_with(part)
            new.erase_node(c)
        log.append(
            f"merge_linears: {len(calls)} linears on {source.name} ({', '.join(c.target for c in calls)}) "
            f"-> one matmul {calls[0].meta['linear'][0]} x {sum(widths)}"
        )
    new.lint()
    return ForwardPassResult(new, True, log)

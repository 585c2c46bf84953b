"""Dead-code elimination, including dropout that cannot fire.

Patterns: a node with no users that is not the output and has no side
effect; an ``nn.Dropout`` module in eval mode or with p = 0, or
``F.dropout(..., training=False)`` (plans are cached per training flag, so
this is exact). Replacement: nothing / the dropout's input. Unused graph
inputs stay (they are the plan's signature).
"""

from __future__ import annotations

from ...ir.mpdfg import MPDFG
from .contract import PassResult, rewrote
from .patterns import inactive_dropout


def dce(dfg: MPDFG) -> PassResult:
    out = dfg.copy()
    dropped = removed = 0
    for n in list(out.graph.nodes):
        if inactive_dropout(n, out.root):
            n.replace_all_uses_with(n.args[0])
            dropped += 1
    for n in reversed(list(out.graph.nodes)):
        if n.op not in ("placeholder", "output") and not n.users:
            out.graph.erase_node(n)
            removed += 1
    if dropped:
        out.log.append(f"dce: removed {dropped} dropout operators that cannot fire (eval mode or p=0)")
    if removed:
        out.log.append(f"dce: removed {removed} unused operators")
    return rewrote(dfg, out)

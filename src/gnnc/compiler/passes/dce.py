"""Dead-code elimination, including dropout that cannot fire.

Patterns: a node with no users that is not the output and has no side
effect; an ``nn.Dropout`` module in eval mode or with p = 0, or
``F.dropout(..., training=False)`` (plans are cached per training flag, so
this is exact). Replacement: nothing / the dropout's input. Unused graph
inputs stay (they are the plan's signature).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from ...ir.mpdfg import MPDFG


def _inactive_dropout(n, root) -> bool:
    if n.op == "call_module":
        module = root.get_submodule(n.target)
        return isinstance(module, nn.Dropout) and (not module.training or module.p == 0)
    if n.op == "call_function" and n.target is F.dropout:
        training = n.kwargs.get("training", n.args[2] if len(n.args) > 2 else True)
        p = n.kwargs.get("p", n.args[1] if len(n.args) > 1 else 0.5)
        return training is False or p == 0
    return False


def dce(dfg: MPDFG) -> MPDFG:
    out = dfg.copy()
    dropped = removed = 0
    for n in list(out.graph.nodes):
        if _inactive_dropout(n, out.root):
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
    return out

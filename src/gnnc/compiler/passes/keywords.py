"""Keyword aliases made canonical before any pass reads a call's arguments.

torch takes numpy's names as aliases of its own keywords: ``x.sum(-1, keepdims=True)`` is
``x.sum(-1, keepdim=True)`` and ``torch.sum(x, axis=1)`` is ``torch.sum(x, dim=1)`` (DGL's test backend
writes ``x.sum(dim, keepdims=keepdims)``). Passes match ``dim`` and ``keepdim``; one that missed a
``keepdims=True`` would drop the kept dim, a silent change of shape. So every tensor method call and every
call of a ``torch.*`` function has those aliases renamed first (torch gives both spellings one meaning).
"""

from __future__ import annotations

import torch
from torch import fx

from ...ir.mpdfg import MPDFG
from .contract import PassResult

ALIASES = {"keepdims": "keepdim", "axis": "dim"}


def canonical_keywords(dfg: MPDFG) -> PassResult:
    """``dfg`` with the numpy-style keyword aliases of torch calls renamed to torch's names, in place, in
    its graph and in the reduce UDFs' graphs its degree-bucket reductions hold (renaming keeps every call's
    meaning, so a traced UDF shared with other plans may be renamed too)."""
    renamed = 0
    for graph in [dfg.graph, *(n.meta["reduce_graph"].graph for n in dfg.graph.nodes if "reduce_graph" in n.meta)]:
        for n in graph.nodes:
            if set(n.kwargs) & ALIASES.keys() and _is_torch_call(n):
                n.kwargs = {ALIASES.get(k, k): v for k, v in n.kwargs.items()}
                renamed += 1
    return PassResult(dfg, renamed > 0)


def _is_torch_call(n: fx.Node) -> bool:
    if n.op == "call_method":
        return True  # a method of a traced tensor
    name = getattr(n.target, "__name__", None)
    return n.op == "call_function" and isinstance(name, str) and getattr(torch, name, None) is n.target

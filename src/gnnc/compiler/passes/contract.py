"""The contract of an MP-DFG pass: ``MPDFG -> PassResult``, the rewritten copy and whether anything changed.

As torch.fx's ``PassResult(graph_module, modified)``: a pass never mutates its input; it returns a new MP-DFG
(or the input itself when nothing matched) with one log line per rewrite, and ``changed``, computed by
comparing the graphs' operators before and after (``rewrote``), so that a group of passes can repeat until
none of them changes anything (``pipeline``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch.fx as fx

from ...ir.mpdfg import MPDFG
from .patterns import node_key


class PassResult(NamedTuple):
    """What an MP-DFG pass returns: the rewritten MP-DFG and whether its operators changed."""

    dfg: MPDFG
    changed: bool


MPDFGPass = Callable[[MPDFG], PassResult]


def operators(graph: fx.Graph) -> tuple:
    """The graph's operators in order, each with its name and what it computes (``patterns.node_key``)."""
    return tuple((n.name, node_key(n)) for n in graph.nodes)


def rewrote(before: MPDFG, after: MPDFG) -> PassResult:
    """``after`` as a pass's result, changed when its operators differ from ``before``'s."""
    return PassResult(after, after is not before and operators(after.graph) != operators(before.graph))

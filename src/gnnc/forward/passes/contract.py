"""The contract of a forward pass: ``fx.Graph -> ForwardPassResult`` over a captured forward
(``gnnc.forward.capture``).

A pass never mutates its input: it returns the input itself, unchanged, when nothing matched, else a rewritten
copy (``changed``), and the lines ``gnnc.explain`` shows for what it rewrote (a pass that only enables others,
such as ``graph_reads``, may change the graph and log nothing; a forward whose passes log nothing is not
replaced).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch.fx as fx


class ForwardPassResult(NamedTuple):
    """What a forward pass returns: the graph (a copy when ``changed``) and its log lines."""

    graph: fx.Graph
    changed: bool
    log: list[str]


ForwardPass = Callable[[fx.Graph], ForwardPassResult]


def unchanged(graph: fx.Graph) -> ForwardPassResult:
    """The result of a pass that matched nothing in ``graph``."""
    return ForwardPassResult(graph, False, [])

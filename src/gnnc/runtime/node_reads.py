"""The node types whose rows of each node feature a relation block's UDFs read.

In the block of relation ``(s, r, d)``, ``edges.src[k]`` reads type ``s``,
``edges.dst[k]`` and the reduce / update UDFs' ``nodes.data[k]`` read type
``d`` (an update's read of a reduce result stays inside the call). Eager
reads exactly these types; a compiled plan indexes node features by global
node id, so a feature stored for some types only is bound over all nodes
with the rows of these types (DGL's per-type features, e.g. ``Wh_<rel>`` set
on the source type of one relation only).
"""
from __future__ import annotations

from ..function import BuiltinReduce

_MESSAGE_ENDS = {"src": 0, "dst": 2}


def end_slot(space: str) -> int:
    """Slot in ``(src type, relation, dst type)`` of the node type a node-feature access in ``space`` reads."""
    return _MESSAGE_ENDS.get(space, 2)


def node_feature_types(g, rel: int, traced) -> dict[str, set[int]]:
    """``{feature: node type ids}`` read from the graph by the traced (message, reduce, update) of ``rel``."""
    produced: set[str] = set()
    found: dict[str, set[int]] = {}
    for stage, t in enumerate(traced):
        if isinstance(t, BuiltinReduce):
            produced.add(t.out)
        elif t is not None:
            for space, key in t.accesses:
                if space in _MESSAGE_ENDS if stage == 0 else (space == "data" and key not in produced):
                    found.setdefault(key, set()).add(g.ntype_id(g.index.etypes[rel][end_slot(space)]))
            if stage == 1:
                produced.update(t.outputs)
    return found

"""The node types whose rows of each node feature a relation block's UDFs read.

In the block of relation ``(s, r, d)``, ``edges.src[k]`` reads type ``s``,
``edges.dst[k]`` and the reduce / update UDFs' ``nodes.data[k]`` read type
``d`` (an update's read of a reduce result stays inside the call). Eager
reads exactly these types; a compiled plan indexes node features by global
node id, so a feature stored for some types only is bound over all nodes
with the rows of these types (DGL's per-type features, e.g. ``Wh_<rel>`` set
on the source type of one relation only). A block's ``edges.src`` reads its
source side and the others its destination side (``gnnc.graph.sided_store``).
"""

from __future__ import annotations

from ..function import BuiltinReduce

_MESSAGE_ENDS = {"src": 0, "dst": 2}


def end_slot(space: str) -> int:
    """Slot in ``(src type, relation, dst type)`` of the node type a node-feature access in ``space`` reads."""
    return _MESSAGE_ENDS.get(space, 2)


def side_of(space: str) -> str:
    """The side ("src" / "dst") whose node features an access in ``space`` reads (``Graph.side_data``)."""
    return "src" if space == "src" else "dst"


def _graph_reads(traced):
    """(space, key) of every node-feature access of the traced (message, reduce, update) that reads the graph."""
    produced: set[str] = set()
    for stage, t in enumerate(traced):
        if isinstance(t, BuiltinReduce):
            produced.add(t.out)
        elif t is not None:
            for space, key in t.accesses:
                if space in _MESSAGE_ENDS if stage == 0 else (space == "data" and key not in produced):
                    yield space, key
            if stage == 1:
                produced.update(t.outputs)


def node_feature_types(g, rel: int, traced) -> dict[str, set[int]]:
    """``{feature: node type ids}`` read from the graph by the traced (message, reduce, update) of ``rel``."""
    found: dict[str, set[int]] = {}
    for space, key in _graph_reads(traced):
        found.setdefault(key, set()).add(g.ntype_id(g.index.etypes[rel][end_slot(space)]))
    return found


def node_feature_sides(traced) -> dict[str, set[str]]:
    """``{feature: sides}`` read from the graph by the traced (message, reduce, update)."""
    found: dict[str, set[str]] = {}
    for space, key in _graph_reads(traced):
        found.setdefault(key, set()).add(side_of(space))
    return found


def sides_differ(g, traced) -> str | None:
    """A feature the UDFs read on both sides of block ``g`` whose sides hold different values (one tensor
    cannot serve both in a plan), or None."""
    return next(
        (key for key, sides in node_feature_sides(traced).items() if len(sides) > 1 and not g._nstore.sides_agree(key)),
        None,
    )

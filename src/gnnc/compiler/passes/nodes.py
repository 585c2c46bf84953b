"""Building replacement nodes inside a pass (what the passes recognise is in ``patterns``)."""

from __future__ import annotations


def new_node(g, like, target, args, *, op: str = "call_function", kwargs=None):
    """A node ``op``/``target`` in graph ``g`` at the insertion point, with ``like``'s stage and UDF source line."""
    node = g.create_node(op, target, tuple(args), kwargs or {})
    node.meta.update(stage=like.meta.get("stage"), source=like.meta.get("source"))
    return node


def same_value(new, old):
    """``new`` replaces ``old`` by the same value: it takes ``old``'s shape and dtype annotations (so later
    rewrites in the same pass can match on them), and is returned."""
    new.meta.update({k: old.meta[k] for k in ("shape", "dtype") if k in old.meta})
    return new

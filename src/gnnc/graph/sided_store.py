"""A block's node features: a source side and a destination side, as DGL's two frames.

``SidedStore`` is a ``TypedStore`` whose own features are the source side
(``srcdata``, what ``edges.src`` reads) and whose ``dst`` store, one row per
destination node, is the destination side (``dstdata``, what ``edges.dst``
and the reduce and update functions' ``nodes.data`` read, and where message
passing writes). A block's destination nodes of a type are its first source
nodes of that type, so both sides line up row by row: snapshots, copies and
drops (``local_scope``, ``to``, a forward's released features) cover both.
Where a block's sides are separate node sets (``gnnc.graph.blocks``) a type
may have more destination than source nodes: its node rows (``node_counts``)
are then more than its source rows, and a read over every node row gives the
source side's rows followed by zeros (:class:`SourceRows`).

Two views read a feature over every node row (the rows a message-passing
call indexes): :class:`DestinationSide` (the destination side's features;
the destination rows are theirs, other rows never read) and
:class:`NodeSet` (``block.ndata`` / ``block.nodes[t].data``, gnnc's
one-node-set view: a write sets both sides, a read gives the destination
side's rows where it has the feature and the source side's elsewhere).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

import torch

from .frame import TypedStore


class SidedStore(TypedStore):
    """Source-side features (this store) and destination-side ones (``dst``: ``dst_counts`` rows per type), over
    ``node_counts`` node rows per type (by default ``counts``; see the module)."""

    def __init__(self, names, counts, dst_counts, node_counts=None):
        super().__init__("node", names, counts)
        self.dst = TypedStore("node", names, dst_counts)
        self.node_counts = self.counts if node_counts is None else tuple(int(n) for n in node_counts)
        self.node_offsets = [0]
        for n in self.node_counts:
            self.node_offsets.append(self.node_offsets[-1] + n)
        self.short = self.node_counts != self.counts  # some type has fewer source nodes than node rows

    def side(self, side: str) -> TypedStore:
        return self.dst if side == "dst" else self

    def snapshot(self):
        return super().snapshot(), self.dst.snapshot()

    def restore(self, snap) -> None:
        super().restore(snap[0])
        self.dst.restore(snap[1])

    def open_scope(self):
        return super().open_scope(), self.dst.open_scope()

    def close_scope(self, kept) -> None:
        super().close_scope(kept[0])
        self.dst.close_scope(kept[1])

    def copy(self, fn=lambda t: t) -> SidedStore:
        source = super().copy(fn)
        out = SidedStore(self.names, self.counts, self.dst.counts, self.node_counts)
        out.whole, out.typed, out.dst = source.whole, source.typed, self.dst.copy(fn)
        return out

    def keep_only(self, kept) -> None:
        super().keep_only(kept)
        self.dst.keep_only(kept)

    def discard(self, key: str) -> None:
        super().discard(key)
        self.dst.discard(key)

    def share_destination_rows(self) -> None:
        """Give the destination side every source feature's destination rows (views), as DGL's ``to_block``
        gives both frames the parent's features."""
        for t in range(len(self.names)):
            for key in self.typed_keys(t):
                self.dst.set_typed(key, t, self.get_typed(key, t)[: self.dst.counts[t]])

    # ------------------------------------------------------- both sides
    def rows(self, key: str, t: int | None) -> torch.Tensor:
        """Feature ``key`` over the rows of type ``t`` (every node when None): the destination side's rows
        where it has the feature, the source side's elsewhere (zeros where neither has it, or where their
        rows differ in shape or dtype). The source tensor itself when the destination side holds its rows."""
        types = range(len(self.names)) if t is None else [t]
        start = 0 if t is None else self.node_offsets[t]
        source = self.source_rows(key, t) if self.short else self._source(key, t)
        ends = {u: self.dst.get_typed(key, u) for u in types if key in self.dst.typed_keys(u)}
        if not ends:
            if source is None:
                raise KeyError(f"no node feature {key!r}; available: {self.keys()}")
            return source
        like = next(iter(ends.values()))
        if source is not None and (source.shape[1:] != like.shape[1:] or source.dtype != like.dtype):
            source = None
        if source is not None and all(_leads(v, source, self.offsets[u] - start) for u, v in ends.items()):
            return source
        base = (
            source
            if source is not None
            else like.new_zeros((self.node_offsets[types[-1] + 1] - start,) + tuple(like.shape[1:]))
        )
        pieces = []
        for u in types:
            lo, hi = self.node_offsets[u] - start, self.node_offsets[u + 1] - start
            head = ends.get(u)
            if head is None:
                pieces.append(base[lo:hi])
                continue
            pieces += [head.to(base.dtype), base[lo + head.shape[0] : hi]]
        return torch.cat(pieces)

    def sides_agree(self, key: str) -> bool:
        """Whether both sides hold ``key`` and the destination side's rows are the source side's (as a write
        to both sides leaves them), so that one tensor serves reads of either (never where node rows lack
        source rows)."""
        source = None if self.short else self._source(key, None)
        return source is not None and all(
            key in self.dst.typed_keys(t) and _leads(self.dst.get_typed(key, t), source, self.offsets[t])
            for t in range(len(self.names))
            if self.dst.counts[t]
        )

    def _source(self, key: str, t: int | None):
        try:
            return self.get_whole(key) if t is None else self.get_typed(key, t)
        except (KeyError, ValueError):
            return None

    def source_rows(self, key: str, t: int | None):
        """Source feature ``key`` over the node rows of type ``t`` (of every type when None): each type's
        source rows, then zeros up to its node rows; None where a type lacks it."""
        rows = self._source(key, t)
        return rows if rows is None else self._padded(rows, range(len(self.names)) if t is None else [t])

    def get_spanning(self, key: str, types) -> torch.Tensor:
        """As :meth:`TypedStore.get_spanning`, over the node rows (see :meth:`source_rows`)."""
        return self._padded(super().get_spanning(key, types), range(len(self.names)))

    def _padded(self, rows: torch.Tensor, types) -> torch.Tensor:
        """``rows`` (the source rows of ``types``, in order) with zeros after each type's up to its node rows."""
        if not self.short:
            return rows
        pieces, start = [], 0
        for u in types:
            pieces += [
                rows[start : start + self.counts[u]],
                rows.new_zeros((self.node_counts[u] - self.counts[u],) + tuple(rows.shape[1:])),
            ]
            start += self.counts[u]
        return torch.cat(pieces)

    def set_rows(self, key: str, value: torch.Tensor, t: int | None, sides=("src", "dst")) -> None:
        """Set ``key`` from ``value`` (rows of type ``t``, or of every node): on the source side, and the
        destination rows on the destination side (slices of ``value``). A block with fewer source nodes than
        node rows has no one node set: ValueError for a write to both sides."""
        if self.short and "src" in sides:
            raise ValueError(
                f"node feature {key!r}: this block's source and destination nodes are separate "
                "node sets (some type has more destination than source nodes); write srcdata and "
                "dstdata"
            )
        rows = self.node_offsets[-1] if t is None else self.node_counts[t]
        if value.shape[0] != rows:
            raise ValueError(f"node feature {key!r} has {value.shape[0]} rows; expected one per node ({rows})")
        if "src" in sides:
            if t is None:
                self.set_whole(key, value)
            else:
                self.set_typed(key, t, value)
        start = 0 if t is None else self.node_offsets[t]
        for u in range(len(self.names)) if t is None else [t]:
            lo = self.node_offsets[u] - start
            self.dst.set_typed(key, u, value[lo : lo + self.dst.counts[u]])

    def keys_of(self, t: int | None, sides=("src", "dst")) -> list[str]:
        """Features of type ``t`` (of every node when None) on ``sides``, source side first."""
        found = []
        for side in sides:
            store = self.side(side)
            found += store.whole_keys() if t is None else store.typed_keys(t)
        return list(dict.fromkeys(found))

    def delete(self, key: str, t: int | None, sides=("src", "dst")) -> None:
        if key not in self.keys_of(t, sides):
            raise KeyError(f"no node feature {key!r}; available: {self.keys_of(t, sides)}")
        for store in map(self.side, sides):
            if t is None:
                store.discard(key)
            elif key in store.typed_keys(t):
                store.del_typed(key, t)


def _leads(head: torch.Tensor, whole: torch.Tensor, row: int) -> bool:
    """Whether ``head`` is the view of ``whole``'s rows from ``row`` on (its destination rows as set)."""
    return (
        head.device == whole.device
        and head.dtype == whole.dtype
        and head.stride() == whole.stride()
        and head.data_ptr() == whole.data_ptr() + row * whole.stride(0) * whole.element_size()
    )


class NodeSet(MutableMapping):
    """``block.ndata`` / ``block.nodes[t].data`` (``t`` None: every node): see the module."""

    def __init__(self, store: SidedStore, t: int | None, type_id):
        self._store, self._t, self._type_id = store, t, type_id

    def __getitem__(self, key):
        return self._store.rows(key, self._t)

    def __setitem__(self, key, value):
        if isinstance(value, dict) and self._t is None:  # DGL's {type: tensor}
            for name, v in value.items():
                self._store.set_rows(key, _tensor(key, v), self._type_id(name))
            return
        self._store.set_rows(key, _tensor(key, value), self._t)

    def __delitem__(self, key):
        self._store.delete(key, self._t)

    def __iter__(self):
        return iter(self._store.keys_of(self._t))

    def __len__(self):
        return len(self._store.keys_of(self._t))

    def __repr__(self):
        return f"{type(self).__name__}({list(self)})"


class DestinationSide(NodeSet):
    """What a message-passing call on a block reads as ``edges.dst`` / ``nodes.data`` and writes its results
    to: the destination side's features, over every node row of type ``t`` (every node when None); a write
    takes a value with a row per node and keeps its destination rows."""

    def __setitem__(self, key, value):
        self._store.set_rows(key, _tensor(key, value), self._t, sides=("dst",))

    def __delitem__(self, key):
        self._store.delete(key, self._t, ("dst",))

    def __iter__(self):
        return iter(self._store.keys_of(self._t, ("dst",)))

    def __len__(self):
        return len(self._store.keys_of(self._t, ("dst",)))

    def __getitem__(self, key):  # over every node, a feature some destination types have (the others' rows unread)
        if key not in (self._store.dst.keys() if self._t is None else self._store.keys_of(self._t, ("dst",))):
            raise KeyError(f"no destination node feature {key!r}; available: {list(self)}")
        return super().__getitem__(key)


class SourceRows(Mapping):
    """What ``edges.src`` reads on a block some of whose node rows lack source nodes: the source side's
    features over every node row of type ``t`` (every node when None), zeros on the rows without a source
    node (no edge starts there)."""

    def __init__(self, store: SidedStore, t: int | None):
        self._store, self._t = store, t

    def __getitem__(self, key):
        rows = self._store.source_rows(key, self._t)
        if rows is None:
            raise KeyError(f"no source node feature {key!r}; available: {list(self)}")
        return rows

    def __iter__(self):
        return iter(self._store.keys_of(self._t, ("src",)))

    def __len__(self):
        return len(self._store.keys_of(self._t, ("src",)))


def _tensor(key, value) -> torch.Tensor:
    if not isinstance(value, torch.Tensor) or value.dim() == 0:
        raise ValueError(
            f"node feature {key!r} must be a tensor with a row per node, got "
            f"{type(value).__name__ if not isinstance(value, torch.Tensor) else 'a scalar'}"
        )
    return value

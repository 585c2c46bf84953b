"""Feature storage for nodes or edges partitioned into types.

A ``TypedStore`` keeps each feature either as one tensor over all elements
(``g.ndata_all`` / ``g.edata_all`` style, same width everywhere) or as one tensor per
type (``g.nodes[t].data`` style, any width per type, types may lack it).
Both views read and write the same store; a whole-graph read (``g.ndata_all``)
of a per-type feature concatenates when every type has it with the same
trailing shape. DGL's ``g.ndata`` on a graph with several types is a
``{type: tensor}`` view (``TypesView``).
Edge features are kept in the user's edge order. A whole feature may be
stored as a ``Deferred`` value (a compiled call's result not computed yet):
every read materializes it once and stores the tensor; ``peek_whole``
returns it as is, for the compiler to fuse into the next call instead.
"""

from __future__ import annotations

from collections.abc import MutableMapping

import torch


class Deferred:
    """A feature value computed on first read: ``shape``, ``dtype``, ``device`` and ``materialize()``."""

    shape: torch.Size
    dtype: torch.dtype
    device: torch.device

    def materialize(self) -> torch.Tensor:
        raise NotImplementedError


class State:
    """What a store holds: the element count of each type (and their offsets) and the features (see the
    module). One object, so that a type subgraph can share it with the graph it was taken from and a local
    scope can set it aside (:meth:`TypedStore.snapshot`)."""

    def __init__(self, counts: tuple, whole=None, typed=None):
        self.counts = counts
        self.offsets = [0]
        for c in counts:
            self.offsets.append(self.offsets[-1] + c)
        self.whole: dict[str, torch.Tensor] = {} if whole is None else whole
        self.typed: dict[str, dict[int, torch.Tensor]] = {} if typed is None else typed

    def clone(self) -> State:
        """A state of the same counts and tensors, whose feature dicts are its own."""
        return State(self.counts, dict(self.whole), {k: dict(v) for k, v in self.typed.items()})

    def take(self, other: State) -> None:
        self.counts, self.offsets, self.whole, self.typed = other.counts, other.offsets, other.whole, other.typed


class TypedStore:
    """Features over ``sum(counts)`` elements split into named types (held in a :class:`State`)."""

    def __init__(self, kind: str, names, counts):
        self.kind = kind  # "node" or "edge", for error messages
        self.names = tuple(names)
        self.state = State(tuple(int(c) for c in counts))

    # the state's parts, as the store's own
    counts = property(lambda self: self.state.counts)
    offsets = property(lambda self: self.state.offsets)
    whole = property(lambda self: self.state.whole, lambda self, value: setattr(self.state, "whole", value))
    typed = property(lambda self: self.state.typed, lambda self, value: setattr(self.state, "typed", value))

    @property
    def total(self) -> int:
        return self.offsets[-1]

    def side(self, side: str) -> TypedStore:
        """The store of the features read on ``side`` ("src" / "dst") of an edge: this one (a block's differ:
        ``gnnc.graph.sided_store``)."""
        return self

    def snapshot(self):
        """The features as they are now, for :meth:`restore` (the store goes on as it is)."""
        return self.state.clone()

    def restore(self, snap) -> None:
        """Hold the features of ``snap`` again, in the state itself (what shares it sees them too)."""
        self.state.take(snap)

    def open_scope(self):
        """Begin a local scope, as DGL's ``local_scope`` does: the store goes on with a copy of its state (the
        same tensors) and the state it had is returned, for :meth:`close_scope`. A view sharing that state (a
        type subgraph's, ``gnnc.graph.shared_types``) keeps it: it sees none of the scope's writes."""
        kept, self.state = self.state, self.state.clone()
        return kept

    def close_scope(self, kept) -> None:
        self.state = kept

    def copy(self, fn=lambda t: t) -> TypedStore:
        """A new store with every tensor passed through ``fn`` (deferred values materialized first)."""
        out = TypedStore(self.kind, self.names, self.counts)
        out.whole = {k: fn(self.get_whole(k)) for k in list(self.whole)}
        out.typed = {k: {t: fn(v) for t, v in d.items()} for k, d in self.typed.items()}
        return out

    def take(self, other: TypedStore) -> None:
        """Hold ``other``'s counts and features: a graph mutated in place keeps its stores and their state, so
        the feature views taken before the mutation (and the type subgraphs sharing the state) see it."""
        self.state.take(other.state)

    def keys(self) -> list[str]:
        """Every feature name, whether stored whole or for some types only."""
        return list(self.whole) + [k for k in self.typed if k not in self.whole]

    def whole_keys(self) -> list[str]:
        """Features readable over all elements: whole, or per type with one shape everywhere."""
        return list(self.whole) + [k for k, parts in self.typed.items() if self._assemblable(parts)]

    def _assemblable(self, parts) -> bool:
        present = [t for t in range(len(self.names)) if self.counts[t] > 0]
        return all(t in parts for t in present) and len({tuple(parts[t].shape[1:]) for t in present}) <= 1

    # ---------------------------------------------------------- whole view
    def peek_whole(self, key: str):
        """The whole value stored under ``key`` as is (tensor or ``Deferred``), or None."""
        return self.whole.get(key)

    def get_whole(self, key: str) -> torch.Tensor:
        if key in self.whole:
            value = self.whole[key]
            if isinstance(value, Deferred):
                value = self.whole[key] = value.materialize()
            return value
        if key not in self.typed:
            raise KeyError(f"no {self.kind} feature {key!r}; available: {self.keys()}")
        return self._whole_of(key, self.typed[key])

    def _whole_of(self, key: str, parts: dict) -> torch.Tensor:
        """Per-type feature ``key`` (``parts``: type -> rows) as one tensor; KeyError where a type with
        elements lacks it."""
        missing = [self.names[t] for t in range(len(self.names)) if t not in parts and self.counts[t] > 0]
        if missing:
            raise KeyError(
                f"{self.kind} feature {key!r} is only set for some types (missing for {missing}); "
                f"read it per type: g.{self.kind[0]}data[{key!r}] gives {{type: tensor}}"
            )
        return self._assemble(key, parts, [t for t in range(len(self.names)) if self.counts[t] > 0])

    def get_spanning(self, key: str, types) -> torch.Tensor:
        """``key`` over all elements, right on the rows of ``types`` (type indices), zeros elsewhere.

        The stored tensor itself when ``key`` is whole. A KeyError names a
        type in ``types`` that lacks ``key``; a ValueError says when their
        trailing shapes or dtypes differ.
        """
        if key in self.whole:
            return self.get_whole(key)
        for t in types:
            self.get_typed(key, t)  # raises a clear KeyError when absent
        return self._assemble(key, self.typed[key], sorted(types))

    def _assemble(self, key: str, parts: dict, types: list[int]) -> torch.Tensor:
        """Per-type feature ``key`` (``parts``: type -> rows) of ``types`` (all present) as one tensor, zeros
        for other types."""
        for what, of in (("shape", lambda p: tuple(p.shape[1:])), ("dtype", lambda p: p.dtype)):
            if len({of(parts[t]) for t in types}) > 1:
                found = {self.names[t]: of(parts[t]) for t in types}
                raise ValueError(
                    f"{self.kind} feature {key!r} has a different {what} per type {found}; read it per type"
                )
        ref = parts[types[0]] if types else next(iter(parts.values()))
        return torch.cat(
            [
                parts[t] if t in types else ref.new_zeros((self.counts[t],) + tuple(ref.shape[1:]))
                for t in range(len(self.names))
            ],
            0,
        )

    def set_whole(self, key: str, value) -> None:
        if not isinstance(value, Deferred):
            value = _as_tensor(key, value, self.kind)
        if value.shape[0] != self.total:
            raise ValueError(
                f"{self.kind} feature {key!r} has {value.shape[0]} rows but the graph has {self.total} {self.kind}s"
            )
        self.whole[key] = value
        self.typed.pop(key, None)

    def keep_only(self, kept) -> None:
        """Drop every feature not named in ``kept`` (a deferred one without computing it)."""
        self.whole = {k: v for k, v in self.whole.items() if k in kept}
        self.typed = {k: v for k, v in self.typed.items() if k in kept}

    def discard(self, key: str) -> None:
        """Drop feature ``key`` if present (a deferred one without computing it)."""
        self.whole.pop(key, None)
        self.typed.pop(key, None)

    def del_key(self, key: str) -> None:
        if key not in self.whole and key not in self.typed:
            raise KeyError(f"no {self.kind} feature {key!r}; available: {self.keys()}")
        self.whole.pop(key, None)
        self.typed.pop(key, None)

    # ------------------------------------------------------------ type view
    def get_typed(self, key: str, t: int) -> torch.Tensor:
        if key in self.whole:
            return self.get_whole(key)[self.offsets[t] : self.offsets[t + 1]]
        if key in self.typed and t in self.typed[key]:
            return self.typed[key][t]
        raise KeyError(f"no {self.kind} feature {key!r} for type {self.names[t]!r}; available: {self.typed_keys(t)}")

    def set_typed(self, key: str, t: int, value) -> None:
        value = _as_tensor(key, value, self.kind)
        if value.shape[0] != self.counts[t]:
            raise ValueError(
                f"{self.kind} feature {key!r} for type {self.names[t]!r} has "
                f"{value.shape[0]} rows but the type has {self.counts[t]} {self.kind}s"
            )
        if len(self.names) == 1:
            self.set_whole(key, value)
            return
        if key in self.whole:
            self._split(key)
        self.typed.setdefault(key, {})[t] = value

    def del_typed(self, key: str, t: int) -> None:
        self.get_typed(key, t)  # raises a clear KeyError when absent
        if key in self.whole:
            self._split(key)
        del self.typed[key][t]
        if not self.typed[key]:
            del self.typed[key]

    def _split(self, key: str) -> None:
        """Store whole feature ``key`` as one slice per type."""
        whole = self.get_whole(key)
        del self.whole[key]
        self.typed[key] = {i: whole[self.offsets[i] : self.offsets[i + 1]] for i in range(len(self.names))}

    def typed_keys(self, t: int) -> list[str]:
        return list(self.whole) + [k for k, d in self.typed.items() if t in d and k not in self.whole]


class WholeView(MutableMapping):
    """Features over every node / edge, types concatenated in type order (global ids): ``g.ndata_all`` /
    ``g.edata_all``, and ``g.ndata`` / ``g.edata`` of a graph with one node / edge type. With several types a
    ``{type: tensor}`` value sets the feature per type; with one, a dict is refused as DGL refuses it."""

    def __init__(self, store: TypedStore, type_id):
        self._store, self._type_id = store, type_id  # type_id: the graph's ntype_id / etype_id

    def __getitem__(self, key):
        return self._store.get_whole(key)

    def __setitem__(self, key, value):
        if isinstance(value, dict):
            if len(self._store.names) == 1:
                raise TypeError(
                    f"{self._store.kind} feature {key!r}: the graph has one {self._store.kind} type; "
                    f"assign a tensor, not a dict (as DGL)"
                )
            for t, v in value.items():
                self._store.set_typed(key, self._type_id(t), v)
            return
        self._store.set_whole(key, value)

    def __delitem__(self, key):
        self._store.del_key(key)

    def __contains__(self, key):
        return key in self._store.whole_keys()

    def __iter__(self):
        return iter(self._store.whole_keys())

    def __len__(self):
        return len(self._store.whole_keys())

    def __repr__(self):
        return f"{type(self).__name__}({self._store.whole_keys()})"


class TypeView(MutableMapping):
    """``g.nodes[t].data`` / ``g.edges[rel].data``: features of one type."""

    def __init__(self, store: TypedStore, t: int):
        self._store, self._t = store, t

    def __getitem__(self, key):
        return self._store.get_typed(key, self._t)

    def __setitem__(self, key, value):
        self._store.set_typed(key, self._t, value)

    def __delitem__(self, key):
        self._store.del_typed(key, self._t)

    def __contains__(self, key):
        return key in self._store.typed_keys(self._t)

    def __iter__(self):
        return iter(self._store.typed_keys(self._t))

    def __len__(self):
        return len(self._store.typed_keys(self._t))

    def __repr__(self):
        return f"{type(self).__name__}({self._store.names[self._t]!r}, {list(self)})"


class TypesView(MutableMapping):
    """Features of several types as ``{type: tensor}``: DGL's ``ndata`` / ``edata`` / ``srcdata`` / ``dstdata``
    on a graph with several such types (DGL's ``HeteroNodeDataView`` / ``HeteroEdgeDataView``).

    ``labels`` name the types in what is read (default: the store's type
    names; DGL's ``edata`` uses canonical relations) and ``type_id`` maps a
    written key to a type index (default: a label). As DGL: a read gives the
    types among ``types`` that hold the feature, ``{}`` when none does (so
    ``in`` is always true and ``pop`` of an absent name gives ``{}``); a write
    takes a dict over some of them; ``del`` removes the feature from every one
    holding it; the keys are the names some type holds.
    """

    def __init__(self, store: TypedStore, types, labels=None, type_id=None):
        self._store, self._types = store, list(types)
        self._labels = list(labels) if labels is not None else [store.names[t] for t in self._types]
        self._type_id = type_id

    def __getitem__(self, key):
        return {
            label: self._store.get_typed(key, t)
            for t, label in zip(self._types, self._labels)
            if key in self._store.typed_keys(t)
        }

    def __setitem__(self, key, value):
        if not isinstance(value, dict):
            raise TypeError(
                f"{self._store.kind} feature {key!r}: this view spans several types {self._labels}; "
                f"assign a dict {{type: tensor}} (as DGL), or one tensor over all of them to "
                f"g.{self._store.kind[0]}data_all"
            )
        ids = {label: self._type_of(key, label) for label in value}
        for label, v in value.items():
            self._store.set_typed(key, ids[label], v)

    def _type_of(self, key, label) -> int:
        if self._type_id is not None:
            t = self._type_id(label)  # the graph's own KeyError for an unknown type
        else:
            t = self._types[self._labels.index(label)] if label in self._labels else None
        if t not in self._types:
            raise KeyError(
                f"{self._store.kind} feature {key!r}: {label!r} is not among this view's types {self._labels}"
            )
        return t

    def __delitem__(self, key):
        for t in self._types:
            if key in self._store.typed_keys(t):
                self._store.del_typed(key, t)

    def __iter__(self):
        return iter([k for k in self._store.keys() if any(k in self._store.typed_keys(t) for t in self._types)])

    def __len__(self):
        return len(list(iter(self)))

    def __repr__(self):
        return f"{type(self).__name__}({self._labels}, {list(self)})"


class TypeParams(MutableMapping):
    """``g.ntype_data`` / ``g.etype_data``: tensors whose leading dim is the number of types."""

    def __init__(self, kind: str, names):
        self._kind, self._names = kind, tuple(names)
        self.data: dict[str, torch.Tensor] = {}

    def __getitem__(self, key):
        if key not in self.data:
            raise KeyError(f"no {self._kind}-type parameter {key!r}; available: {list(self.data)}")
        return self.data[key]

    def __setitem__(self, key, value):
        value = _as_tensor(key, value, f"{self._kind}-type parameter")
        if value.shape[0] != len(self._names):
            raise ValueError(
                f"{self._kind}-type parameter {key!r} has leading dimension "
                f"{value.shape[0]} but the graph has {len(self._names)} {self._kind} types "
                f"{list(self._names)}"
            )
        self.data[key] = value

    def __delitem__(self, key):
        del self.data[key]

    def __iter__(self):
        return iter(self.data)

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        return f"{type(self).__name__}({list(self.data)})"


def _as_tensor(key, value, kind) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        try:
            value = torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(f"{kind} feature {key!r} must be a tensor, got {type(value).__name__}") from err
    if value.dim() == 0:
        raise ValueError(f"{kind} feature {key!r} must have a leading dimension, got a scalar")
    return value


class RowsView(MutableMapping):
    """DGL's ``g.nodes[ids].data`` / ``g.edges[ids].data``: some rows (``ids``, int64) of one type's features
    (``view``, ``count`` rows in all). A write replaces those rows (the stored tensor is not changed in place);
    a new feature's other rows come from ``initial(key, count, like)``."""

    def __init__(self, view: TypeView, ids: torch.Tensor, count: int, initial):
        self._view, self._ids, self._count, self._initial = view, ids, count, initial

    def __getitem__(self, key):
        return self._view[key].index_select(0, self._ids)

    def __setitem__(self, key, value):
        if not isinstance(value, torch.Tensor) or value.dim() == 0 or value.shape[0] != self._ids.numel():
            got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise ValueError(f"feature {key!r}: expected {self._ids.numel()} rows (one per id), got {got}")
        old = self._view[key] if key in self._view else self._initial(key, self._count, value)
        if old.shape[1:] != value.shape[1:]:
            raise ValueError(
                f"feature {key!r} holds {tuple(old.shape[1:])} per row; cannot set rows of {tuple(value.shape[1:])}"
            )
        self._view[key] = old.index_put((self._ids,), value.to(old.dtype))

    def __delitem__(self, key):
        raise TypeError(f"del ...[{key!r}] on some rows: delete the feature from the whole type instead")

    def __contains__(self, key):
        return key in self._view

    def __iter__(self):
        return iter(self._view)

    def __len__(self):
        return len(self._view)

    def __repr__(self):
        return f"{type(self).__name__}({list(self)}, rows={self._ids.numel()})"

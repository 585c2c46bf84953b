"""A type subgraph's features: some types of another store, shared with it, as DGL's type subgraphs share.

DGL's ``edge_type_subgraph`` / ``node_type_subgraph`` (and its relation
slices) hand the new graph the parent's feature frames themselves: a
feature written, replaced or deleted through either graph is seen through
the other, and an in-place write to a tensor read from either is too (it is
the same tensor). ``SharedTypes`` does the same for gnnc's stores: it holds
no features of its own, and every read and write goes to the :class:`State`
of the store it was taken from, on that store's type ``types[i]`` for its own
type ``i``. Nothing is copied, so nothing derived from a feature can go stale
through either graph.

Scopes follow DGL's frames: the subgraph's ``local_scope`` works on a copy of
its features (the parent sees none of its writes, it sees none of the
parent's meanwhile) and shares again at its end; a parent's ``local_scope``
sets the parent's state aside, so the subgraph keeps the state it shared
(``TypedStore.open_scope``). Mutating the parent so that one of the
subgraph's types has other element counts (``add_nodes``, ``remove_edges``,
...) ends the sharing: the subgraph's next feature access raises a
ValueError saying to take the subgraph again (DGL gives rows that match no
node). Mutating the subgraph itself gives it features of its own.

A feature value not computed yet (``Deferred``: a compiled call's result) is
computed when written to a subgraph of some of the types only, since the
store it is shared with keeps such values over all of its elements.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from .frame import Deferred, State, TypedStore

_ATTACHED = object()  # marks what was taken while shared: a scope's end shares again


class SharedTypes(TypedStore):
    """Types ``types`` (indices into ``base``'s, in this store's order, named ``names``) of store ``base``."""

    def __init__(self, base: TypedStore, types, names):
        if isinstance(base, SharedTypes) and base.attached:  # a type subgraph of a type subgraph
            types, base = [base._types[t] for t in types], base._base
        super().__init__(base.kind, names, [base.counts[t] for t in types])
        self._base = TypedStore(base.kind, base.names, ())  # a store of its own on ``base``'s state
        self._base.state = base.state
        self._types = tuple(types)
        self._identity = self._types == tuple(range(len(base.names)))
        self.attached = True  # False inside this store's local scope, and after a mutation of it

    def _shared(self) -> TypedStore:
        """The store shared, checked to still have this store's element counts."""
        base = self._base
        if any(base.counts[t] != n for t, n in zip(self._types, self.counts)):
            raise ValueError(
                f"this type subgraph shares its {self.kind} features with a graph whose {self.kind} types "
                f"{[self.names[i] for i, t in enumerate(self._types) if base.counts[t] != self.counts[i]]} "
                f"changed their {self.kind} counts since (add_nodes, remove_edges, ...): take the subgraph again"
            )
        return base

    # ------------------------------------------------------------ features
    @property  # type: ignore[override]
    def whole(self):
        return _WholeFeatures(self) if self.attached else self.state.whole

    @whole.setter
    def whole(self, value) -> None:
        self.state.whole = value

    @property  # type: ignore[override]
    def typed(self):
        if not self.attached:
            return self.state.typed
        whole = set(self.whole_keys())
        return {key: self._parts(key) for key in self.keys() if key not in whole}

    @typed.setter
    def typed(self, value) -> None:
        self.state.typed = value

    def _parts(self, key: str) -> dict:
        """This store's types holding ``key``: type -> rows."""
        base = self._shared()
        return {i: base.get_typed(key, t) for i, t in enumerate(self._types) if key in base.typed_keys(t)}

    def keys(self) -> list[str]:
        if not self.attached:
            return super().keys()
        base = self._shared()
        return [k for k in base.keys() if any(k in base.typed_keys(t) for t in self._types)]

    def whole_keys(self) -> list[str]:
        if not self.attached:
            return super().whole_keys()
        if self._identity:
            return self._shared().whole_keys()
        return [k for k in self.keys() if self._assemblable(self._parts(k))]

    def typed_keys(self, t: int) -> list[str]:
        return self._shared().typed_keys(self._types[t]) if self.attached else super().typed_keys(t)

    def peek_whole(self, key: str):
        if not self.attached:
            return super().peek_whole(key)
        if self._identity:
            return self._shared().peek_whole(key)
        return self.get_whole(key) if key in self.whole_keys() else None

    def get_whole(self, key: str) -> torch.Tensor:
        if not self.attached:
            return super().get_whole(key)
        base = self._shared()
        if self._identity:
            return base.get_whole(key)
        if len(self._types) == 1:
            return base.get_typed(key, self._types[0])
        parts = self._parts(key)
        if not parts:
            raise KeyError(f"no {self.kind} feature {key!r}; available: {self.keys()}")
        return self._whole_of(key, parts)

    def get_spanning(self, key: str, types) -> torch.Tensor:
        if not self.attached:
            return super().get_spanning(key, types)
        if key in self.whole_keys():
            return self.get_whole(key)
        for t in types:
            self.get_typed(key, t)  # raises a clear KeyError when absent
        return self._assemble(key, self._parts(key), sorted(types))

    def get_typed(self, key: str, t: int) -> torch.Tensor:
        return self._shared().get_typed(key, self._types[t]) if self.attached else super().get_typed(key, t)

    def set_whole(self, key: str, value) -> None:
        if not self.attached:
            super().set_whole(key, value)
            return
        if self._identity:
            self._shared().set_whole(key, value)
            return
        if isinstance(value, Deferred):
            value = value.materialize()
        if not isinstance(value, torch.Tensor) or value.dim() == 0 or value.shape[0] != self.total:
            got = value.shape[0] if isinstance(value, torch.Tensor) and value.dim() else "no"
            raise ValueError(f"{self.kind} feature {key!r} has {got} rows but the graph has {self.total} {self.kind}s")
        for t in range(len(self._types)):
            self.set_typed(key, t, value[self.offsets[t] : self.offsets[t + 1]])

    def set_typed(self, key: str, t: int, value) -> None:
        if not self.attached:
            super().set_typed(key, t, value)
            return
        if isinstance(value, torch.Tensor) and value.dim() and value.shape[0] != self.counts[t]:
            raise ValueError(
                f"{self.kind} feature {key!r} for type {self.names[t]!r} has "
                f"{value.shape[0]} rows but the type has {self.counts[t]} {self.kind}s"
            )
        self._shared().set_typed(key, self._types[t], value)

    def del_typed(self, key: str, t: int) -> None:
        if not self.attached:
            super().del_typed(key, t)
            return
        self._shared().del_typed(key, self._types[t])

    def del_key(self, key: str) -> None:
        if not self.attached:
            super().del_key(key)
            return
        if key not in self.keys():
            raise KeyError(f"no {self.kind} feature {key!r}; available: {self.keys()}")
        self.discard(key)

    def discard(self, key: str) -> None:
        if not self.attached:
            super().discard(key)
            return
        for t in range(len(self._types)):
            if key in self.typed_keys(t):
                self.del_typed(key, t)

    def keep_only(self, kept) -> None:
        if not self.attached:
            super().keep_only(kept)
            return
        for key in self.keys():
            if key not in kept:
                self.discard(key)

    # ------------------------------------------------------------- state
    def copy(self, fn=lambda t: t) -> TypedStore:
        """A store of its own with this one's features passed through ``fn`` (per type)."""
        if not self.attached:
            return super().copy(fn)
        out = TypedStore(self.kind, self.names, self.counts)
        for t in range(len(self._types)):
            for key in self.typed_keys(t):
                out.set_typed(key, t, fn(self.get_typed(key, t)))
        return out

    def _detach(self) -> None:
        """Go on with features of its own: this store's current ones (the same tensors)."""
        if self.attached:
            self.state = self.copy().state
            self.attached = False

    def snapshot(self):
        return (_ATTACHED, self._shared().snapshot()) if self.attached else super().snapshot()

    def restore(self, snap) -> None:
        if isinstance(snap, tuple) and snap[0] is _ATTACHED:
            self._shared().restore(snap[1])
        else:
            super().restore(snap)

    def open_scope(self):
        """DGL's ``local_scope`` of a type subgraph: its features become its own until :meth:`close_scope`."""
        if self.attached:
            self._detach()
            return _ATTACHED
        return super().open_scope()

    def close_scope(self, kept) -> None:
        if kept is _ATTACHED:
            self.attached, self.state = True, State(self.counts)
        else:
            super().close_scope(kept)

    def take(self, other: TypedStore) -> None:
        """A mutation of the subgraph: its features become its own (the graph it shared them with keeps
        its structure)."""
        self._detach()
        super().take(other)


class _WholeFeatures(Mapping):
    """A shared store's features readable over all its elements (``TypedStore.whole``'s reads)."""

    def __init__(self, store: SharedTypes):
        self._store = store

    def __getitem__(self, key):
        if key not in self:
            raise KeyError(key)
        return self._store.get_whole(key)

    def __contains__(self, key) -> bool:
        return key in self._store.whole_keys()

    def __iter__(self):
        return iter(self._store.whole_keys())

    def __len__(self) -> int:
        return len(self._store.whole_keys())

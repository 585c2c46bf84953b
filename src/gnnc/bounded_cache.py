"""``BoundedCache``: a mapping that keeps its ``most`` recently used entries and forgets the oldest."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class BoundedCache(Generic[V]):
    """Up to ``most`` values by hashable key, least recently used (read or written) first out.

    Each operation is atomic, so several threads may share one cache; a value read once stays the
    caller's even if another thread evicts it or clears the cache right after.
    """

    def __init__(self, most: int):
        if most < 1:
            raise ValueError(f"a cache must hold at least one entry, not {most}")
        self.most = most
        self._entries: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        """The value kept for ``key`` (now the most recently used), or None."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: Hashable, value: V) -> V:
        """Keep ``value`` for ``key`` as the most recently used entry, evicting the oldest beyond ``most``;
        returns ``value``."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            self._evict()
        return value

    def setdefault(self, key: Hashable, default: V) -> V:
        """The value kept for ``key``, else ``default`` kept for it (in one step: two threads get one value)."""
        with self._lock:
            if key not in self._entries:
                self._entries[key] = default
            self._entries.move_to_end(key)
            self._evict()
            return self._entries[key]

    def pop(self, key: Hashable) -> V | None:
        """Forget ``key``; its value, or None."""
        with self._lock:
            return self._entries.pop(key, None)

    def values(self) -> list[V]:
        """The values kept, least recently used first (a copy)."""
        with self._lock:
            return list(self._entries.values())

    def items(self) -> list[tuple[Hashable, V]]:
        """The entries kept, least recently used first (a copy)."""
        with self._lock:
            return list(self._entries.items())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def _evict(self) -> None:
        while len(self._entries) > self.most:
            self._entries.popitem(last=False)


__all__ = ["BoundedCache"]

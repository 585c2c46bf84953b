"""Values derived from a user's tensor, cached by the tensor's contents.

A version counter misses writes made through ``.data``, a numpy view or memory another library shares, so
a value made from a tensor (an edge feature in internal order, the rows of each type) is served again only
while the tensor holds, bit for bit, what it held when the value was made: the cache keeps a private copy
and compares it at every lookup. One sequential read of the tensor per lookup, well below the gathers and
sorts these values save.
"""

from __future__ import annotations

import torch

from ..bounded_cache import BoundedCache

_SAME_SIZE_INTS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def same_bits(kept: torch.Tensor, t: torch.Tensor) -> bool:
    """Whether ``t`` has ``kept``'s dtype, shape, device and bits (NaN equals the same NaN, -0.0 differs
    from 0.0)."""
    if kept.dtype != t.dtype or kept.shape != t.shape or kept.device != t.device:
        return False
    if t.is_floating_point() or t.is_complex():
        size = t.element_size() // (2 if t.is_complex() else 1)
        ints = _SAME_SIZE_INTS[size]
        kept, t = (torch.view_as_real(x) if x.is_complex() else x for x in (kept, t))
        return torch.equal(kept.view(ints), t.view(ints))
    return torch.equal(kept, t)


class ByContents:
    """Up to ``most`` values, each kept with a copy of the tensor it was made from and a hashable ``key``
    of whatever else it was made from; least recently used first out. Safe to use from several threads."""

    def __init__(self, most: int):
        self._entries: BoundedCache[tuple] = BoundedCache(most)  # (id(tensor), key) -> (copy of the tensor, value)

    def get(self, t: torch.Tensor, key=()):
        """The value made from a tensor with ``t``'s contents (and ``key``) through this tensor, or None."""
        hit = self._entries.get((id(t), key))
        return hit[1] if hit is not None and same_bits(hit[0], t) else None

    def put(self, t: torch.Tensor, value, key=()) -> None:
        """Keep ``value``, made from ``t``'s present contents (and ``key``)."""
        self._entries.put((id(t), key), (t.detach().clone(), value))

    def clear(self) -> None:
        self._entries.clear()


__all__ = ["ByContents", "same_bits"]

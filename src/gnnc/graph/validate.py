"""Boundary checks for graph construction: ids, lengths, node types."""

from __future__ import annotations

import numpy as np
import torch


def as_ids(values, what: str, noun: str = "node") -> torch.Tensor:
    """Convert a sequence / array / tensor of ``noun`` ids to a 1-D int64 tensor."""
    if isinstance(values, torch.Tensor):
        t = values
    else:
        arr = np.asarray(values)
        if arr.size == 0:
            arr = arr.astype(np.int64)
        t = torch.from_numpy(np.ascontiguousarray(arr))
    if t.dim() != 1:
        raise ValueError(f"{what} must be a 1-D sequence of {noun} ids, got shape {tuple(t.shape)}")
    integral_floats = t.is_floating_point() and bool((t == t.round()).all())
    if t.dtype == torch.bool or t.is_complex() or (t.is_floating_point() and not integral_floats):
        raise ValueError(f"{what} must hold integer {noun} ids, got dtype {t.dtype}")
    return t.to(torch.int64)


def check_range(ids: torch.Tensor, count: int, what: str, noun: str = "node") -> None:
    """Raise ValueError naming the first id outside [0, count)."""
    if ids.numel() == 0:
        return
    bad = (ids < 0) | (ids >= count)
    if bool(bad.any()):
        pos = int(torch.nonzero(bad)[0])
        raise ValueError(f"{what}: {noun} id {int(ids[pos])} at position {pos} is out of range [0, {count})")


def canonical_key(key) -> tuple[str, str, str]:
    if isinstance(key, tuple) and len(key) == 3 and all(isinstance(k, str) for k in key):
        return key
    raise KeyError(f"relation key {key!r} must be a (src_type, relation, dst_type) tuple of strings")

"""DGL's segment operators: reductions, softmax and matrix products over consecutive row segments."""

from __future__ import annotations

import torch

from .. import backend
from .spmm import REDUCES


def segment_reduce(seglen, value: torch.Tensor, reducer: str = "sum") -> torch.Tensor:
    """``out[i] = reducer over the rows of segment i`` of ``value``: segment i is the ``seglen[i]`` rows after
    the rows of segments 0..i-1 (``seglen`` sums to ``value``'s rows; empty segments allowed).

    ``reducer`` in sum, max, min, mean; an empty segment gives 0 with every reducer (as DGL). The result is
    ``[len(seglen), *value.shape[1:]]``, differentiable in ``value``.
    """
    if reducer not in REDUCES:
        raise ValueError(f"segment_reduce: reducer must be one of {REDUCES}, got {reducer!r}")
    segment, count = _segment_ids(seglen, value, "segment_reduce")
    return backend.kernels().segment_reduce(value, segment, count, reducer)


def segment_softmax(seglen, value: torch.Tensor) -> torch.Tensor:
    """Softmax of ``value``'s rows within each segment (segments as ``segment_reduce``), per feature column;
    the result has ``value``'s shape."""
    segment, count = _segment_ids(seglen, value, "segment_softmax")
    return backend.kernels().edge_softmax(value, segment, count)


def segment_mm(a: torch.Tensor, b: torch.Tensor, seglen_a) -> torch.Tensor:
    """``out[rows of segment i] = a[rows of segment i] @ b[i]``: ``a`` [N, D1] cut into ``len(seglen_a)``
    consecutive segments of ``seglen_a`` rows (summing to N), ``b`` [R, D1, D2] one matrix per segment;
    the result is [N, D2], differentiable in ``a`` and ``b``."""
    offsets = [0, *torch.cumsum(_lengths(seglen_a, "segment_mm", "seglen_a"), 0).tolist()]
    return backend.kernels().segment_matmul(a, offsets, b)


def _lengths(seglen, op: str, name: str = "seglen") -> torch.Tensor:
    seglen = torch.as_tensor(seglen)
    if seglen.dim() != 1 or seglen.dtype.is_floating_point or seglen.dtype == torch.bool:
        raise TypeError(f"{op}: {name} must be a 1-D integer tensor, got {seglen.dtype} {tuple(seglen.shape)}")
    if bool((seglen < 0).any()):
        raise ValueError(f"{op}: {name} must be non-negative, got {seglen.tolist()}")
    return seglen.to(torch.int64)


def _segment_ids(seglen, value, op: str) -> tuple[torch.Tensor, int]:
    """(the segment of every row of ``value``, the number of segments)."""
    seglen = _lengths(seglen, op)
    if not isinstance(value, torch.Tensor) or value.dim() == 0 or int(seglen.sum()) != value.shape[0]:
        raise ValueError(
            f"{op}: seglen sums to {int(seglen.sum())} but value has shape "
            f"{tuple(getattr(value, 'shape', ()))}: one row per segment member"
        )
    seglen = seglen.to(value.device)
    return torch.repeat_interleave(torch.arange(seglen.numel(), device=value.device), seglen), seglen.numel()


__all__ = ["segment_mm", "segment_reduce", "segment_softmax"]

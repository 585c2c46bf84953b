"""DGL's ``gather_mm``: a row-wise product with a matrix picked per row."""

from __future__ import annotations

import torch

from .. import backend


def gather_mm(a: torch.Tensor, b: torch.Tensor, *, idx_b: torch.Tensor) -> torch.Tensor:
    """``out[i] = a[i] @ b[idx_b[i]]``: ``a`` [N, D1], ``b`` [R, D1, D2], ``idx_b`` [N] integers in [0, R);
    the result is [N, D2], differentiable in ``a`` and ``b``. No [N, D1, D2] copy of ``b`` is made: rows are
    grouped by their matrix and multiplied one group at a time."""
    if not isinstance(idx_b, torch.Tensor) or idx_b.dim() != 1 or idx_b.dtype.is_floating_point:
        raise TypeError(f"gather_mm: idx_b must be a 1-D integer tensor, got {getattr(idx_b, 'dtype', idx_b)!r}")
    if idx_b.numel() and (int(idx_b.min()) < 0 or int(idx_b.max()) >= b.shape[0]):
        raise ValueError(
            f"gather_mm: idx_b must lie in [0, {b.shape[0]}) (b's matrices), got "
            f"[{int(idx_b.min())}, {int(idx_b.max())}]"
        )
    return backend.kernels().typed_index_matmul(a, None, b, idx_b.to(torch.int64), name="idx_b")


__all__ = ["gather_mm"]

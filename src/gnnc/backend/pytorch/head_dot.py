"""Per-head dot products with shared weight rows (GAT-style attention scores)."""

from __future__ import annotations

import torch

from .common import check_float, check_same


def head_dot(x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """out[r, h, j] = sum_f x[r, h, f] * weights[j, h, f] for x [rows, H, F] and weights [K, H, F].

    One matmul of x viewed as [rows, H*F] with the block-diagonal [H*F, H*K]
    matrix of the weights' rows (built differentiably): no [rows, H, F]
    product is written and no strided sum runs.
    """
    check_head_dot(x, weights)
    rows, heads, feats = x.shape
    columns = weights.permute(1, 2, 0)  # [H, F, K]
    eye = torch.eye(heads, dtype=weights.dtype, device=weights.device)
    block = (columns.unsqueeze(2) * eye[:, None, :, None]).reshape(heads * feats, heads * weights.shape[0])
    return (x.reshape(rows, heads * feats) @ block).view(rows, heads, weights.shape[0])


def check_head_dot(x: torch.Tensor, weights: torch.Tensor) -> None:
    """Validate ``head_dot``'s arguments (errors name the culprit)."""
    check_float("x", x, min_dim=3)
    check_float("weights", weights, min_dim=3)
    check_same(x.device, x.dtype, weights=weights)
    if x.dim() != 3 or weights.dim() != 3 or tuple(weights.shape[1:]) != tuple(x.shape[1:]):
        raise ValueError(
            f"head_dot needs x [rows, H, F] and weights [K, H, F]; got x {tuple(x.shape)} "
            f"and weights {tuple(weights.shape)}"
        )

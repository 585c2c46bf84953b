"""Dropout in one pass over the tensor, its mask a hash of (seed, element index).

torch's CPU dropout draws a Bernoulli tensor, scales it and multiplies: three
passes over fresh memory. Here each element's keep decision is the top 32 bits of
splitmix64(seed + index) compared with ``p * 2**32``, so the mask needs no
memory and the backward recomputes it from the seed. Exact zeros are copied
without hashing (their output is zero whatever the mask); every other element
is multiplied by ``1 / (1 - p)`` or by 0, as torch does (NaN and inf stay NaN
where dropped).
"""

from __future__ import annotations

import numpy as np
import torch

from .interop import as_array, empty, jit_row_kernel, launch_rows

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _kernel(bounds, x, out, seed, threshold, scale):
    s30, s27, s31, s32 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(32)
    for i in range(bounds[0], bounds[1]):
        v = x[i]
        if v == 0:
            out[i] = v
            continue
        z = seed + np.uint64(i) * _GOLDEN
        z = (z ^ (z >> s30)) * _MIX1
        z = (z ^ (z >> s27)) * _MIX2
        z = z ^ (z >> s31)
        out[i] = v * scale if (z >> s32) >= threshold else v * 0


_compiled = jit_row_kernel(_kernel)


def dropout_mask_apply(x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    """``x`` (a float32/float64 CPU tensor) times the mask of ``seed`` scaled by ``1 / (1 - p)``; the same
    ``seed`` and shape give the same mask, so the backward is this call on the gradient."""
    flat = as_array(x).reshape(-1)
    out = empty(tuple(x.shape), x)
    launch_rows(
        _compiled,
        flat.shape[0],
        flat.shape[0],
        flat,
        out.numpy().reshape(-1),
        np.uint64(seed),
        np.uint64(round(p * 2**32)),
        flat.dtype.type(1.0 / (1.0 - p)),
    )
    return out

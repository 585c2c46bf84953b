"""Compiled or interpreted Triton kernels, the device rule, and tile sizes.

Triton decides once per process whether its kernels are compiled for a GPU
or run by its interpreter (numpy, on the CPU): ``TRITON_INTERPRET=1`` is read
when ``triton.language`` is first imported, whose own library functions
(``tl.zeros``, ``tl.max``, ``tl.sum``) are then made interpreted or compiled
for good; a kernel of the other kind cannot call them. So this backend takes
the mode triton's library was imported in (``INTERPRETED``) and makes its
kernels the same (``kernel``), whatever the variable says when this module is
imported. At every call ``check_device`` then demands that the variable still
agrees (triton's constexpr functions read it while a kernel runs) and that
CPU tensors are only handed to the interpreter; each mismatch is an error
saying what to set.

To run on CPU tensors: ``TRITON_INTERPRET=1`` in the environment before
anything imports triton (``TRITON_INTERPRET=1 python script.py``, or
``os.environ["TRITON_INTERPRET"] = "1"`` before the first ``import triton``
or ``import gnnc.backend.triton``), left set.
"""

from __future__ import annotations

import os

import torch

try:
    import triton
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction
except ImportError as error:  # pragma: no cover - triton is a dependency of the gpu and dev extras
    raise ImportError("backend 'triton' needs triton (pip install 'gnnc[gpu]')") from error


def _env_interpret() -> bool:
    """TRITON_INTERPRET as triton reads it now (its knobs, from triton 3.4; the plain variable before)."""
    knobs = getattr(triton, "knobs", None)
    if knobs is not None:
        return bool(knobs.runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def _library_interpreted() -> bool:
    """Whether triton's language library (its @jit functions such as ``tl.zeros``) was made interpreted."""
    probe = getattr(getattr(tl, "standard", None), "zeros", None)
    return _env_interpret() if probe is None else isinstance(probe, InterpretedFunction)


# Whether triton's language library runs interpreted in this process (fixed at its first import).
INTERPRETED = _library_interpreted()

# Elements of one program's tile (rows x features); powers of two.
TILE_ELEMENTS = 2048
MAX_ROWS = 16
MAX_FEATURES = 1024


def kernel(fn):
    """``fn`` as a Triton kernel of the process's mode (see the module docstring)."""
    return InterpretedFunction(fn) if INTERPRETED else JITFunction(fn)


def check_device(device) -> None:
    """Error unless this backend's kernels can run on ``device`` in this process."""
    device = torch.device(device)
    if _env_interpret() != INTERPRETED:
        if INTERPRETED:
            raise RuntimeError(
                "backend 'triton': triton was imported with TRITON_INTERPRET=1 (its interpreter), "
                "which has since been unset; leave it set for the whole process"
            )
        raise RuntimeError(
            "backend 'triton': TRITON_INTERPRET=1 was set after triton was imported; triton reads "
            "it at its first import, so set it before anything imports triton (e.g. "
            "`TRITON_INTERPRET=1 python ...`)"
        )
    if device.type == "cpu" and not INTERPRETED:
        raise RuntimeError(
            "backend 'triton' runs CPU tensors only under Triton's interpreter: set "
            "TRITON_INTERPRET=1 before triton is first imported (e.g. `TRITON_INTERPRET=1 python ...`), "
            "or use backend 'cpu' / 'torch'"
        )
    if device.type not in ("cpu", "cuda"):
        raise ValueError(
            f"backend 'triton' runs on CUDA tensors (or CPU tensors under its interpreter); the tensors are on {device}"
        )


def scalar(value: float | None, like: torch.Tensor) -> torch.Tensor:
    """``value`` (0 for None) as a one-element tensor of ``like``'s dtype and device, for a kernel to load:
    Triton passes a Python float as float32, which would round a float64 kernel's constant (a slope of 0.2
    by 1.5e-8 of itself, as an H200 showed)."""
    return torch.full((1,), 0.0 if value is None else float(value), dtype=like.dtype, device=like.device)


def pow2(n: int) -> int:
    """The smallest power of two >= max(n, 1)."""
    return triton.next_power_of_2(max(1, n))


def row_tile(width: int) -> tuple[int, int]:
    """(rows, features) of a program's tile over rows ``width`` wide: the features up to ``MAX_FEATURES``
    (more run in several programs), as many rows as fit ``TILE_ELEMENTS``."""
    features = min(pow2(width), MAX_FEATURES)
    return max(1, min(MAX_ROWS, TILE_ELEMENTS // features)), features


def head_tile(heads: int, feats: int) -> tuple[int, int, int]:
    """(rows, heads, features) of a tile holding whole [H, F] rows (kernels that sum over a head's features)."""
    bh, bf = pow2(heads), pow2(feats)
    return max(1, min(MAX_ROWS, TILE_ELEMENTS // (bh * bf))), bh, bf


def edge_ids(t: torch.Tensor, num_edges: int) -> torch.Tensor:
    """``t`` (an int index) on its device as a contiguous int64 tensor (a placeholder when there are no edges)."""
    return t.contiguous() if num_edges else t.new_zeros(1)

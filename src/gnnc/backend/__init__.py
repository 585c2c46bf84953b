"""Executable backends: implementations of the gnnc graph-primitive contract.

``torch`` (reference, any device) implements every primitive; ``cpu``
(numba kernels) implements the fused vertex-balanced ones and takes the
rest from ``torch``; ``triton`` (Triton kernels: CUDA tensors, or CPU
tensors under Triton's interpreter, ``TRITON_INTERPRET=1``) likewise. A
compiled plan runs its primitives through the backend made active by
``using``; ``resolve`` turns the user's choice (``auto``, ``torch``,
``cpu``, ``triton``) into a backend for a device.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import importlib.util
import sys

import torch

from ..scoped import scoped
from ..stage_timings import timed

CHOICES = ("auto", "torch", "cpu", "triton")
_PACKAGES = {"torch": "pytorch", "cpu": "cpu", "triton": "triton"}  # backend name -> gnnc.backend subpackage
KERNEL_FLOATS = (torch.float32, torch.float64)  # the floating dtypes the generated kernels (cpu, triton) compute in
_ACTIVE = contextvars.ContextVar("gnnc_backend", default="torch")


def cpu_available() -> bool:
    """Whether the numba CPU backend can run (numba importable)."""
    return importlib.util.find_spec("numba") is not None


def triton_available() -> bool:
    """Whether triton is importable (the Triton backend's kernels can be built)."""
    return importlib.util.find_spec("triton") is not None


def check_choice(choice: str) -> None:
    """ValueError naming ``choice`` unless it is one of ``CHOICES``."""
    if choice not in CHOICES:
        raise ValueError(f"unknown backend {choice!r}; choose one of {', '.join(CHOICES)}")


def resolve(choice: str, device, dtypes=()) -> str:
    """The backend that runs primitives for ``choice`` on ``device``, computing in ``dtypes``.

    ``auto`` picks ``cpu`` for CPU tensors when numba is installed,
    ``triton`` for CUDA tensors when triton is, else ``torch``; and
    ``torch`` wherever a floating dtype is not one of ``KERNEL_FLOATS``
    (half precision features, autocast). Asking for ``cpu`` on another
    device, or without numba, or for ``triton`` where its kernels cannot run
    (no triton; CPU tensors outside its interpreter), or for either in a
    dtype their kernels lack, is an error naming the reason.
    """
    check_choice(choice)
    device = torch.device(device)
    unsupported = sorted(
        {str(d).removeprefix("torch.") for d in dtypes if d.is_floating_point and d not in KERNEL_FLOATS}
    )
    if unsupported and choice != "torch":
        if choice == "auto":
            return "torch"
        raise ValueError(
            f"backend {choice!r} computes in float32 and float64; this call computes in "
            f"{', '.join(unsupported)}: use backend 'auto' or 'torch'"
        )
    if choice == "auto":
        if device.type == "cuda" and triton_available():
            return "triton"
        return "cpu" if device.type == "cpu" and cpu_available() else "torch"
    if choice == "triton":
        if not triton_available():
            raise ImportError("backend 'triton' needs triton (pip install 'gnnc[gpu]')")
        importlib.import_module("gnnc.backend.triton").check_device(device)
    if choice == "cpu":
        if device.type != "cpu":
            raise ValueError(f"backend 'cpu' runs on CPU tensors only; the graph is on {device}")
        if not cpu_available():
            raise ImportError("backend 'cpu' needs numba (pip install numba)")
    return choice


def using(name: str) -> contextlib.AbstractContextManager[None]:
    """Inside the block, ``kernels()`` is backend ``name`` (a resolved name)."""
    return scoped(_ACTIVE, name)


def active() -> str:
    """The resolved name of the backend ``kernels()`` returns now."""
    return _ACTIVE.get()


def kernels():
    """The active backend's primitive module (``gnnc.backend.pytorch`` outside ``using``)."""
    return package(_ACTIVE.get())


def package(name: str):
    """The primitive module of backend ``name`` (``torch``, ``cpu`` or ``triton``); its first import (numba's
    or triton's, seconds) is timed as backend import (``gnnc.stage_timings``)."""
    module = f"gnnc.backend.{_PACKAGES[name]}"
    with timed("backend import") if module not in sys.modules else contextlib.nullcontext():
        return importlib.import_module(module)

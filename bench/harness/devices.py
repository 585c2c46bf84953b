"""The device a run times on: whether it can run here, and what the timed region reads on it.

A ``Meter`` is the device's clock and memory. On ``cpu`` the clock is
``time.perf_counter`` and memory is the process's resident set (``procfs``:
``VmRSS``, high-water mark ``VmHWM``). On ``cuda`` every reading of the clock
first waits for the GPU's queued work (``torch.cuda.synchronize``), and memory
is what torch's CUDA allocator holds for tensors (``memory_allocated``), with
its high-water mark ``max_memory_allocated`` reset at every ``settle``. Imports
torch and the harness's stdlib-only modules but not gnnc (the peer interpreter
times with it too).
"""

from __future__ import annotations

import gc
import time

import torch

from . import procfs

DEVICES = ("cpu", "cuda")


def missing(device: str) -> str | None:
    """Why ``device`` cannot run here (one line), or None when it can."""
    if device not in DEVICES:
        return f"unknown device {device!r}; choose one of {', '.join(DEVICES)}"
    if device == "cuda" and not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        return (
            f"--device cuda needs an NVIDIA GPU, but torch.cuda.is_available() is False here (torch "
            f"{torch.__version__}, {build}); run on a GPU machine with a CUDA build of torch, or leave "
            f"--device out to time on the CPU"
        )
    return None


class CpuMeter:
    """Wall clock and the process's resident set (KiB)."""

    device = "cpu"

    def name(self) -> str:
        return "cpu"

    def now(self) -> float:
        return time.perf_counter()

    def prepare(self) -> bool:
        """Map the pages of library code before memory is read, so they never count (``procfs``)."""
        return procfs.map_file_pages()

    def settle(self) -> int:
        """Collect garbage, return freed heap to the OS, reset the high-water mark; the resident set."""
        gc.collect()
        procfs.trim_heap()
        procfs.reset_peak()
        return procfs.status_kib("VmRSS")

    def peak(self) -> int:
        return procfs.status_kib("VmHWM")


class CudaMeter:
    """Wall clock read after the GPU's queued work is done, and torch's CUDA allocations (KiB)."""

    device = "cuda"

    def name(self) -> str:
        return torch.cuda.get_device_name()

    def now(self) -> float:
        torch.cuda.synchronize()
        return time.perf_counter()

    def prepare(self) -> None:
        """Nothing to map: host memory is not what is measured on a GPU."""
        return None

    def settle(self) -> int:
        """Collect garbage, wait for the GPU, reset the allocator's high-water mark; the bytes allocated now."""
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        return torch.cuda.memory_allocated() // 1024

    def peak(self) -> int:
        return torch.cuda.max_memory_allocated() // 1024


def meter(device: str):
    """The ``Meter`` of ``device`` (``cpu`` or ``cuda``)."""
    meters = {"cpu": CpuMeter, "cuda": CudaMeter}
    if device not in meters:
        raise ValueError(f"unknown device {device!r}; choose one of {', '.join(meters)}")
    return meters[device]()


def cap_gpu_memory(cap_bytes: int) -> None:
    """Let this process's CUDA allocator hold at most ``cap_bytes`` (beyond: torch.cuda.OutOfMemoryError)."""
    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap_bytes / total))


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation failure: the host's (``procfs``) or torch's CUDA allocator's."""
    return procfs.is_out_of_memory(exc) or isinstance(exc, torch.cuda.OutOfMemoryError)

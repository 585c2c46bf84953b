"""Process memory from ``/proc/self/status`` (Linux), its high-water mark, and a memory cap."""
from __future__ import annotations

import ctypes
import ctypes.util
import resource

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number


def status_kib(field: str) -> int:
    """A ``kB`` field of ``/proc/self/status`` (VmRSS, VmHWM, VmSize, ...)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no field {field!r}")


def reset_peak() -> None:
    """Reset VmHWM to the current resident set (``echo 5 > /proc/self/clear_refs``)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def trim_heap() -> None:
    """Give freed heap pages back to the OS, so setup leftovers cannot hide the timed region's growth."""
    libc = _libc()
    trim = getattr(libc, "malloc_trim", None) if libc else None
    if trim is not None:
        trim(0)


def _libc():
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name) if name else None


def fix_mmap_threshold(threshold_bytes: int = 128 * 1024) -> None:
    """Serve every allocation above ``threshold_bytes`` by its own mmap from now on (glibc; no-op elsewhere).

    glibc raises its mmap threshold after large frees, so later large tensors
    come from the heap. Under torch.profiler the profiler's small records are
    interleaved with them there, the heap fragments, and a profiled PyG
    HGTConv training step grew to 10 GB resident (85 MB peak when timed).
    With the threshold fixed, large tensors are mapped and unmapped one by one.
    """
    libc = _libc()
    mallopt = getattr(libc, "mallopt", None) if libc else None
    if mallopt is not None:
        mallopt(M_MMAP_THRESHOLD, threshold_bytes)


def cap_memory(extra_bytes: int) -> None:
    """Let the address space grow by at most ``extra_bytes`` from now on.

    Allocations beyond the cap fail inside the process (torch raises a
    RuntimeError, Python a MemoryError) instead of waking the kernel's OOM
    killer on a shared machine. Virtual size grows at least as fast as the
    resident set, so the cap is conservative.
    """
    limit = status_kib("VmSize") * 1024 + int(extra_bytes)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def available_bytes() -> int:
    """``MemAvailable`` of ``/proc/meminfo``."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/meminfo has no MemAvailable")


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation failure (Python's or torch's CPU allocator)."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "not enough memory" in text)

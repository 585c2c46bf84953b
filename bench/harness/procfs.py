"""Process memory from ``/proc/self/status`` (Linux), its high-water mark, and a memory cap."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import resource

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number
MADV_POPULATE_READ = 22  # Linux 5.14+


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


def map_file_pages() -> bool:
    """Map every page of the process's readable file mappings (shared libraries) into its page tables now.

    A process forked from the forkserver inherits the forkserver's libraries
    but none of their pages in its page tables: each code page it executes
    first faults in and counts as resident, though the page was already in
    memory and is shared with every process. Mapping them all before the
    high-water mark is reset keeps library code out of a configuration's
    peak; what the configuration allocates or newly maps still counts.
    Returns False where the kernel cannot do it (no ``MADV_POPULATE_READ``).
    """
    libc = _libc()
    madvise = getattr(libc, "madvise", None) if libc else None
    if madvise is None:
        return False
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    for start, end in _readable_file_mappings():
        if madvise(start, end - start, MADV_POPULATE_READ) != 0 and ctypes.get_errno() == errno.EINVAL:
            return False  # other errors (a page past the end of its file) leave that mapping partly mapped
    return True


def _readable_file_mappings() -> list[tuple[int, int]]:
    """(start, end) of each readable mapping of a regular file in ``/proc/self/maps``."""
    spans = []
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            if len(fields) < 6 or not fields[1].startswith("r") or fields[4] == "0":
                continue
            path = fields[5].strip()
            if path.startswith("/") and not path.startswith("/dev/"):
                start, end = (int(a, 16) for a in fields[0].split("-"))
                spans.append((start, end))
    return spans


def _libc():
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name, use_errno=True) if name else None


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

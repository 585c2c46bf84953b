"""Handing torch tensors to numba kernels: numpy views, thread counts, specialization, work splitting."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import torch

from ...failures import stage
from ...stage_timings import timed

# numba's OpenMP layer would start a second OpenMP pool beside torch's, whose
# spinning threads slow torch's own operators down several-fold on few cores.
if "NUMBA_THREADING_LAYER" not in os.environ:
    numba.config.THREADING_LAYER = "workqueue"

# Below this many element operations a kernel runs on one thread: starting a
# parallel region costs more than the work, and milliseconds on busy cores.
PARALLEL_MIN_WORK = 1 << 16

# Row widths compiled as constants (the innermost loop then unrolls into whole
# vector instructions); other widths share one kernel reading the width at run time.
SPECIALIZED_WIDTHS = (1, 2, 4, 8, 16, 32, 64)


# numpy advises allocations of at least this size for transparent huge pages (on by default on Linux).
HUGE_PAGE_MIN_BYTES = 4 << 20


def empty(shape, like: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """An uninitialized CPU tensor for a kernel to write (``like``'s dtype unless ``dtype`` is given).

    From ``HUGE_PAGE_MIN_BYTES`` up it is numpy memory, which numpy advises for
    transparent huge pages: when glibc hands out freshly mapped memory (it
    trims or unmaps what a call freed), a torch buffer takes one page fault per
    4 KiB on first write (which can take longer than the kernel that fills
    it), this one about one per 2 MiB.
    """
    dtype = like.dtype if dtype is None else dtype
    if math.prod(shape) * dtype.itemsize < HUGE_PAGE_MIN_BYTES:
        return torch.empty(shape, dtype=dtype)
    return torch.from_numpy(np.empty(shape, dtype=torch.empty(0, dtype=dtype).numpy().dtype))


def as_array(t: torch.Tensor) -> np.ndarray:
    """A contiguous numpy view of a CPU tensor (copied only when not contiguous)."""
    return t.detach().contiguous().numpy()


def match_torch_threads() -> None:
    """Run numba's parallel loops on as many threads as torch uses (at most numba's pool)."""
    wanted = max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS))
    if numba.get_num_threads() != wanted:
        numba.set_num_threads(wanted)


# How the kernels get vectorized. Every kernel is a numba parallel loop (prange
# over chunks of rows) even when it runs on one thread: numba marks the array
# arguments of a parallel loop body noalias when its alias analysis finds no
# views, which lets LLVM keep accumulators in vector registers instead of
# reloading them after every store. The SLP vectorizer (off in numba by
# default) then turns the unrolled constant-width row loops into vector FMAs.
# The setting is global to the process, so it is set only around the calls
# that compile, and reset after.
_compiled: set = set()
# numba's workqueue pool aborts the process when two threads launch parallel loops at once.
_LAUNCH_LOCK = threading.Lock()


@contextlib.contextmanager
def _vectorizing():
    slp = numba.config.SLP_VECTORIZE
    numba.config.SLP_VECTORIZE = 1
    try:
        yield
    finally:
        numba.config.SLP_VECTORIZE = slp


def specialized(factory):
    """``factory(width, *constants)`` -> kernel source; returns ``get(width, *constants)``, the compiled kernel.

    ``factory`` closes over ``width`` (-1: read the row width from the arrays
    at run time) and hashable ``constants`` (an operator name, say) and
    returns a function whose outer loop is a ``prange``. Widths in
    ``SPECIALIZED_WIDTHS`` compile as constants, others share the -1 kernel.
    Compiled on first use, cached on disk. Fast math is limited to
    reassociation and contraction (sums may change order, FMAs fuse); NaN and
    infinities keep their meaning (segment max starts from -inf).
    """

    @functools.cache
    def compiled(width: int, *constants):
        return jit_kernel(factory(width, *constants))

    @functools.wraps(factory)
    def get(width: int, *constants):
        return compiled(constant_width(width), *constants)

    return get


FASTMATH = {"reassoc", "contract"}

ROW_KERNEL_OPTIONS = {"nogil": True, "error_model": "numpy"}


def jit_kernel(fn):
    """``fn``, whose outer loop is a ``prange``, compiled as every loop kernel is (see ``specialized``)."""
    return numba.njit(parallel=True, cache=True, fastmath=FASTMATH)(fn)


def jit_row_kernel(fn, fastmath: set = FASTMATH, cache: bool = True):
    """``fn(bounds, ...)``, whose outer loop runs over ``range(bounds[0], bounds[-1])`` in chunks, compiled
    serial and without the GIL: ``launch`` splits its rows among Python threads. ``fastmath``: the
    flags it may use (without ``reassoc``, two kernels computing one sum from the same source line
    round it alike). ``cache``: whether numba caches it on disk.

    For generated kernels, whose accumulators are scalars (so numba's parallel
    noalias marking gains nothing): a parallel build takes longer to compile,
    and starting its parallel region costs far more per call, even on one
    thread, than calling a serial kernel.

    Division by zero gives inf or nan as torch's does (numba's default "python" error model raises
    ``ZeroDivisionError`` on floats).
    """
    return numba.njit(cache=cache, fastmath=fastmath, **ROW_KERNEL_OPTIONS)(fn)


def constant_width(n: int) -> int:
    """``n`` when kernels compile it as a constant (one of ``SPECIALIZED_WIDTHS``), else -1 (read at run time)."""
    return n if n in SPECIALIZED_WIDTHS else -1


def _call(kernel, *args) -> None:
    """``kernel(*args)``, vectorizing when these argument types are new (the call that compiles)."""
    key = _signature_key(kernel, args)
    with _LAUNCH_LOCK:
        if key in _compiled:
            kernel(*args)
            return
        with stage("code generation"), _vectorizing(), _compiling(kernel):  # first call with these types
            kernel(*args)
        _compiled.add(key)


@contextlib.contextmanager
def _compiling(kernel):
    """Time the first call of ``kernel`` with new argument types as a numba compile, or as a load from
    numba's disk cache where that cache served it (``gnnc.stage_timings``)."""
    hits = kernel.stats.cache_hits.total()
    with timed("numba compile") as frame:
        yield
        if frame is not None and kernel.stats.cache_hits.total() > hits:
            frame.name = "numba cache load"


def _signature_key(kernel, args) -> tuple:
    return (
        id(kernel),
        tuple((a.dtype.str, a.ndim, a.flags.c_contiguous) if isinstance(a, np.ndarray) else type(a) for a in args),
    )


@functools.cache
def _threads() -> ThreadPoolExecutor:
    """The helper threads of row-kernel launches (the calling thread is the other one)."""
    return ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 1) - 1), thread_name_prefix="gnnc-kernel")


def _call_rows(kernel, work: int, rows: int, split, *args, partial: np.ndarray | None = None) -> None:
    """A ``jit_row_kernel`` on all ``rows``: on torch's thread count (one range each, ``split(parts)``
    giving the boundaries) when ``work`` is large enough; the call that compiles runs alone, vectorizing.
    With ``partial``, each range gets its own copy as the last argument (the first range ``partial``
    itself, the others zeroed copies), added into ``partial`` after."""
    tail = () if partial is None else (partial,)
    key = _signature_key(kernel, args + tail)
    if key not in _compiled:
        with _LAUNCH_LOCK:
            if key not in _compiled:
                with stage("code generation"), _vectorizing(), _compiling(kernel):
                    kernel(np.array([0, rows], dtype=np.int64), *args, *tail)
                _compiled.add(key)
                return
    threads = torch.get_num_threads() if work >= PARALLEL_MIN_WORK else 1
    bounds = split(threads) if threads > 1 else np.array([0, rows], dtype=np.int64)
    sums = [] if partial is None else [partial] + [np.zeros_like(partial) for _ in range(2, bounds.shape[0])]

    def own(t):
        return (sums[t],) if sums else ()

    others = [_threads().submit(kernel, bounds[t : t + 2], *args, *own(t)) for t in range(1, bounds.shape[0] - 1)]
    kernel(bounds[0:2], *args, *own(0))
    for other in others:
        other.result()
    for extra in sums[1:]:
        partial += extra


def balanced_bounds(crow: np.ndarray, parts: int) -> np.ndarray:
    """Row ranges ``bounds[c]:bounds[c+1]`` with about equal shares of rows + entries (CSR ``crow``)."""
    rows = crow.shape[0] - 1
    load = crow + np.arange(rows + 1)
    cuts = np.searchsorted(load, np.linspace(0, load[-1], parts + 1)[1:-1])
    return np.unique(np.concatenate(([0], cuts, [rows]))).astype(np.int64)


def launch(
    kernel, crow: np.ndarray, work: int, *args, partial: np.ndarray | None = None, balance: np.ndarray | None = None
) -> None:
    """Run ``kernel(bounds, crow, *args)`` over the rows of CSR ``crow``, split into balanced chunks.

    Small ``work`` (element operations) runs in one chunk on one thread;
    otherwise on torch's thread count, vertex-balanced (by rows plus
    entries): a parallel (``jit_kernel``) kernel gets four chunks per thread
    of numba's pool, a ``jit_row_kernel`` one range per thread. ``partial``
    (``jit_row_kernel`` only): a sum that rows of several ranges add to,
    passed last; each range adds into its own copy and ``partial`` ends as
    the total, so no two threads write one row. ``balance``: row pointers of
    the entries the rows' shares are counted by, where the kernel reads only
    some of each row's (default ``crow``).
    """
    load = crow if balance is None else balance
    _run(kernel, work, crow.shape[0] - 1, lambda parts: balanced_bounds(load, parts), crow, *args, partial=partial)


def launch_rows(kernel, rows: int, work: int, *args) -> None:
    """Run ``kernel(bounds, *args)`` over ``range(rows)`` split into equal chunks (as ``launch``)."""
    _run(kernel, work, rows, lambda parts: np.linspace(0, rows, parts + 1).astype(np.int64), *args)


def _run(kernel, work: int, rows: int, split, *args, partial: np.ndarray | None = None) -> None:
    if not kernel.targetoptions.get("parallel"):
        _call_rows(kernel, work, rows, split, *args, partial=partial)
        return
    if partial is not None:
        raise ValueError("per-range partial sums are for jit_row_kernel kernels")
    if work < PARALLEL_MIN_WORK:
        threads = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            _call(kernel, np.array([0, rows], dtype=np.int64), *args)
        finally:
            numba.set_num_threads(threads)
        return
    match_torch_threads()
    _call(kernel, split(4 * numba.get_num_threads()), *args)

"""Handing torch tensors to numba kernels: numpy views, thread counts, work splitting."""
from __future__ import annotations

import contextlib
import os

import llvmlite.binding as llvm
import numba
import numpy as np
import torch

# numba's OpenMP layer would start a second OpenMP pool beside torch's, whose
# spinning threads slow torch's own operators down several-fold on few cores.
if "NUMBA_THREADING_LAYER" not in os.environ:
    numba.config.THREADING_LAYER = "workqueue"

# Below this many element operations a kernel runs on one thread: starting a
# parallel region costs more than the work, and milliseconds on busy cores.
PARALLEL_MIN_WORK = 1 << 16


def as_array(t: torch.Tensor) -> np.ndarray:
    """A contiguous numpy view of a CPU tensor (copied only when not contiguous)."""
    return t.detach().contiguous().numpy()


def match_torch_threads() -> None:
    """Run numba's parallel loops on as many threads as torch uses (at most numba's pool)."""
    wanted = max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS))
    if numba.get_num_threads() != wanted:
        numba.set_num_threads(wanted)


# LLVM vectorizes the innermost loops (over a head's F features, F often 8)
# 16 wide and 4 times unrolled by default, so F = 8 never reaches the vector
# body; forcing 8 x 1 while our kernels compile vectorizes them (about 25 %
# faster fused softmax aggregation on the pubmed replica). Options are global to the process: they are set
# only around the calls that compile, and reset after.
_VECTOR_OPTIONS = ("-force-vector-width={}", "-force-vector-interleave={}")
_FORCED, _DEFAULT = (8, 1), (0, 0)
_compiled: set = set()


@contextlib.contextmanager
def _forced_vectorization():
    for option, value in zip(_VECTOR_OPTIONS, _FORCED):
        llvm.set_option("", option.format(value))
    try:
        yield
    finally:
        for option, value in zip(_VECTOR_OPTIONS, _DEFAULT):
            llvm.set_option("", option.format(value))


def kernel_pair(fn):
    """(serial, parallel) numba compilations of ``fn`` (whose loops use ``prange``), cached on disk.

    Fast math is limited to reassociation and contraction (sums may change
    order, FMAs fuse); NaN and infinities keep their meaning (segment max
    starts from -inf)."""
    options = dict(cache=True, fastmath={"reassoc", "contract"})
    return numba.njit(**options)(fn), numba.njit(parallel=True, **options)(fn)


def _call(kernel, *args) -> None:
    """``kernel(*args)`` (numpy arrays), forcing the vector shape when these argument types are new."""
    key = (id(kernel), tuple((a.dtype.str, a.ndim, a.flags.c_contiguous) for a in args))
    if key in _compiled:
        kernel(*args)
        return
    with _forced_vectorization():  # first call with these types: compiles (or loads the cache)
        kernel(*args)
    _compiled.add(key)


def balanced_bounds(crow: np.ndarray, parts: int) -> np.ndarray:
    """Row ranges ``bounds[c]:bounds[c+1]`` with about equal shares of rows + entries (CSR ``crow``)."""
    rows = crow.shape[0] - 1
    load = crow + np.arange(rows + 1)
    cuts = np.searchsorted(load, np.linspace(0, load[-1], parts + 1)[1:-1])
    return np.unique(np.concatenate(([0], cuts, [rows]))).astype(np.int64)


def launch(pair, crow: np.ndarray, work: int, *args) -> None:
    """Run kernel ``pair`` over the rows of CSR ``crow``, split into balanced chunks.

    The kernel's first two arguments are the chunk bounds and ``crow``. Small
    ``work`` runs serially in one chunk; otherwise on torch's thread count,
    four chunks per thread (vertex-balanced: by rows plus edges).
    """
    serial, parallel = pair
    if work < PARALLEL_MIN_WORK:
        _call(serial, np.array([0, crow.shape[0] - 1], dtype=np.int64), crow, *args)
        return
    match_torch_threads()
    _call(parallel, balanced_bounds(crow, 4 * numba.get_num_threads()), crow, *args)

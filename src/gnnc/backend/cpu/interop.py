"""Handing torch tensors to numba kernels: numpy views, thread counts, work splitting."""
from __future__ import annotations

import os

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


def kernel_pair(fn):
    """(serial, parallel) numba compilations of ``fn`` (whose loops use ``prange``), cached on disk."""
    return numba.njit(cache=True)(fn), numba.njit(parallel=True, cache=True)(fn)


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
        serial(np.array([0, crow.shape[0] - 1], dtype=np.int64), crow, *args)
        return
    match_torch_threads()
    parallel(balanced_bounds(crow, 4 * numba.get_num_threads()), crow, *args)

"""gnnc.backend.cpu.fastexp.vexp against the exact exponential, called as the kernels call it."""
from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from gnnc.backend.cpu.fastexp import vexp  # noqa: E402


@numba.njit(fastmath={"reassoc", "contract"})  # the kernels' flags: vexp must keep its accuracy under them
def _apply(x, out):
    for i in range(x.shape[0]):
        out[i] = vexp(x[i])


def _ulps(dtype, x):
    """(|vexp(x) - exp(x)| in ulps of the exact result rounded to ``dtype``, where it is normal; vexp(x))."""
    out = np.empty_like(x)
    _apply(x, out)
    exact = np.exp(x.astype(np.longdouble))
    with np.errstate(over="ignore"):
        rounded = exact.astype(dtype)
    normal = (rounded >= np.finfo(dtype).tiny) & np.isfinite(rounded)
    errors = np.abs(out[normal].astype(np.longdouble) - exact[normal]) / np.spacing(rounded[normal])
    return x[normal], errors.astype(np.float64), out


@pytest.mark.parametrize("dtype, top, limits", [(np.float32, 88.3, (1.1, 6.0)), (np.float64, 709.0, (1.1, 2.0))])
def test_accuracy_over_the_whole_range(dtype, top, limits):
    bound = 90.0 if dtype == np.float32 else 710.0
    x = np.linspace(-bound, bound, 2_000_001).astype(dtype)
    where, errors, _ = _ulps(dtype, x)
    assert errors[where < top].max() <= limits[0]
    assert errors[where >= top].max() <= limits[1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_small_arguments_and_special_values(dtype):
    tiny = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-8, -1e-8], dtype)
    _, errors, out = _ulps(dtype, tiny)
    assert errors.max() <= 1.0 and out[0] == out[1] == 1.0
    special = np.array([np.inf, -np.inf, np.nan, 1e6, -1e6], dtype)
    out = np.empty_like(special)
    _apply(special, out)
    assert out[0] == np.inf and out[1] == 0.0 and np.isnan(out[2]) and out[3] == np.inf and out[4] == 0.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_below_the_smallest_normal_is_zero(dtype):
    x = np.linspace(-800.0, np.log(np.finfo(dtype).tiny) - 1e-3, 1001).astype(dtype)
    out = np.empty_like(x)
    _apply(x, out)
    assert not out.any()


def test_other_types_are_refused():
    @numba.njit
    def on_int(n):
        return vexp(n)

    with pytest.raises(numba.core.errors.TypingError, match="float32 or float64"):
        on_int(3)

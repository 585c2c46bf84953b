"""gnnc.backend.cpu.fastexp.vexp against the exact exponential, called as the kernels call it."""

from __future__ import annotations

import platform

import numpy as np
import pytest

pytest.importorskip("numba")

import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from gnnc.backend.cpu.fastexp import SOFTMAX_CUTOFF, softmax_weight, vexp


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


# ---------------------------------------------------------------------------- denormal operands (x86)
# x86 computes with a denormal operand through a microcode assist (~100 cycles): a softmax kernel whose
# exponentials sit at the bottom of the range (attention sharpened by training) ran 5x slower. MXCSR's
# sticky DE flag (bit 1) records whether any SSE/AVX operation saw a denormal operand.

_X86 = platform.machine().lower() in ("x86_64", "amd64")


@intrinsic
def _mxcsr(typingctx, clear):
    """MXCSR before the call; with ``clear`` its exception flags (bits 0-5) are reset."""

    def codegen(context, builder, signature, args):
        slot = builder.alloca(ir.IntType(32))
        ptr = builder.bitcast(slot, ir.IntType(8).as_pointer())
        access = ir.FunctionType(ir.VoidType(), [ptr.type])
        builder.call(cgutils.get_or_insert_function(builder.module, access, "llvm.x86.sse.stmxcsr"), [ptr])
        value = builder.load(slot)
        cleared = builder.and_(value, ir.Constant(ir.IntType(32), ~0x3F & 0xFFFFFFFF))
        builder.store(builder.select(args[0], cleared, value), slot)
        builder.call(cgutils.get_or_insert_function(builder.module, access, "llvm.x86.sse.ldmxcsr"), [ptr])
        return value

    return types.int32(types.boolean), codegen


@numba.njit(fastmath={"reassoc", "contract"})
def _denormal_operand_seen(x, weights):
    _mxcsr(True)
    total = x[0] * 0
    for i in range(x.shape[0]):
        total += softmax_weight(x[i]) if weights else vexp(x[i])
    return (_mxcsr(False) >> 1) & 1, total


@pytest.mark.skipif(not _X86, reason="MXCSR is x86's")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weights", [False, True])
def test_no_denormal_operand_at_the_bottom_of_the_range(dtype, weights):
    low = np.log(np.finfo(dtype).tiny)
    x = np.concatenate([np.linspace(low - 5, low + 5, 20001), [-1e5, -np.inf]]).astype(dtype)
    seen, _ = _denormal_operand_seen(x, weights)
    assert seen == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_weight_is_exp_down_to_two_to_the_minus_64_then_zero(dtype):
    @numba.njit
    def apply(x, out):
        for i in range(x.shape[0]):
            out[i] = softmax_weight(x[i])

    x = np.array([0.0, -1.0, SOFTMAX_CUTOFF + 1e-3, SOFTMAX_CUTOFF - 1e-3, -60.0, -np.inf, np.nan], dtype)
    out = np.empty_like(x)
    apply(x, out)
    exact = np.exp(x[:3].astype(np.float64))
    np.testing.assert_allclose(out[:3], exact, rtol=4 * np.finfo(dtype).eps)
    assert not out[3:6].any() and np.isnan(out[6])

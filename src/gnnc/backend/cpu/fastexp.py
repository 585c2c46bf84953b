"""exp for numba kernels that LLVM can vectorize: ``vexp(x)`` for float32 and float64 scalars.

numba's ``math.exp`` is a call into libm, which the vectorizers leave
scalar; a kernel that exponentiates eight heads per edge then waits on
eight calls. ``vexp`` is straight-line arithmetic (Cody-Waite range
reduction, a polynomial, and 2**n built from its bits), so eight calls on
eight heads become one vector sequence (it is written without branches for
that: a select on one lane's special case stops the vectorizer). Accuracy,
against the exact result (tests sweep the range): within 1.1 ulp up to
x = 88.3 (float32) / 709 (float64), where 2**n reaches the largest normal
exponent; within 6 ulp (float32) / 2 ulp (float64) from there to overflow.
Results below the smallest normal number are flushed to 0, above the largest
finite one are inf; exp(-inf) = 0, exp(nan) = nan. numba compiles it with
the calling kernel's fast-math flags, except for the range reduction,
emitted as two strict fused multiply-adds: reassociation could otherwise
merge the two halves of ln 2 and lose the reduction's precision. LLVM
inlines it: numba's own inlining (``inline="always"``) gave the same machine
code at three to four times the compile time of each generated kernel.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core.errors import TypingError
from numba.extending import intrinsic, overload

LOG2E = 1.4426950408889634

# float32 (Cephes expf): ln 2 split in two; minimax polynomial on |r| <= ln2 / 2
F32_C1, F32_C2 = 0.693359375, -2.12194440e-4
F32_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
F32_LOW, F32_HIGH = -87.33654475, 88.72283905  # exp(F32_LOW) is the smallest normal, exp(F32_HIGH) the largest

# float64 (fdlibm's split of ln 2); Taylor terms up to r**15 / 15!, truncation below 2e-16 for |r| <= ln 2
F64_C1, F64_C2 = 6.93147180369123816490e-01, 1.90821492927058770002e-10
F64_POLY = tuple(1.0 / math.factorial(k) for k in range(15, 1, -1))
F64_LOW, F64_HIGH = -708.3964185322641, 709.782712893384


# Softmax weights below 2**-64 of the largest one are dropped (see ``softmax_weight``).
SOFTMAX_CUTOFF = -64 * math.log(2)


def vexp(x):
    """exp(x) inside numba kernels (float32 or float64, the result in x's type); see the module docstring."""
    return math.exp(x)


def softmax_weight(x):
    """exp(x) for x = logit - max logit <= 0, but 0 where exp(x) < 2**-64.

    A softmax's largest weight is 1, so a dropped weight changes a weighted
    mean by at most 2**-64 of its largest input (far below float64's
    rounding), while kept weights times ordinary inputs stay normal floats:
    once training sharpens the attention, most weights would otherwise be
    tiny and their products denormal, which x86 computes many times slower.
    """
    return math.exp(x) if x >= SOFTMAX_CUTOFF else 0.0


@intrinsic
def _int_bits_as_float(typingctx, bits, like):
    """The float of ``like``'s type whose bit pattern is the integer ``bits`` (int32 / int64)."""
    if like not in (types.float32, types.float64) or not isinstance(bits, types.Integer):
        return None
    width = 32 if like == types.float32 else 64

    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[0], signature.args[0], types.int32 if width == 32 else types.int64)
        return builder.bitcast(value, ir.FloatType() if width == 32 else ir.DoubleType())

    return like(bits, like), codegen


@intrinsic
def _reduce_range(typingctx, x, n, c1, c2):
    """x - n * c1 - n * c2 as two fused multiply-adds without fast-math flags (all four of one float type)."""
    if x not in (types.float32, types.float64) or not (n == c1 == c2 == x):
        return None

    def codegen(context, builder, signature, args):
        value, count, high, low = args
        fma = builder.module.declare_intrinsic("llvm.fma", [value.type] * 3)
        negated = builder.fneg(count)
        return builder.call(fma, [negated, low, builder.call(fma, [negated, high, value])])

    return x(x, n, c1, c2), codegen


@njit
def _horner6(r, c):  # pragma: no cover - numba
    return ((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5]


@njit
def _horner14(r, c):  # pragma: no cover - numba
    high = (((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5]) * r + c[6]
    return ((((((high * r + c[7]) * r + c[8]) * r + c[9]) * r + c[10]) * r + c[11]) * r + c[12]) * r + c[13]


def _exp_impl(float_type, int_type, c1, c2, poly, low, high, bias, shift):
    """exp for one float type: constants in that type, 2**n from the exponent ``bias`` and mantissa ``shift``."""
    one = float_type(1.0)
    infinity = float_type(np.inf)
    log2e = float_type(LOG2E)
    half = float_type(0.5)
    c1, c2, low, high = float_type(c1), float_type(c2), float_type(low), float_type(high)
    coefficients = tuple(float_type(c) for c in poly)
    horner = {6: _horner6, 14: _horner14}[len(coefficients)]  # straight-line: a loop here would stay a loop
    top = float_type(bias)
    bias, shift = int_type(bias), int_type(shift)

    def impl(x):  # pragma: no cover - numba
        clamped = min(max(x, low), high)
        # capped so that 2**n stays normal: just below ``high`` r then reaches ln 2 instead of ln 2 / 2
        n = min(np.floor(clamped * log2e + half), top)
        r = _reduce_range(clamped, n, c1, c2)
        # no branches (numba's inliner trips over them): 0 below ``low``, inf from ``high``, nan stays nan.
        # The zero goes into the scale, not the result: at ``low`` the result can round below the smallest
        # normal, and a denormal operand costs x86 a ~100-cycle assist per multiply.
        scale = _int_bits_as_float((int_type(n) + bias) << shift, x) * (x > low)
        y = ((horner(r, coefficients) * r * r + r) + one) * scale
        return max(y, math.copysign(infinity, x - high))

    return impl


_F32 = _exp_impl(np.float32, np.int32, F32_C1, F32_C2, F32_POLY, F32_LOW, F32_HIGH, 127, 23)
_F64 = _exp_impl(np.float64, np.int64, F64_C1, F64_C2, F64_POLY, F64_LOW, F64_HIGH, 1023, 52)


@overload(vexp)
def _vexp(x):
    if x == types.float32:
        return _F32
    if x == types.float64:
        return _F64
    raise TypingError(f"vexp takes float32 or float64, got {x}")


def _weight_impl(float_type):
    cutoff = float_type(SOFTMAX_CUTOFF)

    def impl(x):  # pragma: no cover - numba
        return vexp(x) * (x >= cutoff)  # branch-free, as vexp

    return impl


_WEIGHTS = {types.float32: _weight_impl(np.float32), types.float64: _weight_impl(np.float64)}


@overload(softmax_weight)
def _softmax_weight(x):
    if x not in _WEIGHTS:
        raise TypingError(f"softmax_weight takes float32 or float64, got {x}")
    return _WEIGHTS[x]

"""Software prefetch for numba kernels that read rows at random (gathers by an index).

A gather over a table larger than the L2 cache waits on one cache miss after
another; asking for the rows a few edges ahead (``llvm.prefetch``) overlaps
those waits.
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

CACHE_LINE = 64


@intrinsic
def _prefetch_element(typingctx, array, flat):
    """Hint the cache line holding element ``flat`` of C-contiguous ``array`` into all cache levels."""
    if not isinstance(array, types.Array) or not isinstance(flat, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        view = context.make_array(array_type)(context, builder, args[0])
        offset = context.cast(builder, args[1], signature.args[1], types.intp)
        address = builder.gep(view.data, [offset])
        byte_ptr = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32]), "llvm.prefetch.p0"
        )
        # read (0), high temporal locality (3), data cache (1)
        builder.call(fn, [builder.bitcast(address, byte_ptr), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.void(array, flat), codegen


@intrinsic
def _item_bytes(typingctx, array):
    """Bytes per element of ``array`` as a compile-time constant (``array.itemsize`` is loaded at run time)."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, args):
        return context.get_constant(types.intp, context.get_abi_sizeof(context.get_data_type(array.dtype)))

    return types.intp(array), codegen


@njit(inline="always")
def prefetch_span(array, start, length):  # pragma: no cover - numba
    """Prefetch the cache lines of the ``length`` elements of C-contiguous ``array`` from flat offset ``start``.

    Kernels pass ``length`` from their compile-time widths: with it and the
    element size constant the loop unrolls into a few prefetch instructions,
    with no integer division per edge.
    """
    step = max(1, CACHE_LINE // _item_bytes(array))
    for k in range(0, length, step):
        _prefetch_element(array, start + k)


@njit(inline="always")
def prefetch_row(array, row, row_len):  # pragma: no cover - numba
    """Prefetch row ``row`` of C-contiguous ``array`` viewed as rows of ``row_len`` elements (``prefetch_span``)."""
    prefetch_span(array, row * row_len, row_len)

"""Triton device functions shared by the kernels: a program's block of CSR rows, the binary operators
and their operand gradients."""

from __future__ import annotations

import triton.language as tl

from .launch import kernel


def _row_block(crow, num_rows, width, BV: tl.constexpr, BD: tl.constexpr):
    """This program's rows (BV of them, ``row_ok`` masking those past ``num_rows``) and feature positions
    (BD, ``d_ok`` masking those past ``width``), and each row's first entry and entry count in CSR ``crow``."""
    rows = tl.program_id(0) * BV + tl.arange(0, BV)
    d = tl.program_id(1) * BD + tl.arange(0, BD)
    row_ok = rows < num_rows
    start = tl.load(crow + rows, mask=row_ok, other=0)
    deg = tl.load(crow + rows + 1, mask=row_ok, other=0) - start
    return rows, d, row_ok, d < width, start, deg


def _binary(a, b, OP: tl.constexpr):
    """a op b for OP in add, sub, mul, div; ``a`` itself for copy."""
    if OP == "add":
        y = a + b
    elif OP == "sub":
        y = a - b
    elif OP == "mul":
        y = a * b
    elif OP == "div":
        y = a / b
    else:
        y = a
    return y


def _operands(own, theirs, OWN: tl.constexpr):
    """(a, b) of y = a op b from a row's own operand and the other one: ``own`` is a when ``OWN`` is 'a'."""
    if OWN == "a":
        a = own
        b = theirs
    else:
        a = theirs
        b = own
    return a, b


def _operand_grad(g, a, b, OP: tl.constexpr, SIDE: tl.constexpr):
    """d(a op b)/da * g (SIDE 'a') or d(a op b)/db * g (SIDE 'b'); copy is the identity in a."""
    if OP == "mul":
        if SIDE == "a":
            out = g * b
        else:
            out = g * a
    elif OP == "div":
        if SIDE == "a":
            out = g / b
        else:
            out = -g * a / (b * b)
    elif OP == "sub" and SIDE == "b":
        out = -g
    else:
        out = g
    return out


row_block = kernel(_row_block)
binary = kernel(_binary)
operands = kernel(_operands)
operand_grad = kernel(_operand_grad)

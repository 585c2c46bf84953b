"""DGL's ``TypedLinear``: a linear map chosen per row by the row's type."""

from __future__ import annotations

import math

import torch
from torch import nn

from ..ops import gather_mm, segment_mm

__all__ = ["TypedLinear"]


class TypedLinear(nn.Module):
    """``out[i] = x[i] W[x_type[i]]``, DGL 2.1's ``TypedLinear``, with DGL's parameters:

    no ``regularizer``: ``W [num_types, in_size, out_size]``;
    ``'basis'``: ``W [num_bases, in_size, out_size]`` and ``coeff [num_types, num_bases]``,
    ``W_t = sum_b coeff_tb W_b``;
    ``'bdd'``: ``W [num_types, num_bases * (in_size / num_bases) * (out_size / num_bases)]``, each type's map
    block-diagonal with ``num_bases`` blocks.

    ``sorted_by_type``: the rows come grouped by type in increasing order (one product per type).
    """

    def __init__(self, in_size, out_size, num_types, regularizer=None, num_bases=None):
        super().__init__()
        self.in_size, self.out_size, self.num_types = in_size, out_size, num_types
        if regularizer not in (None, "basis", "bdd"):
            raise ValueError(f'Supported regularizer options: "basis", "bdd", but got {regularizer}')
        if regularizer is not None and num_bases is None:
            raise ValueError(f'Missing "num_bases" for {regularizer} regularization.')
        if regularizer is None:
            self.W = nn.Parameter(torch.empty(num_types, in_size, out_size))
        elif regularizer == "basis":
            self.W = nn.Parameter(torch.empty(num_bases, in_size, out_size))
            self.coeff = nn.Parameter(torch.empty(num_types, num_bases))
        else:
            if in_size % num_bases or out_size % num_bases:
                raise ValueError("Input and output sizes must be divisible by num_bases.")
            self.submat_in, self.submat_out = in_size // num_bases, out_size // num_bases
            self.W = nn.Parameter(torch.empty(num_types, num_bases * self.submat_in * self.submat_out))
        if regularizer is not None:
            self.num_bases = num_bases
        self.regularizer = regularizer
        self.reset_parameters()

    def reset_parameters(self):
        with torch.no_grad():
            fan_in = self.submat_in if self.regularizer == "bdd" else self.in_size
            nn.init.uniform_(self.W, -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))
            if self.regularizer == "basis":
                nn.init.xavier_uniform_(self.coeff, gain=nn.init.calculate_gain("relu"))

    def get_weight(self):
        """Every type's weight: ``[num_types, in_size, out_size]`` (bdd: the ``W`` parameter itself)."""
        if self.regularizer == "basis":
            flat = self.W.view(self.num_bases, self.in_size * self.out_size)
            return (self.coeff @ flat).view(self.num_types, self.in_size, self.out_size)
        return self.W

    def forward(self, x, x_type, sorted_by_type=False):
        w = self.get_weight()
        if self.regularizer == "bdd":
            w = w.index_select(0, x_type).view(-1, self.submat_in, self.submat_out)
            return torch.bmm(x.view(-1, 1, self.submat_in), w).view(-1, self.out_size)
        if sorted_by_type:
            return segment_mm(x, w, seglen_a=torch.bincount(x_type, minlength=self.num_types).cpu())
        return gather_mm(x, w, idx_b=x_type)

    def rowwise(self, x, x_type):
        """``forward``'s product written row by row, ``x[i] @ W[x_type[i]]``, the form gnnc's compiler turns into
        a typed matmul without weight copies (``gnnc.compiler.passes.index_typed``) inside a message function; eagerly
        it gathers one weight matrix per row."""
        w = self.get_weight()
        if self.regularizer == "bdd":  # per row: num_bases products of [1, submat_in] by [submat_in, submat_out]
            blocks = w[x_type].view(-1, self.num_bases, self.submat_in, self.submat_out)
            return torch.matmul(x.view(-1, self.num_bases, 1, self.submat_in), blocks).view(-1, self.out_size)
        return torch.bmm(x.unsqueeze(1), w[x_type]).squeeze(1)

    def __repr__(self):
        extra = "" if self.regularizer is None else f", regularizer={self.regularizer}, num_bases={self.num_bases}"
        return f"TypedLinear(in_size={self.in_size}, out_size={self.out_size}, num_types={self.num_types}{extra})"

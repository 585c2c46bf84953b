"""DGL's feature casts of a graph (``dgl.to_half`` and its kin): a graph of the same structure whose
floating-point node and edge features are of one float type; other features (ids, counts) stay as they
are, and the given graph is left unchanged."""

from __future__ import annotations

import torch

__all__ = ["to_bfloat16", "to_double", "to_float", "to_half"]


def _cast(g, dtype: torch.dtype):
    out = g.local_var()
    spaces = [out.nodes[t].data for t in out.ntypes] + [out.edges[k].data for k in out.canonical_etypes]
    for data in spaces:
        for key, value in list(data.items()):
            if value.is_floating_point():
                data[key] = value.to(dtype)
    return out


def to_bfloat16(g):
    """``g`` with its floating-point features in bfloat16."""
    return _cast(g, torch.bfloat16)


def to_half(g):
    """``g`` with its floating-point features in float16."""
    return _cast(g, torch.float16)


def to_float(g):
    """``g`` with its floating-point features in float32."""
    return _cast(g, torch.float32)


def to_double(g):
    """``g`` with its floating-point features in float64."""
    return _cast(g, torch.float64)

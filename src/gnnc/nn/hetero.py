"""DGL's ``HeteroGraphConv``: one module per relation, results summed (or otherwise combined) per node type."""

from __future__ import annotations

from functools import partial

import torch
from torch import nn

from ..dgl_base import DGLError
from .hetero_modules import HeteroEmbedding, HeteroLinear  # DGL keeps them in hetero

__all__ = ["HeteroEmbedding", "HeteroGraphConv", "HeteroLinear"]


class HeteroGraphConv(nn.Module):
    """DGL 2.1's ``HeteroGraphConv``: for every relation ``(s, r, d)`` of ``g`` whose source type has
    inputs, ``mods[r]`` (or ``mods[(s, r, d)]``) runs on ``g[s, r, d]`` with ``(inputs[s], inputs[d])``;
    each destination type's results are combined by ``aggregate`` (``sum``, ``max``, ``min``, ``mean``,
    ``stack`` or a callable ``f(tensors, dsttype)``). Returns ``{dsttype: tensor}`` for the types that got
    any. Sub-modules are told to allow zero in-degree nodes, as DGL's. ``mod_args`` / ``mod_kwargs``:
    extra arguments per relation name. On a block, destination inputs are the first rows of each type.
    """

    def __init__(self, mods, aggregate="sum"):
        super().__init__()
        self.mod_dict = mods
        self.mods = nn.ModuleDict({str(k): v for k, v in mods.items()})
        for mod in self.mods.values():
            allow = getattr(mod, "set_allow_zero_in_degree", None)
            if callable(allow):
                allow(True)
        self.agg_fn = get_aggregate_fn(aggregate) if isinstance(aggregate, str) else aggregate

    def _get_module(self, etype):
        mod = self.mod_dict.get(etype, None)
        if mod is not None:
            return mod
        if isinstance(etype, tuple):
            return self.mod_dict[etype[1]]
        raise KeyError(f"Cannot find module with edge type {etype}")

    def forward(self, g, inputs, mod_args=None, mod_kwargs=None):
        mod_args, mod_kwargs = mod_args or {}, mod_kwargs or {}
        if isinstance(inputs, tuple):
            src_inputs, dst_inputs = inputs
        elif getattr(g, "is_block", False):
            src_inputs = inputs
            dst_inputs = {k: v[: g.number_of_dst_nodes(k)] for k, v in inputs.items()}
        else:
            src_inputs = dst_inputs = inputs
        outputs = {ntype: [] for ntype in g.dsttypes}
        for stype, etype, dtype in g.canonical_etypes:
            if stype not in src_inputs or dtype not in dst_inputs:
                continue
            out = self._get_module((stype, etype, dtype))(
                g[stype, etype, dtype],
                (src_inputs[stype], dst_inputs[dtype]),
                *mod_args.get(etype, ()),
                **mod_kwargs.get(etype, {}),
            )
            outputs[dtype].append(out)
        return {ntype: self.agg_fn(results, ntype) for ntype, results in outputs.items() if results}


def _stack(inputs, dsttype):
    return torch.stack(inputs, dim=1) if inputs else None


def _combine(inputs, dsttype, reduce):
    return reduce(torch.stack(inputs, dim=0), dim=0) if inputs else None


def _max(x, dim):
    return torch.max(x, dim=dim)[0]


def _min(x, dim):
    return torch.min(x, dim=dim)[0]


# module-level functions, not lambdas: a HeteroGraphConv is pickled whole by ``torch.save``
_REDUCES = {"sum": torch.sum, "mean": torch.mean, "max": _max, "min": _min}


def get_aggregate_fn(agg):
    """DGL's cross-type aggregator by name: ``f(tensors, dsttype)``."""
    if agg == "stack":
        return _stack
    if agg not in _REDUCES:
        raise DGLError(
            f'Invalid cross type aggregator. Must be one of "sum", "max", "min", "mean" or "stack". But got "{agg}"'
        )
    return partial(_combine, reduce=_REDUCES[agg])

"""The mini-batch models by name (``MODEL_BUILDERS``): stacks of R-GCN, R-GAT or HGT layers over sampled
blocks (``LayerStack``), built for a graph's relations and node types."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..data.neighbor_sampler import forward_blocks
from ..models import HGTConv, RGATConv, RGCNConv


class LayerStack(nn.Module):
    """``forward(blocks, x)``: layers over blocks (``forward_blocks``), then an optional head.

    ``x`` has one row per node of ``blocks[0]``; the result one row per
    destination node of ``blocks[-1]`` (the seeds).
    """

    def __init__(self, layers, activation=F.relu, head: nn.Module | None = None):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.activation = activation
        self.head = head

    def forward(self, blocks, x: torch.Tensor) -> torch.Tensor:
        h = forward_blocks(self.layers, blocks, x, self.activation)
        return h if self.head is None else self.head(self.activation(h))


def rgcn(g, hidden: int, num_classes: int, num_layers: int) -> LayerStack:
    """R-GCN: ``num_layers`` RGCNConv, the last one to ``num_classes``."""
    dims = [hidden] * num_layers + [num_classes]
    rels = len(g.canonical_etypes)
    return LayerStack([RGCNConv(dims[i], dims[i + 1], rels) for i in range(num_layers)])


def rgat(g, hidden: int, num_classes: int, num_layers: int, num_heads: int = 4) -> LayerStack:
    """R-GAT: ``num_layers`` RGATConv of ``num_heads`` heads, then a linear head."""
    if hidden % num_heads:
        raise ValueError(f"rgat: hidden {hidden} is not divisible by {num_heads} heads")
    rels = len(g.canonical_etypes)
    layers = [RGATConv(hidden, hidden // num_heads, rels, num_heads) for _ in range(num_layers)]
    return LayerStack(layers, head=nn.Linear(hidden, num_classes))


def hgt(g, hidden: int, num_classes: int, num_layers: int, num_heads: int = 4) -> LayerStack:
    """HGT: ``num_layers`` HGTConv, then a linear head."""
    layers = [HGTConv(hidden, hidden, len(g.ntypes), len(g.canonical_etypes), num_heads) for _ in range(num_layers)]
    return LayerStack(layers, head=nn.Linear(hidden, num_classes))


MODEL_BUILDERS = {"rgcn": rgcn, "rgat": rgat, "hgt": hgt}

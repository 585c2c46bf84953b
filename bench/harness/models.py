"""The gnnc reference layers as benchmarked: widths, extra inputs, and the compared view of their output.

Every layer maps its input width to ``HIDDEN`` = 64 output columns (GAT and
RGAT: ``HEADS`` = 8 heads of ``HEAD_DIM`` = 8). Where a PyG built-in
computes a slightly different function, the layer is configured here to
compute PyG's (see ``pyg_models`` for the PyG side and its notes).
Homogeneous models run on the homogeneous datasets, relational models on
the heterogeneous ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from gnnc import models as gm

from .datasets import DATASETS, HETEROGENEOUS, HOMOGENEOUS, BenchData

HIDDEN = 64
HEADS = 8
HEAD_DIM = HIDDEN // HEADS
KERNELS = 3  # GMM: Gaussian kernels, as DGL's MoNet example
PSEUDO_DIM = 2  # GMM: pseudo-coordinates per edge


@dataclass(frozen=True)
class ModelSpec:
    """How to build one reference layer and read its output.

    ``build(data)`` makes the layer (the caller seeds torch first); the layer
    is called as ``layer(graph, x, *inputs(data))``; ``view(out, data)`` is the
    2-D tensor the equivalence gate compares.
    """

    name: str
    title: str
    kind: str
    build: Callable[[BenchData], nn.Module]
    inputs: Callable[[BenchData], tuple] = lambda data: ()
    view: Callable[[torch.Tensor, BenchData], torch.Tensor] = lambda out, data: out


def gmm_pseudo(data: BenchData) -> torch.Tensor:
    """MoNet's pseudo-coordinates ``(1/sqrt(deg_in(u)+1), 1/sqrt(deg_in(v)+1))`` per edge, user edge order."""
    g = data.graph
    src, dst = g.find_edges()
    inv = (g.in_degrees().to(torch.float32) + 1).rsqrt()
    return torch.stack([inv[src], inv[dst]], 1)


def destination_rows(g) -> torch.Tensor:
    """Global ids of the nodes whose type is some relation's destination (PyG's HGTConv outputs only these)."""
    dst_types = {dt for _, _, dt in g.canonical_etypes}
    ranges = [torch.arange(*g.index.ntype_range(i)) for i, t in enumerate(g.ntypes) if t in dst_types]
    return torch.cat(ranges)


def _rgat(data: BenchData) -> nn.Module:
    layer = gm.RGATConv(data.x.shape[1], HEAD_DIM, num_rels=len(data.graph.etypes), num_heads=HEADS)
    with torch.no_grad():  # PyG's RGATConv has one attention vector for all relations
        layer.attn.copy_(layer.attn[:1].expand_as(layer.attn))
    return layer


MODELS = {
    spec.name: spec
    for spec in (
        ModelSpec("gcn", "GCN", HOMOGENEOUS, lambda d: gm.GCNConv(d.x.shape[1], HIDDEN)),
        ModelSpec(
            "gat",
            "GAT",
            HOMOGENEOUS,
            lambda d: gm.GATConv(d.x.shape[1], HEAD_DIM, num_heads=HEADS),
            view=lambda out, d: out.flatten(1),
        ),
        ModelSpec("edgeconv", "EdgeConv", HOMOGENEOUS, lambda d: gm.EdgeConv(d.x.shape[1], HIDDEN)),
        ModelSpec(
            "gmm",
            "GMM (MoNet)",
            HOMOGENEOUS,
            lambda d: gm.GMMConv(d.x.shape[1], HIDDEN, PSEUDO_DIM, KERNELS, aggregator="mean"),
            inputs=lambda d: (gmm_pseudo(d),),
        ),
        ModelSpec(
            "rgcn", "RGCN", HETEROGENEOUS, lambda d: gm.RGCNConv(d.x.shape[1], HIDDEN, num_rels=len(d.graph.etypes))
        ),
        ModelSpec("rgat", "RGAT", HETEROGENEOUS, _rgat),
        ModelSpec(
            "hgt",
            "HGT",
            HETEROGENEOUS,
            lambda d: gm.HGTConv(
                d.x.shape[1], HIDDEN, len(d.graph.ntypes), len(d.graph.etypes), num_heads=HEADS, use_norm=False
            ),
            view=lambda out, d: out[destination_rows(d.graph)],
        ),
    )
}


def datasets_for(model: str, dataset_names) -> list[str]:
    """The datasets among ``dataset_names`` whose graph kind ``model`` runs on."""
    return [n for n in dataset_names if DATASETS[n].kind == MODELS[model].kind]

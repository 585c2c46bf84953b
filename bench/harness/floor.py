"""The floor: bytes every configuration must move and FLOPs it must run, and the time they take here.

Formulas (documented with their reasoning in bench/README.md) use the graph's
shape: N nodes, E edges, R relations, S distinct (source, relation) pairs,
D distinct (destination, relation) pairs, input width f, and the model
widths of ``models``. Floor time = max(bytes / copy bandwidth, FLOPs / matmul rate).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .models import HEAD_DIM, HEADS, HIDDEN, KERNELS, PSEUDO_DIM

FLOAT, INDEX = 4, 4  # bytes: fp32 values; int32 ids suffice for every graph here
RELATIONAL = ("rgcn", "rgat", "hgt")


@dataclass(frozen=True)
class Shape:
    """What the floor depends on; ``params`` counts the reference layer's parameters."""

    nodes: int
    edges: int
    relations: int
    src_pairs: int
    dst_pairs: int
    in_dim: int
    params: int


@dataclass(frozen=True)
class Work:
    flops: float
    bytes: float


def shape_of(g, in_dim: int, params: int) -> Shape:
    """The floor shape of graph ``g`` with ``in_dim``-wide inputs."""
    n, rel = g.num_nodes(), g.index.edge_rel

    def pairs(ends: torch.Tensor) -> int:
        return int(torch.unique(rel * n + ends).numel())

    return Shape(n, g.num_edges(), len(g.etypes), pairs(g.index.src), pairs(g.index.dst), in_dim, params)


def _forward_flops(model: str, s: Shape) -> float:
    N, E, R, S, D, f = s.nodes, s.edges, s.relations, s.src_pairs, s.dst_pairs, s.in_dim
    d, H, C, K, P = HIDDEN, HEADS, HEAD_DIM, KERNELS, PSEUDO_DIM
    if model == "gcn":
        return 2 * N * f * d + E + 2 * E * d
    if model == "gat":
        return 2 * N * f * d + 4 * N * d + 5 * E * H + 2 * E * d
    if model == "edgeconv":
        return 4 * N * f * d + 2 * E * d
    if model == "gmm":
        return 2 * N * f * K * d + E * K * (3 * P + 2) + 2 * E * K * d
    if model == "rgcn":
        return 2 * N * f * d + min(2 * S * f * d + 2 * E * d, 2 * E * f + 2 * D * f * d)
    if model == "rgat":
        return (
            2 * R * f * d
            + 2 * (S + D) * f * H
            + 5 * E * H
            + min(2 * S * f * d + 2 * E * d, 2 * E * H * f + 2 * D * f * d)
        )
    if model == "hgt":
        return 6 * N * f * d + 4 * min(S, D) * d * C + 4 * E * d + 4 * E * H + 2 * N * d * d + 4 * N * d
    raise KeyError(f"no floor formula for model {model!r}")


def _forward_bytes(model: str, s: Shape) -> float:
    N, E = s.nodes, s.edges
    structure = INDEX * (N + 1 + E) + (INDEX * E if model in RELATIONAL else 0)
    edge_inputs = FLOAT * E * PSEUDO_DIM if model == "gmm" else 0
    return FLOAT * (N * s.in_dim + N * HIDDEN + s.params) + structure + edge_inputs


def work(model: str, mode: str, s: Shape) -> Work:
    """Least work of one inference forward, or of one training step (forward, backward, SGD update).

    Training: backward at least repeats the forward's FLOPs (each weight
    gradient costs what its forward product did) and its traffic, plus
    writing parameter gradients and the SGD update (read gradient, read and
    write parameter): 2x forward + 16 bytes per parameter.
    """
    fwd = Work(_forward_flops(model, s), _forward_bytes(model, s))
    if mode == "inference":
        return fwd
    if mode == "training":
        return Work(2 * fwd.flops, 2 * fwd.bytes + 4 * FLOAT * s.params)
    raise ValueError(f"unknown mode {mode!r}; use inference or training")


def floor_seconds(w: Work, rates: dict) -> float:
    """Time this machine needs at least: the slower of moving the bytes and running the FLOPs."""
    return max(w.bytes / rates["copy_bytes_per_s"], w.flops / rates["matmul_flops_per_s"])

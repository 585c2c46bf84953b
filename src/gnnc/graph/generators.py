"""Random graphs (DGL's ``rand_graph`` / ``rand_bipartite``) and the seed of the generator they draw from."""

from __future__ import annotations

import torch

from .core import graph, heterograph

_RNG = torch.Generator()
_RNG.seed()  # unseeded: a fresh draw per process, as DGL's until ``seed`` is called


def seed(val: int) -> None:
    """Seed the generator of ``rand_graph`` and ``rand_bipartite`` (DGL's ``dgl.seed``). torch's global
    generator is untouched, and gnnc's samplers take their own seed (``NeighborSampler(seed=...)``)."""
    _RNG.manual_seed(int(val))


def rand_graph(num_nodes: int, num_edges: int, idtype=torch.int64, device=None):
    """A graph of ``num_nodes`` nodes and ``num_edges`` distinct edges drawn uniformly from the
    ``num_nodes ** 2`` possible ones (self loops included), as DGL's ``rand_graph``. Edge ids follow the
    drawn order; the drawn edges differ from DGL's for the same seed."""
    src, dst = _pairs(num_nodes, num_nodes, num_edges)
    return graph((src, dst), num_nodes=num_nodes, idtype=idtype, device=device)


def rand_bipartite(
    utype: str,
    etype: str,
    vtype: str,
    num_src_nodes: int,
    num_dst_nodes: int,
    num_edges: int,
    idtype=torch.int64,
    device=None,
):
    """A uni-bipartite graph with one relation ``(utype, etype, vtype)`` and ``num_edges`` distinct edges
    drawn uniformly from the ``num_src_nodes * num_dst_nodes`` possible ones, as DGL's ``rand_bipartite``."""
    src, dst = _pairs(num_src_nodes, num_dst_nodes, num_edges)
    return heterograph(
        {(utype, etype, vtype): (src, dst)},
        device=device,
        idtype=idtype,
        num_nodes_dict={utype: num_src_nodes, vtype: num_dst_nodes},
    )


def _pairs(rows: int, cols: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` distinct (row, col) pairs drawn uniformly without replacement."""
    population = rows * cols
    if not 0 <= count <= population:
        raise ValueError(f"cannot draw {count} distinct edges from {rows} x {cols} node pairs")
    if count * 4 >= population:  # dense: one permutation of all pairs
        picked = torch.randperm(population, generator=_RNG)[:count]
    else:  # sparse: distinct values of draws with replacement, then a random subset of them (uniform by symmetry)
        picked = torch.empty(0, dtype=torch.int64)
        while picked.numel() < count:
            picked = torch.cat([picked, torch.randint(population, (count,), generator=_RNG)]).unique()
        picked = picked[torch.randperm(picked.numel(), generator=_RNG)[:count]]
    return picked // cols, picked % cols


__all__ = ["rand_bipartite", "rand_graph", "seed"]

"""DGL's ``dgl.dataloading`` call shape over gnnc's sampler: ``NeighborSampler(fanouts)`` and ``DataLoader``.

DGL code writes ``sampler = dgl.dataloading.NeighborSampler([15, 10])`` (the
graph comes later) and ``for input_nodes, output_nodes, blocks in
dgl.dataloading.DataLoader(g, train_ids, sampler, batch_size=..., shuffle=...)``.
Here the sampler draws with ``gnnc.data.neighbor_sampler.NeighborSampler``
(uniform, without replacement; ``-1`` takes every in-edge), kept per graph
structure, and each batch is DGL's triple: ``input_nodes`` the first block's
source nodes, ``output_nodes`` the batch's seeds, ``blocks`` one ``Block`` per
layer, input layer first. As DGL's, every block holds its nodes' parent ids
as ``srcdata[NID]`` / ``dstdata[NID]`` and its edges' as ``edata[EID]``
(in the graph's ``idtype``; per type on a graph with several), and no other
feature.

Random draws (the shuffle, the sampler's stream) come from torch's global
generator, so ``torch.manual_seed`` makes a run repeat, as in DGL (gnnc's
draws are not DGL's). Options of DGL's that change what is drawn
(``edge_dir='out'``, ``prob``, ``mask``, ``replace=True``, ``exclude``) raise
NotImplementedError; those that only change how fast batches arrive
(``num_workers``, ``use_prefetch_thread``, ``pin_prefetcher``, ...) are
accepted and change nothing here: batches are sampled in the calling process.
"""

from __future__ import annotations

import math

import torch

from ..dgl_base import EID, NID
from ..graph import Graph
from ..graph.block import Block
from .neighbor_sampler import NeighborSampler as _Sampler

__all__ = ["NeighborSampler", "MultiLayerFullNeighborSampler", "DataLoader"]

# DataLoader options that only change how batches are produced, not which
_SPEED_ONLY = frozenset(
    {
        "num_workers",
        "persistent_workers",
        "pin_memory",
        "prefetch_factor",
        "use_prefetch_thread",
        "use_alternate_streams",
        "pin_prefetcher",
        "use_uva",
        "gpu_cache",
        "use_ddp",
        "ddp_seed",
    }
)


class NeighborSampler:
    """DGL's ``NeighborSampler(fanouts)``: ``fanouts[l]`` in-edges per node and relation for layer ``l``
    (-1: all); ``sample(g, seeds)`` gives ``(input_nodes, output_nodes, blocks)``."""

    def __init__(
        self,
        fanouts,
        edge_dir: str = "in",
        prob=None,
        mask=None,
        replace: bool = False,
        prefetch_node_feats=None,
        prefetch_labels=None,
        prefetch_edge_feats=None,
        output_device=None,
    ):
        drawn_otherwise = {"edge_dir='out'": edge_dir != "in", "prob": prob is not None, "mask": mask is not None}
        drawn_otherwise["replace=True"] = bool(replace)
        drawn_otherwise["prefetch_*"] = any(x is not None for x in (prefetch_node_feats, prefetch_labels))
        drawn_otherwise["prefetch_*"] |= prefetch_edge_feats is not None
        unsupported = [name for name, given in drawn_otherwise.items() if given]
        if unsupported:
            raise NotImplementedError(
                f"NeighborSampler: gnnc samples in-edges uniformly without replacement; {unsupported} not supported "
                "(read features from the graph with block.srcdata[dgl.NID] instead of prefetching)"
            )
        self.fanouts = list(fanouts)
        self.output_device = output_device
        self._sampler: _Sampler | None = None

    def _for(self, g: Graph) -> _Sampler:
        """gnnc's sampler on ``g``'s structure (built again when the structure changes), seeded from torch's
        global generator."""
        if self._sampler is None or self._sampler.g is not g or self._sampler.g.index is not g.index:
            seed = int(torch.randint(2**62, ()))
            self._sampler = _Sampler(g, self.fanouts, seed=seed)
        return self._sampler

    def sample(self, g: Graph, seed_nodes, exclude_eids=None):
        """``(input_nodes, output_nodes, blocks)`` for ``seed_nodes`` (ids of the one node type, or a dict by
        type): see the module."""
        if exclude_eids is not None:
            raise NotImplementedError("NeighborSampler.sample: exclude_eids is not supported by gnnc's sampler")
        by_type = seed_nodes if isinstance(seed_nodes, dict) else {_only_type(g): seed_nodes}
        blocks = self._for(g).sample_by_type({g.ntype_id(t): ids for t, ids in by_type.items()})
        for block in blocks:
            _store_ids(g, block)
        if self.output_device is not None:
            blocks = [block.to(self.output_device) for block in blocks]
        return blocks[0].srcdata[NID], seed_nodes, blocks

    sample_blocks = sample


class MultiLayerFullNeighborSampler(NeighborSampler):
    """DGL's: every in-edge in each of ``num_layers`` layers."""

    def __init__(self, num_layers: int, **options):
        super().__init__([-1] * num_layers, **options)


def _only_type(g: Graph) -> str:
    if len(g.index.ntypes) != 1:
        raise ValueError(
            f"the graph has several node types {list(g.index.ntypes)}: give the seed nodes as a dict by type"
        )
    return g.index.ntypes[0]


def _store_ids(g: Graph, block: Block) -> None:
    """DGL's ``NID`` / ``EID`` of ``block``'s nodes and edges: ids in ``g`` (per type / relation)."""
    offsets = g.index.ntype_offsets
    src_counts = block.num_src_per_type
    start = 0
    src, dst = {}, {}
    for t, name in enumerate(block.index.ntypes):
        local = block.src_ids[start : start + src_counts[t]] - offsets[t]
        src[name], dst[name] = local.to(g.idtype), local[: block.num_dst_per_type[t]].to(g.idtype)
        start += src_counts[t]
    edges = {}
    for r, key in enumerate(block.canonical_etypes):
        lo, hi = block.index.rel_range(r)
        edges[key] = (block.parent_eids[lo:hi] - g.index.rel_offsets[r]).to(g.idtype)
    one_type = len(src) == 1
    block.srcdata[NID] = next(iter(src.values())) if one_type else src
    block.dstdata[NID] = next(iter(dst.values())) if one_type else dst
    block.edata[EID] = next(iter(edges.values())) if len(edges) == 1 else edges


class DataLoader:
    """DGL's ``DataLoader(graph, indices, graph_sampler, device=None, batch_size=1, drop_last=False,
    shuffle=False)``: batches of ``indices`` (node ids, or a dict by node type) sampled by
    ``graph_sampler.sample(graph, batch)``, moved to ``device``; see the module for other options."""

    def __init__(
        self, graph, indices, graph_sampler, device=None, batch_size: int = 1, drop_last=False, shuffle=False, **options
    ):
        unknown = sorted(set(options) - _SPEED_ONLY)
        if unknown:
            raise TypeError(f"DataLoader: unsupported options {unknown}")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be a positive int, got {batch_size!r}")
        self.graph, self.graph_sampler, self.device = graph, graph_sampler, device
        self.batch_size, self.drop_last, self.shuffle = batch_size, bool(drop_last), bool(shuffle)
        if isinstance(indices, dict):
            self._items = [(t, torch.as_tensor(ids).reshape(-1)) for t, ids in indices.items()]
        else:
            self._items = [(None, torch.as_tensor(indices).reshape(-1))]

    def __len__(self) -> int:
        total = sum(ids.numel() for _, ids in self._items)
        return total // self.batch_size if self.drop_last else math.ceil(total / self.batch_size)

    def __iter__(self):
        types = torch.cat([torch.full((ids.numel(),), i, dtype=torch.int64) for i, (_, ids) in enumerate(self._items)])
        ids = torch.cat([ids.to("cpu") for _, ids in self._items])
        order = torch.randperm(ids.numel()) if self.shuffle else torch.arange(ids.numel())
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            pick = order[start : start + self.batch_size]
            yield self._batch(types.index_select(0, pick), ids.index_select(0, pick))

    def _batch(self, types: torch.Tensor, ids: torch.Tensor):
        seeds = {
            name: ids[types == i].to(self.graph.device)
            for i, (name, _) in enumerate(self._items)
            if bool((types == i).any())
        }
        out = self.graph_sampler.sample(self.graph, seeds if self._items[0][0] is not None else seeds[None])
        return out if self.device is None else _to(out, self.device)


def _to(value, device):
    """``value`` (tensors, blocks, and tuples, lists and dicts of them) on ``device``."""
    if isinstance(value, (torch.Tensor, Graph)):
        return value.to(device)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    return value

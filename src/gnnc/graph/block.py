"""A layer's block (DGL's convention): a graph whose destination nodes are the first of its source nodes.

A ``Block`` is a gnnc ``Graph`` with its parent's node types and relations
(some relations may be empty). Its nodes are the source nodes, grouped by node
type; within each type the destination nodes come first. Every edge ends at a
destination node, so a layer runs on all block nodes and its results are read
at the destination rows: ``dstdata`` / ``dstnodes[t].data`` (DGL's separate
destination frame, here the first rows) or ``slice_dst``. The sampler
(``gnnc.data.sampler``) and ``gnnc.to_block`` make them.

DGL's block holds its source and destination nodes as two node sets; a
gnnc block holds them as one where the destination nodes lead, which is the
order DGL's ``to_block(include_dst_in_src=True)`` and its samplers give. DGL's
``"SRC/<type>"`` / ``"DST/<type>"`` names count either side.
"""
from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from functools import cached_property

import torch

from .core import Graph, NodeSpace
from .frame import TypeView

class Block(Graph):
    """One layer's computation graph; see the module docstring for the node layout.

    ``src_ids``: parent global id of every block node. ``num_dst_per_type``:
    destination nodes of each node type (a prefix of that type's nodes).
    ``parent_eids``: parent edge id (user order) of every block edge, in the
    block's user edge order.
    """

    def __init__(self, index, src_ids: torch.Tensor, num_dst_per_type, parent_eids: torch.Tensor,
                 nstore=None, estore=None):
        super().__init__(index, nstore, estore)
        if src_ids.numel() != index.num_nodes:
            raise ValueError(f"Block: {src_ids.numel()} parent ids for {index.num_nodes} nodes")
        if parent_eids.numel() != index.num_edges:
            raise ValueError(f"Block: {parent_eids.numel()} parent edge ids for {index.num_edges} edges")
        self.src_ids = src_ids
        self.num_dst_per_type = tuple(int(n) for n in num_dst_per_type)
        self.parent_eids = parent_eids

    is_block = True

    def num_dst_nodes(self, ntype: str | None = None) -> int:
        """Destination nodes in all (or one) node types."""
        if ntype is None:
            return sum(self.num_dst_per_type)
        return self.num_dst_per_type[self.ntype_id(ntype)]

    number_of_dst_nodes = num_dst_nodes

    def num_nodes(self, ntype: str | None = None) -> int:
        """Source nodes in all (or one) node types; DGL's ``"DST/<type>"`` counts destination nodes and
        ``"SRC/<type>"`` source nodes."""
        if isinstance(ntype, str) and ntype.startswith("DST/"):
            return self.num_dst_nodes(ntype[4:])
        if isinstance(ntype, str) and ntype.startswith("SRC/"):
            ntype = ntype[4:]
        return super().num_nodes(ntype)

    @property
    def srctypes(self) -> list[str]:
        """Every node type (DGL's block: the source side has the parent's node types)."""
        return self.ntypes

    @property
    def dsttypes(self) -> list[str]:
        """Every node type (DGL's block: the destination side has the parent's node types)."""
        return self.ntypes

    @property
    def srcnodes(self) -> NodeSpace:
        return NodeSpace(self)

    @property
    def dstnodes(self) -> "DestinationSpace":
        """DGL's ``block.dstnodes``: ``dstnodes[t].data`` holds the destination rows of node type ``t``;
        ``dstnodes(t)`` the destination nodes' ids."""
        return DestinationSpace(self)

    @property
    def dstdata(self):
        """DGL's block ``dstdata``: with one node type, the destination nodes' rows (the first
        ``num_dst_nodes()`` block nodes) as :class:`DestinationRows`; otherwise as on any graph."""
        if len(self.index.ntypes) == 1:
            return DestinationRows(self.ndata, self.num_dst_nodes(), self.num_nodes())
        return super().dstdata

    @cached_property
    def dst_index(self) -> torch.Tensor:
        """Block ids of the destination nodes, type by type, in destination order."""
        offsets = self.index.ntype_offsets
        parts = [torch.arange(offsets[t], offsets[t] + n, device=self.device)
                 for t, n in enumerate(self.num_dst_per_type)]
        return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64, device=self.device)

    @property
    def dst_ids(self) -> torch.Tensor:
        """Parent global ids of the destination nodes, in destination order."""
        return self.src_ids.index_select(0, self.dst_index)

    def slice_dst(self, h: torch.Tensor) -> torch.Tensor:
        """Rows of ``h`` (one per block node) that belong to destination nodes."""
        if h.dim() == 0 or h.shape[0] != self.num_nodes():
            raise ValueError(f"slice_dst: expected {self.num_nodes()} rows (one per block node), "
                             f"got shape {tuple(h.shape)}")
        return h.index_select(0, self.dst_index)

    def to(self, device) -> "Block":
        moved = super().to(device)
        out = Block(moved.index, self.src_ids.to(device), self.num_dst_per_type, self.parent_eids.to(device),
                    moved._nstore, moved._estore)
        out.ntype_data.data, out.etype_data.data = moved.ntype_data.data, moved.etype_data.data
        return out

    def __repr__(self) -> str:
        return (f"Block(src={dict(zip(self.ntypes, self.index.ntype_counts))}, "
                f"dst={dict(zip(self.ntypes, self.num_dst_per_type))}, num_edges={self.num_edges()})")


class DestinationRows(MutableMapping):
    """A one-type block's ``dstdata``: the first ``num_dst`` rows of its node data (destination nodes are the
    first block nodes). DGL keeps a separate destination frame, so its code writes ``[num_dst, ...]``
    tensors here: a new feature gets zeros on the other nodes; a feature the source side already holds
    must equal its first rows (the same nodes here), else ValueError: two values for one node would
    silently change what ``edges.src`` reads."""

    def __init__(self, ndata, num_dst: int, num_nodes: int):
        self._ndata, self._num_dst, self._num_nodes = ndata, num_dst, num_nodes

    def __getitem__(self, key):
        return self._ndata[key][:self._num_dst]

    def __setitem__(self, key, value):
        if not isinstance(value, torch.Tensor) or value.dim() == 0 or value.shape[0] != self._num_dst:
            got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise ValueError(f"block.dstdata[{key!r}] takes one row per destination node ({self._num_dst}), "
                             f"got {got}")
        if key in self._ndata:
            held = self._ndata[key]
            if held.shape[1:] != value.shape[1:] or held.dtype != value.dtype \
                    or not torch.equal(held[:self._num_dst], value):
                raise ValueError(f"block.dstdata[{key!r}] differs from the first {self._num_dst} rows of "
                                 f"block.srcdata[{key!r}]: in a gnnc block the destination nodes are the first "
                                 f"source nodes, with one value per node; store it under another name")
            return
        rest = value.new_zeros((self._num_nodes - self._num_dst,) + tuple(value.shape[1:]))
        self._ndata[key] = torch.cat([value, rest])

    def __delitem__(self, key):
        del self._ndata[key]

    def __contains__(self, key):
        return key in self._ndata

    def __iter__(self):
        return iter(self._ndata)

    def __len__(self):
        return len(self._ndata)




@dataclass(frozen=True)
class _Rows:
    data: MutableMapping


class DestinationSpace(NodeSpace):
    """A block's ``dstnodes``: as ``nodes`` over the destination nodes only (the first nodes of each type)."""

    def __getitem__(self, ntype) -> _Rows:
        t = self._g.ntype_id(ntype)
        return _Rows(DestinationRows(TypeView(self._g._nstore, t), self._g.num_dst_per_type[t],
                                     self._g.index.ntype_counts[t]))

    def __call__(self, ntype=None) -> torch.Tensor:
        return self._g.ids(torch.arange(self._g.num_dst_nodes(ntype), device=self._g.device))

"""A layer's block (DGL's convention): message passing from source nodes into destination nodes.

A ``Block`` is a gnnc ``Graph`` with its parent's node types and relations
(some relations may be empty). Its nodes are the source nodes, grouped by node
type; within each type the destination nodes come first (the order DGL's
``to_block(include_dst_in_src=True)`` and its samplers give). Every edge ends
at a destination node. The sampler (``gnnc.data.neighbor_sampler``) and
``gnnc.to_block`` make them.

A block whose two sides are separate node sets (DGL's ``create_block``,
``to_block(include_dst_in_src=False)``: ``gnnc.graph.blocks``) numbers both
sides from 0 within each type: the structure holds ``max(sources,
destinations)`` rows of the type, source ``i`` and destination ``i`` share
row ``i`` without being one node. Its counts, degrees, ids and features are
DGL's; where a type has more destination than source nodes, ``edges.src``
reads zeros on the rows without a source node (no edge starts there) and
``ndata`` / ``nodes[t].data`` (one node set) refuse writes.

As DGL's, a block holds two sides of node features
(``gnnc.graph.sided_store``): ``srcdata`` / ``srcnodes[t].data`` (what
``edges.src`` reads) and ``dstdata`` / ``dstnodes[t].data`` (one row per
destination node: what ``edges.dst`` and the reduce and update functions'
``nodes.data`` read, where ``update_all`` and the other message-passing
calls write, and where the update function runs). ``ndata`` /
``nodes[t].data`` are gnnc's view of one node set (DGL has none on a block):
a write sets both sides, a read gives the destination side's rows where it
has the feature and the source side's elsewhere, so a layer written for
whole graphs (``g.ndata['x'] = x; g.update_all(...); g.ndata['h']``) runs on a
block and its results are read at the destination rows (``slice_dst``).
DGL's ``"SRC/<type>"`` / ``"DST/<type>"`` names count either side and
name either side's features in ``nodes[...]``.
"""

from __future__ import annotations

from functools import cached_property

import torch

from .core import Graph, NodeSpace
from .frame import TypesView, TypeView, WholeView
from .sided_store import DestinationSide, NodeSet, SidedStore, SourceRows


class Block(Graph):
    """One layer's computation graph; see the module docstring for the node layout.

    ``src_ids``: parent global id of every source node. ``num_dst_per_type``:
    destination nodes of each node type (a prefix of that type's nodes).
    ``parent_eids``: parent edge id (user order) of every block edge, in the
    block's user edge order. ``num_src_per_type``: source nodes of each type
    (by default every node row; fewer where the sides are separate node sets,
    see the module). ``side_types``: DGL's (``srctypes``, ``dsttypes``) when
    not every node type (``create_block``'s).
    """

    def __init__(
        self,
        index,
        src_ids: torch.Tensor,
        num_dst_per_type,
        parent_eids: torch.Tensor,
        nstore=None,
        estore=None,
        num_src_per_type=None,
        side_types=None,
    ):
        num_dst_per_type = tuple(int(n) for n in num_dst_per_type)
        num_src_per_type = tuple(index.ntype_counts if num_src_per_type is None else map(int, num_src_per_type))
        if any(max(s, d) != n for s, d, n in zip(num_src_per_type, num_dst_per_type, index.ntype_counts)):
            raise ValueError(
                f"Block: node rows {index.ntype_counts} must be the larger of the source counts "
                f"{num_src_per_type} and destination counts {num_dst_per_type}"
            )
        if src_ids.numel() != sum(num_src_per_type):
            raise ValueError(f"Block: {src_ids.numel()} parent ids for {sum(num_src_per_type)} source nodes")
        if parent_eids.numel() != index.num_edges:
            raise ValueError(f"Block: {parent_eids.numel()} parent edge ids for {index.num_edges} edges")
        super().__init__(
            index, nstore or SidedStore(index.ntypes, num_src_per_type, num_dst_per_type, index.ntype_counts), estore
        )
        self.src_ids = src_ids
        self.num_dst_per_type = num_dst_per_type
        self.num_src_per_type = num_src_per_type
        self.parent_eids = parent_eids
        self.side_types = side_types

    is_block = True

    @property
    def is_unibipartite(self) -> bool:
        """True, as DGL's blocks: every edge goes from the source side to the destination side."""
        return True

    def num_dst_nodes(self, ntype: str | None = None) -> int:
        """Destination nodes in all (or one) node types."""
        if ntype is None:
            return sum(self.num_dst_per_type)
        return self.num_dst_per_type[self.ntype_id(ntype)]

    number_of_dst_nodes = num_dst_nodes

    def num_nodes(self, ntype: str | None = None) -> int:
        """DGL's ``DGLBlock.num_nodes``: with no type, source plus destination nodes (the sides count
        apart, as :attr:`ntypes` lists them); a type's count is its source nodes; ``"DST/<type>"`` counts
        destination nodes and ``"SRC/<type>"`` source nodes. The source nodes are
        :meth:`num_src_nodes`."""
        if isinstance(ntype, str) and ntype.startswith("DST/"):
            return self.num_dst_nodes(ntype[4:])
        if isinstance(ntype, str) and ntype.startswith("SRC/"):
            ntype = ntype[4:]
        if ntype is None:
            return sum(self.num_src_per_type) + sum(self.num_dst_per_type)
        return self.num_src_per_type[self.ntype_id(ntype)]

    def ntype_id(self, ntype: str | None) -> int:
        """As :meth:`Graph.ntype_id`; DGL's ``"SRC/<type>"`` / ``"DST/<type>"`` name the type too."""
        if isinstance(ntype, str) and ntype[:4] in ("SRC/", "DST/"):
            ntype = ntype[4:]
        return super().ntype_id(ntype)

    @property
    def ntypes(self) -> list[str]:
        """DGL's ``DGLBlock.ntypes``: the source types, then the destination types (``['_N', '_N']`` for a
        block of one node type). The block's node types, each once, are ``index.ntypes``; a position ``t``
        there names the same type here."""
        return self.srctypes + self.dsttypes

    @property
    def srctypes(self) -> list[str]:
        """DGL's source types: every node type (``to_block``'s, the parent's), or ``create_block``'s."""
        return list(self.index.ntypes) if self.side_types is None else list(self.side_types[0])

    @property
    def dsttypes(self) -> list[str]:
        """DGL's destination types: every node type (``to_block``'s, the parent's), or ``create_block``'s."""
        return list(self.index.ntypes) if self.side_types is None else list(self.side_types[1])

    def side_rows(self, values: torch.Tensor, t: int | None, end_slot: int) -> torch.Tensor:
        """Of ``values`` (one per node row of type ``t``, or of every type when None), DGL's side's: the
        destination nodes' (``end_slot`` 2) or the source nodes' (0), as DGL's degrees span them."""
        counts = self.num_dst_per_type if end_slot == 2 else self.num_src_per_type
        if t is not None:
            return values[: counts[t]]
        offsets = self.index.ntype_offsets
        return torch.cat([values[offsets[u] : offsets[u] + n] for u, n in enumerate(counts)])

    @property
    def ndata(self) -> NodeSet:
        """Both sides as one node set (see the module)."""
        return NodeSet(self._nstore, None, self.ntype_id)

    @property
    def nodes(self) -> NodeSpace:
        """``nodes[t].data``: both sides of type ``t`` as one node set; ``nodes("SRC/t")`` / ``nodes["DST/t"]``
        name one side (DGL's names)."""
        return _Sides(self, "both")

    @property
    def srcdata(self):
        """DGL's source-side features: with one node type a mapping over the source nodes, else one
        ``{type: tensor}`` view."""
        return self._side_data(self._nstore)

    @property
    def dstdata(self):
        """DGL's destination-side features (one row per destination node); else as :attr:`srcdata`."""
        return self._side_data(self._nstore.dst)

    def _side_data(self, store):
        if len(self.index.ntypes) == 1:
            return WholeView(store, self.ntype_id)
        return TypesView(store, range(len(self.index.ntypes)))

    @property
    def srcnodes(self) -> NodeSpace:
        return _Sides(self, "src")

    @property
    def dstnodes(self) -> NodeSpace:
        """DGL's ``block.dstnodes``: ``dstnodes[t].data`` the destination side of type ``t``; ``dstnodes(t)``
        the destination nodes' ids."""
        return _Sides(self, "dst")

    def side_data(self, side: str, ntype: int | None = None):
        """``edges.src`` reads the source side; ``edges.dst``, ``nodes.data`` and message passing's results the
        destination side, over every node row (``gnnc.graph.sided_store.DestinationSide``; the source side
        padded where it lacks node rows: ``SourceRows``)."""
        if side == "src" and self._nstore.short:
            return SourceRows(self._nstore, ntype)
        if side == "src":
            return WholeView(self._nstore, self.ntype_id) if ntype is None else TypeView(self._nstore, ntype)
        return DestinationSide(self._nstore, ntype, self.ntype_id)

    def receivers(self, ntype: int | None = None) -> torch.Tensor:
        """The nodes an update function runs on: the destination nodes (of type ``ntype``: local ids)."""
        if ntype is None:
            return self.dst_index
        return torch.arange(self.num_dst_per_type[ntype], device=self.device)

    def local_var(self) -> Block:
        """DGL's ``local_var``: this block with feature writes of its own (the tensors shared)."""
        out = Block(
            self.index,
            self.src_ids,
            self.num_dst_per_type,
            self.parent_eids,
            self._nstore.copy(),
            self._estore.copy(),
            self.num_src_per_type,
            self.side_types,
        )
        out.ntype_data.data, out.etype_data.data = dict(self.ntype_data.data), dict(self.etype_data.data)
        out.idtype, out.initializers = self.idtype, {kind: dict(f) for kind, f in self.initializers.items()}
        return out

    @cached_property
    def dst_index(self) -> torch.Tensor:
        """Block ids of the destination nodes, type by type, in destination order."""
        offsets = self.index.ntype_offsets
        parts = [
            torch.arange(offsets[t], offsets[t] + n, device=self.device) for t, n in enumerate(self.num_dst_per_type)
        ]
        return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64, device=self.device)

    @property
    def dst_ids(self) -> torch.Tensor:
        """Parent global ids of the destination nodes, in destination order."""
        return self.src_ids.index_select(0, self.dst_index)

    def slice_dst(self, h: torch.Tensor) -> torch.Tensor:
        """Rows of ``h`` (one per source node) that belong to destination nodes."""
        if h.dim() == 0 or h.shape[0] != self.num_src_nodes():
            raise ValueError(
                f"slice_dst: expected {self.num_src_nodes()} rows (one per source node), got shape {tuple(h.shape)}"
            )
        return h.index_select(0, self.dst_index)

    def to(self, device) -> Block:
        moved = super().to(device)
        out = Block(
            moved.index,
            self.src_ids.to(device),
            self.num_dst_per_type,
            self.parent_eids.to(device),
            moved._nstore,
            moved._estore,
            self.num_src_per_type,
            self.side_types,
        )
        out.ntype_data.data, out.etype_data.data = moved.ntype_data.data, moved.etype_data.data
        out.idtype = moved.idtype
        return out

    def __repr__(self) -> str:
        return (
            f"Block(src={dict(zip(self.index.ntypes, self.num_src_per_type))}, "
            f"dst={dict(zip(self.index.ntypes, self.num_dst_per_type))}, num_edges={self.num_edges()})"
        )


class _Sides(NodeSpace):
    """A block's ``nodes`` ("both": the one node set), ``srcnodes`` ("src") or ``dstnodes`` ("dst"); a type
    named ``"SRC/t"`` / ``"DST/t"`` picks that side of type ``t`` (DGL's names)."""

    def __init__(self, g: Block, side: str):
        super().__init__(g)
        self._side = side

    def _named(self, ntype):
        for prefix, side in (("SRC/", "src"), ("DST/", "dst")):
            if isinstance(ntype, str) and ntype.startswith(prefix):
                return _Sides(self._g, side), ntype[len(prefix) :]
        return self, ntype

    def __getitem__(self, key):
        if isinstance(key, str) or (isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], str)):
            space, name = self._named(key if isinstance(key, str) else key[1])
            if space is not self:
                return space[name if isinstance(key, str) else (key[0], name)]
        return super().__getitem__(key)

    def _data(self, t: int) -> tuple:
        store = self._g._nstore
        if self._side == "both":
            return NodeSet(store, t, self._g.ntype_id), store.counts[t]
        store = store.side(self._side)
        return TypeView(store, t), store.counts[t]

    def __call__(self, ntype=None) -> torch.Tensor:
        """A side's node ids; ``nodes(t)`` a type's source nodes, and ``nodes()`` (no type) refused, as DGL's
        (a block's :attr:`ntypes` list each type twice)."""
        space, ntype = self._named(ntype)
        if space is not self:
            return space(ntype)
        if self._side == "both" and ntype is None:
            raise ValueError(
                f"name the node type: a block's node types are {self._g.ntypes} (source side, then "
                f"destination side, as DGL's); srcnodes() and dstnodes() give either side's ids"
            )
        count = self._g.num_dst_nodes if self._side == "dst" else self._g.num_src_nodes
        return self._g.ids(torch.arange(count(ntype), device=self._g.device))

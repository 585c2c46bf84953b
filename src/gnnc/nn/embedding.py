"""Input features of a heterogeneous graph: read-only per type, or learnable.

Some node types carry features (any width per type); featureless ones get a
learnable embedding table (``nn.Embedding(sparse=True)``, so gradients touch
only the rows looked up, for ``gnnc.nn.SparseAdam``). Every type then goes
through its own linear layer to one common width, giving the
``[num_nodes, hidden]`` input a gnnc model takes. Node ids are the graph's
global ids (type offset + local id).

Lookup is split in two so a trainer can time them apart: ``fetch`` gathers
the raw rows (feature fetch), ``project`` applies the per-type linears.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class FetchedRows:
    """Raw input rows of a set of nodes, one entry per node type present.

    ``parts[i] = (ntype index, positions in the request, rows [k, width_of_type])``.
    """

    num_nodes: int
    parts: list[tuple[int, torch.Tensor, torch.Tensor]]


def split_by_type(ids: torch.Tensor, offsets: torch.Tensor, ntypes, who: str):
    """``(type index, type, positions in ids, local ids)`` for every type present among global ``ids``.

    IndexError naming ``who`` when an id lies outside ``[0, offsets[-1])``.
    """
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= int(offsets[-1])):
        raise IndexError(
            f"{who}: node ids must lie in [0, {int(offsets[-1])}), got range [{int(ids.min())}, {int(ids.max())}]"
        )
    types = torch.searchsorted(offsets[1:], ids, right=True)
    for i, t in enumerate(ntypes):
        pos = torch.nonzero(types == i).squeeze(1)
        if pos.numel():
            yield i, t, pos, ids.index_select(0, pos) - offsets[i]


class TypedEmbedding(nn.Module):
    """Per-type inputs projected to ``hidden_dim``; see the module docstring.

    ``num_nodes``: ordered ``{ntype: count}`` (the graph's node types in order).
    ``features``: ``{ntype: tensor [count, width]}`` read-only inputs.
    ``learnable``: ``{ntype: width}`` types that get an embedding table.
    Every node type must be in exactly one of the two.
    """

    def __init__(
        self,
        num_nodes: dict,
        hidden_dim: int,
        features: dict | None = None,
        learnable: dict | None = None,
        dtype: torch.dtype = torch.float32,
    ):
        super().__init__()
        features, learnable = dict(features or {}), dict(learnable or {})
        self.ntypes = list(num_nodes)
        self.hidden_dim = hidden_dim
        for t in list(features) + list(learnable):
            if t not in num_nodes:
                raise KeyError(f"TypedEmbedding: unknown node type {t!r}; node types: {self.ntypes}")
        for t in self.ntypes:
            if (t in features) == (t in learnable):
                where = "both features and a learnable table" if t in features else "neither features nor a table"
                raise ValueError(f"TypedEmbedding: node type {t!r} has {where}; give exactly one")
        offsets = [0]
        for t in self.ntypes:
            offsets.append(offsets[-1] + int(num_nodes[t]))
        self.register_buffer("offsets", torch.tensor(offsets, dtype=torch.int64), persistent=False)
        self.embeddings = nn.ModuleDict()
        self.projections = nn.ModuleDict()
        self._feature_names: dict[int, str] = {}
        for i, t in enumerate(self.ntypes):
            if t in features:
                feat = features[t]
                if feat.dim() != 2 or feat.shape[0] != num_nodes[t]:
                    raise ValueError(
                        f"TypedEmbedding: features of {t!r} have shape {tuple(feat.shape)}, "
                        f"expected [{num_nodes[t]}, width]"
                    )
                name = f"feature_{i}"
                self.register_buffer(name, feat.detach().to(dtype), persistent=False)
                self._feature_names[i] = name
                width = feat.shape[1]
            else:
                width = int(learnable[t])
                table = nn.Embedding(int(num_nodes[t]), width, sparse=True, dtype=dtype)
                nn.init.normal_(table.weight)  # same scale as standardized features
                self.embeddings[t] = table
            self.projections[t] = nn.Linear(width, hidden_dim, dtype=dtype)

    @classmethod
    def from_graph(
        cls,
        g,
        hidden_dim: int,
        learnable_ntypes,
        embed_dim: int | None = None,
        feature_key: str = "feat",
        dtype: torch.dtype = torch.float32,
    ) -> TypedEmbedding:
        """Inputs for ``g``: ``learnable_ntypes`` get tables of width ``embed_dim``
        (default ``hidden_dim``); every other type reads ``g.nodes[t].data[feature_key]``."""
        learnable_ntypes = list(learnable_ntypes)
        features = {}
        for t in g.ntypes:
            if t in learnable_ntypes:
                continue
            if feature_key not in g.nodes[t].data:
                raise KeyError(
                    f"TypedEmbedding: node type {t!r} has no {feature_key!r} feature; "
                    f"make it learnable or give it features"
                )
            features[t] = g.nodes[t].data[feature_key]
        width = hidden_dim if embed_dim is None else embed_dim
        return cls(
            {t: g.num_nodes(t) for t in g.ntypes}, hidden_dim, features, {t: width for t in learnable_ntypes}, dtype
        )

    def sparse_parameters(self) -> list[nn.Parameter]:
        """The embedding tables (sparse gradients)."""
        return [table.weight for table in self.embeddings.values()]

    def dense_parameters(self) -> list[nn.Parameter]:
        """The per-type projections (dense gradients)."""
        return list(self.projections.parameters())

    def fetch(self, ids: torch.Tensor) -> FetchedRows:
        """Raw rows of the nodes ``ids`` (global ids), grouped by type."""
        parts = []
        for i, t, pos, local in split_by_type(ids.to(self.offsets.device), self.offsets, self.ntypes, "TypedEmbedding"):
            if i in self._feature_names:
                rows = getattr(self, self._feature_names[i]).index_select(0, local)
            else:
                rows = self.embeddings[t](local)
            parts.append((i, pos, rows))
        return FetchedRows(ids.numel(), parts)

    def project(self, fetched: FetchedRows) -> torch.Tensor:
        """``[num_nodes, hidden_dim]``: each type's rows through its own linear layer."""
        ref = self.projections[self.ntypes[0]].weight
        out = ref.new_zeros((fetched.num_nodes, self.hidden_dim))
        for i, pos, rows in fetched.parts:
            out = out.index_copy(0, pos, self.projections[self.ntypes[i]](rows))
        return out

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.project(self.fetch(ids))

"""DGL's per-type linear and embedding modules (``HeteroLinear``, ``HeteroEmbedding``, in DGL's
``dgl.nn.pytorch.hetero``): one module per node or edge type, keyed by ``str(type)`` as DGL's so state dicts
load."""

from __future__ import annotations

from torch import nn


class HeteroLinear(nn.Module):
    """DGL 2.1's ``HeteroLinear``: ``{type: [N_t, in_size[t]]}`` to ``{type: [N_t, out_size]}``, one
    ``nn.Linear`` per type in ``linears`` (types may be node type names or canonical edge types)."""

    def __init__(self, in_size, out_size, bias=True):
        super().__init__()
        self.linears = nn.ModuleDict({str(t): nn.Linear(size, out_size, bias=bias) for t, size in in_size.items()})

    def forward(self, feat):
        return {t: self.linears[str(t)](x) for t, x in feat.items()}


class HeteroEmbedding(nn.Module):
    """DGL 2.1's ``HeteroEmbedding``: ``{type: ids}`` to ``{type: rows}``, one ``nn.Embedding`` of
    ``num_embeddings[t]`` rows per type in ``embeds``; ``weight`` is ``{type: table}``."""

    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        self.embeds = nn.ModuleDict({str(t): nn.Embedding(rows, embedding_dim) for t, rows in num_embeddings.items()})
        self.raw_keys = {str(t): t for t in num_embeddings}

    @property
    def weight(self):
        return {self.raw_keys[key]: table.weight for key, table in self.embeds.items()}

    def reset_parameters(self):
        """Xavier-uniform tables, as DGL's reset (construction keeps ``nn.Embedding``'s normal draw)."""
        for table in self.embeds.values():
            nn.init.xavier_uniform_(table.weight)

    def forward(self, input_ids):
        return {t: self.embeds[str(t)](ids) for t, ids in input_ids.items()}

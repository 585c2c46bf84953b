"""Stand-in for ``ogb.graphproppred.mol_encoder``: one embedding per categorical column, summed."""

import torch

ATOM_FEATURE_DIMS = [119, 5, 12, 12, 10, 6, 6, 2, 2]
BOND_FEATURE_DIMS = [5, 6, 2]


class _ColumnEmbeddingSum(torch.nn.Module):
    def __init__(self, emb_dim, dims):
        super().__init__()
        self.embeddings = torch.nn.ModuleList(torch.nn.Embedding(d, emb_dim) for d in dims)
        for embedding in self.embeddings:
            torch.nn.init.xavier_uniform_(embedding.weight.data)

    def forward(self, x):
        return sum(embedding(x[:, i]) for i, embedding in enumerate(self.embeddings))


class AtomEncoder(_ColumnEmbeddingSum):
    def __init__(self, emb_dim):
        super().__init__(emb_dim, ATOM_FEATURE_DIMS)


class BondEncoder(_ColumnEmbeddingSum):
    def __init__(self, emb_dim):
        super().__init__(emb_dim, BOND_FEATURE_DIMS)

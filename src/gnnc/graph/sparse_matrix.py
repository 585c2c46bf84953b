"""``SparseMatrix``: the COO matrix DGL's ``g.adj()`` returns (the part of ``dgl.sparse.SparseMatrix`` that
code reading an adjacency uses)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SparseMatrix:
    """A ``shape`` matrix with ``val[i]`` at (``row[i]``, ``col[i]``); duplicate entries add up when densified."""

    _indices: torch.Tensor  # [2, nnz]
    val: torch.Tensor  # [nnz] or [nnz, d]
    shape: tuple[int, int]

    def indices(self) -> torch.Tensor:
        """[2, nnz]: the rows, then the columns of the entries."""
        return self._indices

    @property
    def row(self) -> torch.Tensor:
        return self._indices[0]

    @property
    def col(self) -> torch.Tensor:
        return self._indices[1]

    @property
    def nnz(self) -> int:
        return self._indices.shape[1]

    @property
    def dtype(self) -> torch.dtype:
        return self.val.dtype

    @property
    def device(self) -> torch.device:
        return self.val.device

    def coo(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.row, self.col

    def to_dense(self) -> torch.Tensor:
        dense = self.val.new_zeros(self.shape + tuple(self.val.shape[1:]))
        return dense.index_put_((self.row.long(), self.col.long()), self.val, accumulate=True)

"""DGL's forms of a relation's edges, read into (src, dst) id tensors, and its id types.

A relation is given as ``(src_ids, dst_ids)``, ``('coo', (src_ids, dst_ids))``, ``('csr', (indptr, indices,
edge_ids))`` (rows are sources), ``('csc', (indptr, indices, edge_ids))`` (rows are destinations) or a list
of ``(src, dst)`` pairs; ``edge_ids`` may be empty (edges in the order the rows list them). The id type
(``idtype``: ``torch.int32`` or ``torch.int64``) is the one asked for, else the ids' own when they are
tensors, else int64, as DGL infers it.
"""

from __future__ import annotations

import torch

from .validate import as_ids

ID_TYPES = (torch.int32, torch.int64)


def check_idtype(idtype) -> torch.dtype:
    """``idtype`` if it is one DGL allows (int32 or int64), else ValueError."""
    if idtype not in ID_TYPES:
        raise ValueError(f"idtype must be torch.int32 or torch.int64, got {idtype}")
    return idtype


def relation_edges(data, what: str, idtype=None) -> tuple[torch.Tensor, torch.Tensor, torch.dtype]:
    """(src, dst, idtype) of one relation's edge data (int64 tensors; ``idtype`` as the module says)."""
    fmt, arrays = "coo", data
    if isinstance(data, tuple) and len(data) == 2 and isinstance(data[0], str):
        fmt, arrays = data
    if fmt not in ("coo", "csr", "csc"):
        raise ValueError(f"{what}: unknown sparse format {fmt!r}; use 'coo', 'csr' or 'csc'")
    if isinstance(data, list):  # DGL: a list is a list of edges
        arrays = _pairs(data, what)
    if not isinstance(arrays, (tuple, list)) or len(arrays) != (2 if fmt == "coo" else 3):
        shape = "(src_ids, dst_ids)" if fmt == "coo" else "(indptr, indices, edge_ids)"
        raise ValueError(f"{what}: expected {shape} for format {fmt!r}")
    if idtype is None:
        tensors = [a for a in arrays if isinstance(a, torch.Tensor)]
        idtype = tensors[0].dtype if tensors and tensors[0].dtype in ID_TYPES else torch.int64
    idtype = check_idtype(idtype)
    if fmt == "coo":
        return as_ids(arrays[0], f"{what} source ids"), as_ids(arrays[1], f"{what} destination ids"), idtype
    indptr, indices = as_ids(arrays[0], f"{what} indptr"), as_ids(arrays[1], f"{what} indices")
    eids = as_ids(arrays[2], f"{what} edge ids")
    if (
        indptr.numel() == 0
        or int(indptr[0]) != 0
        or int(indptr[-1]) != indices.numel()
        or bool((indptr[1:] < indptr[:-1]).any())
    ):
        raise ValueError(f"{what}: indptr must rise from 0 to the number of indices ({indices.numel()})")
    rows = torch.repeat_interleave(torch.arange(indptr.numel() - 1), indptr[1:] - indptr[:-1])
    if eids.numel():
        if eids.numel() != indices.numel() or not torch.equal(torch.sort(eids).values, torch.arange(indices.numel())):
            raise ValueError(f"{what}: edge ids must be a permutation of 0..{indices.numel() - 1}")
        order = torch.argsort(eids)
        rows, indices = rows[order], indices[order]
    src, dst = (rows, indices) if fmt == "csr" else (indices, rows)
    return src, dst, idtype


def sparse_rows(data) -> tuple[int, int] | None:
    """For DGL's ``('csr' | 'csc', (indptr, ...))`` forms, ``(end, rows)``: the relation's end whose nodes are
    the rows (0: sources, 2: destinations) and how many rows the indptr declares (DGL's node count of that
    end, trailing empty rows included); None for the other forms."""
    if isinstance(data, tuple) and len(data) == 2 and isinstance(data[0], str) and data[0] in ("csr", "csc"):
        return (0 if data[0] == "csr" else 2), len(data[1][0]) - 1
    return None


def _pairs(edges: list, what: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A list of (src, dst) pairs as two id tensors."""
    if any(not isinstance(e, (tuple, list)) or len(e) != 2 for e in edges):
        raise ValueError(f"{what}: a list of edges must hold (src, dst) pairs")
    src = as_ids([int(u) for u, _ in edges], f"{what} source ids")
    dst = as_ids([int(v) for _, v in edges], f"{what} destination ids")
    return src, dst

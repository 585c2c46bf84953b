"""DGL's positional encodings of a homogeneous graph's nodes: ``random_walk_pe``, ``lap_pe`` (and its old
name ``laplacian_pe``), ``svd_pe``. Each returns a float32 ``[N, ...]`` tensor on the CPU, as DGL's.

``lap_pe`` and ``svd_pe`` flip the signs of their vectors at random (numpy's
generator, as DGL draws them): only their magnitudes are determined.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.linalg
import torch

from .core import Graph

__all__ = ["lap_pe", "laplacian_pe", "random_walk_pe", "svd_pe"]


def _homogeneous(g: Graph, call: str) -> None:
    if len(g.ntypes) != 1 or len(g.canonical_etypes) != 1:
        raise ValueError(f"{call}: the graph must be homogeneous (as DGL's)")


def random_walk_pe(g: Graph, k: int, eweight_name=None) -> torch.Tensor:
    """DGL's ``random_walk_pe``: column ``i`` holds each node's probability of being back at itself after
    ``i + 1`` steps of a random walk along out-edges (edge weights ``eweight_name`` scale the steps), ``[N,
    k]``."""
    _homogeneous(g, "random_walk_pe")
    n = g.num_nodes()
    adj = g.adj_external(scipy_fmt="csr")
    if eweight_name is not None:
        src, dst = (t.long().numpy() for t in g.edges())
        weights = g.edata[eweight_name].detach().reshape(-1).cpu().numpy()
        adj = adj.multiply(sp.csr_matrix((weights, (src, dst)), shape=(n, n)))
    walk = np.asarray(adj.toarray() / (np.asarray(adj.sum(1)) + 1e-30))
    columns, power = [], walk
    for step in range(k):
        if step:
            power = power @ walk
        columns.append(torch.from_numpy(np.diagonal(power).copy()).to(torch.float32))
    return torch.stack(columns, dim=-1)


def lap_pe(g: Graph, k: int, padding: bool = False, return_eigval: bool = False):
    """DGL's ``lap_pe``: the eigenvectors of the ``k`` smallest non-trivial eigenvalues of ``I - D^-1/2 A
    D^-1/2`` (in-degrees, at least 1), ``[N, k]``, each with a random sign.

    ``k >= N`` needs ``padding``: the missing vectors are zeros and their
    eigenvalues NaN (ValueError without it, as DGL documents).
    ``return_eigval`` also returns the ``k`` eigenvalues."""
    _homogeneous(g, "lap_pe")
    n = g.num_nodes()
    if not padding and n <= k:
        raise ValueError(
            f"lap_pe: the number of eigenvectors k must be smaller than the number of nodes n, "
            f"{k} and {n} detected (pass padding=True to pad)"
        )
    norm = sp.diags(g.in_degrees().numpy().clip(1) ** -0.5, dtype=float)
    laplacian = sp.eye(n) - norm @ g.adj_external(scipy_fmt="csr") @ norm
    if k + 1 < n - 1:
        values, vectors = scipy.sparse.linalg.eigs(laplacian, k=k + 1, which="SR", ncv=4 * k, tol=1e-2)
        found = k
        order = values.argsort()[1:]
    else:  # ARPACK needs k + 1 < n - 1: the dense solver, as DGL falls back to it
        values, vectors = np.linalg.eig(laplacian.toarray())
        found = min(n - 1, k)
        smallest = np.argpartition(values, found)[: found + 1]
        order = smallest[values[smallest].argsort()][1:]
    eigvals = torch.as_tensor(values[order].real, dtype=torch.float32)
    signs = 2 * (np.random.rand(found) > 0.5) - 1.0
    pe = torch.as_tensor(signs * vectors[:, order].real, dtype=torch.float32)
    if n <= k:
        pe = torch.cat([pe, torch.zeros((n, k - n + 1), dtype=torch.float32)], dim=1)
        eigvals = torch.cat([eigvals, torch.full((k - n + 1,), float("nan"), dtype=torch.float32)])
    return (pe, eigvals) if return_eigval else pe


def laplacian_pe(g: Graph, k: int, padding: bool = False, return_eigval: bool = False):
    """DGL's deprecated name of :func:`lap_pe` (it warns, as DGL's does)."""
    warnings.warn("dgl.laplacian_pe will be deprecated. Use dgl.lap_pe please.", stacklevel=2)
    return lap_pe(g, k, padding, return_eigval)


def svd_pe(g: Graph, k: int, padding: bool = False, random_flip: bool = True) -> torch.Tensor:
    """DGL's ``svd_pe``: ``[U_k sqrt(S_k), V_k sqrt(S_k)]`` from the SVD ``A = U S V^T`` of the dense adjacency
    (``A[u, v]`` counts edges ``u -> v``), ``[N, 2k]``; each row's sign flipped at random when ``random_flip``.
    ``k > N`` needs ``padding`` (zero columns; ValueError without it)."""
    _homogeneous(g, "svd_pe")
    n = g.num_nodes()
    if not padding and n < k:
        raise ValueError(
            f"svd_pe: the number of singular values k must be no greater than the number of nodes "
            f"n, but got {k} and {n} respectively"
        )
    u, s, vh = scipy.linalg.svd(g.adj_external(scipy_fmt="coo").toarray())
    m = min(n, k)
    scale = np.sqrt(s[:m])
    encoding = np.concatenate([u[:, :m] * scale, vh.T[:, :m] * scale], axis=1)
    if random_flip:
        encoding = (2 * (np.random.rand(n) > 0.5) - 1)[:, None] * encoding
    out = torch.as_tensor(encoding, dtype=torch.float32)
    if n < k:
        out = torch.cat([out, torch.zeros((n, 2 * (k - n)), dtype=torch.float32)], dim=1)
    return out

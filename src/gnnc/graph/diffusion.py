"""The computations behind DGL's diffusion transforms (``GCNNorm``, ``PPR``, ``HeatKernel``, ``GDC``,
``SIGNDiffusion``; the classes are in ``gnnc.graph.transform_classes``).

Dense matrices follow DGL's layout ``M[dst, src]``: column ``u`` spreads
node ``u``'s value to the rows it reaches. Sums over in-edges are plain
tensor scatters (the numbers DGL's ``update_all`` with built-ins gives).
"""

from __future__ import annotations

import scipy.linalg
import torch

from .core import Graph, heterograph

__all__: list[str] = []  # helpers of the transform classes, not DGL names

SIGN_OPS = ("raw", "rw", "gcn", "ppr")


def _broadcast(weight: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Per-edge ``weight`` shaped to multiply per-edge rows ``like`` (DGL's broadcasting of feature shapes)."""
    pad = like.dim() - weight.dim()
    return weight.reshape(weight.shape[:1] + (1,) * max(pad, 0) + weight.shape[1:])


def in_sum(g: Graph, h: torch.Tensor, weight: torch.Tensor | None = None, etype=None) -> torch.Tensor:
    """Per destination node, the sum over its in-edges of the source's row of ``h`` (times the edge's
    ``weight``): DGL's ``update_all(copy_u / u_mul_e, sum)``."""
    src, dst = (t.long() for t in g.edges(etype=etype))
    rows = h.index_select(0, src)
    if weight is not None:
        rows = rows * _broadcast(weight, rows)
    out = rows.new_zeros((g.num_nodes(g.to_canonical_etype(etype)[2]),) + tuple(rows.shape[1:]))
    return out.index_add_(0, dst, rows)


def in_weight_sum(g: Graph, weight: torch.Tensor, etype=None) -> torch.Tensor:
    """Per destination node, the sum of its in-edges' ``weight`` (DGL's ``update_all(copy_e, sum)``)."""
    dst = g.edges(etype=etype)[1].long()
    out = weight.new_zeros((g.num_nodes(g.to_canonical_etype(etype)[2]),) + tuple(weight.shape[1:]))
    return out.index_add_(0, dst, weight)


def gcn_norm(g: Graph, etype, eweight_name: str | None) -> torch.Tensor:
    """DGL's ``GCNNorm`` weight of relation ``etype``'s edges: ``w_e / sqrt(d_u d_v)`` where ``d`` sums the
    in-edges' weights ``eweight_name``, or without that feature (or name) ``1 / sqrt(d_u d_v)`` with
    in-degrees; 1 / sqrt(0) is taken as 0."""
    src, dst = (t.long() for t in g.edges(etype=etype))
    data = g.edges[etype].data
    if eweight_name is not None and eweight_name in data:
        weight = data[eweight_name]
        degree = in_weight_sum(g, weight, etype)
    else:
        weight, degree = None, g.in_degrees(etype=etype).to(torch.float32)
    scale = 1.0 / torch.sqrt(degree)
    scale = torch.where(torch.isinf(scale), torch.zeros_like(scale), scale)
    out = scale.index_select(0, src) * scale.index_select(0, dst)
    return out if weight is None else out * weight


def sign_diffusion(g: Graph, k: int, feat: torch.Tensor, eweight_name, diffuse_op: str, alpha: float) -> list:
    """DGL's ``SIGNDiffusion`` features: ``k`` successive diffusions of ``feat`` (``diffuse_op`` one of
    ``raw``: sums over in-edges, weighted by ``eweight_name`` when the graph has it; ``rw``: their mean, or the
    weighted sum over the in-weights' sum; ``gcn``: sums weighted by :func:`gcn_norm`; ``ppr``: as ``gcn``, then
    ``(1 - alpha) h + alpha feat``)."""
    etype = g.canonical_etypes[0]
    if diffuse_op in ("gcn", "ppr"):
        # DGL: without eweight_name, GCNNorm ignores any "w" the graph holds; a name it lacks gets unweighted norms
        weight = gcn_norm(g, etype, eweight_name)
    else:
        weight = g.edata[eweight_name] if eweight_name is not None and eweight_name in g.edata else None
    total = in_weight_sum(g, weight) if diffuse_op == "rw" and weight is not None else None
    out, h = [], feat
    for _ in range(k):
        h = in_sum(g, h, weight)
        if diffuse_op == "rw":
            h = h / (
                total.reshape(-1, 1)
                if total is not None
                else g.in_degrees().clamp(min=1).to(h.dtype).reshape((-1,) + (1,) * (h.dim() - 1))
            )
        elif diffuse_op == "ppr":
            h = (1 - alpha) * h + alpha * feat
        out.append(h)
    return out


def dense_adjacency(g: Graph, weight: torch.Tensor) -> torch.Tensor:
    """``[N, N]`` float32 ``M[dst, src] = weight`` of a homogeneous graph's edges."""
    src, dst = (t.long() for t in g.edges())
    mat = torch.zeros((g.num_nodes(), g.num_nodes()), dtype=torch.float32, device=g.device)
    mat[dst, src] = weight.to(torch.float32)
    return mat


def edge_weights(g: Graph, name: str) -> torch.Tensor:
    """Edge feature ``name``, or ones when the graph has none of that name (DGL's diffusions)."""
    return g.edata[name] if name in g.edata else torch.ones(g.num_edges(), dtype=torch.float32, device=g.device)


def ppr_matrix(g: Graph, alpha: float, eweight_name: str) -> torch.Tensor:
    """Personalised PageRank diffusion ``alpha (I - (1 - alpha) A)^-1``."""
    mat = dense_adjacency(g, (alpha - 1) * edge_weights(g, eweight_name))
    return alpha * torch.linalg.inv(mat + torch.eye(g.num_nodes(), device=g.device))


def heat_kernel_matrix(g: Graph, t: float, eweight_name: str) -> torch.Tensor:
    """Heat kernel diffusion ``exp(t (A - I))`` (by eigendecomposition when the graph is bidirected)."""
    mat = dense_adjacency(g, t * edge_weights(g, eweight_name)) - t * torch.eye(g.num_nodes(), device=g.device)
    if _bidirected(g):
        values, vectors = torch.linalg.eigh(mat, UPLO="U")
        return vectors @ torch.diag(values.exp()) @ vectors.t()
    return torch.as_tensor(scipy.linalg.expm(mat.cpu().numpy()), dtype=torch.float32, device=g.device)


def gdc_matrix(g: Graph, coefs, eweight_name: str) -> torch.Tensor:
    """Graph diffusion ``sum_i coefs[i] A^i``."""
    adj = dense_adjacency(g, edge_weights(g, eweight_name))
    power = torch.eye(g.num_nodes(), device=g.device)
    out = coefs[0] * power
    for coef in coefs[1:]:
        power = power @ adj
        out = out + coef * power
    return out


def _bidirected(g: Graph) -> bool:
    """Whether every edge ``u -> v`` has a reverse ``v -> u`` (as many of them)."""
    src, dst = (t.long() for t in g.edges())
    n = g.num_nodes()
    return torch.equal(torch.sort(src * n + dst).values, torch.sort(dst * n + src).values)


def sparsified_graph(g: Graph, mat: torch.Tensor, eweight_name: str, eps, avg_degree: int) -> Graph:
    """A graph over ``g``'s nodes (features copied) with an edge ``u -> v`` where ``mat[v, u] >= eps``, ordered by
    (v, u), its weight ``mat[v, u]`` as ``eweight_name``. ``eps=None``: the ``avg_degree * N``-th largest entry
    (every entry when that is more than there are)."""
    n = g.num_nodes()
    if eps is None:
        eps = float("-inf") if avg_degree > n else torch.sort(mat.flatten(), descending=True).values[avg_degree * n - 1]
    dst, src = (mat >= eps).nonzero(as_tuple=False).t()
    key = g.canonical_etypes[0]
    out = heterograph({key: (src, dst)}, num_nodes_dict={key[0]: n}, idtype=g.idtype, device=g.device)
    for name, value in g.ndata.items():
        out.ndata[name] = value
    out.edata[eweight_name] = mat[dst, src]
    return out

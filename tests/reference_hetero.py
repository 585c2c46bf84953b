"""Independent implementations of the heterogeneous reference models.

The same math as ``gnnc.models`` written directly with index_select /
index_add / scatter_reduce over global (src, dst, relation, node type)
arrays; no gnnc message passing, batches or executor. Each function reads
the given module's own parameters, so its result is directly comparable to
``module(g, x)``. All of them compute eval-mode results (no dropout).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _structure(g):
    """Global src, dst, relation id per edge (user order) and node type id per node."""
    src, dst = g.find_edges()
    return src, dst, g.edge_type_ids(), g.node_type_ids()


def edge_softmax(logits: torch.Tensor, dst: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Softmax of ``logits`` [E, H] over the edges sharing a destination, max-shifted."""
    index = dst.unsqueeze(1).expand_as(logits)
    peak = logits.new_zeros((num_nodes, logits.shape[1]))
    peak = peak.scatter_reduce(0, index, logits, "amax", include_self=False)
    # The shift cancels in the softmax, so it carries no gradient.
    shifted = torch.exp(logits - peak.detach().index_select(0, dst))
    total = logits.new_zeros((num_nodes, logits.shape[1])).index_add(0, dst, shifted)
    return shifted / total.index_select(0, dst)


def rgcn(module, g, x: torch.Tensor) -> torch.Tensor:
    src, dst, rel, _ = _structure(g)
    n = g.num_nodes()
    if module.num_bases is None:
        weight = module.weight
    else:
        weight = (module.coeff[:, :, None, None] * module.basis[None]).sum(1)
    pair = rel * n + dst
    count = torch.bincount(pair, minlength=len(g.canonical_etypes) * n)
    norm = count.index_select(0, pair).to(x.dtype).reciprocal()
    out = x.new_zeros((n, module.out_dim))
    for r in range(len(g.canonical_etypes)):
        sel = torch.nonzero(rel == r).flatten()
        msg = x.index_select(0, src[sel]) @ weight[r]
        out = out.index_add(0, dst[sel], msg * norm[sel].unsqueeze(1))
    if module.loop_weight is not None:
        out = out + x @ module.loop_weight
    if module.bias is not None:
        out = out + module.bias
    if module.activation is not None:
        out = module.activation(out)
    return out


def rgat(module, g, x: torch.Tensor) -> torch.Tensor:
    src, dst, rel, _ = _structure(g)
    n, heads, d = g.num_nodes(), module.num_heads, module.out_dim
    z = torch.einsum("ni,rio->rno", x, module.weight).reshape(module.num_rels, n, heads, d)
    z_src, z_dst = z[rel, src], z[rel, dst]
    a = module.attn.index_select(0, rel)
    score = (z_src * a[..., :d]).sum(-1) + (z_dst * a[..., d:]).sum(-1)
    alpha = edge_softmax(F.leaky_relu(score, module.negative_slope), dst, n)
    out = x.new_zeros((n, heads, d)).index_add(0, dst, alpha.unsqueeze(-1) * z_src)
    return out.reshape(n, heads * d)


def hgt(module, g, x: torch.Tensor) -> torch.Tensor:
    src, dst, rel, ntype = _structure(g)
    n, heads, d_k = g.num_nodes(), module.num_heads, module.d_k

    def typed_linear(weight, bias, inp):
        return torch.einsum("ni,nio->no", inp, weight.index_select(0, ntype)) + bias.index_select(0, ntype)

    k = typed_linear(module.k_weight, module.k_bias, x).reshape(n, heads, d_k)
    q = typed_linear(module.q_weight, module.q_bias, x).reshape(n, heads, d_k)
    v = typed_linear(module.v_weight, module.v_bias, x).reshape(n, heads, d_k)
    k_e = torch.einsum("ehi,ehij->ehj", k.index_select(0, src), module.relation_att.index_select(0, rel))
    v_e = torch.einsum("ehi,ehij->ehj", v.index_select(0, src), module.relation_msg.index_select(0, rel))
    score = (k_e * q.index_select(0, dst)).sum(-1) * module.relation_pri.index_select(0, rel)
    alpha = edge_softmax(score / math.sqrt(d_k), dst, n)
    t = x.new_zeros((n, heads, d_k)).index_add(0, dst, alpha.unsqueeze(-1) * v_e).reshape(n, heads * d_k)
    a = typed_linear(module.a_weight, module.a_bias, F.gelu(t))
    beta = torch.sigmoid(module.skip.index_select(0, ntype)).unsqueeze(1)
    h = beta * a + (1 - beta) * x
    if not module.use_norm:
        return h
    parts = []
    for t_id in range(len(g.ntypes)):
        rows = h[ntype == t_id]
        parts.append(F.layer_norm(rows, (h.shape[1],), module.norm_weight[t_id], module.norm_bias[t_id], 1e-5))
    return torch.cat(parts)  # node ids are grouped by type, in type order


def simple_hgn(module, g, x: torch.Tensor, prev_attn: torch.Tensor | None = None):
    src, dst, rel, _ = _structure(g)
    n, heads, d, d_e = g.num_nodes(), module.num_heads, module.out_dim, module.edge_dim
    z = (x @ module.weight).reshape(n, heads, d)
    z_rel = (module.edge_emb @ module.edge_weight).reshape(module.num_rels, heads, d_e)
    a_src, a_dst, a_rel = module.attn.split([d, d, d_e], dim=-1)
    score = (
        (z * a_src).sum(-1).index_select(0, src)
        + (z * a_dst).sum(-1).index_select(0, dst)
        + (z_rel * a_rel).sum(-1).index_select(0, rel)
    )
    alpha = edge_softmax(F.leaky_relu(score, module.negative_slope), dst, n)
    if prev_attn is not None:
        alpha = (1 - module.beta) * alpha + module.beta * prev_attn
    h = x.new_zeros((n, heads, d)).index_add(0, dst, alpha.unsqueeze(-1) * z.index_select(0, src))
    h = h.reshape(n, heads * d)
    if module.res_weight is not None:
        h = h + x @ module.res_weight
    return h, alpha

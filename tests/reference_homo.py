"""Independent implementations of the models in ``gnnc.models`` (test oracles).

Each function takes a module and computes its output with plain tensor ops
(index_select / index_add / scatter_reduce) over the edge list from
``g.find_edges()``, using the module's own parameters; no gnnc message
passing is involved. Modules must be in eval mode (dropout is not modelled).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


def _edges(g):
    return g.find_edges()


def _require_eval(module) -> None:
    if module.training:
        raise ValueError(f"{type(module).__name__} is in training mode; the references model eval mode only")


def scatter_sum(values: torch.Tensor, index: torch.Tensor, n: int) -> torch.Tensor:
    return values.new_zeros((n,) + tuple(values.shape[1:])).index_add(0, index, values)


def scatter_max(values: torch.Tensor, index: torch.Tensor, n: int) -> torch.Tensor:
    """Elementwise max per index; rows no value goes to stay 0."""
    idx = index.view((-1,) + (1,) * (values.dim() - 1)).expand_as(values)
    return values.new_zeros((n,) + tuple(values.shape[1:])).scatter_reduce(0, idx, values, "amax", include_self=False)


def edge_softmax(logits: torch.Tensor, dst: torch.Tensor, n: int) -> torch.Tensor:
    """Softmax of ``logits`` [E, ...] over the edges sharing a destination, max-shifted."""
    peak = scatter_max(logits, dst, n).index_select(0, dst)
    ex = torch.exp(logits - peak)
    return ex / scatter_sum(ex, dst, n).index_select(0, dst)


def _degrees(ids: torch.Tensor, n: int, dtype) -> torch.Tensor:
    return torch.bincount(ids, minlength=n).to(dtype)


def _gcn_linear(conv, g, x):
    """GCNConv before its activation."""
    src, dst = _edges(g)
    n = g.num_nodes()
    c_out = _degrees(src, n, x.dtype).clamp(min=1).rsqrt()
    c_in = _degrees(dst, n, x.dtype).clamp(min=1).rsqrt()
    coef = (c_out[src] * c_in[dst]).unsqueeze(-1)
    h = scatter_sum(coef * x.index_select(0, src), dst, n) @ conv.weight
    return h if conv.bias is None else h + conv.bias


def gcn_conv(conv, g, x):
    h = _gcn_linear(conv, g, x)
    return h if conv.activation is None else conv.activation(h)


def gcn(net, g, x):
    _require_eval(net)
    return _gcn_linear(net.conv2, g, torch.relu(_gcn_linear(net.conv1, g, x)))


def gat_logits(conv, g, x):
    """Per-edge, per-head attention logits ``[E, heads]`` and projected ``z`` ``[N, heads, out]``."""
    src, dst = _edges(g)
    d = conv.out_dim
    z = (x @ conv.fc.weight.t()).view(-1, conv.num_heads, d)
    score_src = (z * conv.attn[:, :d]).sum(-1)
    score_dst = (z * conv.attn[:, d:]).sum(-1)
    raw = score_src.index_select(0, src) + score_dst.index_select(0, dst)
    return F.leaky_relu(raw, conv.leaky_relu.negative_slope), z


def _gat_linear(conv, g, x):
    """GATConv before its activation."""
    _require_eval(conv)
    src, dst = _edges(g)
    n = g.num_nodes()
    logits, z = gat_logits(conv, g, x)
    alpha = edge_softmax(logits, dst, n)
    h = scatter_sum(alpha.unsqueeze(-1) * z.index_select(0, src), dst, n)
    return h if conv.bias is None else h + conv.bias


def gat_conv(conv, g, x):
    h = _gat_linear(conv, g, x)
    return h if conv.activation is None else conv.activation(h)


def gat(net, g, x):
    _require_eval(net)
    h = F.elu(_gat_linear(net.conv1, g, x)).reshape(x.shape[0], -1)
    return _gat_linear(net.conv2, g, h).mean(1)


def gcnn_conv(conv, g, x, edge_feat):
    src, dst = _edges(g)
    n = g.num_nodes()
    pre = (
        F.linear(x, conv.lin_src.weight, conv.lin_src.bias).index_select(0, src)
        + edge_feat @ conv.lin_edge.weight.t()
        + (x @ conv.lin_dst.weight.t()).index_select(0, dst)
    )
    msg = F.linear(torch.relu(pre), conv.lin_msg.weight, conv.lin_msg.bias)
    h = scatter_sum(msg, dst, n)
    hidden = torch.relu(F.linear(torch.cat([h, x], 1), conv.out1.weight, conv.out1.bias))
    return F.linear(hidden, conv.out2.weight, conv.out2.bias)


def edge_conv(conv, g, x):
    src, dst = _edges(g)
    x_u, x_v = x.index_select(0, src), x.index_select(0, dst)
    layers = [m for m in conv.mlp if isinstance(m, torch.nn.Linear)]
    h = torch.cat([x_v, x_u - x_v], 1)
    for i, lin in enumerate(layers):
        if i:
            h = torch.relu(h)
        h = F.linear(h, lin.weight, lin.bias)
    return scatter_max(h, dst, g.num_nodes())


def gmm_conv(conv, g, x, pseudo):
    src, dst = _edges(g)
    n = g.num_nodes()
    k, out = conv.num_kernels, conv.out_dim
    z = (x @ conv.fc.weight.t()).view(-1, k, out)
    # [E, K]: Gaussian weight of every kernel on every edge
    scaled = (pseudo.unsqueeze(1) - conv.mu.unsqueeze(0)) * conv.inv_sigma.unsqueeze(0)
    w = torch.exp(-0.5 * (scaled**2).sum(-1))
    msg = w.unsqueeze(-1) * z.index_select(0, src)
    if conv.aggregator == "max":
        h = scatter_max(msg, dst, n)
    else:
        h = scatter_sum(msg, dst, n)
        if conv.aggregator == "mean":
            h = h / _degrees(dst, n, x.dtype).clamp(min=1).view(-1, 1, 1)
    h = h.sum(1)
    return h if conv.bias is None else h + conv.bias

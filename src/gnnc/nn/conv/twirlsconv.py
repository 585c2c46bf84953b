"""DGL's ``TWIRLSConv`` (Yang et al., 2021: graph neural networks inspired by classical iterative
algorithms) as gnnc message passing."""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import nn

from ... import function as fn
from ...graph.transforms import add_self_loop, remove_self_loop


class MLP(nn.Module):
    """DGL's TWIRLS MLP: ``num_layers`` linear layers (``layers``) with ReLU and dropout between them (and
    before the first with ``init_activate``), each activation after a ``norms`` entry for ``norm`` ``"batch"``
    or ``"layer"``; Xavier-normal weights and zero biases."""

    def __init__(self, input_d, hidden_d, output_d, num_layers, dropout, norm, init_activate):
        super().__init__()
        self.init_activate, self.norm, self.dropout = init_activate, norm, dropout
        widths = [input_d] + [hidden_d] * (num_layers - 1) + [output_d] if num_layers > 0 else []
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in itertools.pairwise(widths)])
        count = num_layers - 1 + int(init_activate)
        if norm == "batch":
            self.norms = nn.ModuleList([nn.BatchNorm1d(hidden_d) for _ in range(count)])
        elif norm == "layer":
            self.norms = nn.ModuleList([nn.LayerNorm(hidden_d) for _ in range(count)])
        self.reset_params()

    def reset_params(self):
        """Xavier-normal weights, zero biases."""
        for layer in self.layers:
            nn.init.xavier_normal_(layer.weight.data)
            nn.init.constant_(layer.bias.data, 0)

    def forward(self, x):
        norms = iter(self.norms) if self.norm != "none" else None

        def activate(h):
            if norms is not None:
                h = next(norms)(h)
            return F.dropout(F.relu(h), self.dropout, training=self.training)

        if self.init_activate:
            x = activate(x)
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i != len(self.layers) - 1:
                x = activate(x)
        return x


def _scale_rows(g, x, power, coeff=1.0, bias=0.0):
    """``x`` times ``(coeff deg + bias) ** power`` per node (``deg`` the weighted in-degree)."""
    return x * torch.pow(coeff * g.ndata["deg"] + bias, power).view(x.size(0), 1)


def _weighted_sum(g, x):
    """``A_w x``: each node's in-neighbours' rows times the edge weights ``w``, summed."""
    g.srcdata["h"] = x
    g.update_all(fn.u_mul_e("h", "w", "m"), fn.sum("m", "h"))
    return g.dstdata["h"]


def _reweight(g, y, etas, tau, T, p, attn_dropout, training):
    """The attention step: edge weights ``1 / max(tau, relu(|y_u - y_v|^2)^(1 - p/2))`` (0 above ``T`` when
    ``T > 0``), plus 1e-9, and the weighted degrees they give."""
    if etas is not None:
        y = y * etas.view(-1)
    g.srcdata["h"] = y
    g.srcdata["h_norm"] = (y**2).sum(-1)
    g.apply_edges(fn.u_dot_v("h", "h", "dot_"))
    g.apply_edges(fn.u_add_v("h_norm", "h_norm", "norm_"))
    w = g.edata["norm_"].view(-1) - 2 * g.edata["dot_"].view(-1)
    w = torch.pow(F.relu(w) + 1e-7, 1 - 0.5 * p)
    w[w < tau] = tau
    if T > 0:
        w[w > T] = float("inf")
    g.edata["w"] = 1 / w + 1e-9
    g.update_all(fn.copy_e("w", "m"), fn.sum("m", "deg"))
    g.ndata["deg"] = g.ndata["deg"].view(-1)
    if attn_dropout > 0:
        g.edata["w"] = F.dropout(g.edata["w"], attn_dropout, training=training)


class TWIRLSUnfoldingAndAttention(nn.Module):
    """DGL's TWIRLS propagation: ``prop_step`` steps of (preconditioned, with ``precond``) gradient descent
    on the graph-regularised energy with weight ``lam`` and step ``alp`` (``1 / (lam + 1)`` when 0), the edge
    weights recomputed by the attention step before the first step (``init_att``) and after step
    ``attn_aft`` (when >= 0); ``etas`` (with ``use_eta``) scales the features the attention compares."""

    def __init__(
        self,
        d,
        alp,
        lam,
        prop_step,
        attn_aft=-1,
        tau=0.2,
        T=-1,
        p=1,
        use_eta=False,
        init_att=False,
        attn_dropout=0,
        precond=True,
    ):
        super().__init__()
        self.d, self.lam, self.tau, self.T, self.p = d, lam, tau, T, p
        self.alp = alp if alp > 0 else 1 / (lam + 1)
        self.prop_step, self.attn_aft, self.use_eta, self.init_att = prop_step, attn_aft, use_eta, init_att
        self.attn_dropout, self.precond = attn_dropout, precond
        self.etas = nn.Parameter(torch.ones(d)) if use_eta else None

    def _step(self, g, y, x):
        alp, lam = self.alp, self.lam
        if self.precond:
            prop = _scale_rows(g, _weighted_sum(g, _scale_rows(g, y, -0.5, lam, 1 - lam)), -0.5, lam, 1 - lam)
            return (1 - alp) * y + alp * lam * prop + alp * _scale_rows(g, x, -1, lam, 1 - lam)
        normalized = _scale_rows(g, _weighted_sum(g, _scale_rows(g, y, -0.5)), -0.5)
        return (1 - alp * lam - alp) * y + alp * lam * normalized + alp * x

    def forward(self, g, X):
        attend = (self.tau, self.T, self.p, self.attn_dropout, self.training)
        y = X
        g.edata["w"] = torch.ones(g.num_edges(), 1, device=X.device)
        g.ndata["deg"] = g.in_degrees().to(X)
        if self.init_att:
            _reweight(g, y, self.etas, *attend)
        for k in range(self.prop_step):
            y = self._step(g, y, X)
            if k == self.attn_aft - 1:
                _reweight(g, y, self.etas, *attend)
        return y


class TWIRLSConv(nn.Module):
    """DGL 2.1's ``TWIRLSConv``: ``mlp_bef`` (``num_mlp_before`` layers), the ``unfolding`` propagation over
    the graph with its self loops replaced by one per node, then ``mlp_aft`` (``num_mlp_after`` layers).
    With ``attention`` the edge weights are recomputed halfway (``prop_step // 2``). As DGL's, a layer
    without an MLP before, attention or input dropout computes the propagation once and reuses it on later
    calls (``cached_unfolding``), whatever graph or features they pass.
    """

    def __init__(
        self,
        input_d,
        output_d,
        hidden_d,
        prop_step,
        num_mlp_before=1,
        num_mlp_after=1,
        norm="none",
        precond=True,
        alp=0,
        lam=1,
        attention=False,
        tau=0.2,
        T=-1,
        p=1,
        use_eta=False,
        attn_bef=False,
        dropout=0.0,
        attn_dropout=0.0,
        inp_dropout=0.0,
    ):
        super().__init__()
        self.input_d, self.output_d, self.hidden_d, self.prop_step = input_d, output_d, hidden_d, prop_step
        self.num_mlp_before, self.num_mlp_after, self.norm, self.precond = num_mlp_before, num_mlp_after, norm, precond
        self.attention, self.alp, self.lam, self.tau, self.T, self.p = attention, alp, lam, tau, T, p
        self.use_eta, self.init_att, self.dropout = use_eta, attn_bef, dropout
        self.attn_dropout, self.inp_dropout = attn_dropout, inp_dropout
        self.attn_aft = prop_step // 2 if attention else -1
        self.cacheable = not attention and num_mlp_before == 0 and inp_dropout <= 0
        if self.cacheable:
            self.cached_unfolding = None
        self.size_bef_unf = output_d if num_mlp_after == 0 else hidden_d
        self.size_aft_unf = input_d if num_mlp_before == 0 else hidden_d
        self.mlp_bef = MLP(input_d, hidden_d, self.size_bef_unf, num_mlp_before, dropout, norm, init_activate=False)
        self.unfolding = TWIRLSUnfoldingAndAttention(
            hidden_d, alp, lam, prop_step, self.attn_aft, tau, T, p, use_eta, attn_bef, attn_dropout, precond
        )
        self.mlp_aft = MLP(
            self.size_aft_unf,
            hidden_d,
            output_d,
            num_mlp_after,
            dropout,
            norm,
            init_activate=num_mlp_before > 0 and num_mlp_after > 0,
        )

    def forward(self, graph, feat):
        graph = add_self_loop(remove_self_loop(graph))
        x = feat
        if self.cacheable:
            if self.cached_unfolding is None:
                self.cached_unfolding = self.unfolding(graph, x)
            x = self.cached_unfolding
        else:
            if self.inp_dropout > 0:
                x = F.dropout(x, self.inp_dropout, training=self.training)
            x = self.unfolding(graph, self.mlp_bef(x))
        return self.mlp_aft(x)

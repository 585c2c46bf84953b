"""Heterogeneous graph transformer (Hu et al. 2020, as DGL's HGTLayer) written as UDFs."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .common import zeros_default


class HGTConv(nn.Module):
    r"""One HGT layer over a whole heterograph.

    With ``\tau(n)`` the type of node ``n``, ``\phi(e)`` the relation of
    edge ``e = (u, v)``, ``H`` heads of width ``d_k = out_dim / H`` and
    head ``i`` taking the ``i``-th block of ``d_k`` columns:

    .. math::
        K_u = x_u W^K_{\tau(u)} + b^K_{\tau(u)}, \quad
        Q_v = x_v W^Q_{\tau(v)} + b^Q_{\tau(v)}, \quad
        V_u = x_u W^V_{\tau(u)} + b^V_{\tau(u)}

        \mathrm{att}^i_e = (K^i_u W^{att}_{\phi(e),i}) \cdot Q^i_v \; \mu_{\phi(e),i} / \sqrt{d_k}, \quad
        \alpha^i_e = \operatorname{softmax}_{e' \to v}(\mathrm{att}^i_{e'})

        t_v = \big\Vert_i \sum_{e = (u, v)} \alpha^i_e \, V^i_u W^{msg}_{\phi(e),i}

        a_v = \mathrm{Dropout}\big(\mathrm{GELU}(t_v) W^A_{\tau(v)} + b^A_{\tau(v)}\big), \quad
        \beta_v = \sigma(s_{\tau(v)}), \quad
        h_v = \beta_v a_v + (1 - \beta_v) x_v

    The softmax runs over ALL incoming edges of ``v``, across relations;
    nodes with no in-edges get ``t_v = 0``. With ``use_norm`` ``h_v`` then
    goes through a per-node-type LayerNorm. The gated skip adds ``x_v``, so
    ``in_dim`` must equal ``out_dim``; ``out_dim`` must divide by ``num_heads``.

    ``forward(g, x)``: ``x`` is ``[num_nodes, in_dim]`` by global node id;
    returns ``[num_nodes, out_dim]``. ``g`` must have ``num_ntypes`` node
    types and ``num_rels`` relations.

    Relation-aggregation-first split (``gnnc.distributed.raf``): ``message``
    reads node field ``x``, node-type fields ``k_weight``, ``q_weight``,
    ``v_weight``, ``k_bias``, ``q_bias``, ``v_bias`` and relation fields
    ``relation_att``, ``relation_msg``, ``relation_pri`` and gives per edge
    the score ``attn`` ``[E, H]`` and value ``v`` ``[E, H, d_k]``;
    ``reduce`` is their softmax-weighted sum, heads flattened into ``t``;
    ``update`` reads ``t``, ``x`` and node-type fields ``a_weight``,
    ``a_bias``, ``skip`` and gives ``h``; with ``use_norm``, ``layer_norm``
    reads ``h`` and node-type fields ``norm_weight``, ``norm_bias``.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        num_ntypes: int,
        num_rels: int,
        num_heads: int,
        dropout: float = 0.0,
        use_norm: bool = False,
    ):
        super().__init__()
        if in_dim != out_dim:
            raise ValueError(f"HGTConv: the gated skip connection needs in_dim == out_dim, got {in_dim} and {out_dim}")
        if out_dim % num_heads:
            raise ValueError(f"HGTConv: out_dim {out_dim} is not divisible by num_heads {num_heads}")
        self.in_dim, self.out_dim, self.num_heads = in_dim, out_dim, num_heads
        self.num_ntypes, self.num_rels = num_ntypes, num_rels
        self.d_k = out_dim // num_heads
        self.sqrt_dk = math.sqrt(self.d_k)
        self.dropout, self.use_norm = dropout, use_norm
        self.k_weight = nn.Parameter(torch.empty(num_ntypes, in_dim, out_dim))
        self.q_weight = nn.Parameter(torch.empty(num_ntypes, in_dim, out_dim))
        self.v_weight = nn.Parameter(torch.empty(num_ntypes, in_dim, out_dim))
        self.a_weight = nn.Parameter(torch.empty(num_ntypes, out_dim, out_dim))
        self.k_bias = nn.Parameter(torch.empty(num_ntypes, out_dim))
        self.q_bias = nn.Parameter(torch.empty(num_ntypes, out_dim))
        self.v_bias = nn.Parameter(torch.empty(num_ntypes, out_dim))
        self.a_bias = nn.Parameter(torch.empty(num_ntypes, out_dim))
        self.relation_att = nn.Parameter(torch.empty(num_rels, num_heads, self.d_k, self.d_k))
        self.relation_msg = nn.Parameter(torch.empty(num_rels, num_heads, self.d_k, self.d_k))
        self.relation_pri = nn.Parameter(torch.empty(num_rels, num_heads))
        self.skip = nn.Parameter(torch.empty(num_ntypes))
        if use_norm:
            self.norm_weight = nn.Parameter(torch.empty(num_ntypes, out_dim))
            self.norm_bias = nn.Parameter(torch.empty(num_ntypes, out_dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """As DGL's HGTLayer: nn.Linear-style typed linears, Xavier relation maps, unit prior and skip."""
        for w, b, fan_in in (
            (self.k_weight, self.k_bias, self.in_dim),
            (self.q_weight, self.q_bias, self.in_dim),
            (self.v_weight, self.v_bias, self.in_dim),
            (self.a_weight, self.a_bias, self.out_dim),
        ):
            bound = 1.0 / math.sqrt(fan_in)
            nn.init.uniform_(w, -bound, bound)
            nn.init.uniform_(b, -bound, bound)
        for w in (*self.relation_att.flatten(0, 1), *self.relation_msg.flatten(0, 1)):
            nn.init.xavier_uniform_(w)
        nn.init.ones_(self.relation_pri)
        nn.init.ones_(self.skip)
        if self.use_norm:
            nn.init.ones_(self.norm_weight)
            nn.init.zeros_(self.norm_bias)

    def message(self, edges):
        heads, d_k = self.num_heads, self.d_k
        x_src, x_dst = edges.src["x"].unsqueeze(1), edges.dst["x"].unsqueeze(1)
        k = torch.bmm(x_src, edges.srctype["k_weight"]).squeeze(1) + edges.srctype["k_bias"]
        v = torch.bmm(x_src, edges.srctype["v_weight"]).squeeze(1) + edges.srctype["v_bias"]
        q = torch.bmm(x_dst, edges.dsttype["q_weight"]).squeeze(1) + edges.dsttype["q_bias"]
        k = torch.matmul(k.view(-1, heads, 1, d_k), edges.type["relation_att"]).squeeze(2)
        v = torch.matmul(v.view(-1, heads, 1, d_k), edges.type["relation_msg"]).squeeze(2)
        q = q.view(-1, heads, d_k)
        attn = torch.sum(k * q, dim=-1) * edges.type["relation_pri"] / self.sqrt_dk
        return {"attn": attn, "v": v}

    @staticmethod
    def reduce(nodes):
        alpha = torch.softmax(nodes.mailbox["attn"], dim=1)
        t = torch.sum(alpha.unsqueeze(-1) * nodes.mailbox["v"], dim=1)
        return {"t": t.flatten(1)}

    def update(self, nodes):
        t = F.gelu(nodes.data["t"])
        a = torch.bmm(t.unsqueeze(1), nodes.type["a_weight"]).squeeze(1) + nodes.type["a_bias"]
        a = F.dropout(a, self.dropout, self.training)
        beta = torch.sigmoid(nodes.type["skip"]).unsqueeze(1)
        return {"h": beta * a + (1 - beta) * nodes.data["x"]}

    @staticmethod
    def layer_norm(nodes):
        h = nodes.data["h"]
        mean = h.mean(dim=-1, keepdim=True)
        var = h.var(dim=-1, unbiased=False, keepdim=True)
        h = (h - mean) / torch.sqrt(var + 1e-5)
        return {"h": h * nodes.type["norm_weight"] + nodes.type["norm_bias"]}

    def forward(self, g, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.shape[1] != self.in_dim:
            raise ValueError(f"HGTConv: expected features of shape [num_nodes, {self.in_dim}], got {tuple(x.shape)}")
        with g.local_scope():
            g.ndata_all["x"] = x
            for name in (
                "k_weight",
                "q_weight",
                "v_weight",
                "a_weight",
                "k_bias",
                "q_bias",
                "v_bias",
                "a_bias",
                "skip",
            ):
                g.ntype_data[name] = getattr(self, name)
            for name in ("relation_att", "relation_msg", "relation_pri"):
                g.etype_data[name] = getattr(self, name)
            # kept where no node has in-edges: a reduce UDF is not called (the update still reads t)
            g.ndata_all["t"] = zeros_default(x, (x.shape[0], self.out_dim))
            g.update_all(self.message, self.reduce, self.update)
            if self.use_norm:
                g.ntype_data["norm_weight"] = self.norm_weight
                g.ntype_data["norm_bias"] = self.norm_bias
                g.apply_nodes(self.layer_norm)
            return g.ndata_all["h"]

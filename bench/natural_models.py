"""GNN layers written the way DGL users write them (tutorials and examples), for ``natural_udfs.py``.

Plain UDF code with no gnnc idioms (no ``edges.type`` / ``etype_data``, no
knobs): bound-method UDFs, ``nn.Linear`` / ``nn.ModuleList`` parameters,
``gnnc.function`` built-ins where DGL's code uses them, and typed weights
reached by indexing a parameter with an integer edge feature
(``weight[edges.data['rel_type']]``) as DGL's entity-classification RGCN does.
Relational models run on a homogeneous graph (DGL's ``to_homogeneous``) whose
``edata['rel_type']`` holds each edge's relation, ``edata['norm']`` its RGCN
norm and ``ndata['ntype']`` each node's type.

Every layer is called ``layer(g, h)`` with ``h`` ``[num_nodes, in_dim]``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

import gnnc.function as fn


# --------------------------------------------------------------------- GCN
# DGL examples/pytorch/gcn/gcn_mp.py: norm on the source in the message, on the destination in the reduce,
# bias and activation in a NodeApplyModule.
def gcn_msg(edges):
    return {"m": edges.src["h"] * edges.src["out_norm"]}


def gcn_reduce(nodes):
    return {"h": torch.sum(nodes.mailbox["m"], 1) * nodes.data["in_norm"]}


class NodeApplyModule(nn.Module):
    def __init__(self, out_feats, activation=None, bias=True):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(out_feats)) if bias else None
        self.activation = activation

    def forward(self, nodes):
        h = nodes.data["h"]
        if self.bias is not None:
            h = h + self.bias
        if self.activation:
            h = self.activation(h)
        return {"h": h}


class GCNLayer(nn.Module):
    def __init__(self, in_feats, out_feats, activation=None, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.Tensor(in_feats, out_feats))
        nn.init.xavier_uniform_(self.weight)
        self.node_update = NodeApplyModule(out_feats, activation, bias)

    def forward(self, g, h):
        g.ndata["out_norm"] = g.out_degrees().float().clamp(min=1).pow(-0.5).unsqueeze(1)
        g.ndata["in_norm"] = g.in_degrees().float().clamp(min=1).pow(-0.5).unsqueeze(1)
        g.ndata["h"] = torch.mm(h, self.weight)
        g.update_all(gcn_msg, gcn_reduce, self.node_update)
        return g.ndata.pop("h")


# --------------------------------------------------------------------- GAT
# DGL's GAT tutorial (tutorials/models/1_gnn/9_gat.py): one GATLayer per head, MultiHeadGATLayer concatenates.
class GATLayer(nn.Module):
    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.fc = nn.Linear(in_dim, out_dim, bias=False)
        self.attn_fc = nn.Linear(2 * out_dim, 1, bias=False)

    def edge_attention(self, edges):
        z2 = torch.cat([edges.src["z"], edges.dst["z"]], dim=1)
        a = self.attn_fc(z2)
        return {"e": F.leaky_relu(a)}

    def message_func(self, edges):
        return {"z": edges.src["z"], "e": edges.data["e"]}

    def reduce_func(self, nodes):
        alpha = F.softmax(nodes.mailbox["e"], dim=1)
        h = torch.sum(alpha * nodes.mailbox["z"], dim=1)
        return {"h": h}

    def forward(self, g, h):
        z = self.fc(h)
        g.ndata["z"] = z
        g.apply_edges(self.edge_attention)
        g.update_all(self.message_func, self.reduce_func)
        return g.ndata.pop("h")


class MultiHeadGATLayer(nn.Module):
    def __init__(self, in_dim, out_dim, num_heads, merge="cat"):
        super().__init__()
        self.heads = nn.ModuleList()
        for i in range(num_heads):
            self.heads.append(GATLayer(in_dim, out_dim))
        self.merge = merge

    def forward(self, g, h):
        head_outs = [attn_head(g, h) for attn_head in self.heads]
        if self.merge == "cat":
            return torch.cat(head_outs, dim=1)
        return torch.mean(torch.stack(head_outs))


# DGL users porting GATConv to UDFs: one linear for all heads, ``view(-1, H, F)``, per-head attention vectors
# applied to each end in the edge UDF, the softmax over the mailbox.
class MultiHeadViewGATLayer(nn.Module):
    def __init__(self, in_dim, out_dim, num_heads):
        super().__init__()
        self.num_heads, self.out_dim = num_heads, out_dim
        self.fc = nn.Linear(in_dim, out_dim * num_heads, bias=False)
        self.attn_l = nn.Parameter(torch.Tensor(1, num_heads, out_dim))
        self.attn_r = nn.Parameter(torch.Tensor(1, num_heads, out_dim))
        nn.init.xavier_normal_(self.attn_l)
        nn.init.xavier_normal_(self.attn_r)

    def edge_attention(self, edges):
        e = (edges.src["z"] * self.attn_l).sum(-1) + (edges.dst["z"] * self.attn_r).sum(-1)
        return {"e": F.leaky_relu(e)}

    def message_func(self, edges):
        return {"z": edges.src["z"], "e": edges.data["e"]}

    def reduce_func(self, nodes):
        alpha = F.softmax(nodes.mailbox["e"], dim=1)
        return {"h": torch.sum(alpha.unsqueeze(-1) * nodes.mailbox["z"], dim=1)}

    def forward(self, g, h):
        with g.local_scope():
            g.ndata["z"] = self.fc(h).view(-1, self.num_heads, self.out_dim)
            g.apply_edges(self.edge_attention)
            g.update_all(self.message_func, self.reduce_func)
            return g.ndata["h"]


# --------------------------------------------------------------- GraphSAGE
# DGL's "Make your own GNN module" tutorial (blitz/3_message_passing.py), mean aggregator.
class SAGEConv(nn.Module):
    def __init__(self, in_feat, out_feat):
        super().__init__()
        self.fc = nn.Linear(in_feat * 2, out_feat)

    def forward(self, g, h):
        with g.local_scope():
            g.ndata["h"] = h
            g.update_all(message_func=fn.copy_u("h", "m"), reduce_func=fn.mean("m", "h_N"))
            h_N = g.ndata["h_N"]
            h_total = torch.cat([h, h_N], dim=1)
            return self.fc(h_total)


# --------------------------------------------------------------------- GIN
# GIN (Xu et al. 2019) as a user writes it with UDFs: the reduce adds (1 + eps) h_v to the neighbour sum and
# writes back into 'h' (it reads the feature it overwrites); a 2-layer MLP follows.
class GINLayer(nn.Module):
    def __init__(self, in_dim, out_dim, init_eps=0.0):
        super().__init__()
        self.eps = nn.Parameter(torch.FloatTensor([init_eps]))
        self.mlp = nn.Sequential(nn.Linear(in_dim, out_dim), nn.ReLU(), nn.Linear(out_dim, out_dim))

    def message_func(self, edges):
        return {"m": edges.src["h"]}

    def reduce_func(self, nodes):
        return {"h": (1 + self.eps) * nodes.data["h"] + torch.sum(nodes.mailbox["m"], dim=1)}

    def forward(self, g, h):
        with g.local_scope():
            g.ndata["h"] = h
            g.update_all(self.message_func, self.reduce_func)
            return self.mlp(g.ndata["h"])


# -------------------------------------------------------------------- RGCN
# DGL examples/pytorch/rgcn (entity classification) RGCNLayer, unchanged but for gnnc.function and taking h.
class RGCNLayer(nn.Module):
    def __init__(self, in_feat, out_feat, num_rels, num_bases=-1, bias=None, activation=None):
        super().__init__()
        self.in_feat, self.out_feat, self.num_rels, self.num_bases = in_feat, out_feat, num_rels, num_bases
        self.bias, self.activation = bias, activation
        if self.num_bases <= 0 or self.num_bases > self.num_rels:
            self.num_bases = self.num_rels
        self.weight = nn.Parameter(torch.Tensor(self.num_bases, self.in_feat, self.out_feat))
        if self.num_bases < self.num_rels:
            self.w_comp = nn.Parameter(torch.Tensor(self.num_rels, self.num_bases))
        nn.init.xavier_uniform_(self.weight, gain=nn.init.calculate_gain("relu"))
        if self.num_bases < self.num_rels:
            nn.init.xavier_uniform_(self.w_comp, gain=nn.init.calculate_gain("relu"))

    def forward(self, g, h):
        if self.num_bases < self.num_rels:
            weight = self.weight.view(self.in_feat, self.num_bases, self.out_feat)
            weight = torch.matmul(self.w_comp, weight).view(self.num_rels, self.in_feat, self.out_feat)
        else:
            weight = self.weight

        def message_func(edges):
            w = weight[edges.data["rel_type"]]
            msg = torch.bmm(edges.src["h"].unsqueeze(1), w).squeeze()
            msg = msg * edges.data["norm"]
            return {"msg": msg}

        def apply_func(nodes):
            h = nodes.data["h"]
            if self.bias:
                h = h + self.bias
            if self.activation:
                h = self.activation(h)
            return {"h": h}

        g.ndata["h"] = h
        g.update_all(message_func, fn.sum(msg="msg", out="h"), apply_func)
        return g.ndata.pop("h")


# -------------------------------------------------------------------- RGAT
# Relational GAT in DGL's two-call attention style: per-edge relation weights and attention vectors looked up
# by the edge's relation id, the softmax over each node's mailbox (all relations).
class RGATLayer(nn.Module):
    def __init__(self, in_dim, out_dim, num_rels, num_heads):
        super().__init__()
        self.out_dim, self.num_heads = out_dim, num_heads
        self.weight = nn.Parameter(torch.Tensor(num_rels, in_dim, num_heads * out_dim))
        self.attn = nn.Parameter(torch.Tensor(num_rels, num_heads, 2 * out_dim))
        nn.init.xavier_normal_(self.weight, gain=nn.init.calculate_gain("relu"))
        nn.init.xavier_normal_(self.attn, gain=nn.init.calculate_gain("relu"))

    def edge_attention(self, edges):
        w = self.weight[edges.data["rel_type"]]
        z_src = torch.bmm(edges.src["h"].unsqueeze(1), w).squeeze(1).view(-1, self.num_heads, self.out_dim)
        z_dst = torch.bmm(edges.dst["h"].unsqueeze(1), w).squeeze(1).view(-1, self.num_heads, self.out_dim)
        a = self.attn[edges.data["rel_type"]]
        e = (torch.cat([z_src, z_dst], dim=-1) * a).sum(-1)
        return {"e": F.leaky_relu(e, 0.2), "z": z_src}

    def message_func(self, edges):
        return {"z": edges.data["z"], "e": edges.data["e"]}

    def reduce_func(self, nodes):
        alpha = F.softmax(nodes.mailbox["e"], dim=1)
        h = torch.sum(alpha.unsqueeze(-1) * nodes.mailbox["z"], dim=1)
        return {"h": h.view(-1, self.num_heads * self.out_dim)}

    def forward(self, g, h):
        with g.local_scope():
            g.ndata["h"] = h
            g.apply_edges(self.edge_attention)
            g.update_all(self.message_func, self.reduce_func)
            return g.ndata["h"]


# --------------------------------------------------------------------- HGT
# DGL examples/pytorch/hgt HGTLayer on a homogeneous graph with type ids: per-node-type K/Q/V/A linears in
# ModuleLists (applied per type by mask), relation_att / relation_msg / relation_pri looked up per edge by
# relation id inside the edge UDF, softmax over the mailbox, gated skip per node type.
class HGTLayer(nn.Module):
    def __init__(self, in_dim, out_dim, num_types, num_relations, n_heads, dropout=0.0):
        super().__init__()
        self.in_dim, self.out_dim = in_dim, out_dim
        self.num_types, self.num_relations = num_types, num_relations
        self.n_heads = n_heads
        self.d_k = out_dim // n_heads
        self.sqrt_dk = math.sqrt(self.d_k)
        self.k_linears = nn.ModuleList([nn.Linear(in_dim, out_dim) for _ in range(num_types)])
        self.q_linears = nn.ModuleList([nn.Linear(in_dim, out_dim) for _ in range(num_types)])
        self.v_linears = nn.ModuleList([nn.Linear(in_dim, out_dim) for _ in range(num_types)])
        self.a_linears = nn.ModuleList([nn.Linear(out_dim, out_dim) for _ in range(num_types)])
        self.relation_pri = nn.Parameter(torch.ones(num_relations, n_heads))
        self.relation_att = nn.Parameter(torch.Tensor(num_relations, n_heads, self.d_k, self.d_k))
        self.relation_msg = nn.Parameter(torch.Tensor(num_relations, n_heads, self.d_k, self.d_k))
        self.skip = nn.Parameter(torch.ones(num_types))
        self.drop = nn.Dropout(dropout)
        nn.init.xavier_uniform_(self.relation_att)
        nn.init.xavier_uniform_(self.relation_msg)

    def edge_attention(self, edges):
        etype = edges.data["rel_type"]
        relation_att = self.relation_att[etype]
        relation_pri = self.relation_pri[etype]
        relation_msg = self.relation_msg[etype]
        key = torch.matmul(edges.src["k"].unsqueeze(2), relation_att).squeeze(2)
        att = (edges.dst["q"] * key).sum(dim=-1) * relation_pri / self.sqrt_dk
        val = torch.matmul(edges.src["v"].unsqueeze(2), relation_msg).squeeze(2)
        return {"a": att, "v": val}

    def message_func(self, edges):
        return {"v": edges.data["v"], "a": edges.data["a"]}

    def reduce_func(self, nodes):
        att = F.softmax(nodes.mailbox["a"], dim=1)
        h = torch.sum(att.unsqueeze(dim=-1) * nodes.mailbox["v"], dim=1)
        return {"t": h.view(-1, self.out_dim)}

    def forward(self, g, h):
        with g.local_scope():
            ntype = g.ndata["ntype"]
            k = h.new_empty(h.shape[0], self.out_dim)
            q, v = torch.empty_like(k), torch.empty_like(k)
            for t in range(self.num_types):
                mask = ntype == t
                k[mask] = self.k_linears[t](h[mask])
                q[mask] = self.q_linears[t](h[mask])
                v[mask] = self.v_linears[t](h[mask])
            g.ndata["k"] = k.view(-1, self.n_heads, self.d_k)
            g.ndata["q"] = q.view(-1, self.n_heads, self.d_k)
            g.ndata["v"] = v.view(-1, self.n_heads, self.d_k)
            g.apply_edges(self.edge_attention)
            g.update_all(self.message_func, self.reduce_func)
            t_all = g.ndata["t"]
            out = torch.empty_like(t_all)
            for t in range(self.num_types):
                mask = ntype == t
                alpha = torch.sigmoid(self.skip[t])
                trans_out = self.drop(self.a_linears[t](F.gelu(t_all[mask])))
                out[mask] = trans_out * alpha + h[mask] * (1 - alpha)
            return out

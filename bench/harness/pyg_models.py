"""PyG built-ins that compute the same function as a benchmarked gnnc layer, parameters copied across.

Each pairing builds the PyG layer from the eager case: the PyG side gets the
eager layer's parameter values and the graph in PyG's form (``edge_index``
in the user's edge order, global node ids; dicts for HGTConv), made once
outside the timed region. ``note`` says how the two sides were configured to
agree; a pairing whose functions cannot be made equal carries ``differs``
(why), and only then is its equivalence gate skipped.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .case import Case, Prepared
from .models import HEAD_DIM, HEADS, KERNELS, PSEUDO_DIM


@dataclass(frozen=True)
class Pairing:
    layer: str  # the PyG class
    build: Callable[[Case], Prepared]
    note: str
    differs: str | None = None


def _edge_index(case: Case) -> torch.Tensor:
    src, dst = case.data.graph.find_edges()
    return torch.stack([src, dst])


def _dgl_gcn_norm(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """``1 / sqrt(deg_out(u) * deg_in(v))`` per edge u->v, the norm of gnnc's (and DGL's) GCNConv."""
    src, dst = edge_index
    out_deg = torch.bincount(src, minlength=num_nodes).to(torch.float32)
    in_deg = torch.bincount(dst, minlength=num_nodes).to(torch.float32)
    return out_deg.rsqrt()[src] * in_deg.rsqrt()[dst]


@torch.no_grad()
def _gcn(case: Case) -> Prepared:
    from torch_geometric.nn import GCNConv

    ours, ei, n = case.eager, _edge_index(case), case.data.graph.num_nodes()
    conv = GCNConv(ours.weight.shape[0], ours.weight.shape[1], add_self_loops=False, normalize=False)
    conv.lin.weight.copy_(ours.weight.T)
    conv.bias.copy_(ours.bias)
    return Prepared(conv, lambda x: conv(x, ei, _dgl_gcn_norm(ei, n)), lambda out: out)


@torch.no_grad()
def _gat(case: Case) -> Prepared:
    from torch_geometric.nn import GATConv

    ours, ei = case.eager, _edge_index(case)
    conv = GATConv(ours.fc.in_features, HEAD_DIM, heads=HEADS, add_self_loops=False)
    conv.lin.weight.copy_(ours.fc.weight)
    conv.att_src.copy_(ours.attn[:, :HEAD_DIM].unsqueeze(0))
    conv.att_dst.copy_(ours.attn[:, HEAD_DIM:].unsqueeze(0))
    conv.bias.copy_(ours.bias.flatten())
    return Prepared(conv, lambda x: conv(x, ei), lambda out: out)


def _edgeconv(case: Case) -> Prepared:
    from torch_geometric.nn import EdgeConv

    ei = _edge_index(case)
    conv = EdgeConv(copy.deepcopy(case.eager.mlp), aggr="max")
    conv.nn.load_state_dict(case.eager.mlp.state_dict())  # EdgeConv re-initialises the MLP it is given
    return Prepared(conv, lambda x: conv(x, ei), lambda out: out)


@torch.no_grad()
def _gmm(case: Case) -> Prepared:
    from torch_geometric.nn import GMMConv

    ours, ei, (pseudo,) = case.eager, _edge_index(case), case.inputs
    conv = GMMConv(
        ours.fc.in_features, ours.out_dim, dim=PSEUDO_DIM, kernel_size=KERNELS, aggr="mean", root_weight=False
    )
    conv.root = None  # PyG 2.8's forward reads self.root, which root_weight=False never sets
    conv.g.copy_(ours.fc.weight.T)
    conv.mu.copy_(ours.mu)
    conv.sigma.copy_(ours.inv_sigma.reciprocal())
    conv.bias.copy_(ours.bias)
    return Prepared(conv, lambda x: conv(x, ei, pseudo), lambda out: out)


def _rgcn(layer: str):
    @torch.no_grad()
    def build(case: Case) -> Prepared:
        import torch_geometric.nn as pyg_nn

        ours, g = case.eager, case.data.graph
        ei, etype = _edge_index(case), g.edge_type_ids()
        conv = getattr(pyg_nn, layer)(ours.in_dim, ours.out_dim, num_relations=ours.num_rels, aggr="mean")
        conv.weight.copy_(ours.weight)
        conv.root.copy_(ours.loop_weight)
        conv.bias.copy_(ours.bias)
        return Prepared(conv, lambda x: conv(x, ei, etype), lambda out: out)

    return build


@torch.no_grad()
def _rgat(case: Case) -> Prepared:
    from torch_geometric.nn import RGATConv

    ours, g = case.eager, case.data.graph
    ei, etype = _edge_index(case), g.edge_type_ids()
    conv = RGATConv(
        ours.in_dim,
        HEAD_DIM,
        num_relations=ours.num_rels,
        heads=HEADS,
        bias=False,
        attention_mechanism="across-relation",
        attention_mode="additive-self-attention",
    )
    conv.weight.copy_(ours.weight)
    # q scores the destination, k the source; block-diagonal so head h reads only its own columns.
    conv.q.zero_()
    conv.k.zero_()
    for h in range(HEADS):
        cols = slice(h * HEAD_DIM, (h + 1) * HEAD_DIM)
        conv.k[cols, h] = ours.attn[0, h, :HEAD_DIM]
        conv.q[cols, h] = ours.attn[0, h, HEAD_DIM:]
    return Prepared(conv, lambda x: conv(x, ei, etype), lambda out: out)


@torch.no_grad()
def _hgt(case: Case) -> Prepared:
    from torch_geometric.nn import HGTConv

    ours, g = case.eager, case.data.graph
    # PyG keys parameters by type name, which may not contain '.': FB15k relation names do.
    ntypes = [f"n{i}" for i in range(len(g.ntypes))]
    keys = [(f"n{g.ntype_id(s)}", f"r{j}", f"n{g.ntype_id(d)}") for j, (s, _, d) in enumerate(g.canonical_etypes)]
    conv = HGTConv(ours.in_dim, ours.out_dim, metadata=(ntypes, keys), heads=ours.num_heads)
    for i, t in enumerate(ntypes):
        kqv = conv.kqv_lin.lins[t]
        kqv.weight.copy_(torch.cat([ours.k_weight[i].T, ours.q_weight[i].T, ours.v_weight[i].T]))
        kqv.bias.copy_(torch.cat([ours.k_bias[i], ours.q_bias[i], ours.v_bias[i]]))
        conv.out_lin.lins[t].weight.copy_(ours.a_weight[i].T)
        conv.out_lin.lins[t].bias.copy_(ours.a_bias[i])
        conv.skip[t].copy_(ours.skip[i : i + 1])
    for j, key in enumerate(keys):
        conv.p_rel["__".join(key)].copy_(ours.relation_pri[j].unsqueeze(0))
    # PyG's per-(head, relation) maps are indexed head * num_relations + relation.
    conv.k_rel.weight.copy_(ours.relation_att.transpose(0, 1).flatten(0, 1))
    conv.v_rel.weight.copy_(ours.relation_msg.transpose(0, 1).flatten(0, 1))
    ranges = [g.index.ntype_range(i) for i in range(len(ntypes))]
    edges = {key: torch.stack(g.find_edges(rel)) for key, rel in zip(keys, g.canonical_etypes)}
    dst_types = [t for t in ntypes if any(k[2] == t for k in keys)]

    def call(x):
        return conv({t: x[lo:hi] for t, (lo, hi) in zip(ntypes, ranges)}, edges)

    return Prepared(conv, call, lambda out: torch.cat([out[t] for t in dst_types]))


PYG = {
    "gcn": Pairing(
        "GCNConv",
        _gcn,
        "PyG GCNConv(normalize=False, add_self_loops=False) fed the per-edge norm "
        "1/sqrt(deg_out(u) deg_in(v)) of our layer, computed on every call (PyG's own gcn_norm "
        "uses the source's in-degree, which differs on directed graphs)",
    ),
    "gat": Pairing("GATConv", _gat, "PyG GATConv(heads=8, add_self_loops=False)"),
    "edgeconv": Pairing("EdgeConv", _edgeconv, "PyG EdgeConv(aggr='max') around a copy of our MLP"),
    "gmm": Pairing(
        "GMMConv",
        _gmm,
        "PyG GMMConv(aggr='mean', root_weight=False) with sigma = 1/inv_sigma; ours aggregator='mean' (PyG's default)",
    ),
    "rgcn": Pairing(
        "RGCNConv",
        _rgcn("RGCNConv"),
        "PyG RGCNConv(aggr='mean'): mean per relation, as our 1/c_{v,r}; loops over relations",
    ),
    "rgat": Pairing(
        "RGATConv",
        _rgat,
        "PyG RGATConv(across-relation, additive, bias=False) has one attention "
        "vector for all relations: ours starts with its per-relation attention tied; PyG's q, k "
        "made block-diagonal so heads do not mix",
    ),
    "hgt": Pairing(
        "HGTConv",
        _hgt,
        "PyG HGTConv: no LayerNorm (ours use_norm=False); PyG outputs only node "
        "types that some relation points to, so the gate compares those rows",
    ),
}

PYG_FAST = {
    "rgcn": Pairing(
        "FastRGCNConv", _rgcn("FastRGCNConv"), "PyG FastRGCNConv(aggr='mean'): one weight matrix gathered per edge"
    ),
}

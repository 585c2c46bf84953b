"""Models from DGL's tutorials and examples, written the way DGL users write them.

Used by ``tests/test_dgl_examples.py``. The code keeps its users' style on
purpose: bound methods, module-level functions, lambdas, closure factories,
partials, per-relation closures with default arguments and late binding,
ModuleDicts and ParameterDicts keyed by edge type, built-ins next to UDFs,
graph data written without ``local_scope``, dropout and batch norm left in
(the tests run them in eval mode). Tensors made inside a forward (labels,
edge weights) take the default dtype, as in user code.
"""

import functools
import math

import torch
from torch import nn
from torch.nn import functional as F

import gnnc.function as fn
from gnnc.ops import edge_softmax

IN_DIM = 6  # node (and edge) feature width of the homogeneous examples
HETERO_DIM = 5  # node feature width of the heterogeneous examples


# ---- GatedGCN (benchmarking-gnns), UDFs
class GatedGCNLayer(nn.Module):
    def __init__(self, input_dim, output_dim, dropout=0.0, residual=True):
        super().__init__()
        self.A = nn.Linear(input_dim, output_dim, bias=True)
        self.B = nn.Linear(input_dim, output_dim, bias=True)
        self.C = nn.Linear(input_dim, output_dim, bias=True)
        self.D = nn.Linear(input_dim, output_dim, bias=True)
        self.E = nn.Linear(input_dim, output_dim, bias=True)
        self.residual = residual
        self.dropout = dropout

    def edge_func(self, edges):
        e_ij = edges.data["Ce"] + edges.src["Dh"] + edges.dst["Eh"]
        return {"e": e_ij, "sigma": torch.sigmoid(e_ij)}

    def message_func(self, edges):
        return {"Bh_j": edges.src["Bh"], "sigma": edges.data["sigma"]}

    def reduce_func(self, nodes):
        Ah_i = nodes.data["Ah"]
        Bh_j = nodes.mailbox["Bh_j"]
        sigma_ij = nodes.mailbox["sigma"]
        h = Ah_i + torch.sum(sigma_ij * Bh_j, dim=1) / (torch.sum(sigma_ij, dim=1) + 1e-6)
        return {"h": h}

    def forward(self, g, h, e):
        h_in, e_in = h, e
        with g.local_scope():
            g.ndata["h"] = h
            g.ndata["Ah"] = self.A(h)
            g.ndata["Bh"] = self.B(h)
            g.ndata["Dh"] = self.D(h)
            g.ndata["Eh"] = self.E(h)
            g.edata["e"] = e
            g.edata["Ce"] = self.C(e)
            g.apply_edges(self.edge_func)
            g.update_all(self.message_func, self.reduce_func)
            h = g.ndata["h"]
            e = g.edata["e"]
        h = F.relu(h)
        e = F.relu(e)
        if self.residual:
            h = h_in + h
            e = e_in + e
        h = F.dropout(h, self.dropout, training=self.training)
        e = F.dropout(e, self.dropout, training=self.training)
        return h, e


class GatedGCNNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([GatedGCNLayer(IN_DIM, IN_DIM) for _ in range(2)])

    def forward(self, g, h, e):
        for layer in self.layers:
            h, e = layer(g, h, e)
        return h, e


# ---- GatedGCN, built-ins (DGL's gatedgcn example)
class GatedGCNBuiltin(nn.Module):
    def __init__(self, d=IN_DIM):
        super().__init__()
        self.A, self.B, self.C, self.D, self.E = [nn.Linear(d, d) for _ in range(5)]
        self.bn_h = nn.BatchNorm1d(d)

    def forward(self, g, h, e):
        with g.local_scope():
            g.ndata["h"], g.ndata["Ah"], g.ndata["Bh"] = h, self.A(h), self.B(h)
            g.ndata["Dh"], g.ndata["Eh"] = self.D(h), self.E(h)
            g.edata["e"], g.edata["Ce"] = e, self.C(e)
            g.apply_edges(fn.u_add_v("Dh", "Eh", "DEh"))
            g.edata["e"] = g.edata["DEh"] + g.edata["Ce"]
            g.edata["sigma"] = torch.sigmoid(g.edata["e"])
            g.update_all(fn.u_mul_e("Bh", "sigma", "m"), fn.sum("m", "sum_sigma_h"))
            g.update_all(fn.copy_e("sigma", "m"), fn.sum("m", "sum_sigma"))
            g.ndata["h"] = g.ndata["Ah"] + g.ndata["sum_sigma_h"] / (g.ndata["sum_sigma"] + 1e-6)
            h = self.bn_h(g.ndata["h"])
            return F.relu(h) + g.ndata["h"], g.edata["e"]


# ---- MoNet / GMMConv, gaussian kernels in a UDF message
class GMMConvUDF(nn.Module):
    def __init__(self, in_feats, out_feats, dim=2, n_kernels=3):
        super().__init__()
        self.dim, self.K, self.out = dim, n_kernels, out_feats
        self.mu = nn.Parameter(torch.Tensor(n_kernels, dim))
        self.inv_sigma = nn.Parameter(torch.Tensor(n_kernels, dim))
        self.fc = nn.Linear(in_feats, n_kernels * out_feats, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_feats))
        nn.init.normal_(self.mu, 0, 0.1)
        nn.init.constant_(self.inv_sigma, 1)

    def message(self, edges):
        E = edges.data["pseudo"].shape[0]
        gaussian = -0.5 * ((edges.data["pseudo"].view(E, 1, self.dim) - self.mu.view(1, self.K, self.dim)) ** 2)
        gaussian = gaussian * (self.inv_sigma.view(1, self.K, self.dim) ** 2)
        gaussian = torch.exp(gaussian.sum(dim=-1, keepdim=True))
        return {"m": edges.src["h"] * gaussian}

    def forward(self, g, feat, pseudo):
        with g.local_scope():
            g.ndata["h"] = self.fc(feat).view(-1, self.K, self.out)
            g.edata["pseudo"] = pseudo
            g.update_all(self.message, fn.mean("m", "h"))
            return g.ndata["h"].sum(1) + self.bias


class MoNet(nn.Module):
    """DGL's examples/pytorch/monet: pseudo-coordinates [1/sqrt(deg_u), 1/sqrt(deg_v)] through Linear + Tanh."""

    def __init__(self):
        super().__init__()
        self.pseudo_proj = nn.ModuleList([nn.Sequential(nn.Linear(2, 2), nn.Tanh()) for _ in range(2)])
        self.layers = nn.ModuleList([GMMConvUDF(IN_DIM, 5), GMMConvUDF(5, 4)])

    def forward(self, g, feat):
        us, vs = g.edges()
        deg = g.in_degrees().double()
        udeg = 1 / torch.sqrt(deg[us] + 1)
        vdeg = 1 / torch.sqrt(deg[vs] + 1)
        pseudo = torch.cat([udeg.unsqueeze(1), vdeg.unsqueeze(1)], dim=1)
        h = feat
        for i, layer in enumerate(self.layers):
            h = layer(g, h, self.pseudo_proj[i](pseudo))
            if i == 0:
                h = F.elu(h)
        return h


# ---- EdgeConv (DGCNN), max over the mailbox
class EdgeConvUDF(nn.Module):
    def __init__(self, in_feat, out_feat):
        super().__init__()
        self.theta = nn.Linear(in_feat, out_feat)
        self.phi = nn.Linear(in_feat, out_feat)

    def message(self, edges):
        theta_x = self.theta(edges.src["x"] - edges.dst["x"])
        phi_x = self.phi(edges.dst["x"])
        return {"e": theta_x + phi_x}

    def reduce(self, nodes):
        return {"x": torch.max(nodes.mailbox["e"], 1)[0]}

    def forward(self, g, x):
        with g.local_scope():
            g.ndata["x"] = x
            g.update_all(self.message, self.reduce)
            return g.ndata["x"]


class DGCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = EdgeConvUDF(IN_DIM, 8), EdgeConvUDF(8, 4)

    def forward(self, g, x):
        h = F.leaky_relu(self.c1(g, x), 0.2)
        return self.c2(g, h)


# ---- GCNII, fn.u_mul_e with learned edge weights
class GCNIIConv(nn.Module):
    def __init__(self, d, alpha=0.1, lambda_=1.0, layer=1):
        super().__init__()
        self.alpha = alpha
        self.beta = math.log(lambda_ / layer + 1)
        self.weight = nn.Parameter(torch.randn(d, d) * 0.3)

    def forward(self, g, feat, feat_0, edge_weight):
        with g.local_scope():
            deg = g.in_degrees().double().clamp(min=1)
            norm = torch.pow(deg, -0.5).unsqueeze(1)
            feat = feat * norm
            g.ndata["h"] = feat
            g.edata["w"] = edge_weight
            g.update_all(fn.u_mul_e("h", "w", "m"), fn.sum("m", "h"))
            feat = g.ndata.pop("h")
            feat = feat * norm
            feat = feat * (1 - self.alpha)
            feat_0 = feat_0[: feat.size(0)] * self.alpha
            rst = feat + feat_0
            rst = (1 - self.beta) * rst + self.beta * (rst @ self.weight)
            return rst


class GCNII(nn.Module):
    def __init__(self, nlayers=3):
        super().__init__()
        self.fc_in = nn.Linear(IN_DIM, 8)
        self.convs = nn.ModuleList([GCNIIConv(8, layer=i + 1) for i in range(nlayers)])
        self.fc_out = nn.Linear(8, 3)
        self.ew = nn.Parameter(torch.tensor(0.7))

    def forward(self, g, x, w):
        h = h0 = F.relu(self.fc_in(x))
        for conv in self.convs:
            h = F.relu(conv(g, h, h0, w * self.ew))
        return self.fc_out(h)


# ---- APPNP, lambda message with edge dropout
class APPNPConv(nn.Module):
    def __init__(self, k, alpha, edge_drop=0.3):
        super().__init__()
        self._k, self._alpha = k, alpha
        self.edge_drop = nn.Dropout(edge_drop)

    def forward(self, graph, feat):
        with graph.local_scope():
            norm = torch.pow(graph.in_degrees().double().clamp(min=1), -0.5)
            shp = norm.shape + (1,) * (feat.dim() - 1)
            norm = torch.reshape(norm, shp)
            feat_0 = feat
            for _ in range(self._k):
                feat = feat * norm
                graph.ndata["h"] = feat
                graph.edata["w"] = self.edge_drop(torch.ones(graph.number_of_edges(), 1))
                graph.update_all(lambda edges: {"m": edges.src["h"] * edges.data["w"]}, fn.sum("m", "h"))
                feat = graph.ndata.pop("h")
                feat = feat * norm
                feat = (1 - self._alpha) * feat + self._alpha * feat_0
            return feat


class APPNP(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1, self.lin2 = nn.Linear(IN_DIM, 8), nn.Linear(8, 3)
        self.prop = APPNPConv(4, 0.1)

    def forward(self, g, x):
        return self.prop(g, self.lin2(F.relu(self.lin1(x))))


# ---- APPNP, teleport term in apply_node_func closing over h0
class APPNPApplyNodeFunc(nn.Module):
    def __init__(self, k=3, alpha=0.2):
        super().__init__()
        self.k, self.alpha = k, alpha
        self.lin = nn.Linear(IN_DIM, 4)

    def forward(self, g, x):
        h0 = self.lin(x)
        with g.local_scope():
            norm = g.in_degrees().double().clamp(min=1).pow(-0.5).unsqueeze(1)
            g.ndata["norm"] = norm
            g.ndata["h"] = h0
            for _ in range(self.k):
                g.update_all(
                    lambda e: {"m": e.src["h"] * e.src["norm"]},
                    fn.sum("m", "h"),
                    lambda nodes: {"h": (1 - self.alpha) * nodes.data["h"] * nodes.data["norm"] + self.alpha * h0},
                )
            return g.ndata["h"]


# ---- TAGConv and SGC: k hops in a python loop
class TAGConv(nn.Module):
    def __init__(self, in_feats, out_feats, k=3):
        super().__init__()
        self._k = k
        self.lin = nn.Linear(in_feats * (k + 1), out_feats)

    def forward(self, graph, feat):
        with graph.local_scope():
            degs = graph.in_degrees().double().clamp(min=1)
            norm = torch.pow(degs, -0.5).unsqueeze(-1)
            fstack = [feat]
            for _ in range(self._k):
                rst = fstack[-1] * norm
                graph.ndata["h"] = rst
                graph.update_all(fn.copy_u("h", "m"), fn.sum("m", "h"))
                rst = graph.ndata["h"]
                rst = rst * norm
                fstack.append(rst)
            return self.lin(torch.cat(fstack, dim=-1))


def sgc_msg(edges):
    return {"m": edges.src["h"] * edges.src["norm"]}


def sgc_reduce(nodes):
    return {"h": nodes.mailbox["m"].sum(dim=1) * nodes.data["norm"]}


class SGConvUDF(nn.Module):
    def __init__(self, k=2):
        super().__init__()
        self.k = k
        self.fc = nn.Linear(IN_DIM, 3)

    def forward(self, g, x):
        with g.local_scope():
            g.ndata["norm"] = g.in_degrees().double().clamp(min=1).pow(-0.5).unsqueeze(1)
            g.ndata["h"] = x
            for _ in range(self.k):
                g.update_all(sgc_msg, sgc_reduce)
            return self.fc(g.ndata["h"])


class TAGNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.t = TAGConv(IN_DIM, 5)
        self.s = SGConvUDF()

    def forward(self, g, x):
        return self.t(g, x), self.s(g, x)


# ---- AGNN: cosine attention, learned beta, softmax by hand
class AGNNConv(nn.Module):
    def __init__(self, init_beta=1.0):
        super().__init__()
        self.beta = nn.Parameter(torch.Tensor([init_beta]))

    def edge_att(self, edges):
        cos = (edges.src["norm_h"] * edges.dst["norm_h"]).sum(-1, keepdim=True)
        return {"e": self.beta * cos}

    def msg(self, edges):
        return {"e": edges.data["e"], "h": edges.src["h"]}

    def reduce(self, nodes):
        e = nodes.mailbox["e"]
        e = torch.exp(e - e.max(dim=1, keepdim=True)[0])
        a = e / e.sum(dim=1, keepdim=True)
        return {"h": (a * nodes.mailbox["h"]).sum(1)}

    def forward(self, g, feat):
        with g.local_scope():
            g.ndata["h"] = feat
            g.ndata["norm_h"] = F.normalize(feat, p=2, dim=-1)
            g.apply_edges(self.edge_att)
            g.update_all(self.msg, self.reduce)
            return g.ndata.pop("h")


class AGNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(IN_DIM, 8)
        self.convs = nn.ModuleList([AGNNConv(1.0), AGNNConv(0.5)])
        self.cls = nn.Linear(8, 3)

    def forward(self, g, x):
        h = F.relu(self.proj(x))
        for c in self.convs:
            h = c(g, h)
        return self.cls(h)


# ---- Graph Transformer (benchmarking-gnns): UDF factories
def src_dot_dst(src_field, dst_field, out_field):
    def func(edges):
        return {out_field: (edges.src[src_field] * edges.dst[dst_field]).sum(-1, keepdim=True)}

    return func


def scaled_exp(field, scale_constant):
    def func(edges):
        return {field: torch.exp((edges.data[field] / scale_constant).clamp(-5, 5))}

    return func


class MultiHeadAttentionLayer(nn.Module):
    def __init__(self, in_dim, out_dim, num_heads):
        super().__init__()
        self.out_dim, self.num_heads = out_dim, num_heads
        self.Q = nn.Linear(in_dim, out_dim * num_heads, bias=True)
        self.K = nn.Linear(in_dim, out_dim * num_heads, bias=True)
        self.V = nn.Linear(in_dim, out_dim * num_heads, bias=True)

    def propagate_attention(self, g):
        g.apply_edges(src_dot_dst("K_h", "Q_h", "score"))
        g.apply_edges(scaled_exp("score", math.sqrt(self.out_dim)))
        g.update_all(fn.u_mul_e("V_h", "score", "V_h"), fn.sum("V_h", "wV"))
        g.update_all(fn.copy_e("score", "score"), fn.sum("score", "z"))

    def forward(self, g, h):
        Q_h, K_h, V_h = self.Q(h), self.K(h), self.V(h)
        g.ndata["Q_h"] = Q_h.view(-1, self.num_heads, self.out_dim)
        g.ndata["K_h"] = K_h.view(-1, self.num_heads, self.out_dim)
        g.ndata["V_h"] = V_h.view(-1, self.num_heads, self.out_dim)
        self.propagate_attention(g)
        head_out = g.ndata["wV"] / (g.ndata["z"] + 1e-6)
        return head_out


class GraphTransformerLayer(nn.Module):
    def __init__(self, d=8, heads=2):
        super().__init__()
        self.attention = MultiHeadAttentionLayer(d, d // heads, heads)
        self.O = nn.Linear(d, d)
        self.ln = nn.LayerNorm(d)
        self.ffn = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Dropout(0.5), nn.Linear(2 * d, d))
        self.d = d

    def forward(self, g, h):
        attn_out = self.attention(g, h).view(-1, self.d)
        h = self.ln(h + self.O(attn_out))
        return h + self.ffn(h)


class GraphTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Linear(IN_DIM, 8)
        self.layers = nn.ModuleList([GraphTransformerLayer() for _ in range(2)])

    def forward(self, g, x):
        h = self.emb(x)
        for layer in self.layers:
            h = layer(g, h)
        return h


# ---- NNConv (built-in u_mul_e on 3-D weights) and MPNN (UDF bmm)
class NNConv(nn.Module):
    def __init__(self, in_feats, out_feats, edge_func, aggregator_type="mean"):
        super().__init__()
        self._in, self._out = in_feats, out_feats
        self.edge_func = edge_func
        self.reducer = {"sum": fn.sum, "mean": fn.mean, "max": fn.max}[aggregator_type]
        self.bias = nn.Parameter(torch.zeros(out_feats))
        self.res_fc = nn.Linear(in_feats, out_feats, bias=False)

    def forward(self, graph, feat, efeat):
        with graph.local_scope():
            graph.srcdata["h"] = feat.unsqueeze(-1)
            graph.edata["w"] = self.edge_func(efeat).view(-1, self._in, self._out)
            graph.update_all(fn.u_mul_e("h", "w", "m"), self.reducer("m", "neigh"))
            rst = graph.dstdata["neigh"].sum(dim=1)
            return rst + self.res_fc(feat) + self.bias


class NNConvUDF(nn.Module):
    def __init__(self, in_feats, out_feats, edim):
        super().__init__()
        self._in, self._out = in_feats, out_feats
        self.edge_net = nn.Sequential(nn.Linear(edim, 16), nn.ReLU(), nn.Linear(16, in_feats * out_feats))

    def message(self, edges):
        w = self.edge_net(edges.data["ef"]).view(-1, self._in, self._out)
        return {"m": torch.bmm(edges.src["h"].unsqueeze(1), w).squeeze(1)}

    def forward(self, g, h, ef):
        with g.local_scope():
            g.ndata["h"], g.edata["ef"] = h, ef
            g.update_all(self.message, fn.sum("m", "h"))
            return g.ndata["h"]


class MPNN(nn.Module):
    def __init__(self, edim=3):
        super().__init__()
        self.c1 = NNConv(IN_DIM, 5, nn.Sequential(nn.Linear(edim, 8), nn.ReLU(), nn.Linear(8, IN_DIM * 5)), "mean")
        self.c2 = NNConv(5, 4, nn.Linear(edim, 20), "max")
        self.c3 = NNConvUDF(4, 3, edim)

    def forward(self, g, x, e):
        h = F.relu(self.c1(g, x, e))
        h = F.relu(self.c2(g, h, e))
        return self.c3(g, h, e)


# ---- PNA: mean/max/min/std/var aggregators, degree scalers
AVG_D_LOG = 1.5


def aggregate_mean(h):
    return torch.mean(h, dim=1)


def aggregate_max(h):
    return torch.max(h, dim=1)[0]


def aggregate_min(h):
    return torch.min(h, dim=1).values


def aggregate_std(h):
    return torch.sqrt(torch.relu(torch.mean(h * h, dim=-2) - torch.mean(h, dim=-2) ** 2) + 1e-5)


def aggregate_var(h):
    return torch.var(h, dim=1, unbiased=False)


def scale_identity(h, D=None, avg_d=None):
    return h


def scale_amplification(h, D, avg_d):
    return h * (math.log(D + 1) / avg_d["log"])


def scale_attenuation(h, D, avg_d):
    return h * (avg_d["log"] / math.log(D + 1))


AGGREGATORS = {
    "mean": aggregate_mean,
    "max": aggregate_max,
    "min": aggregate_min,
    "std": aggregate_std,
    "var": aggregate_var,
}
SCALERS = {"identity": scale_identity, "amplification": scale_amplification, "attenuation": scale_attenuation}


class PNALayer(nn.Module):
    def __init__(self, in_dim, out_dim, aggregators, scalers, avg_d):
        super().__init__()
        self.aggregators = [AGGREGATORS[a] for a in aggregators]
        self.scalers = [SCALERS[s] for s in scalers]
        self.avg_d = avg_d
        self.pretrans = nn.Linear(2 * in_dim, in_dim)
        self.posttrans = nn.Linear((len(aggregators) * len(scalers) + 1) * in_dim, out_dim)

    def pretrans_edges(self, edges):
        z2 = torch.cat([edges.src["h"], edges.dst["h"]], dim=1)
        return {"e": self.pretrans(z2)}

    def message_func(self, edges):
        return {"e": edges.data["e"]}

    def reduce_func(self, nodes):
        h = nodes.mailbox["e"]
        D = h.shape[-2]
        h = torch.cat([aggregate(h) for aggregate in self.aggregators], dim=1)
        h = torch.cat([scale(h, D=D, avg_d=self.avg_d) for scale in self.scalers], dim=1)
        return {"h": h}

    def forward(self, g, h):
        with g.local_scope():
            g.ndata["h"] = h
            g.apply_edges(self.pretrans_edges)
            g.update_all(self.message_func, self.reduce_func)
            h = torch.cat([h, g.ndata["h"]], dim=1)
            return self.posttrans(h)


class PNA(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = PNALayer(
            IN_DIM, 5, ["mean", "max", "min", "std"], ["identity", "amplification", "attenuation"], {"log": AVG_D_LOG}
        )
        self.l2 = PNALayer(5, 4, ["var", "max"], ["identity", "amplification"], {"log": AVG_D_LOG})

    def forward(self, g, x):
        return self.l2(g, F.relu(self.l1(g, x)))


# ---- GINE: learned eps, sum or a max-reducing lambda
class GINEConv(nn.Module):
    def __init__(self, apply_func, init_eps=0.1):
        super().__init__()
        self.apply_func = apply_func
        self.eps = nn.Parameter(torch.DoubleTensor([init_eps]))

    def message(self, edges):
        return {"m": F.relu(edges.src["hn"] + edges.data["he"])}

    def forward(self, graph, node_feat, edge_feat, agg="sum"):
        with graph.local_scope():
            graph.srcdata["hn"] = node_feat
            graph.edata["he"] = edge_feat
            red = (
                fn.sum("m", "neigh")
                if agg == "sum"
                else (lambda nodes: {"neigh": nodes.mailbox["m"].max(dim=1).values})
            )
            graph.update_all(self.message, red)
            rst = (1 + self.eps) * node_feat + graph.dstdata["neigh"]
            return self.apply_func(rst)


class GINE(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = GINEConv(nn.Sequential(nn.Linear(IN_DIM, 8), nn.ReLU(), nn.Linear(8, IN_DIM)))
        self.c2 = GINEConv(nn.Linear(IN_DIM, 4), init_eps=0.0)

    def forward(self, g, x, e):
        return self.c2(g, F.relu(self.c1(g, x, e)), e, agg="max")


# ---- GraphSAGE: pool, gcn and a min reducer UDF
class SAGEConv(nn.Module):
    def __init__(self, in_feats, out_feats, aggregator):
        super().__init__()
        self.agg = aggregator
        self.fc_pool = nn.Linear(in_feats, in_feats)
        self.fc_self = nn.Linear(in_feats, out_feats, bias=False)
        self.fc_neigh = nn.Linear(in_feats, out_feats, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_feats))
        self.feat_drop = nn.Dropout(0.4)

    def forward(self, graph, feat):
        with graph.local_scope():
            h_self = feat = self.feat_drop(feat)
            if self.agg == "pool":
                graph.srcdata["h"] = F.relu(self.fc_pool(feat))
                graph.update_all(
                    fn.copy_u("h", "m"), lambda nodes: {"neigh": torch.max(nodes.mailbox["m"], dim=1).values}
                )
                h_neigh = self.fc_neigh(graph.dstdata["neigh"])
                rst = self.fc_self(h_self) + h_neigh
            elif self.agg == "gcn":
                graph.srcdata["h"] = feat
                graph.dstdata["h"] = h_self
                graph.update_all(fn.copy_u("h", "m"), fn.sum("m", "neigh"))
                degs = graph.in_degrees().to(feat)
                h_neigh = (graph.dstdata["neigh"] + graph.dstdata["h"]) / (degs.unsqueeze(-1) + 1)
                rst = self.fc_neigh(h_neigh)
            else:  # 'min', a UDF reading the degree from the mailbox's shape
                graph.srcdata["h"] = feat

                def red(nodes):
                    m = nodes.mailbox["m"]
                    deg = m.shape[1]
                    return {"neigh": m.min(1)[0] + m.sum(1) / deg}

                graph.update_all(fn.copy_u("h", "m"), red)
                rst = self.fc_self(h_self) + self.fc_neigh(graph.dstdata["neigh"])
            return rst + self.bias


class GraphSAGE(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([SAGEConv(IN_DIM, 8, "pool"), SAGEConv(8, 8, "gcn"), SAGEConv(8, 4, "min")])

    def forward(self, g, x):
        h = x
        for i, layer in enumerate(self.layers):
            h = layer(g, h)
            if i < 2:
                h = F.relu(h)
        return h


# ---- ChebConv: a nested helper writing graph data
class ChebConv(nn.Module):
    def __init__(self, in_feats, out_feats, k):
        super().__init__()
        self._k = k
        self.linear = nn.Linear(k * in_feats, out_feats)

    def forward(self, graph, feat, lambda_max=None):
        def unnLaplacian(feat, D_invsqrt, graph):
            graph.ndata["h"] = feat * D_invsqrt
            graph.update_all(fn.copy_u("h", "m"), fn.sum("m", "h"))
            return graph.ndata.pop("h") * D_invsqrt

        with graph.local_scope():
            D_invsqrt = torch.pow(graph.in_degrees().double().clamp(min=1), -0.5).unsqueeze(-1)
            if lambda_max is None:
                lambda_max = 2.0
            re_norm = 2.0 / lambda_max
            X_0 = feat
            Xt = X_0
            if self._k > 1:
                h = unnLaplacian(X_0, D_invsqrt, graph)
                X_1 = -re_norm * h + X_0 * (re_norm - 1)
                Xt = torch.cat((Xt, X_1), 1)
            for _ in range(2, self._k):
                h = unnLaplacian(X_1, D_invsqrt, graph)
                X_i = -2 * re_norm * h + X_1 * 2 * (re_norm - 1) - X_0
                Xt = torch.cat((Xt, X_i), 1)
                X_1, X_0 = X_i, X_1
            return self.linear(Xt)


class Cheb(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = ChebConv(IN_DIM, 8, 3), ChebConv(8, 3, 2)

    def forward(self, g, x):
        return self.c2(g, F.relu(self.c1(g, x, lambda_max=1.7)))


# ---- link prediction: SAGE + dot and MLP scorers, positive and negative graphs
class DotPredictor(nn.Module):
    def forward(self, g, h):
        with g.local_scope():
            g.ndata["h"] = h
            g.apply_edges(fn.u_dot_v("h", "h", "score"))
            return g.edata["score"][:, 0]


class MLPPredictor(nn.Module):
    def __init__(self, h_feats):
        super().__init__()
        self.W1 = nn.Linear(h_feats * 2, h_feats)
        self.W2 = nn.Linear(h_feats, 1)

    def apply_edges(self, edges):
        h = torch.cat([edges.src["h"], edges.dst["h"]], 1)
        return {"score": self.W2(F.relu(self.W1(h))).squeeze(1)}

    def forward(self, g, h):
        with g.local_scope():
            g.ndata["h"] = h
            g.apply_edges(self.apply_edges)
            return g.edata["score"]


class LinkPrediction(nn.Module):
    def __init__(self):
        super().__init__()
        self.sage = SAGEConv(IN_DIM, 8, "gcn")
        self.dot, self.mlp = DotPredictor(), MLPPredictor(8)

    def forward(self, g, x, neg_g):
        h = self.sage(g, x)
        pos_d, neg_d = self.dot(g, h), self.dot(neg_g, h)
        pos_m, neg_m = self.mlp(g, h), self.mlp(neg_g, h)
        scores = torch.cat([pos_d + pos_m, neg_d + neg_m])
        labels = torch.cat([torch.ones(pos_d.shape[0]), torch.zeros(neg_d.shape[0])])
        return F.binary_cross_entropy_with_logits(scores, labels).unsqueeze(0), scores


# ---- edge features rewritten by apply_edges; torch.where, clamp, in-place ops
class EdgeUpdate(nn.Module):
    def __init__(self, d=IN_DIM):
        super().__init__()
        self.lin_e = nn.Linear(3 * d, d)
        self.lin_n = nn.Linear(2 * d, d)
        self.drop = nn.Dropout(0.5)

    def edge_update(self, edges):
        e = edges.data["e"]
        z = torch.cat([edges.src["h"], edges.dst["h"], e], dim=-1)
        e = e + self.drop(torch.tanh(self.lin_e(z)))
        return {"e": e}

    def reduce(self, nodes):
        m = nodes.mailbox["m"]
        w = torch.where(m > 0, m, 0.1 * m)  # leaky ReLU by hand
        w = w.clamp(min=-1.0, max=2.0)
        s = w.sum(1)
        s /= m.shape[1]
        s += nodes.data["h"]
        return {"h": s}

    def forward(self, g, h, e):
        with g.local_scope():
            g.ndata["h"] = h
            g.edata["e"] = e
            g.apply_edges(self.edge_update)
            g.apply_edges(self.edge_update)
            g.update_all(fn.u_mul_e("h", "e", "m"), self.reduce)
            return self.lin_n(torch.cat([g.ndata["h"], h], -1)), g.edata["e"]


# ---- GraphConv with EdgeWeightNorm (1-D edge weights, reversed graph)
class EdgeWeightNorm(nn.Module):
    def __init__(self, norm="both", eps=0.0):
        super().__init__()
        self._norm, self._eps = norm, eps

    def forward(self, graph, edge_weight):
        with graph.local_scope():
            graph.edata["_edge_w"] = edge_weight
            if self._norm == "both":
                reversed_g = graph.reverse()
                reversed_g.edata["_edge_w"] = edge_weight
                reversed_g.update_all(fn.copy_e("_edge_w", "m"), fn.sum("m", "out_weight"))
                degs = reversed_g.dstdata["out_weight"] + self._eps
                norm = torch.pow(degs, -0.5)
                graph.srcdata["_src_out_w"] = norm
            if self._norm != "none":
                graph.update_all(fn.copy_e("_edge_w", "m"), fn.sum("m", "in_weight"))
                degs = graph.dstdata["in_weight"] + self._eps
                norm = torch.pow(degs, -0.5) if self._norm == "both" else 1.0 / degs
                graph.dstdata["_dst_in_w"] = norm
            graph.apply_edges(
                lambda e: {"_norm_edge_weights": e.src["_src_out_w"] * e.dst["_dst_in_w"] * e.data["_edge_w"]}
            )
            return graph.edata["_norm_edge_weights"]


class GraphConv(nn.Module):
    def __init__(self, in_feats, out_feats, norm="both", activation=None):
        super().__init__()
        self._norm = norm
        self.weight = nn.Parameter(torch.Tensor(in_feats, out_feats))
        self.bias = nn.Parameter(torch.zeros(out_feats))
        nn.init.xavier_uniform_(self.weight)
        self._activation = activation

    def forward(self, graph, feat, edge_weight=None):
        with graph.local_scope():
            aggregate_fn = fn.copy_u("h", "m")
            if edge_weight is not None:
                graph.edata["_edge_weight"] = edge_weight
                aggregate_fn = fn.u_mul_e("h", "_edge_weight", "m")
            feat_src, feat_dst = feat, feat
            if self._norm in ["left", "both"]:
                degs = graph.out_degrees().to(feat_src).clamp(min=1)
                norm = torch.pow(degs, -0.5) if self._norm == "both" else 1.0 / degs
                shp = norm.shape + (1,) * (feat_src.dim() - 1)
                feat_src = feat_src * torch.reshape(norm, shp)
            feat_src = torch.matmul(feat_src, self.weight)
            graph.srcdata["h"] = feat_src
            graph.update_all(aggregate_fn, fn.sum(msg="m", out="h"))
            rst = graph.dstdata["h"]
            if self._norm in ["right", "both"]:
                degs = graph.in_degrees().to(feat_dst).clamp(min=1)
                norm = torch.pow(degs, -0.5) if self._norm == "both" else 1.0 / degs
                rst = rst * torch.reshape(norm, norm.shape + (1,) * (feat_dst.dim() - 1))
            rst = rst + self.bias
            if self._activation is not None:
                rst = self._activation(rst)
            return rst


class WeightedGCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.ewn = EdgeWeightNorm("both")
        self.c1 = GraphConv(IN_DIM, 8, norm="none", activation=F.relu)
        self.c2 = GraphConv(8, 3, norm="right")
        self.c3 = GraphConv(3, 3, norm="left")

    def forward(self, g, x, w):
        nw = self.ewn(g, w)
        h = self.c1(g, x, nw)
        h = self.c2(g, h, w)
        return self.c3(g, h), nw


# ---- DotGAT (examples/pytorch/dotgat): u_dot_v + edge_softmax
class DotGatConv(nn.Module):
    def __init__(self, in_feats, out_feats, num_heads):
        super().__init__()
        self._out_feats, self._num_heads = out_feats, num_heads
        self.fc = nn.Linear(in_feats, out_feats * num_heads, bias=False)

    def forward(self, graph, feat):
        with graph.local_scope():
            feat_src = feat_dst = self.fc(feat).view(-1, self._num_heads, self._out_feats)
            graph.srcdata.update({"ft": feat_src})
            graph.dstdata.update({"ft": feat_dst})
            graph.apply_edges(fn.u_dot_v("ft", "ft", "a"))
            graph.edata["sa"] = edge_softmax(graph, graph.edata["a"] / self._out_feats**0.5)
            graph.update_all(fn.u_mul_e("ft", "sa", "attn"), fn.sum("attn", "agg_u"))
            return graph.dstdata["agg_u"].view(-1, self._num_heads * self._out_feats), graph.edata["sa"]


class DotGAT(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = DotGatConv(IN_DIM, 4, 2), DotGatConv(8, 3, 1)

    def forward(self, g, x):
        h, a1 = self.c1(g, x)
        h, a2 = self.c2(g, F.elu(h))
        return h, a1, a2


# ---- GATv2: score after the nonlinearity, in a UDF; edge_softmax
class GATv2Layer(nn.Module):
    def __init__(self, in_dim, out_dim, heads, share_weights=False):
        super().__init__()
        self.H, self.D = heads, out_dim
        self.fc_src = nn.Linear(in_dim, heads * out_dim)
        self.fc_dst = self.fc_src if share_weights else nn.Linear(in_dim, heads * out_dim)
        self.attn = nn.Parameter(torch.randn(1, heads, out_dim) * 0.3)
        self.attn_drop = nn.Dropout(0.3)
        self.res = nn.Linear(in_dim, heads * out_dim, bias=False)

    def edge_score(self, edges):
        e = F.leaky_relu(edges.src["el"] + edges.dst["er"], negative_slope=0.2)
        return {"e": (e * self.attn).sum(dim=-1).unsqueeze(-1)}

    def forward(self, g, x):
        with g.local_scope():
            g.srcdata["el"] = self.fc_src(x).view(-1, self.H, self.D)
            g.dstdata["er"] = self.fc_dst(x).view(-1, self.H, self.D)
            g.apply_edges(self.edge_score)
            g.edata["a"] = self.attn_drop(edge_softmax(g, g.edata["e"]))
            g.update_all(fn.u_mul_e("el", "a", "m"), fn.sum("m", "ft"))
            rst = g.dstdata["ft"] + self.res(x).view(-1, self.H, self.D)
            return rst.flatten(1)


class GATv2(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = GATv2Layer(IN_DIM, 4, 3), GATv2Layer(12, 3, 1, share_weights=True)

    def forward(self, g, x):
        return self.l2(g, F.elu(self.l1(g, x)))


# ---- hetero R-GCN: multi_update_all with per-relation UDFs
class HeteroRGCNLayer(nn.Module):
    """``style``: 'partial' (functools.partial of a method), 'default' (a lambda binding the relation as a
    default argument) or 'late' (a late-binding closure: every relation uses the last relation's Linear,
    a user bug that compiled code must reproduce)."""

    def __init__(self, in_size, out_size, etypes, style):
        super().__init__()
        self.weight = nn.ModuleDict({name: nn.Linear(in_size, out_size) for name in etypes})
        self.style = style

    def msg(self, edges, etype):
        return {"m": self.weight[etype](edges.src["h"])}

    def forward(self, G, feat_dict, cross="sum"):
        with G.local_scope():
            for ntype in G.ntypes:
                G.nodes[ntype].data["h"] = feat_dict[ntype]
            funcs = {}
            for srctype, etype, dsttype in G.canonical_etypes:
                if self.style == "partial":
                    funcs[etype] = (functools.partial(self.msg, etype=etype), fn.mean("m", "h"))
                elif self.style == "default":
                    funcs[(srctype, etype, dsttype)] = (
                        lambda edges, etype=etype: {"m": self.weight[etype](edges.src["h"])},
                        lambda nodes: {"h": nodes.mailbox["m"].sum(1)},
                    )
                else:
                    funcs[etype] = (lambda edges: {"m": self.weight[etype](edges.src["h"])}, fn.max("m", "h"))
            G.multi_update_all(funcs, cross)
            return {nt: G.nodes[nt].data["h"] for nt in G.ntypes if "h" in G.nodes[nt].data}


class HeteroRGCN(nn.Module):
    def __init__(self, G):
        super().__init__()
        self.l1 = HeteroRGCNLayer(HETERO_DIM, 6, G.etypes, "partial")
        self.l2 = HeteroRGCNLayer(6, 6, G.etypes, "default")
        self.l3 = HeteroRGCNLayer(6, 4, G.etypes, "late")

    def forward(self, G, h):
        h1 = self.l1(G, h, "sum")
        h1 = {k: F.leaky_relu(v) for k, v in h1.items()}
        h2 = self.l2(G, h1, "mean")
        h2 = {k: torch.tanh(v) for k, v in h2.items()}
        h3 = self.l3(G, h2, "max")
        return h1, h2, h3


# ---- HeteroMLPPredictor: apply_edges per edge type
class HeteroMLPPredictor(nn.Module):
    def __init__(self, in_dims, n_classes):
        super().__init__()
        self.W = nn.Linear(in_dims * 2, n_classes)

    def apply_edges(self, edges):
        x = torch.cat([edges.src["h"], edges.dst["h"]], 1)
        y = self.W(x)
        return {"score": y}

    def forward(self, graph, h):
        with graph.local_scope():
            graph.ndata["h"] = h
            for etype in graph.canonical_etypes:
                graph.apply_edges(self.apply_edges, etype=etype)
            for etype in graph.canonical_etypes:
                graph.apply_edges(fn.u_dot_v("h", "h", "dot"), etype=etype)
            res = {}
            for et in graph.canonical_etypes:
                res[("score",) + et] = graph.edges[et].data["score"]
                res[("dot",) + et] = graph.edges[et].data["dot"]
            res[("all",)] = graph.edata["score"]
            return res


# ---- hetero attention: per-relation softmax UDFs, stack/min cross reducers, apply_node_func
class HeteroAttention(nn.Module):
    def __init__(self, G):
        super().__init__()
        self.fc = nn.ModuleDict({nt: nn.Linear(HETERO_DIM, 4) for nt in G.ntypes})
        self.attn = nn.ParameterDict({e: nn.Parameter(torch.randn(8)) for e in G.etypes})
        self.out = nn.Linear(4, 4)

    def forward(self, G, h, cross="stack"):
        with G.local_scope():
            for nt in G.ntypes:
                G.nodes[nt].data["z"] = self.fc[nt](h[nt])
            funcs = {}
            for s, e, d in G.canonical_etypes:
                a = self.attn[e]

                def edge_attention(edges, a=a):
                    z2 = torch.cat([edges.src["z"], edges.dst["z"]], dim=1)
                    return {"e": F.leaky_relu((z2 * a).sum(-1, keepdim=True), 0.2), "z": edges.src["z"]}

                def reduce(nodes):
                    alpha = torch.softmax(nodes.mailbox["e"], dim=1)
                    return {"h": torch.sum(alpha * nodes.mailbox["z"], dim=1)}

                funcs[e] = (edge_attention, reduce)
            apply = lambda nodes: (
                {"h": F.elu(self.out(nodes.data["h"]))} if cross != "stack" else {"h": nodes.data["h"] * 2}
            )
            G.multi_update_all(funcs, cross, apply)
            return {nt: G.nodes[nt].data["h"] for nt in G.ntypes if "h" in G.nodes[nt].data}


class HeteroAttentionNet(nn.Module):
    def __init__(self, G):
        super().__init__()
        self.a, self.b = HeteroAttention(G), HeteroAttention(G)

    def forward(self, G, h):
        return self.a(G, h, "stack"), self.b(G, h, "min")


# ---- SAGE on a bipartite graph through srcdata/dstdata
class BipartiteSAGE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc_self = nn.Linear(HETERO_DIM, 4)
        self.fc_neigh = nn.Linear(HETERO_DIM, 4)
        self.fc_e = nn.Linear(1, HETERO_DIM)

    def forward(self, g, h_user, h_game, w):
        with g.local_scope():
            g.srcdata["h"] = h_user
            g.dstdata["h"] = h_game
            g.edges["plays"].data["w"] = w
            g.update_all(
                lambda edges: {"m": edges.src["h"] * torch.sigmoid(self.fc_e(edges.data["w"]))},
                fn.mean("m", "neigh"),
                etype="plays",
            )
            return self.fc_self(g.dstdata["h"]) + self.fc_neigh(g.dstdata["neigh"])


# ---- hetero GCN: u_mul_e per relation, 'stack', HAN-style semantic attention
class HeteroGCNSemanticAttention(nn.Module):
    def __init__(self, G):
        super().__init__()
        self.W = nn.ModuleDict({e: nn.Linear(HETERO_DIM, 4, bias=False) for e in G.etypes})
        self.canon = G.canonical_etypes
        self.sem = nn.Linear(4, 1)

    def forward(self, G, feats):
        with G.local_scope():
            funcs = {}
            for s, e, d in self.canon:
                G.nodes[s].data["Wh_" + e] = self.W[e](feats[s])
                sd = G.out_degrees(etype=(s, e, d)).double().clamp(min=1).pow(-0.5)
                dd = G.in_degrees(etype=(s, e, d)).double().clamp(min=1).pow(-0.5)
                su, dv = G.edges(etype=(s, e, d))
                G.edges[(s, e, d)].data["norm"] = (sd[su] * dd[dv]).unsqueeze(1)
                funcs[(s, e, d)] = (fn.u_mul_e("Wh_" + e, "norm", "m"), fn.sum("m", "h"))
            G.multi_update_all(funcs, "stack")
            out = {}
            for nt in G.ntypes:
                if "h" in G.nodes[nt].data:
                    z = G.nodes[nt].data["h"]  # [N, relations, F]
                    beta = torch.softmax(self.sem(torch.tanh(z)).mean(0), dim=0)
                    out[nt] = (beta.unsqueeze(0) * z).sum(1)
            return out

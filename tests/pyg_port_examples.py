"""PyG layers ported to DGL-style UDFs the way PyG users port them: ``x_i`` / ``x_j`` as ``edges.dst`` /
``edges.src``, the aggregation as a reduce over the mailbox, parameters used inside the UDFs.

Used by ``tests/test_dgl_examples.py``. Covers what DGL's own examples do not:
a learned softmax temperature and power mean in the reduce (``1.0 / self.p``,
a number left of a parameter), a GRU cell as the node update, a split of a
FiLM projection, TransformerConv's heads with a gated root weight, and
PointNet's relative positions.
"""

import math

import torch
from torch import nn
from torch.nn import functional as F

import gnnc.function as fn

from .dgl_examples import IN_DIM


class GENConv(nn.Module):
    """Softmax aggregation with a learned temperature t (PyG's GENConv, aggr='softmax', learn_t=True)."""

    def __init__(self):
        super().__init__()
        self.t = nn.Parameter(torch.tensor(1.5))
        self.mlp = nn.Sequential(nn.Linear(IN_DIM, 2 * IN_DIM), nn.ReLU(), nn.Linear(2 * IN_DIM, IN_DIM))

    def message(self, edges):
        return {"m": F.relu(edges.src["x"] + edges.data["e"]) + 1e-7}

    def reduce(self, nodes):
        m = nodes.mailbox["m"]
        alpha = torch.softmax(m * self.t, dim=1)
        return {"agg": (alpha * m).sum(dim=1)}

    def forward(self, g, x, e):
        with g.local_scope():
            g.ndata["x"] = x
            g.edata["e"] = e
            g.update_all(self.message, self.reduce)
            return self.mlp(g.ndata["agg"] + x)


class PowerMeanConv(nn.Module):
    """PyG's PowerMeanAggregation with a learned p: mean of m**p, then the 1/p-th power."""

    def __init__(self):
        super().__init__()
        self.p = nn.Parameter(torch.tensor(2.0))

    def forward(self, g, x):
        def reduce(nodes):
            m = nodes.mailbox["m"].clamp(min=0, max=100)
            return {"h": m.pow(self.p).mean(dim=1).pow(1.0 / self.p)}

        with g.local_scope():
            g.ndata["x"] = torch.sigmoid(x)
            g.update_all(fn.copy_u("x", "m"), reduce)
            return g.ndata["h"]


class PointNetConv(nn.Module):
    """local_nn([x_j, pos_j - pos_i]), max-aggregated (PyG's PointNetConv), positions from the features."""

    def __init__(self):
        super().__init__()
        self.local_nn = nn.Sequential(nn.Linear(IN_DIM + 3, IN_DIM), nn.ReLU())

    def forward(self, g, x):
        g.ndata["x"] = x
        g.ndata["pos"] = x[:, :3] * 0.5
        g.apply_edges(
            lambda edges: {
                "msg": self.local_nn(torch.cat([edges.src["x"], edges.src["pos"] - edges.dst["pos"]], dim=-1))
            }
        )
        g.update_all(fn.copy_e("msg", "m"), fn.max("m", "h"))
        return g.ndata.pop("h")


class GatedGraphConv(nn.Module):
    """Two steps of a sum of linear messages and a GRU cell as the node update (PyG's GatedGraphConv)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(IN_DIM, IN_DIM, bias=False)
        self.rnn = nn.GRUCell(IN_DIM, IN_DIM)

    def forward(self, g, x):
        with g.local_scope():
            g.ndata["h"] = x
            for _ in range(2):
                g.ndata["Wh"] = self.lin(g.ndata["h"])
                g.update_all(
                    fn.copy_u("Wh", "m"),
                    fn.sum("m", "a"),
                    lambda nodes: {"h": self.rnn(nodes.data["a"], nodes.data["h"])},
                )
            return g.ndata["h"]


class FiLMConv(nn.Module):
    """beta, gamma = film(x_i).split(...); relu(gamma * lin(x_j) + beta), mean-aggregated (PyG's FiLMConv)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(IN_DIM, IN_DIM, bias=False)
        self.film = nn.Linear(IN_DIM, 2 * IN_DIM)

    def message(self, edges):
        beta, gamma = self.film(edges.dst["x"]).split(IN_DIM, dim=-1)
        return {"m": F.relu(gamma * self.lin(edges.src["x"]) + beta)}

    def forward(self, g, x):
        g.ndata["x"] = x
        g.update_all(self.message, lambda nodes: {"h": nodes.mailbox["m"].mean(1)})
        return g.ndata["h"]


class TransformerConv(nn.Module):
    """Multi-head scaled dot-product attention with a gated root weight (PyG's TransformerConv, beta=True)."""

    heads, channels = 2, 3

    def __init__(self):
        super().__init__()
        width = self.heads * self.channels
        self.query, self.key, self.value = (nn.Linear(IN_DIM, width) for _ in range(3))
        self.lin_skip = nn.Linear(IN_DIM, width)
        self.lin_beta = nn.Linear(3 * width, 1, bias=False)

    def forward(self, g, x):
        H, C = self.heads, self.channels
        g.ndata["q"] = self.query(x).view(-1, H, C)
        g.ndata["k"] = self.key(x).view(-1, H, C)
        g.ndata["v"] = self.value(x).view(-1, H, C)

        def message(edges):
            return {"a": (edges.dst["q"] * edges.src["k"]).sum(dim=-1) / math.sqrt(C), "v": edges.src["v"]}

        def reduce(nodes):
            alpha = F.softmax(nodes.mailbox["a"], dim=1)
            return {"o": (alpha.unsqueeze(-1) * nodes.mailbox["v"]).sum(dim=1)}

        g.update_all(message, reduce)
        out = g.ndata["o"].reshape(-1, H * C)
        root = self.lin_skip(x)
        beta = torch.sigmoid(self.lin_beta(torch.cat([out, root, out - root], dim=-1)))
        return beta * root + (1 - beta) * out


class LearnedTeleport(nn.Module):
    """APPNP-style propagation with a learned teleport alpha: (1 - alpha) * agg + alpha * h0 in the update."""

    def __init__(self):
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor(0.2))

    def forward(self, g, x):
        deg = g.in_degrees().float().clamp(min=1)
        g.ndata["norm"] = torch.pow(deg, -0.5).unsqueeze(1)
        g.ndata["h"], g.ndata["h0"] = x, x
        for _ in range(2):
            g.update_all(
                lambda edges: {"m": edges.src["h"] * edges.src["norm"]},
                fn.sum("m", "agg"),
                lambda nodes: {
                    "h": (1 - self.alpha) * nodes.data["agg"] * nodes.data["norm"] + self.alpha * nodes.data["h0"]
                },
            )
        return g.ndata["h"]


class LEConv(nn.Module):
    """edge_weight * (lin1(x_i) - lin2(x_j)), summed, plus lin3(x) (PyG's LEConv)."""

    def __init__(self):
        super().__init__()
        self.lin1, self.lin2, self.lin3 = (
            nn.Linear(IN_DIM, IN_DIM),
            nn.Linear(IN_DIM, IN_DIM, bias=False),
            nn.Linear(IN_DIM, IN_DIM),
        )

    def forward(self, g, x, e):
        g.ndata["a"], g.ndata["b"] = self.lin1(x), self.lin2(x)
        g.edata["w"] = e[:, :1]
        g.update_all(lambda edges: {"m": edges.data["w"] * (edges.dst["a"] - edges.src["b"])}, fn.sum("m", "agg"))
        return g.ndata["agg"] + self.lin3(x)


class GatedAttentionReadout(nn.Module):
    """A softmax gate over the mailbox, a standard deviation and a min, concatenated (aggregators side by side)."""

    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(IN_DIM, 1)

    def forward(self, g, x):
        def reduce(nodes):
            m = nodes.mailbox["m"]
            gate = torch.softmax(self.gate(m), dim=1)
            std = torch.sqrt(torch.relu(m.pow(2).mean(1) - m.mean(1).pow(2)) + 1e-5)
            return {"h": torch.cat([(gate * m).sum(1), std, m.min(dim=1).values], dim=-1)}

        g.ndata["x"] = x
        g.update_all(fn.copy_u("x", "m"), reduce)
        return g.ndata["h"]

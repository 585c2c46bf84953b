"""DGL's ``PNAConv`` (Corso et al., 2020, principal neighbourhood aggregation) with its constructor,
parameters and numbers."""

from __future__ import annotations

import math

import torch
from torch import nn


def _mean(msg):
    return msg.mean(dim=1)


def _var(msg):
    """E[m^2] - E[m]^2, clipped at 0 against rounding."""
    mean = msg.mean(dim=1)
    return torch.relu((msg * msg).mean(dim=1) - mean * mean)


def _moment(n):
    """The n-th central moment's signed n-th root, (E[(m - E[m])^n])^(1/n)."""

    def aggregate(msg):
        central = (msg - msg.mean(dim=1, keepdim=True)).pow(n).mean(dim=1)
        return torch.sign(central) * (central.abs() + 1e-30).pow(1.0 / n)

    return aggregate


# each maps a mailbox [nodes, degree, features] to [nodes, features]
AGGREGATORS = {
    "mean": _mean,
    "sum": lambda msg: msg.sum(dim=1),
    "max": lambda msg: msg.max(dim=1)[0],
    "min": lambda msg: msg.min(dim=1)[0],
    "std": lambda msg: torch.sqrt(_var(msg) + 1e-30),
    "var": _var,
    "moment3": _moment(3),
    "moment4": _moment(4),
    "moment5": _moment(5),
}

# each scales an aggregate by the node's in-degree d and the layer's delta
SCALERS = {
    "identity": lambda h, degree, delta: h,
    "amplification": lambda h, degree, delta: h * (math.log(degree + 1) / delta),
    "attenuation": lambda h, degree, delta: h * (delta / math.log(degree + 1)),
}


class PNAConvTower(nn.Module):
    """One tower of DGL's PNA layer, on its slice of the features:

        m_uv  = M([h_u, h_v, e_uv])
        out_v = dropout( BN( U([h_v, scaler(agg_{u->v} m_uv) for scaler, agg]) / sqrt(N_graph) ) )

    A node without in-edges aggregates zeros. ``N_graph`` is the node count of the node's graph in a batch.
    """

    def __init__(self, in_size, out_size, aggregators, scalers, delta, dropout=0.0, edge_feat_size=0):
        super().__init__()
        self.in_size, self.out_size = in_size, out_size
        self.aggregators, self.scalers, self.delta = aggregators, scalers, delta
        self.edge_feat_size = edge_feat_size
        self.M = nn.Linear(2 * in_size + edge_feat_size, in_size)
        self.U = nn.Linear((len(aggregators) * len(scalers) + 1) * in_size, out_size)
        self.dropout = nn.Dropout(dropout)
        self.batchnorm = nn.BatchNorm1d(out_size)

    def message(self, edges):
        parts = [edges.src["h"], edges.dst["h"]]
        if self.edge_feat_size > 0:
            parts.append(edges.data["a"])
        return {"msg": self.M(torch.cat(parts, dim=-1))}

    def aggregate(self, nodes):
        """The aggregates of ``nodes``' mailbox, in ``self.aggregators``' order."""
        return [AGGREGATORS[name](nodes.mailbox["msg"]) for name in self.aggregators]

    def reduce_func(self, nodes):
        h = torch.cat(self.aggregate(nodes), dim=1)
        degree = nodes.mailbox["msg"].shape[1]
        return {"h_neigh": torch.cat([SCALERS[name](h, degree, self.delta) for name in self.scalers], dim=1)}

    def forward(self, graph, node_feat, edge_feat=None):
        snorm = torch.cat([torch.full((int(n), 1), 1.0 / int(n)).to(node_feat) for n in graph.batch_num_nodes()]).sqrt()
        with graph.local_scope():
            graph.ndata["h"] = node_feat
            if self.edge_feat_size > 0:
                assert edge_feat is not None, "Edge features must be provided."
                graph.edata["a"] = edge_feat
            graph.update_all(self.message, self.reduce_func)
            h = self.U(torch.cat([node_feat, graph.ndata["h_neigh"]], dim=-1)) * snorm
            return self.dropout(self.batchnorm(h))


class PNAConv(nn.Module):
    """Principal neighbourhood aggregation, DGL 2.1's ``PNAConv``: ``num_towers`` towers
    (``PNAConvTower``), each on its slice of the input features, concatenated and mixed:

        out = LeakyReLU( mixing_layer([tower_1, ..., tower_T]) ) (+ node_feat with ``residual``)

    ``residual`` holds only when ``in_size == out_size``. Parameters as DGL's (``towers.<i>.M``, ``.U``,
    ``.batchnorm``, ``mixing_layer.0``).
    """

    def __init__(
        self, in_size, out_size, aggregators, scalers, delta, dropout=0.0, num_towers=1, edge_feat_size=0, residual=True
    ):
        super().__init__()
        assert in_size % num_towers == 0, "in_size must be divisible by num_towers"
        assert out_size % num_towers == 0, "out_size must be divisible by num_towers"
        self.in_size, self.out_size = in_size, out_size
        self.tower_in_size, self.tower_out_size = in_size // num_towers, out_size // num_towers
        self.edge_feat_size = edge_feat_size
        self.residual = residual and in_size == out_size
        self.towers = nn.ModuleList(
            [
                PNAConvTower(
                    self.tower_in_size,
                    self.tower_out_size,
                    aggregators,
                    scalers,
                    delta,
                    dropout=dropout,
                    edge_feat_size=edge_feat_size,
                )
                for _ in range(num_towers)
            ]
        )
        self.mixing_layer = nn.Sequential(nn.Linear(out_size, out_size), nn.LeakyReLU())

    def forward(self, graph, node_feat, edge_feat=None):
        width = self.tower_in_size
        h = torch.cat(
            [tower(graph, node_feat[:, i * width : (i + 1) * width], edge_feat) for i, tower in enumerate(self.towers)],
            dim=1,
        )
        h = self.mixing_layer(h)
        return h + node_feat if self.residual else h

"""DGL's ``DGNConv`` (directional graph networks, Beaini et al., 2021): PNA with directional aggregators
along Laplacian eigenvectors, with DGL 2.1's constructor, parameters and numbers."""

from __future__ import annotations

import torch
from torch import nn

from .pnaconv import AGGREGATORS, PNAConv, PNAConvTower


def _direction(nodes, k: int, signed: bool):
    """The field along eigenvector ``k`` on each in-edge, ``F_uv / (sum_u |F_uv| + 1e-30)`` with
    ``F_uv = eig_u[k] - eig_v[k]`` (``|F_uv|`` in the numerator unless ``signed``): ``[nodes, degree, 1]``."""
    field = nodes.mailbox["eig_s"][:, :, k] - nodes.mailbox["eig_d"][:, :, k]
    scale = field.abs().sum(dim=1, keepdim=True) + 1e-30
    return ((field if signed else field.abs()) / scale).unsqueeze(-1)


def _directional(name: str, nodes):
    """``dir<k>-av``: sum_u w_uv m_uv with w = |F| / |F|_1; ``dir<k>-dx``: |sum_u w_uv m_uv - h_v sum_u w_uv|
    with the signed field."""
    k, kind = int(name[3]) - 1, name[5:]
    msg = nodes.mailbox["msg"]
    weight = _direction(nodes, k, signed=kind == "dx")
    average = (msg * weight).sum(dim=1)
    return average if kind == "av" else torch.abs(average - weight.sum(dim=1) * nodes.data["h"])


class DGNConvTower(PNAConvTower):
    """A PNA tower whose messages also carry both ends' eigenvectors (``eig``), for the directional
    aggregators ``dir<k>-av`` / ``dir<k>-dx`` (k in 1, 2, 3)."""

    def message(self, edges):
        return {**super().message(edges), "eig_s": edges.src["eig"], "eig_d": edges.dst["eig"]}

    def aggregate(self, nodes):
        return [
            _directional(name, nodes) if name.startswith("dir") else AGGREGATORS[name](nodes.mailbox["msg"])
            for name in self.aggregators
        ]


class DGNConv(PNAConv):
    """Directional graph network layer, DGL 2.1's ``DGNConv``: ``PNAConv`` whose towers also aggregate along
    the graph's Laplacian eigenvectors (``eig_vec``, ``[N, k]``, e.g. from ``LapPE``) with the ``dir<k>-av``
    and ``dir<k>-dx`` aggregators. Same parameters as ``PNAConv``."""

    def __init__(
        self, in_size, out_size, aggregators, scalers, delta, dropout=0.0, num_towers=1, edge_feat_size=0, residual=True
    ):
        super().__init__(in_size, out_size, aggregators, scalers, delta, dropout, num_towers, edge_feat_size, residual)
        # DGL builds PNA's towers first, then these (the random initialisation draws in the same order)
        self.towers = nn.ModuleList(
            [
                DGNConvTower(
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
        self.use_eig_vec = any(name.startswith("dir") for name in aggregators)

    def forward(self, graph, node_feat, edge_feat=None, eig_vec=None):
        with graph.local_scope():
            if self.use_eig_vec:
                graph.ndata["eig"] = eig_vec
            return super().forward(graph, node_feat, edge_feat)

"""DGL's graph readout modules (``dgl.nn.pytorch.glob``): one row per graph of a batch."""

from __future__ import annotations

import torch
from torch import nn

from ..readout import (
    broadcast_nodes,
    max_nodes,
    mean_nodes,
    softmax_nodes,
    sum_nodes,
    topk_nodes,
)
from .set_transformer import (  # DGL keeps them here
    SetTransformerDecoder,
    SetTransformerEncoder,
)

__all__ = [
    "AvgPooling",
    "GlobalAttentionPooling",
    "MaxPooling",
    "Set2Set",
    "SetTransformerDecoder",
    "SetTransformerEncoder",
    "SortPooling",
    "SumPooling",
]


class _Pooling(nn.Module):
    """``readout(graph, feat)`` of each graph's node rows, ``[batch_size, *]``."""

    readout = None

    def forward(self, graph, feat):
        with graph.local_scope():
            graph.ndata["h"] = feat
            return self.readout(graph, "h")


class SumPooling(_Pooling):
    """Sum of each graph's node features (DGL's ``SumPooling``)."""

    readout = staticmethod(sum_nodes)


class AvgPooling(_Pooling):
    """Mean of each graph's node features (DGL's ``AvgPooling``)."""

    readout = staticmethod(mean_nodes)


class MaxPooling(_Pooling):
    """Elementwise maximum of each graph's node features (DGL's ``MaxPooling``)."""

    readout = staticmethod(max_nodes)


class SortPooling(nn.Module):
    """DGL's ``SortPooling``: each node's features sorted ascending, then each graph's ``k`` nodes with the
    largest last feature, flattened to ``[batch_size, k * width]`` (zero rows where a graph has fewer)."""

    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, graph, feat):
        with graph.local_scope():
            feat, _ = feat.sort(dim=-1)
            graph.ndata["h"] = feat
            return topk_nodes(graph, "h", self.k, sortby=-1)[0].view(-1, self.k * feat.shape[-1])


class GlobalAttentionPooling(nn.Module):
    """DGL's ``GlobalAttentionPooling``: ``sum_v softmax_v(gate_nn(x_v)) feat_nn(x_v)`` per graph, the softmax
    over each graph's nodes (``feat_nn`` the identity when None); with ``get_attention`` also the gates."""

    def __init__(self, gate_nn, feat_nn=None):
        super().__init__()
        self.gate_nn, self.feat_nn = gate_nn, feat_nn

    def forward(self, graph, feat, get_attention=False):
        with graph.local_scope():
            gate = self.gate_nn(feat)
            assert gate.shape[-1] == 1, "The output of gate_nn should have size 1 at the last axis."
            feat = self.feat_nn(feat) if self.feat_nn else feat
            graph.ndata["gate"] = gate
            gate = softmax_nodes(graph, "gate")
            graph.ndata["r"] = feat * gate
            readout = sum_nodes(graph, "r")
            return (readout, gate) if get_attention else readout


class Set2Set(nn.Module):
    """DGL's ``Set2Set`` (Vinyals et al., 2015): ``n_iters`` steps of an ``n_layers`` LSTM whose query
    attends over each graph's nodes; returns ``[batch_size, 2 * input_dim]``. Parameter ``lstm`` as DGL's."""

    def __init__(self, input_dim, n_iters, n_layers):
        super().__init__()
        self.input_dim, self.output_dim = input_dim, 2 * input_dim
        self.n_iters, self.n_layers = n_iters, n_layers
        self.lstm = nn.LSTM(self.output_dim, self.input_dim, n_layers)
        self.reset_parameters()

    def reset_parameters(self):
        self.lstm.reset_parameters()

    def forward(self, graph, feat):
        with graph.local_scope():
            batch_size = graph.batch_size
            state = feat.new_zeros((self.n_layers, batch_size, self.input_dim))
            h = (state, state)
            q_star = feat.new_zeros(batch_size, self.output_dim)
            for _ in range(self.n_iters):
                q, h = self.lstm(q_star.unsqueeze(0), h)
                q = q.view(batch_size, self.input_dim)
                graph.ndata["e"] = (feat * broadcast_nodes(graph, q)).sum(dim=-1, keepdim=True)
                graph.ndata["r"] = feat * softmax_nodes(graph, "e")
                q_star = torch.cat([q, sum_nodes(graph, "r")], dim=-1)
            return q_star

    def extra_repr(self):
        return f"n_iters={self.n_iters}"

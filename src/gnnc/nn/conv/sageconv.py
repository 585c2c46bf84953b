"""DGL's ``SAGEConv`` (Hamilton et al., 2017) with its constructor, parameters and numbers."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ... import function as fn
from ...dgl_base import DGLError
from .common import copy_or_weighted, expand_as_pair, in_degrees, is_block

_AGGREGATORS = {"mean", "gcn", "pool", "lstm"}


class SAGEConv(nn.Module):
    """GraphSAGE, DGL 2.1's ``SAGEConv``. With ``h = feat_drop(x)`` and ``w_e = edge_weight`` (1 without):

        mean:  n_v = fc_neigh( mean_{u->v} w_e h_u )
        gcn:   n_v = fc_neigh( (sum_{u->v} w_e h_u + h_v) / (in_deg(v) + 1) )
        pool:  n_v = fc_neigh( max_{u->v} w_e ReLU(fc_pool(h_u)) )
        lstm:  n_v = fc_neigh( last hidden state of an LSTM over v's messages, in DGL's mailbox order )
        out_v = norm( act( fc_self(h_v) + n_v ) )     (gcn: n_v + bias, no fc_self)

    Parameters as DGL's (``fc_self`` carries the bias, except for gcn's ``bias``), so DGL state dicts load;
    a node without in-edges has ``n_v = fc_neigh(0)``. ``feat`` may be a ``(source, destination)`` pair.
    """

    def __init__(self, in_feats, out_feats, aggregator_type, feat_drop=0.0, bias=True, norm=None, activation=None):
        super().__init__()
        if aggregator_type not in _AGGREGATORS:
            raise DGLError(
                f"Invalid aggregator_type. Must be one of {_AGGREGATORS}. But got {aggregator_type!r} instead."
            )
        self._in_src_feats, self._in_dst_feats = in_feats if isinstance(in_feats, tuple) else (in_feats, in_feats)
        self._out_feats, self._aggre_type = out_feats, aggregator_type
        self.norm, self.activation = norm, activation
        self.feat_drop = nn.Dropout(feat_drop)
        if aggregator_type == "pool":
            self.fc_pool = nn.Linear(self._in_src_feats, self._in_src_feats)
        if aggregator_type == "lstm":
            self.lstm = nn.LSTM(self._in_src_feats, self._in_src_feats, batch_first=True)
        self.fc_neigh = nn.Linear(self._in_src_feats, out_feats, bias=False)
        if aggregator_type != "gcn":
            self.fc_self = nn.Linear(self._in_dst_feats, out_feats, bias=bias)
        elif bias:
            self.bias = nn.Parameter(torch.zeros(out_feats))
        else:
            self.register_buffer("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        gain = nn.init.calculate_gain("relu")
        if self._aggre_type == "pool":
            nn.init.xavier_uniform_(self.fc_pool.weight, gain=gain)
        if self._aggre_type == "lstm":
            self.lstm.reset_parameters()
        if self._aggre_type != "gcn":
            nn.init.xavier_uniform_(self.fc_self.weight, gain=gain)
        nn.init.xavier_uniform_(self.fc_neigh.weight, gain=gain)

    def _lstm_reducer(self, nodes):
        m = nodes.mailbox["m"]  # [nodes, degree, width]
        state = m.new_zeros((1, m.shape[0], self._in_src_feats))
        _, (last, _) = self.lstm(m, (state, state))
        return {"neigh": last.squeeze(0)}

    def forward(self, graph, feat, edge_weight=None):
        with graph.local_scope():
            if isinstance(feat, tuple):
                feat_src, feat_dst = self.feat_drop(feat[0]), self.feat_drop(feat[1])
            else:
                feat_src, feat_dst = expand_as_pair(self.feat_drop(feat), graph)
            message = copy_or_weighted(graph, edge_weight)
            if graph.num_edges() == 0:  # the reducers below leave no "neigh" on a graph without edges
                graph.dstdata["neigh"] = torch.zeros(feat_dst.shape[0], self._in_src_feats).to(feat_dst)
            h_neigh = getattr(self, f"_{self._aggre_type}")(graph, feat, feat_src, feat_dst, message)
            if self._aggre_type == "gcn":
                rst = h_neigh if self.bias is None else h_neigh + self.bias
            else:
                rst = self.fc_self(feat_dst) + h_neigh
            if self.activation is not None:
                rst = self.activation(rst)
            if self.norm is not None:
                rst = self.norm(rst)
            return rst

    def _linear_first(self) -> bool:
        """DGL applies ``fc_neigh`` before aggregating when that narrows the features."""
        return self._in_src_feats > self._out_feats

    def _mean(self, graph, feat, feat_src, feat_dst, message):
        graph.srcdata["h"] = self.fc_neigh(feat_src) if self._linear_first() else feat_src
        graph.update_all(message, fn.mean("m", "neigh"))
        h_neigh = graph.dstdata["neigh"]
        return h_neigh if self._linear_first() else self.fc_neigh(h_neigh)

    def _gcn(self, graph, feat, feat_src, feat_dst, message):
        if isinstance(feat, tuple) and feat[0].shape[1:] != feat[1].shape[1:]:
            raise DGLError(
                f"The feature shape of source nodes: {feat[0].shape[1:]} should be equal to the "
                f"feature shape of destination nodes: {feat[1].shape[1:]}."
            )
        graph.srcdata["h"] = self.fc_neigh(feat_src) if self._linear_first() else feat_src
        if isinstance(feat, tuple):
            graph.dstdata["h"] = self.fc_neigh(feat_dst) if self._linear_first() else feat_dst
        else:
            graph.dstdata["h"] = graph.srcdata["h"][: graph.num_dst_nodes()] if is_block(graph) else graph.srcdata["h"]
        graph.update_all(message, fn.sum("m", "neigh"))
        degrees = in_degrees(graph).to(feat_dst)
        h_neigh = (graph.dstdata["neigh"] + graph.dstdata["h"]) / (degrees.unsqueeze(-1) + 1)
        return h_neigh if self._linear_first() else self.fc_neigh(h_neigh)

    def _pool(self, graph, feat, feat_src, feat_dst, message):
        graph.srcdata["h"] = F.relu(self.fc_pool(feat_src))
        graph.update_all(message, fn.max("m", "neigh"))
        return self.fc_neigh(graph.dstdata["neigh"])

    def _lstm(self, graph, feat, feat_src, feat_dst, message):
        graph.srcdata["h"] = feat_src
        graph.update_all(message, self._lstm_reducer)
        return self.fc_neigh(graph.dstdata["neigh"])

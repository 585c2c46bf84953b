"""Small modules of DGL's ``dgl.nn.pytorch.utils``."""

import torch
from torch import nn

from ..graph.core import Graph
from .label_propagation import LabelPropagation

__all__ = ["Identity", "JumpingKnowledge", "LabelPropagation", "Sequential"]


class Identity(nn.Module):
    """Returns its input (DGL's ``Identity``; a residual connection that needs no projection)."""

    def forward(self, x):
        return x


class Sequential(nn.Sequential):
    """DGL's ``Sequential``: modules called in turn as ``module(graph, *feats)``, each one's output (a tuple
    spreads over the next one's arguments) the next one's input. ``graph`` is one graph for every module or
    a list, the i-th module getting the i-th graph."""

    def forward(self, graph, *feats):
        if isinstance(graph, list):
            pairs = zip(graph, self)
        elif isinstance(graph, Graph):
            pairs = ((graph, module) for module in self)
        else:
            raise TypeError("The first argument of forward must be a DGLGraph or a list of DGLGraph s")
        for graph_i, module in pairs:
            feats = module(graph_i, *(feats if isinstance(feats, tuple) else (feats,)))
        return feats


class JumpingKnowledge(nn.Module):
    """DGL's ``JumpingKnowledge`` (Xu et al., 2018): a list of per-layer node representations combined by
    ``"cat"`` (concatenated), ``"max"`` (element-wise maximum) or ``"lstm"`` (attention weights per node and
    layer from a bidirectional LSTM over the layers, ``lstm`` and ``att`` as DGL names them, hidden size
    ``num_layers * in_feats // 2``)."""

    def __init__(self, mode="cat", in_feats=None, num_layers=None):
        super().__init__()
        assert mode in ("cat", "max", "lstm"), f"Expect mode to be 'cat', or 'max' or 'lstm', got {mode}"
        self.mode = mode
        if mode == "lstm":
            assert in_feats is not None, "in_feats is required for lstm mode"
            assert num_layers is not None, "num_layers is required for lstm mode"
            hidden = (num_layers * in_feats) // 2
            self.lstm = nn.LSTM(in_feats, hidden, bidirectional=True, batch_first=True)
            self.att = nn.Linear(2 * hidden, 1)

    def reset_parameters(self):
        """The LSTM's and the attention's own resets (the other modes have no parameters)."""
        if self.mode == "lstm":
            self.lstm.reset_parameters()
            self.att.reset_parameters()

    def forward(self, feat_list):
        if self.mode == "cat":
            return torch.cat(feat_list, dim=-1)
        if self.mode == "max":
            return torch.stack(feat_list, dim=-1).max(dim=-1)[0]
        stacked = torch.stack(feat_list, dim=1)  # [nodes, layers, in_feats]
        alpha = torch.softmax(self.att(self.lstm(stacked)[0]).squeeze(-1), dim=-1)
        return (stacked * alpha.unsqueeze(-1)).sum(dim=1)

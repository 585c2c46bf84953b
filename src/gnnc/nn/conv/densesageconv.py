"""DGL's ``DenseSAGEConv``: GraphSAGE's ``gcn`` aggregation over a dense adjacency matrix, with DGL 2.1's
constructor, parameters and numbers."""

from __future__ import annotations

from torch import nn


class DenseSAGEConv(nn.Module):
    """``SAGEConv(..., "gcn")`` on ``adj`` (``[destinations, sources]``):

        out = norm( act( fc( (adj x_src + x_dst) / (deg + 1) ) ) )

    ``deg`` is the row sum; ``feat`` is one tensor or a ``(source, destination)`` pair of the same feature shape, each
    through ``feat_drop``. ``fc`` is the ``nn.Linear`` DGL names so; ``norm`` a callable applied last.
    """

    def __init__(self, in_feats, out_feats, feat_drop=0.0, bias=True, norm=None, activation=None):
        super().__init__()
        self._in_feats, self._out_feats, self._norm = in_feats, out_feats, norm
        self.feat_drop = nn.Dropout(feat_drop)
        self.activation = activation
        self.fc = nn.Linear(in_feats, out_feats, bias=bias)
        self.reset_parameters()

    def reset_parameters(self):
        """Xavier-uniform ``fc.weight`` with ReLU's gain, as DGL's (the bias keeps ``nn.Linear``'s start)."""
        nn.init.xavier_uniform_(self.fc.weight, gain=nn.init.calculate_gain("relu"))

    def forward(self, adj, feat):
        if isinstance(feat, tuple):
            if feat[0].shape[1:] != feat[1].shape[1:]:
                raise ValueError(
                    "The source and destination features of DenseSAGEConv must have the same feature "
                    f"shape, got {tuple(feat[0].shape[1:])} and {tuple(feat[1].shape[1:])}"
                )
            src, dst = self.feat_drop(feat[0]), self.feat_drop(feat[1])
        else:
            src = dst = self.feat_drop(feat)
        adj = adj.to(src)
        out = self.fc((adj @ src + dst) / (adj.sum(dim=1, keepdim=True) + 1))
        if self.activation is not None:
            out = self.activation(out)
        return out if self._norm is None else self._norm(out)

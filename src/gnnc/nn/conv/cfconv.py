"""DGL's ``CFConv`` (SchNet's continuous-filter convolution, Schütt et al., 2017) with its constructor,
parameters and numbers."""

from __future__ import annotations

import math

from torch import nn

from ... import function as fn


class ShiftedSoftplus(nn.Module):
    """``softplus(x) - log(shift)``, DGL's ``ShiftedSoftplus`` (softplus with ``beta`` and ``threshold``)."""

    def __init__(self, beta=1, shift=2, threshold=20):
        super().__init__()
        self.shift = shift
        self.softplus = nn.Softplus(beta=beta, threshold=threshold)

    def forward(self, inputs):
        return self.softplus(inputs) - math.log(float(self.shift))


class CFConv(nn.Module):
    """Continuous-filter convolution, DGL 2.1's ``CFConv``:

        out_v = ssp( project_out( sum_{u->v} project_node(x_u) * project_edge(e_uv) ) )

    ``project_edge`` is Linear, ssp, Linear, ssp; ``project_out`` Linear, ssp (ssp: ``ShiftedSoftplus``), under
    DGL's parameter names. ``node_feats`` may be a ``(source, destination)`` pair (the destination unused).
    """

    def __init__(self, node_in_feats, edge_in_feats, hidden_feats, out_feats):
        super().__init__()
        self.project_edge = nn.Sequential(
            nn.Linear(edge_in_feats, hidden_feats),
            ShiftedSoftplus(),
            nn.Linear(hidden_feats, hidden_feats),
            ShiftedSoftplus(),
        )
        self.project_node = nn.Linear(node_in_feats, hidden_feats)
        self.project_out = nn.Sequential(nn.Linear(hidden_feats, out_feats), ShiftedSoftplus())

    def forward(self, g, node_feats, edge_feats):
        with g.local_scope():
            node_src = node_feats[0] if isinstance(node_feats, tuple) else node_feats
            g.srcdata["hv"] = self.project_node(node_src)
            g.edata["he"] = self.project_edge(edge_feats)
            g.update_all(fn.u_mul_e("hv", "he", "m"), fn.sum("m", "h"))
            return self.project_out(g.dstdata["h"])

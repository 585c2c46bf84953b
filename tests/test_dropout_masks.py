"""Compiled training draws eager's dropout masks under ``torch.use_deterministic_algorithms(True)`` (issue 45).

A lowered reduce UDF runs its dropout once over all edges where eager draws one mask per degree bucket;
with determinism on, the plan draws bucket by bucket in eager's order (``runtime.bucket_order``).
"""

import warnings

import pytest
import torch
from torch import nn

import gnnc
from gnnc import models
from gnnc.compiler import driver as compiled
from gnnc.ir import operators as ops
from tests.graphs import random_homograph


def _train_step(model, g, x, seed):
    """Output and parameter gradients of one step in train mode from random state ``seed``; the plans run."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    with warnings.catch_warnings(), compiled.recording() as plans:
        warnings.simplefilter("error", gnnc.FallbackWarning)
        out = model(g, x)
    out.square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    return out.detach(), grads, {n.target for p in plans for n in p.dfg.graph.nodes}


@pytest.mark.usefixtures("eager_dropout_masks")
def test_gat_in_train_mode_draws_eager_masks_under_determinism():
    g = random_homograph(60, 300, 0)
    x = torch.randn(60, 16, dtype=torch.float64)
    torch.manual_seed(0)
    model = models.GAT(16, 8, 3, heads=4, feat_drop=0.5, attn_drop=0.5).double().train()
    fast = gnnc.compile(model)
    for seed in (1, 2):  # the second step reuses the cached plans
        want, want_grads, _ = _train_step(model, g, x, seed)
        got, got_grads, targets = _train_step(fast, g, x, seed)
        torch.testing.assert_close(got, want)
        for a, b in zip(got_grads, want_grads):
            torch.testing.assert_close(a, b)
        assert ops.in_bucket_order in targets and ops.bucketed_reduce not in targets


class _NodeDropout(nn.Module):
    """A reduce with its dropout on node-level values: eager draws it per bucket of destination rows."""

    def __init__(self, drops=1):
        super().__init__()
        self.drops = nn.ModuleList(nn.Dropout(0.5) for _ in range(drops))
        self.w = nn.Parameter(torch.randn(4, 4, dtype=torch.float64))

    def forward(self, g, h):
        def reduce(nodes):
            total = nodes.mailbox["m"].sum(1)
            for drop in self.drops:
                total = drop(total) @ self.w
            return {"o": total}

        with g.local_scope():
            g.ndata["h"] = h
            g.update_all(lambda edges: {"m": edges.src["h"]}, reduce)
            return g.ndata["o"]


@pytest.mark.usefixtures("eager_dropout_masks")
@pytest.mark.parametrize("drops", [1, 2])
def test_dropout_on_node_rows_of_a_reduce_and_several_dropouts_draw_eager_masks(drops):
    """Two dropouts in one reduce interleave their draws bucket by bucket in eager: that reduce keeps its
    degree buckets (which run as eager), a single one draws per bucket in the lowered plan."""
    g = random_homograph(40, 200, 1)
    x = torch.randn(40, 4, dtype=torch.float64)
    torch.manual_seed(0)
    model = _NodeDropout(drops).train()
    want, want_grads, _ = _train_step(model, g, x, 3)
    got, got_grads, targets = _train_step(gnnc.compile(model), g, x, 3)
    torch.testing.assert_close(got, want)
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a, b)
    assert (ops.in_bucket_order in targets) == (drops == 1) and (ops.bucketed_reduce in targets) == (drops == 2)

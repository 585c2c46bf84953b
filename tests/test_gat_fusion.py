"""models.GATConv compiled runs the fused softmax aggregation wherever its attention dropout is the identity.

4598c6e called a reduce's nn.Dropout through ops.in_bucket_order (eager's masks under determinism) even when
it cannot fire (eval mode, p = 0): that op between the softmax and the sum kept the fuse pass from forming
the fused aggregation, and GATConv's forward ran edge_softmax and a separate aggregation (22 -> 40 ms on
20000 nodes / 200000 edges). a1a6028's fast_dropout rewrote those identity dropouts too, forcing a forward
capture for nothing. A dropout that draws masks (training, p > 0) keeps what it compiled to before both:
edge_softmax, the dropout on the edges and the aggregation, without degree buckets.
"""

import warnings

import pytest
import torch

import gnnc
from gnnc import models
from gnnc.compiler import driver as compiled
from gnnc.ir import operators as ops
from tests.graphs import random_homograph

FUSED = {ops.edge_softmax_aggregate, ops.sddmm_softmax_aggregate}


def _run(model, g, x):
    """The compiled model's output, the targets of the plans it ran, and its forward log."""
    cm = gnnc.compile(model)
    with warnings.catch_warnings(), compiled.recording() as plans:
        warnings.simplefilter("error", gnnc.FallbackWarning)
        out = cm(g, x)
    assert plans, "no compiled plan ran"
    return out, {n.target for p in plans for n in p.dfg.graph.nodes}, cm.forward_log


def _inputs(dtype=torch.float64):
    torch.manual_seed(0)
    g = random_homograph(60, 400, 3)
    return g, torch.randn(60, 8, dtype=dtype)


@pytest.mark.parametrize("attn_drop", [0.0, 0.5])
@pytest.mark.parametrize("feat_drop", [0.0, 0.5])
def test_eval_mode_runs_the_fused_aggregation_and_matches_eager(attn_drop, feat_drop):
    g, x = _inputs()
    model = models.GATConv(8, 4, 3, feat_drop=feat_drop, attn_drop=attn_drop).double().eval()
    got, targets, log = _run(model, g, x)
    assert targets & FUSED and ops.bucketed_reduce not in targets and ops.in_bucket_order not in targets, targets
    assert not any(line.startswith("fast_dropout") for line in log), log  # identity dropouts: nothing to rewrite
    torch.testing.assert_close(got, model(g, x))


def test_training_with_dropouts_of_p_zero_runs_the_fused_aggregation():
    g, x = _inputs()
    model = models.GATConv(8, 4, 3).double().train()
    got, targets, log = _run(model, g, x)
    assert targets & FUSED and ops.bucketed_reduce not in targets and ops.in_bucket_order not in targets, targets
    assert not any(line.startswith("fast_dropout") for line in log), log
    torch.testing.assert_close(got, model(g, x))


def test_a_captured_forward_keeps_the_fused_aggregation():
    """Input dropout in training: fast_dropout captures the forward; its update_all compiles as a call's."""
    g, x = _inputs()
    model = models.GATConv(8, 4, 3, feat_drop=0.5).double().train()
    _, targets, log = _run(model, g, x)
    assert any(line.startswith("fast_dropout: 1 dropout calls (model.feat_drop)") for line in log), log
    assert targets & FUSED and ops.bucketed_reduce not in targets, targets


def test_attention_dropout_in_training_keeps_edge_softmax_without_buckets_and_eager_masks(eager_dropout_masks):
    """As before a1a6028: the fused kernel has no dropout, so edge_softmax, the mask and the aggregation; under
    torch.use_deterministic_algorithms(True) the mask is eager's (4598c6e)."""
    g, x = _inputs()
    model = models.GATConv(8, 4, 3, attn_drop=0.5).double().train()
    _, targets, _ = _run(model, g, x)
    assert ops.edge_softmax in targets and ops.in_bucket_order in targets, targets
    assert ops.bucketed_reduce not in targets and not targets & FUSED, targets
    torch.manual_seed(7)
    got, _, _ = _run(model, g, x)
    torch.manual_seed(7)
    want = model(g, x)
    torch.testing.assert_close(got, want)


def test_eval_gat_builds_the_generated_softmax_aggregation_kernel():
    """The premise of test_kernel_cache's refused-folder test: GATConv's aggregation runs a generated kernel."""
    from gnnc.backend.cpu import softmax_aggregate

    if not gnnc.backend.cpu_available():
        pytest.skip("numba kernels not available")
    g, x = _inputs(torch.float32)
    model = models.GATConv(8, 4, 3).eval()
    softmax_aggregate._forward_kernel.cache_clear()
    got, _, _ = _run(model, g, x)
    assert softmax_aggregate._forward_kernel.cache_info().misses >= 1
    torch.testing.assert_close(got, model(g, x))

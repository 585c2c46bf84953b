"""``forward.passes.release_features`` and ``scope_deferral`` alone on a captured forward: the rewritten
forward, replayed with no other pass and message passing run eagerly, computes eager's numbers."""

from __future__ import annotations

import pytest
import torch

from gnnc.forward.capture import capture
from gnnc.forward.passes import release_features, scope_deferral
from gnnc.runtime.deferred import trust_next_apply_edges
from gnnc.runtime.feature_release import arm_drop, drop_features

from .test_scope_passes import Attention, _graph


@pytest.mark.parametrize(
    "name, pass_fn, placed",
    [
        ("release_features", release_features, {arm_drop, drop_features}),
        ("scope_deferral", scope_deferral, {trust_next_apply_edges}),
    ],
)
def test_the_pass_alone_rewrites_the_forward_and_keeps_eagers_numbers(name, pass_fn, placed):
    model = Attention(after=("t", "q"))
    g = _graph()
    h = torch.randn(g.num_nodes(), 4, dtype=torch.float64)
    captured, log = capture(model, (g, h), {}, [(name, pass_fn)])
    assert captured is not None and log and all(line.startswith(name) for line in log)
    targets = {n.target for n in captured.module.graph.nodes}
    assert placed & targets
    before = dict(g.ndata)
    torch.testing.assert_close(captured(model, (g, h), {}), model(g, h))
    assert dict(g.ndata).keys() == before.keys()  # the scope restored the graph's features

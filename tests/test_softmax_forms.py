"""Every softmax a user writes in a reduce UDF runs as the fused softmax aggregation (issue 45).

Each form is compiled against eager on graphs with zero in-degree nodes, self loops and multi-edges, with
large logits, forward and backward, and the plan must hold the fused aggregation and no degree buckets.
"""

import warnings

import pytest
import torch
from torch.nn import functional as F

import gnnc
from gnnc.compiler import driver as compiled
from gnnc.ir import operators as ops
from tests.graphs import random_homograph


def _max_values(e):
    s = torch.exp(e - e.max(1, keepdim=True).values)
    return s / s.sum(1, keepdim=True)


def _amax(e):
    s = (e - torch.amax(e, dim=1, keepdim=True)).exp()
    return s / torch.sum(s, dim=1, keepdim=True)


def _no_max(e):
    s = torch.exp(e)
    return s / s.sum(1, keepdim=True)


def _split(e):
    top = torch.max(e, dim=1, keepdim=True)[0]
    s = e - top
    s = s.exp()
    total = s.sum(dim=-2).unsqueeze(1)
    return torch.div(s, total)


FORMS = {
    "max_values": _max_values,
    "amax": _amax,
    "no_max": _no_max,
    "split_statements": _split,
    "torch_softmax": lambda e: torch.softmax(e, 1),
    "F_softmax": lambda e: F.softmax(e, dim=1),
    "exp_log_softmax": lambda e: torch.exp(F.log_softmax(e, dim=1)),
}
FUSED = {ops.edge_softmax_aggregate, ops.sddmm_softmax_aggregate}


def _attend(form, g, z, e, compile):
    """GAT's aggregation with ``form`` as the reduce's softmax; logits per edge [E, H], z [N, H, F]."""
    with g.local_scope():
        g.ndata["z"], g.edata["e"] = z, e

        def reduce(nodes):
            alpha = form(nodes.mailbox["e"])
            return {"h": (alpha.unsqueeze(-1) * nodes.mailbox["z"]).sum(1)}

        g.update_all(lambda edges: {"z": edges.src["z"], "e": edges.data["e"]}, reduce, compile=compile)
        return g.ndata["h"]


def _run(reduce_output, g, inputs, compile):
    """Output and input gradients of ``reduce_output(g, *inputs, compile)``; compiled: the plans it ran."""
    inputs = [x.detach().clone().requires_grad_() for x in inputs]
    with warnings.catch_warnings(), compiled.recording() as plans:
        warnings.simplefilter("error", gnnc.FallbackWarning)
        out = reduce_output(g, *inputs, compile)
    weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view(out.shape)
    grads = torch.autograd.grad((torch.nan_to_num(out) * weights).sum(), inputs)
    targets = {n.target for p in plans for n in p.dfg.graph.nodes}
    return out.detach(), grads, targets


def _inputs(seed, scale, dtype=torch.float64, heads=4):
    g = random_homograph(30, 120, seed)
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(30, heads, 5, generator=gen, dtype=dtype)
    e = scale * torch.randn(g.num_edges(), heads, generator=gen, dtype=dtype)
    return g, z, e


@pytest.mark.parametrize("scale", [1.0, 60.0])
@pytest.mark.parametrize("name", sorted(FORMS))
def test_each_softmax_form_runs_fused_and_matches_eager(name, scale):
    g, z, e = _inputs(0, scale)
    run = lambda g, z, e, c: _attend(FORMS[name], g, z, e, c)
    want, want_grads, _ = _run(run, g, (z, e), False)
    got, got_grads, targets = _run(run, g, (z, e), True)
    assert targets & FUSED and ops.bucketed_reduce not in targets
    assert torch.isfinite(want).all()  # float64 logits of 60 sigma: eager finite even without the max subtracted
    torch.testing.assert_close(got, want)
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a, b)


def test_the_form_without_max_subtraction_is_finite_where_eager_overflows():
    """exp(1000) is inf in eager (inf / inf: NaN); the fused kernel subtracts each destination's max first,
    so it gives the softmax's finite weights. Rows eager computes finitely are equal."""
    g, z, e = _inputs(1, 1.0, torch.float32)
    e[:10] += 1000.0
    want, _, _ = _run(lambda g, z, e, c: _attend(_no_max, g, z, e, c), g, (z, e), False)
    got, _, targets = _run(lambda g, z, e, c: _attend(_no_max, g, z, e, c), g, (z, e), True)
    assert targets & FUSED
    overflowed = ~torch.isfinite(want).flatten(1).all(1)
    assert overflowed.any() and torch.isfinite(got).all()
    torch.testing.assert_close(got[~overflowed], want[~overflowed])
    ref, _, _ = _run(lambda g, z, e, c: _attend(FORMS["max_values"], g, z, e, c), g, (z, e), False)
    torch.testing.assert_close(got, ref)  # the finite values are the softmax's


def _other_reduce(body):
    def run(g, z, e, compile):
        with g.local_scope():
            g.ndata["z"], g.edata["e"] = z, e
            g.update_all(
                lambda edges: {"z": edges.src["z"], "e": edges.data["e"]},
                lambda nodes: {"h": body(nodes.mailbox["e"], nodes.mailbox["z"])},
                compile=compile,
            )
            return g.ndata["h"]

    return run


OTHERS = {
    # log_softmax over the degree dim on its own: segment operators, not the fused aggregation
    "log_softmax": lambda e, z: (F.log_softmax(e, 1).unsqueeze(-1) * z).sum(1),
    # keepdim reductions over the degree dim broadcast back to the edges
    "centred": lambda e, z: ((e - e.mean(1, keepdim=True)).pow(2).unsqueeze(-1) * z).sum(1),
    "max_keepdim_out": lambda e, z: e.max(1, keepdim=True).values.squeeze(1) + z.sum(1).sum(-1),
    # not a softmax: the exp divided by the sum of another exp
    "mismatched_sum": lambda e, z: (
        (torch.exp(e) / torch.exp(e - e.amax(1, keepdim=True)).sum(1, keepdim=True)).unsqueeze(-1) * z
    ).sum(1),
    # softmax over a feature dim: stays the plain softmax on edges
    "feature_dim": lambda e, z: (torch.exp(e) / torch.exp(e).sum(-1, keepdim=True)).unsqueeze(-1).mul(z).sum(1),
}


@pytest.mark.parametrize("name", sorted(OTHERS))
def test_keepdim_reductions_and_log_softmax_over_degrees_lower_to_segment_operators(name):
    g, z, e = _inputs(2, 3.0)
    want, want_grads, _ = _run(_other_reduce(OTHERS[name]), g, (z, e), False)
    got, got_grads, targets = _run(_other_reduce(OTHERS[name]), g, (z, e), True)
    # a segment operator, a fused softmax aggregation, or (softmax over features) one generated edge loop
    assert ops.bucketed_reduce not in targets and targets & ({ops.segment_reduce, ops.edge_expr_aggregate} | FUSED)
    if name in ("mismatched_sum", "feature_dim", "log_softmax"):
        assert not targets & FUSED
    torch.testing.assert_close(got, want)
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize(
    "body",
    [
        lambda e, z: (F.softmax(e, dim=1, dtype=torch.float64).unsqueeze(-1) * z).sum(1),
        lambda e, z: e.sum(1, dtype=torch.float64) + z.sum(1).sum(-1),
    ],
    ids=["softmax", "sum"],
)
def test_a_reduction_over_degrees_with_a_dtype_keeps_it(body):
    """The segment operators take no dtype: a reduction asking for one keeps its degree buckets (eager's dtype)."""
    g, z, e = _inputs(3, 1.0, torch.float32)
    want, _, _ = _run(_other_reduce(body), g, (z, e), False)
    got, _, _ = _run(_other_reduce(body), g, (z, e), True)
    assert got.dtype == want.dtype == torch.float64
    torch.testing.assert_close(got, want)


def test_integer_logits_are_not_taken_for_a_softmax():
    """exp of an integer mailbox is a float in eager; the softmax kernels take no integers."""
    g, z, _ = _inputs(4, 1.0)
    e = torch.randint(-3, 4, (g.num_edges(), 4))
    run = lambda g, z, c: _attend(_no_max, g, z, e, c)
    want, _, _ = _run(run, g, (z,), False)
    got, _, _ = _run(run, g, (z,), True)
    torch.testing.assert_close(got, want)

"""gnnc's one-pass dropout (issue 45: GCN on Cora was slower compiled, its time in torch's input dropout):
the kernel's distribution, scale, gradient and special values; the forward pass that puts it into compiled
forwards; eager's masks under torch.use_deterministic_algorithms."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import gnnc
from gnnc import data, models
from gnnc.runtime import dropout as gd

pytest.importorskip("numba")


def _wide(rows=400, cols=300, density=1.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(rows, cols, generator=gen) + 0.5
    return x * (torch.rand(rows, cols, generator=gen) < density)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_kernel_keeps_one_minus_p_and_scales_the_rest(p, dtype):
    x = _wide().to(dtype)
    assert gd.runs_kernel(x, p, True)
    y = gd.dropout(x, p, True)
    kept = y != 0
    n = x.numel()
    sigma = (p * (1 - p) / n) ** 0.5
    assert abs(kept.double().mean().item() - (1 - p)) < 5 * sigma
    torch.testing.assert_close(y[kept], x[kept] * (1 / (1 - p)), rtol=0, atol=0)
    assert y.dtype == dtype and y.shape == x.shape


def test_kernel_masks_are_independent_of_position_and_call():
    x = torch.ones(200_000)
    torch.manual_seed(0)
    a, b = gd.dropout(x, 0.5, True) != 0, gd.dropout(x, 0.5, True) != 0
    assert 0.49 < (a == b).double().mean().item() < 0.51  # two calls: independent masks
    assert 0.49 < (a[1:] == a[:-1]).double().mean().item() < 0.51  # neighbours: independent
    torch.manual_seed(0)
    assert torch.equal(gd.dropout(x, 0.5, True) != 0, a)  # torch.manual_seed repeats them


def test_kernel_keeps_zeros_and_propagates_nan_and_inf_like_torch():
    x = _wide(density=0.01)
    x[0, :8] = torch.tensor([float("nan")] * 4 + [float("inf")] * 4)
    x[1, :4] = -0.0
    y = gd.dropout(x, 0.5, True)
    assert torch.equal(y[x == 0], x[x == 0])
    assert torch.equal(torch.signbit(y[1, :4]), torch.ones(4, dtype=torch.bool))
    assert torch.isnan(y[0, :4]).all()  # NaN * 0 and NaN * 2: NaN, as torch's x * mask
    assert (torch.isnan(y[0, 4:8]) | torch.isposinf(y[0, 4:8])).all()  # inf * 0: NaN, inf * 2: inf


def test_gradient_is_the_forward_mask_scaled():
    x = _wide().requires_grad_()
    weight = torch.randn(x.shape)
    y = gd.dropout(x, 0.3, True)
    (y * weight).sum().backward()
    torch.testing.assert_close(x.grad, weight * (y.detach() / x.detach()))


def test_gradcheck_with_a_fixed_seed():
    def seeded(t):
        torch.manual_seed(1)
        return gd.dropout(t, 0.3, True)

    x = (torch.rand(300, 250, dtype=torch.float64) + 0.5).requires_grad_()
    assert torch.autograd.gradcheck(seeded, x, fast_mode=True)
    assert torch.autograd.gradgradcheck(seeded, x, fast_mode=True)


@pytest.mark.parametrize("case", ["small", "eval", "p0", "int", "deterministic"])
def test_torch_dropout_where_the_kernel_does_not_run(case):
    x = torch.rand(10, 10) if case == "small" else _wide()
    p, training = (0.0 if case == "p0" else 0.5), case != "eval"
    if case == "int":
        x = (x * 10).long()
        p = 0.5
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(case == "deterministic")
    try:
        assert not gd.runs_kernel(x, p, training)
        if case == "int":
            return
        torch.manual_seed(3)
        expected = F.dropout(x, p, training)
        torch.manual_seed(3)
        assert torch.equal(gd.dropout(x, p, training), expected)
    finally:
        torch.use_deterministic_algorithms(previous)


def _gcn_on_wide_features():
    g = data.synthetic("cora", scale=0.1, seed=0, feat_dim=400).graph.add_self_loop()
    torch.manual_seed(0)
    return g, g.ndata["feat"], models.GCN(400, 16, 7)


def test_compiled_gcn_training_runs_the_kernel_and_says_so():
    g, x, model = _gcn_on_wide_features()
    fast = gnnc.compile(model)
    fast.train()
    calls = []
    original = gd._MaskedScale.apply
    gd._MaskedScale.apply = lambda *a: calls.append(a[1]) or original(*a)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", gnnc.FallbackWarning)
            fast(g, x).sum().backward()
    finally:
        gd._MaskedScale.apply = original
    assert calls == [0.5]  # the input's dropout (the hidden one is below MIN_ELEMENTS: torch's)
    assert any(line.startswith("fast_dropout: 2 dropout calls") for line in fast.forward_log), fast.forward_log
    assert all(p.grad is not None for p in model.parameters())


def test_compiled_gcn_has_eager_masks_under_deterministic_algorithms(eager_dropout_masks):
    g, x, model = _gcn_on_wide_features()
    fast = gnnc.compile(model)
    model.train()
    with warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        torch.manual_seed(5)
        got = fast(g, x)
    torch.manual_seed(5)
    expected = model(g, x)
    assert any(line.startswith("fast_dropout") for line in fast.forward_log)
    torch.testing.assert_close(got, expected)

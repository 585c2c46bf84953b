"""Half-precision features and autocast: compiled calls run (on the torch backend, the generated kernels
compute in float32 and float64 only) and are as close to the float64 result as eager is.

DGL-example models (``tests/dgl_examples.py``) run eagerly and compiled, in float32 under
``torch.autocast`` and with their parameters and inputs cast to bfloat16 / float16. Rounding differs between
the two (sums in another order; the torch backend's scatter sums round each addition to the dtype, where
torch's reductions accumulate in float32), so each is measured against the float64 run: compiled may be
off by at most four times eager's error plus a few units of the dtype's rounding, and overflows to inf or
nan in the same places as eager (float16 AGNN overflows in both).
"""

import copy
import warnings

import pytest
import torch

import gnnc
from gnnc import backend
from gnnc.compiler.driver import recording
from tests import test_dgl_examples as examples

# models whose eager run works under autocast and with half-precision parameters (the others compute their
# degree norms with ``.double()``, which eager rejects too)
MODELS = (
    "GatedGCN_builtin",
    "EdgeConv_DGCNN",
    "AGNN",
    "GraphTransformer",
    "NNConv_MPNN",
    "PNA",
    "DotGAT",
    "GATv2",
    "HeteroRGCN_multi_update_all",
    "HeteroAttention_stack_min",
    "BipartiteSAGE_srcdata_dstdata",
)
HALF = (torch.bfloat16, torch.float16)


def test_auto_picks_the_torch_backend_for_half_precision():
    assert backend.resolve("auto", "cpu", {torch.float32, torch.int64}) in ("cpu", "torch")
    for dtype in HALF:
        assert backend.resolve("auto", "cpu", {torch.float32, dtype}) == "torch"
        assert backend.resolve("torch", "cpu", {dtype}) == "torch"


@pytest.mark.skipif(not backend.cpu_available(), reason="needs numba")
def test_asking_for_the_kernels_in_half_precision_names_the_dtype():
    with pytest.raises(
        ValueError, match="backend 'cpu' computes in float32 and float64; this call computes in bfloat16"
    ):
        backend.resolve("cpu", "cpu", {torch.bfloat16})


def _run(module, call, make_graph, make_inputs, cast=None, autocast=None):
    def inputs(g):
        made = make_inputs(g)
        return made if cast is None else [_cast(v, cast) for v in made]

    with torch.autocast("cpu", dtype=autocast or torch.bfloat16, enabled=autocast is not None):
        return examples._outputs_and_gradients(module, call, make_graph, inputs)


def _cast(value, dtype):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.detach().to(dtype).requires_grad_(value.requires_grad)
    if isinstance(value, dict):
        return {k: _cast(v, dtype) for k, v in value.items()}
    return value


def _error(actual, reference):
    """Largest difference over the finite entries of ``reference``."""
    finite = reference.isfinite()
    return (actual.double() - reference)[finite].abs().max().item() if finite.any() else 0.0


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("how", ["autocast", "cast"])
@pytest.mark.parametrize("name", MODELS)
def test_compiled_is_as_close_to_float64_as_eager(name, how, dtype):
    make_graph, make_model, make_inputs = examples.EXAMPLES[name]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        reference_model = make_model(make_graph()).double().eval()
    expected, expected_grads = examples._outputs_and_gradients(
        reference_model, reference_model, make_graph, lambda g: [_cast(v, torch.float64) for v in make_inputs(g)]
    )
    model = copy.deepcopy(reference_model).to(torch.float32 if how == "autocast" else dtype)
    options = {"autocast": dtype} if how == "autocast" else {"cast": dtype}
    eager_out, eager_grads = _run(model, model, make_graph, make_inputs, **options)
    compiled = gnnc.compile(copy.deepcopy(model))
    with warnings.catch_warnings(), recording() as plans:
        warnings.simplefilter("error", gnnc.FallbackWarning)
        compiled_out, compiled_grads = _run(compiled.model, compiled, make_graph, make_inputs, **options)
    assert plans and all(plan.dfg is not None for plan in plans)
    eps = torch.finfo(dtype).eps
    pairs = list(zip(compiled_out, eager_out, expected)) + [
        (compiled_grads[k], eager_grads[k], expected_grads[k]) for k in expected_grads
    ]
    for i, (c, e, ref) in enumerate(pairs):
        assert c.dtype == e.dtype
        assert torch.equal(c.isfinite(), e.isfinite()), f"value {i}: inf or nan elsewhere than eager's"
        finite = e.isfinite()
        reference = torch.where(finite, ref, torch.nan)
        scale = reference[finite].abs().max().item() if finite.any() else 0.0
        # 12 eps: a gradient that is a difference of near-equal terms (a softmax over logits sharing one node's
        # term) errs by eps of the terms, not of itself; HeteroAttention's 'tag' bias in float16 is one
        assert _error(c, reference) <= 4 * _error(e, reference) + 12 * eps * scale, f"value {i}"


def test_a_plan_made_under_autocast_is_not_reused_without_it():
    make_graph, make_model, make_inputs = examples.EXAMPLES["GATv2"]
    torch.manual_seed(0)
    model = make_model(make_graph()).float().eval()
    compiled = gnnc.compile(model)
    g, x = make_graph(), make_inputs(make_graph())[0].float()
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad(), recording() as autocast_plans:
        compiled(g, x)
    with recording() as plans, torch.no_grad():
        out = compiled(g, x)
    torch.testing.assert_close(out, model(make_graph(), x))
    assert {p.backend for p in autocast_plans} == {"torch"}
    assert {p.backend for p in plans} == {backend.resolve("auto", "cpu")}

"""Training loops' contexts around compiled models: compiled == eager.

- Evaluating under ``torch.inference_mode()`` first, then training on the same graph (as Lightning's
  validation sanity check does): the structures gnnc caches with the graph must not be inference tensors,
  which can never be saved for backward. Compiled and eager, DGL-example models and gnnc's layers.
- Gradient checkpointing (``torch.utils.checkpoint``, non-reentrant): the recomputation must save the same
  tensors as the forward (compiling on the first call saves none), and its early stop must reach torch.
- ``torch.compile`` around a compiled model: dynamo stops at each message-passing call (gnnc's runtime is
  opaque to it) instead of tracing gnnc's internals.
"""

import copy
import warnings

import pytest
import torch
from torch.utils.checkpoint import checkpoint

import gnnc
from tests import test_dgl_examples as examples
from tests import test_models_hetero as hetero
from tests.test_dgl_examples import float64_by_default  # noqa: F401 - autouse: the examples' dtype


def _example(name):
    """(graph maker, the example model in eval mode, input maker)."""
    make_graph, make_model, make_inputs = examples.EXAMPLES[name]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return make_graph, make_model(make_graph()).eval(), make_inputs


def _assert_matches_eager(model, call, graph, make_inputs, reference, make_graph):
    """``call`` on ``graph()``: outputs and gradients (w.r.t. inputs and ``model``'s parameters) == ``reference``
    run eagerly on ``make_graph()``, with no fallback."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        actual, actual_grads = examples._outputs_and_gradients(model, call, graph, make_inputs)
    expected, expected_grads = examples._outputs_and_gradients(reference, reference, make_graph, make_inputs)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)
    for key, e in expected_grads.items():
        torch.testing.assert_close(actual_grads[key], e, msg=lambda m: f"gradient of {key}: {m}")


def _evaluate_in_inference_mode(call, g, inputs):
    with torch.inference_mode():
        call(g, *[x.detach() if isinstance(x, torch.Tensor) else x for x in inputs])


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "eager"])
@pytest.mark.parametrize("name", list(examples.EXAMPLES))
def test_dgl_example_trains_on_a_graph_first_evaluated_in_inference_mode(name, compiled):
    make_graph, reference, make_inputs = _example(name)
    model = copy.deepcopy(reference)
    call = gnnc.compile(model) if compiled else model
    g = make_graph()
    _evaluate_in_inference_mode(call, g, make_inputs(g))
    _assert_matches_eager(model, call, lambda: g, make_inputs, reference, make_graph)


@pytest.mark.parametrize("model", list(hetero.CASES))
def test_gnnc_layer_trains_on_a_graph_first_evaluated_in_inference_mode(model):
    case = hetero.CASES[model]
    g = hetero._graph("hetero1")
    module, inputs = hetero._setup(case, g, seed=0)
    compiled = gnnc.compile(module)
    _evaluate_in_inference_mode(compiled, g, inputs)
    outs, grads = hetero._run(lambda m, gr, *xs: compiled(gr, *xs), module, g, inputs, seed=0)
    ref_outs, ref_grads = hetero._run(case.reference, module, hetero._graph("hetero1"), inputs, seed=0)
    for o, r in zip(outs, ref_outs):
        torch.testing.assert_close(o, r, rtol=hetero.RTOL, atol=hetero.ATOL)
    for name, gr in grads.items():
        torch.testing.assert_close(
            gr, ref_grads[name], rtol=hetero.RTOL, atol=1e-9, msg=lambda m: f"gradient of {name}: {m}"
        )


def test_degrees_read_in_inference_mode_do_not_stop_training():
    g = examples.homograph()
    with torch.inference_mode():
        g.in_degrees(), g.out_degrees()
    x = torch.randn(g.num_nodes(), 3, dtype=torch.float64, requires_grad=True)
    g.ndata["h"] = x
    g.update_all(lambda e: {"m": e.src["h"]}, lambda n: {"h": n.mailbox["m"].max(1).values})
    g.ndata["h"].sum().backward()
    assert x.grad is not None


def test_a_call_in_inference_mode_gives_the_same_values_without_gradients():
    g = examples.homograph()
    model = examples.models.DotGAT().eval()
    (x,) = examples.node_features(g)
    with torch.inference_mode():
        outs = examples._tensors(gnnc.compile(model)(g, x))
    expected = examples._tensors(model(examples.homograph(), x))
    for out, e in zip(outs, expected, strict=True):
        assert not out.requires_grad
        torch.testing.assert_close(out, e.detach())


@pytest.mark.parametrize("warm", [False, True], ids=["compiled_in_the_checkpoint", "compiled_before"])
@pytest.mark.parametrize("name", list(examples.EXAMPLES))
def test_dgl_example_under_gradient_checkpointing(name, warm):
    make_graph, reference, make_inputs = _example(name)
    compiled = gnnc.compile(copy.deepcopy(reference))
    if warm:
        examples._outputs_and_gradients(compiled.model, compiled, make_graph, make_inputs)
    _assert_matches_eager(
        compiled.model,
        lambda g, *xs: checkpoint(compiled, g, *xs, use_reentrant=False),
        make_graph,
        make_inputs,
        reference,
        make_graph,
    )


@pytest.mark.parametrize("name", ["DotGAT", "HeteroRGCN_multi_update_all", "PNA"])
def test_torch_compile_around_a_compiled_model(name):
    make_graph, reference, make_inputs = _example(name)
    compiled = gnnc.compile(copy.deepcopy(reference))
    dynamo = torch.compile(compiled, backend="eager")
    for _ in range(2):  # the second call runs what dynamo made on the first
        _assert_matches_eager(compiled.model, dynamo, make_graph, make_inputs, reference, make_graph)


def test_import_gnnc_leaves_dynamo_and_triton_unimported():
    """Dynamo is only used when the user's code imported it: importing it (and triton, in compiled mode)
    costs about 1.5 s, and triton's interpreter cannot be chosen once it is imported."""
    import subprocess
    import sys

    probe = "import sys, gnnc; print(sorted(m for m in ('torch._dynamo', 'triton') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"

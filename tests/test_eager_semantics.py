"""What eager does that a compiled plan must keep: in-place writes, module hooks, custom autograd Functions.

Each case runs a UDF eagerly (the oracle) and compiled, in float64, on random
graphs with zero in-degree nodes, self loops and multi-edges; outputs, the
gradients of the node features and parameters, and the node features
themselves after the call must agree. Where the compiled plan cannot keep
eager's meaning the call must fall back with a FallbackWarning, never differ.
"""

import contextlib
import warnings

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import gnnc.function as fn
from gnnc.compiler.driver import FallbackWarning
from tests.graphs import random_homograph

D = 3


def _graph(seed):
    g = random_homograph(10, 36, seed)
    gen = torch.Generator().manual_seed(seed)
    g.ndata["h"] = torch.randn(10, D, dtype=torch.float64, generator=gen)
    g.edata["w"] = torch.rand(g.num_edges(), 1, dtype=torch.float64, generator=gen)
    return g


def _compare(run, params, seed, fallback: bool):
    """``run(g, compile) -> tensor`` both ways: equal outputs, gradients and features; the compiled call
    falls back exactly when ``fallback``."""
    results = []
    for flag in (False, True):
        g = _graph(seed)
        h = g.ndata["h"].requires_grad_()
        before = h.detach().clone()
        for p in params:
            p.grad = None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", FallbackWarning)
            out = run(g, flag)
        fell_back = any(issubclass(w.category, FallbackWarning) for w in caught)
        out.pow(2).sum().backward()
        grads = [torch.zeros_like(t) if t.grad is None else t.grad.clone() for t in (h, *params)]
        results.append((out.detach(), grads, h.detach().clone(), before, fell_back))
    (eager, eager_grads, eager_h, before, _), (fast, fast_grads, fast_h, _, fell_back) = results
    assert fell_back == fallback
    torch.testing.assert_close(fast, eager)
    for a, b in zip(fast_grads, eager_grads):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(fast_h, eager_h)
    torch.testing.assert_close(fast_h, before)  # none of these UDFs writes into the user's features


LIN = nn.Linear(D, D).double()
RELU_INPLACE = nn.ReLU(inplace=True)
LEAKY_INPLACE = nn.LeakyReLU(0.2, inplace=True)


def _aliased_add(edges):
    x = edges.src["h"] * 2
    y = x  # one tensor, two names: eager's += changes what y reads
    x += edges.dst["h"]
    return {"m": y * edges.data["w"]}


def _second_read_is_fresh(edges):
    first = F.relu(edges.src["h"], inplace=True)
    return {"m": first - edges.src["h"]}  # eager's second read gathers again: unchanged by the first's relu


COMPILED = {
    "nn.ReLU(inplace) on src": lambda e: {"m": RELU_INPLACE(e.src["h"])},
    "F.relu(inplace) on src": lambda e: {"m": F.relu(e.src["h"], inplace=True) * e.data["w"]},
    "clamp_ on src + dst": lambda e: {"m": e.src["h"].clamp_(min=0) + e.dst["h"]},
    "in-place module after a linear": lambda e: {"m": LEAKY_INPLACE(LIN(e.src["h"]))},
    "+= through an alias": _aliased_add,
    "a second read after an in-place write": _second_read_is_fresh,
    "mul_ then read": lambda e: {"m": (lambda x: x.mul_(e.data["w"]) + x)(e.src["h"] - e.dst["h"])},
}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", sorted(COMPILED))
def test_in_place_writes_compile_with_eagers_meaning(name, seed):
    message = COMPILED[name]

    def run(g, flag):
        g.update_all(message, fn.sum("m", "o"), compile=flag)
        return g.ndata["o"] + g.ndata["h"]  # a self term: reads h after the call

    _compare(run, list(LIN.parameters()), seed, fallback=False)


def test_in_place_relu_of_a_reduced_value_compiles():
    def run(g, flag):
        g.update_all(fn.copy_u("h", "m"), lambda nodes: {"o": nodes.mailbox["m"].sum(1).relu_()}, compile=flag)
        return g.ndata["o"]

    _compare(run, [], 0, fallback=False)


def _viewed_then_written(edges):
    x = edges.src["h"] * 2
    first = x[:, :1]  # a view: eager's in-place relu below changes it too
    x.relu_()
    return {"m": first * x}


BUCKET_VIEWS = ("a mailbox", "node data in a reduce")
REFUSED = {
    "a mailbox": (fn.copy_u("h", "m"), lambda nodes: {"o": F.relu(nodes.mailbox["m"], inplace=True).sum(1)}),
    "node data in a reduce": (
        fn.copy_u("h", "m"),
        lambda nodes: {"o": nodes.mailbox["m"].sum(1) + nodes.data["h"].mul_(2)},
    ),
    "a view taken before": (_viewed_then_written, fn.sum("m", "o")),
    "a slice": (lambda e: {"m": (lambda x: (x[:, :1].relu_(), x)[1])(e.src["h"] * 1)}, fn.sum("m", "o")),
    "item assignment": (
        lambda e: {"m": (lambda x: (x.__setitem__(x < 0, 0.0), x)[1])(e.src["h"] * 1)},
        fn.sum("m", "o"),
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_in_place_writes_eager_would_spread_run_eagerly(name):
    message, reduce = REFUSED[name]

    def run(g, flag):
        # eager's bucket tensors are views of one split (for a cheap backward): autograd refuses writes into them
        with torch.no_grad() if name in BUCKET_VIEWS else contextlib.nullcontext():
            g.update_all(message, reduce, compile=flag)
        return g.ndata["o"] + g.ndata["h"]

    _compare(run, [], 0, fallback=True)


def test_in_place_write_into_edge_data_runs_eagerly_and_writes_it():
    outs = []
    for flag in (False, True):
        g = _graph(0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", FallbackWarning)
            g.apply_edges(lambda e: {"s": e.data["w"].mul_(2) + 1}, compile=flag)
        assert any(issubclass(w.category, FallbackWarning) for w in caught) == flag
        outs.append((g.edata["s"], g.edata["w"]))
    for a, b in zip(*outs):
        torch.testing.assert_close(a, b)


def _hooked_linear(hook_kind, width):
    lin = nn.Linear(width, D).double()
    if hook_kind == "forward":
        lin.register_forward_hook(lambda m, inputs, out: out * 2)
    elif hook_kind == "pre":
        lin.register_forward_pre_hook(lambda m, inputs: (inputs[0] * 0.5,))
    elif hook_kind == "weight_norm":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            lin = nn.utils.weight_norm(lin)
    else:
        lin = nn.utils.spectral_norm(lin).eval()
    return lin


@pytest.mark.parametrize("hook_kind", ["forward", "pre", "weight_norm", "spectral_norm"])
@pytest.mark.parametrize("form", ["difference", "concatenation"])
def test_modules_with_hooks_run_eagerly(hook_kind, form):
    """Distribution and concat split rewrite ``lin(src - dst)`` / ``lin(cat)`` as ``F.linear`` on the weight:
    hooks (and the weight norm's recomputed weight) would be skipped."""
    lin = _hooked_linear(hook_kind, D if form == "difference" else 2 * D)

    def message(edges):
        if form == "difference":
            return {"m": lin(edges.src["h"] - edges.dst["h"])}
        return {"m": lin(torch.cat([edges.src["h"], edges.dst["h"]], -1))}

    def run(g, flag):
        g.update_all(message, fn.sum("m", "o"), compile=flag)
        return g.ndata["o"]

    _compare(run, list(lin.parameters()), 0, fallback=True)


def test_a_hook_added_after_compiling_is_not_skipped():
    lin = nn.Linear(D, D).double()

    def run(g, flag):
        g.update_all(lambda e: {"m": lin(e.src["h"] - e.dst["h"])}, fn.sum("m", "o"), compile=flag)
        return g.ndata["o"]

    _compare(run, list(lin.parameters()), 0, fallback=False)
    handle = lin.register_forward_hook(lambda m, inputs, out: out * 3)
    _compare(run, list(lin.parameters()), 0, fallback=True)
    handle.remove()
    _compare(run, list(lin.parameters()), 0, fallback=False)


def test_parametrized_weight_norm_compiles_and_trains():
    lin = nn.utils.parametrizations.weight_norm(nn.Linear(D, D).double())
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)

    def run(g, flag):
        g.update_all(
            lambda e: {"m": lin(torch.cat([e.src["h"], e.dst["h"]], -1)[:, :D])}, fn.sum("m", "o"), compile=flag
        )
        return g.ndata["o"]

    for step in range(2):
        _compare(run, list(lin.parameters()), step, fallback=False)
        run(_graph(step), True).sum().backward()
        opt.step()
        opt.zero_grad()


class _StraightThroughClamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clamp(-0.5, 0.5)

    @staticmethod
    def backward(ctx, grad):
        return grad


class _GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return -grad


PRE_BOUND = _GradReverse.apply


@pytest.mark.parametrize("form", ["direct", "pre-bound", "imported in the UDF"])
def test_custom_autograd_functions_keep_their_backward(form):
    def message(edges):
        if form == "direct":
            return {"m": _StraightThroughClamp.apply(edges.src["h"])}
        if form == "pre-bound":
            return {"m": PRE_BOUND(edges.src["h"]) * edges.data["w"]}
        import tests.test_eager_semantics as here

        return {"m": here._StraightThroughClamp.apply(edges.src["h"] * 2)}

    def run(g, flag):
        g.update_all(message, fn.sum("m", "o"), compile=flag)
        return g.ndata["o"]

    _compare(run, [], 0, fallback=True)

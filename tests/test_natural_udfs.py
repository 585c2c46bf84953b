"""UDFs written the way users write them: every way of reaching parameters compiles, stays live and matches eager.

Also the regressions of issue 13 (per-relation default-argument closures,
stale tensors after rebinding, reduce UDFs reading what they overwrite,
built-in binary messages) and the plan cache's key, one component at a time.
"""

import functools
import traceback
import warnings

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

import gnnc
import gnnc.function as fn
from gnnc.compiler import driver as compiled
from gnnc.compiler.driver import FallbackWarning
from gnnc.ir import rules
from tests.graphs import random_heterograph, random_homograph

D = 4
torch.manual_seed(0)
GLOBAL_LINEAR = nn.Linear(D, D).double()
GLOBAL_WEIGHT = nn.Parameter(torch.randn(D, D, dtype=torch.float64))
GLOBAL_TENSOR = torch.randn(D, dtype=torch.float64)
GLOBAL_MODULES = {"a": nn.Linear(D, D).double(), "b": [nn.Linear(D, D).double()]}


def _graph(seed=0):
    g = random_homograph(12, 40, seed)
    gen = torch.Generator().manual_seed(seed)  # the same features whatever ran before in this process
    g.ndata["h"] = torch.randn(12, D, dtype=torch.float64, generator=gen).requires_grad_()
    g.edata["w"] = torch.rand(g.num_edges(), 1, dtype=torch.float64, generator=gen)
    return g


def _both(run, g, params=()):
    """``run(g, compile)`` eager and compiled: outputs and gradients (features and ``params``) must agree."""
    results = []
    for flag in (False, True):
        for p in (g.ndata_all["h"], *params):
            p.grad = None
        with warnings.catch_warnings():
            warnings.simplefilter("error", FallbackWarning)
            out = run(g, flag)
        out.pow(2).sum().backward()
        results.append(
            (
                out.detach(),
                [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in (g.ndata_all["h"], *params)],
            )
        )
    (eager, eager_grads), (fast, fast_grads) = results
    _assert_close(fast, eager)
    for a, b in zip(fast_grads, eager_grads):
        _assert_close(a, b)


def _assert_close(actual, expected):
    """assert_close, with float32's absolute tolerance scaled by the largest magnitude in ``expected``: a compiled
    sum adds the same float32 terms in another order than eager, which moves a result by some ulps of the
    largest terms, not of the result (a gradient of 10 summed from terms of 500 differs by about 3e-5)."""
    if expected.dtype != torch.float32 or expected.numel() == 0:
        torch.testing.assert_close(actual, expected)
        return
    scale = max(1.0, expected.abs().max().item())
    torch.testing.assert_close(actual, expected, rtol=1.3e-6, atol=1e-5 * scale)


def _sum_update(message):
    def run(g, flag):
        g.update_all(message, fn.sum("m", "o"), compile=flag)
        return g.ndata["o"]

    return run


def _global_module_message(edges):
    return {"m": GLOBAL_LINEAR(edges.src["h"]) * edges.data["w"]}


def _global_parameter_message(edges):
    return {"m": edges.src["h"] @ GLOBAL_WEIGHT + GLOBAL_TENSOR}


def _helper(x):
    return F.leaky_relu(GLOBAL_MODULES["a"](x), 0.1)


def _helper_message(edges):
    return {"m": _helper(edges.src["h"]) + GLOBAL_MODULES["b"][0](edges.dst["h"])}


def _scaled_message(edges, weight, scale=2.0):
    return {"m": scale * edges.src["h"] @ weight}


def test_module_level_functions_with_global_modules_parameters_and_tensors():
    g = _graph()
    _both(_sum_update(_global_module_message), g, list(GLOBAL_LINEAR.parameters()))
    _both(_sum_update(_global_parameter_message), g, [GLOBAL_WEIGHT])
    _both(_sum_update(_helper_message), g, list(GLOBAL_MODULES["a"].parameters()))


def test_partial_default_arguments_and_closures():
    g = _graph()
    weight = torch.randn(D, D, dtype=torch.float64, requires_grad=True)
    _both(_sum_update(functools.partial(_scaled_message, weight=weight, scale=0.5)), g, [weight])

    def with_default(edges, w=weight):
        return {"m": edges.src["h"] @ w}

    _both(_sum_update(with_default), g, [weight])
    _both(_sum_update(lambda edges: {"m": torch.tanh(edges.src["h"] @ weight)}), g, [weight])


class _Container(nn.Module):
    def __init__(self):
        super().__init__()
        self.by_name = nn.ModuleDict({"x": nn.Linear(D, D), "y": nn.Linear(D, D)}).double()
        self.listed = nn.ModuleList([nn.Linear(D, D) for _ in range(2)]).double()
        self.plain = {"scale": torch.rand(D, dtype=torch.float64, requires_grad=True)}

    def forward(self, g, flag):
        def message(edges):
            return {"m": self.by_name["x"](edges.src["h"]) + self.listed[1](edges.dst["h"]) * self.plain["scale"]}

        g.update_all(message, fn.max("m", "o"), compile=flag)
        return g.ndata["o"]


def test_modules_in_dicts_lists_and_lambdas_in_forward():
    model = _Container()
    _both(model, _graph(), [*model.parameters(), model.plain["scale"]])


# --------------------------------------------------------------- issue 13 regressions
def test_per_relation_default_argument_closures_get_their_own_plans():
    g = random_heterograph(seed=1)
    g.ndata_all["h"] = torch.randn(g.num_nodes(), D, dtype=torch.float64, requires_grad=True)
    layers = nn.ModuleList([nn.Linear(D, D) for _ in g.etypes]).double()

    def run(g, flag):
        funcs = {}
        for k, etype in enumerate(g.canonical_etypes):

            def message(edges, k=k):
                return {"m": layers[k](edges.src["h"])}

            def reduce(nodes):
                return {"z": nodes.mailbox["m"].sum(1)}

            funcs[etype] = (message, reduce)
        g.multi_update_all(funcs, "sum", compile=flag)
        return g.ndata_all["z"]

    _both(run, g, list(layers.parameters()))


class _PlainTensorWeights(nn.Module):
    """Weights kept as plain tensors and rebound after each step, as users of plain tensors do."""

    def __init__(self):
        super().__init__()
        self.k_weight = torch.randn(D, D, dtype=torch.float64, requires_grad=True)

    def message(self, edges):
        return {"m": edges.src["h"] @ self.k_weight}

    def forward(self, g):
        g.update_all(self.message, fn.sum("m", "o"))
        return g.ndata["o"]


def test_rebound_plain_tensor_attributes_are_read_live():
    g, model = _graph(), _PlainTensorWeights()
    fast = gnnc.compile(model)
    for _ in range(3):
        torch.testing.assert_close(fast(g), model(g))
        fast(g).sum().backward()
        model.k_weight = (model.k_weight.detach() - 0.1 * model.k_weight.grad).requires_grad_()


def test_rebound_parameters_of_bound_modules_are_read_live():
    g, layer = _graph(), nn.Linear(D, D).double()

    def run(g):
        g.update_all(lambda e: {"m": layer(e.src["h"])}, fn.sum("m", "o"), compile=True)
        return g.ndata["o"]

    run(g)
    layer.weight = nn.Parameter(torch.randn(D, D, dtype=torch.float64))
    expected = (g.ndata["h"] @ layer.weight.T + layer.bias).detach()
    torch.testing.assert_close(run(g).detach().sum(), gnnc_sum_by_dst(g, expected))


def gnnc_sum_by_dst(g, rows):
    src, dst = g.find_edges()
    return torch.zeros_like(rows).index_add_(0, dst, rows[src]).sum()


def test_tensors_derived_inside_the_udf_from_closure_tensors_stay_live():
    g = _graph()
    weight = torch.randn(2, D, D, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD([weight], lr=0.1)

    def run(g, flag):
        def message(edges):
            embed = weight.view(-1, D)  # derived inside the UDF: must not be frozen at trace time
            return {"m": edges.src["h"] @ embed[D:] + embed[0]}

        g.update_all(message, fn.sum("m", "o"), compile=flag)
        return g.ndata["o"]

    for _ in range(3):
        _both(run, g, [weight])
        run(g, True).sum().backward()
        opt.step()
        opt.zero_grad()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_appnp_teleport_term_closed_over_by_the_node_udf(seed):
    """APPNP / GCNII as users write them: k hops whose apply_node_func adds ``alpha * h0``, a tensor of the
    forward with a row per node, reached by closure (it used to fall back: stand-in rows met real ones)."""
    g = random_homograph(9, 30, seed)  # zero in-degree nodes, self loops, multi-edges
    g.ndata["h"] = torch.randn(9, D, dtype=torch.float64, requires_grad=True)
    g.edata["w"] = torch.rand(g.num_edges(), 1, dtype=torch.float64)
    lin = nn.Linear(D, D).double()

    def run(g, flag):
        h0 = lin(g.ndata["h"])
        with g.local_scope():
            g.ndata["z"] = h0
            for _ in range(3):
                g.update_all(
                    fn.u_mul_e("z", "w", "m"),
                    fn.sum("m", "z"),
                    lambda nodes: {"z": 0.9 * nodes.data["z"] + 0.1 * h0},
                    compile=flag,
                )
            return g.ndata["z"]

    _both(run, g, list(lin.parameters()))


@pytest.mark.parametrize("seed", [0, 1])
def test_a_per_type_tensor_closed_over_by_a_relations_node_udf(seed):
    """``update_all(..., etype=...)`` whose apply_node_func adds a tensor of the forward with a row per node of
    the relation's destination type (it used to fall back as 'a gnnc bug': only whole-graph calls bound such
    a tensor as node rows). 'likes' ends at items, 'follows' at users; both have unreached nodes."""
    g = random_heterograph(seed)
    g.ndata_all["h"] = torch.randn(g.num_nodes(), D, dtype=torch.float64, requires_grad=True)
    lin = nn.Linear(D, D).double()

    def run(g, flag):
        with g.local_scope():
            item0, user0 = lin(g.nodes["item"].data["h"]), lin(g.nodes["user"].data["h"])
            g.update_all(
                fn.copy_u("h", "m"),
                fn.sum("m", "o"),
                lambda nodes: {"o": nodes.data["o"] + item0},
                etype="likes",
                compile=flag,
            )
            g.update_all(
                lambda e: {"m": e.src["h"] * e.dst["h"]},
                fn.mean("m", "o"),
                lambda nodes: {"o": torch.tanh(nodes.data["o"]) * user0 + nodes.data["h"]},
                etype="follows",
                compile=flag,
            )
            return torch.cat([g.nodes["item"].data["o"], g.nodes["user"].data["o"]])

    _both(run, g, list(lin.parameters()))


# --------------------------------------------------------------- masks and mixed dtypes in messages
def _masked_graph(seed):
    """``_graph`` with a bool and an int edge feature, float32 edge weights and a bool node feature."""
    g = _graph(seed)
    gen = torch.Generator().manual_seed(seed)
    g.edata["b"] = torch.rand(g.num_edges(), 1, generator=gen) > 0.5
    g.edata["t"] = torch.randint(0, 3, (g.num_edges(), 1), generator=gen)
    g.edata["w32"] = torch.rand(g.num_edges(), 1, generator=gen, dtype=torch.float32)
    g.ndata["hb"] = torch.rand(g.num_nodes(), D, generator=gen) > 0.5
    return g


def _reduced(message, reduce):
    def run(g, flag):
        g.update_all(message, getattr(fn, reduce)("m", "o"), compile=flag)
        return g.ndata["o"]

    return run


@pytest.mark.parametrize(
    "message, reduce",
    [
        # reorder moved ``x.dtype`` (a dtype, not rows) as if it were node rows to gather
        (lambda e: {"m": e.src["h"] * (e.dst["h"] > 0).to(e.src["h"].dtype)}, "sum"),
        (lambda e: {"m": e.src["h"] * (e.dst["h"] > 0).to(e.src["h"].dtype)}, "max"),
        (lambda e: {"m": e.src["h"] * (e.src["h"] > 0).to(dtype=e.src["h"].dtype)}, "mean"),
        # a float32 mask times float64 features: fused kernels were handed operands of two dtypes
        (lambda e: {"m": e.src["h"] * (e.src["h"] > e.dst["h"]).float()}, "sum"),
        (lambda e: {"m": e.src["h"] * (e.dst["h"] > 0).float()}, "max"),
    ],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_a_mask_cast_in_the_message_compiles(message, reduce, seed):
    _both(_reduced(message, reduce), _graph(seed))


@pytest.mark.parametrize(
    "message, reduce",
    [
        # float times bool: the fused spmm or SDDMM was handed the bool operand as is
        (lambda e: {"m": e.src["h"] * (e.src["h"] > e.dst["h"])}, "sum"),
        (lambda e: {"m": (e.src["h"] > e.dst["h"]) * e.src["h"]}, "mean"),
        (lambda e: {"m": e.src["h"] * e.dst["hb"]}, "max"),
        (fn.u_mul_e("h", "b", "m"), "sum"),
        (fn.u_mul_v("h", "hb", "m"), "min"),
        # float times int, float64 times float32
        (fn.u_mul_e("h", "t", "m"), "mean"),
        (lambda e: {"m": e.src["h"] * e.data["w32"]}, "sum"),
    ],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_float_features_times_a_mask_or_another_dtype_compile_as_torch_promotes(message, reduce, seed):
    _both(_reduced(message, reduce), _masked_graph(seed))


# Row-wise operators users reach for besides the common ones: each compiled without a fallback (``_both``
# turns one into an error) and equal to eager, values and gradients. Rounding ones (floor, round, ...) have
# zero gradients; the feature is still differentiated through the other term.
@pytest.mark.parametrize(
    "message",
    [
        lambda e: {"m": torch.chunk(e.src["h"], 2, dim=-1)[0] * torch.sigmoid(torch.chunk(e.dst["h"], 2, -1)[1])},
        lambda e: {"m": torch.cat(torch.split(e.src["h"], [1, D - 1], dim=1)[::-1], 1)},
        lambda e: {"m": torch.split(e.src["h"], 2, -1)[1].repeat(1, 2)},
        lambda e: {
            "m": e.src["h"]
            + torch.floor(e.dst["h"])
            + torch.ceil(e.src["h"])
            + torch.round(e.dst["h"])
            + torch.trunc(e.src["h"])
        },
        lambda e: {
            "m": torch.tan(torch.tanh(e.src["h"]))
            + torch.atan(e.dst["h"])
            + torch.sinh(e.src["h"])
            + torch.cosh(e.dst["h"] * 0.5)
        },
        lambda e: {
            "m": torch.exp2(torch.tanh(e.src["h"]))
            + torch.log2(1 + e.dst["h"].abs())
            + torch.log10(2 + e.src["h"].abs())
        },
        lambda e: {"m": torch.clamp_min(e.src["h"], 0.1) * torch.clamp_max(e.dst["h"], 0.2)},
        lambda e: {
            "m": e.src["h"] * torch.logical_and(e.src["h"] > 0, torch.logical_not(e.dst["h"] > 0))
            + e.dst["h"] * torch.logical_or(e.src["h"] > 0, e.dst["h"] < -1)
        },
        lambda e: {
            "m": F.relu6(4 * e.src["h"])
            + F.hardswish(e.dst["h"])
            + F.hardsigmoid(e.src["h"])
            + F.logsigmoid(e.dst["h"])
            + F.softsign(e.src["h"])
            + F.tanhshrink(e.dst["h"])
        },
        lambda e: {
            "m": e.src["h"].sin() * e.dst["h"].cos()
            + e.src["h"].tanh().tan()
            + e.dst["h"].atan()
            + e.src["h"].erf()
            + e.dst["h"].sign() * e.src["h"]
        },
        lambda e: {
            "m": e.src["h"].log1p().nan_to_num()
            + e.dst["h"].expm1()
            + e.src["h"].floor()
            + e.dst["h"].ceil()
            + e.src["h"].round()
            + e.dst["h"].trunc()
        },
        lambda e: {
            "m": e.src["h"].maximum(e.dst["h"])
            - e.src["h"].minimum(e.dst["h"] * 2)
            + e.src["h"].clamp_min(0).clamp_max(1)
            + e.dst["h"].tanh().exp2()
            + e.src["h"].abs().log2().clamp_min(-4)
        },
        lambda e: {
            "m": e.src["h"] * (e.src["h"] > 0).logical_and(e.dst["h"] < 0).logical_or(e.src["h"] > 1).logical_not()
        },
    ],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_less_common_row_wise_operators_compile(message, seed):
    _both(_sum_update(message), _graph(seed))


def _circular_correlation(a, b):
    """CompGCN's ccorr composition (DGL's examples/pytorch/compGCN), as its authors wrote it."""
    return torch.fft.irfft(torch.conj(torch.fft.rfft(a)) * torch.fft.rfft(b), a.shape[-1])


# FFTs along a feature dim work row by row: complex values inside a message compile as torch calls.
@pytest.mark.parametrize(
    "message",
    [
        lambda e: {"m": _circular_correlation(e.src["h"], e.dst["h"])},
        lambda e: {"m": torch.fft.ifft(torch.fft.fft(e.src["h"], dim=1).conj() * e.dst["h"], dim=-1).real},
        lambda e: {"m": torch.fft.irfft(torch.fft.rfft(e.src["h"], norm="ortho"), D, norm="ortho").mul(e.dst["h"])},
    ],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_fft_along_features_compiles(message, seed):
    _both(_sum_update(message), _graph(seed))


def test_fft_along_rows_falls_back():
    """torch.fft over dim 0 mixes edges: refused at compile time, run eagerly with eager's numbers."""
    run = _sum_update(lambda e: {"m": torch.fft.rfft(e.src["h"], dim=0).real[:1].expand_as(e.src["h"])})
    g = _graph(0)
    with pytest.warns(FallbackWarning, match="fft_rfft"):
        compiled_out = run(g, True)
    torch.testing.assert_close(compiled_out, run(g, False))


# Tensors a UDF makes with its batch's row count (``torch.zeros(h.shape[0], d)``, ``h.new_ones(h.size(0), 1)``):
# tensors of the batch's rows, compiled; each value of a row is the same wherever the row goes.
def _factory_message(e):
    h = e.src["h"]
    pad = torch.zeros(h.shape[0], 2, dtype=h.dtype)
    gate = h.new_ones(h.size(0), 1) * 0.5 + torch.full((h.shape[0], 1), 0.25, dtype=h.dtype, device=h.device)
    return {
        "m": torch.cat([h * gate, pad], 1)[:, :D]
        + e.dst["h"].new_zeros(e.dst["h"].shape)
        + torch.ones(h.size()[0], D, dtype=h.dtype) * e.dst["h"]
    }


def _factory_reduce(nodes):
    m = nodes.mailbox["m"]
    return {"o": torch.zeros(m.shape[0], D, dtype=m.dtype) + m.sum(1) * m.new_full((m.size(0), 1), 2.0)}


def _factory_update(nodes):
    o = nodes.data["o"]
    acc = torch.zeros(o.shape[0], D, dtype=o.dtype)
    acc += nodes.data["h"]  # in place, on the fresh tensor
    return {"o": torch.cat([torch.tanh(o) + acc, torch.empty(o.shape[0], 0, dtype=o.dtype)], 1)}


def _graph_of(kind):
    g = {
        "random": lambda: random_homograph(12, 40, 3),
        "one node": lambda: gnnc.graph(([0], [0]), num_nodes=1),
        "no edges": lambda: gnnc.graph(([], []), num_nodes=3),
    }[kind]()
    g.ndata["h"] = torch.randn(g.num_nodes(), D, dtype=torch.float64, requires_grad=True)
    return g


@pytest.mark.parametrize(
    "reduce, update",
    [
        (fn.sum("m", "o"), None),
        (fn.max("m", "o"), _factory_update),
        (_factory_reduce, None),
        (_factory_reduce, _factory_update),
    ],
)
@pytest.mark.parametrize("graph", ["random", "one node", "no edges"])
def test_tensors_sized_by_the_batch_rows_compile(reduce, update, graph):
    g = _graph_of(graph)
    start = torch.randn(g.num_nodes(), D, dtype=torch.float64, requires_grad=True)

    def run(g, flag):
        g.ndata["o"] = start  # as DGL, a reduce UDF is not called without edges: o stays, the update reads it
        g.update_all(_factory_message, reduce, update, compile=flag)
        return g.ndata["o"]

    _both(run, g, [start])


def test_tensors_sized_by_the_batch_rows_in_every_relation_of_a_heterograph():
    """Per relation (one of them empty), the rows are that relation's edges and its destination's nodes."""
    g = random_heterograph(seed=2)
    g.ndata_all["h"] = torch.randn(g.num_nodes(), D, dtype=torch.float64, requires_grad=True)

    def run(g, flag):
        g.multi_update_all(
            {etype: (_factory_message, _factory_reduce) for etype in g.canonical_etypes}, "sum", compile=flag
        )
        return g.ndata_all["o"]

    _both(run, g)


def test_a_tensor_sized_by_the_rows_and_filled_in_place_gives_eagers_numbers():
    """``z = zeros(rows, d); z[:, :2] = ...`` (compiled or run eagerly, never other numbers)."""

    def message(e):
        h = e.src["h"]
        z = torch.zeros(h.shape[0], D, dtype=h.dtype)
        z[:, :2] = h[:, :2] * e.dst["h"][:, 2:]
        return {"m": z}

    g = _graph()
    out = []
    for flag in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FallbackWarning)
            g.update_all(message, fn.sum("m", "o"), compile=flag)
        out.append(g.ndata["o"])
    torch.testing.assert_close(out[1], out[0])


def test_a_float32_factor_is_not_summed_in_float32_ahead_of_a_float64_destination_factor():
    """``src32 * dst64``: eager sums float64 products; postponing the destination factor summed the
    float32 rows in float32 (silently less precise). Gradients reach the float32 feature too."""
    g = _graph()
    h32 = torch.randn(g.num_nodes(), D, dtype=torch.float32, requires_grad=True)
    g.ndata["h32"] = h32
    _both(_reduced(lambda e: {"m": e.src["h32"] * e.dst["h"]}, "sum"), g, [h32])


def test_a_failing_builtin_call_names_the_users_line(monkeypatch):
    """A compiler failure in a call of built-ins names the built-ins and the user's line that made the call,
    not a line of gnnc's own ``function.py``."""
    from gnnc.compiler.passes import pipeline

    def broken(dfg):
        raise RuntimeError("broken pass")

    monkeypatch.setitem(pipeline.PASSES, "broken", broken)
    monkeypatch.setattr(pipeline, "PIPELINE", (*pipeline.PIPELINE, "broken"))
    g = _graph()

    def call():
        g.update_all(fn.u_mul_e("h", "w", "m"), fn.sum("m", "o"), compile=True)

    with pytest.warns(FallbackWarning) as record:
        call()
    (message,) = [str(w.message) for w in record]
    line = call.__code__.co_firstlineno + 1
    assert "u_mul_e, sum" in message and f"{__file__}:{line}" in message and "function.py" not in message


def _scaled_if_present_reduce(nodes):
    out = nodes.mailbox["m"].sum(1)
    if "scale" in nodes.data:
        out = out * nodes.data["scale"]
    return {"o": out}


def _scaled_if_present_update(nodes):
    return {"o": nodes.data["o"] * nodes.data["scale"]} if "scale" in nodes.data.keys() else {"o": nodes.data["o"]}


@pytest.mark.parametrize("stage", ["reduce", "update"])
def test_a_node_udf_asking_which_node_features_exist_is_answered_from_node_data(stage):
    """``'scale' in nodes.data`` was answered from the edge features: False with a node feature 'scale', True
    with only an edge feature of that name. Node feature present, absent (an edge one of that name), present."""
    reduce, update = (
        (_scaled_if_present_reduce, None) if stage == "reduce" else (fn.sum("m", "o"), _scaled_if_present_update)
    )
    for present in (True, False, True):
        g = _graph()
        if present:
            g.ndata["scale"] = torch.rand(12, 1, dtype=torch.float64) + 1.0
        else:
            g.edata["scale"] = torch.rand(g.num_edges(), 1, dtype=torch.float64)

        def run(g, flag):
            g.update_all(fn.copy_u("h", "m"), reduce, update, compile=flag)
            return g.ndata["o"]

        _both(run, g)


def _double_if_reduced(nodes):
    return {"o": 2 * nodes.data["o"]} if "o" in nodes.data else {}


def _double_reduced_keys(nodes):
    return {k: 2 * nodes.data[k] for k in nodes.data.keys() if k.startswith("o")}


@pytest.mark.parametrize("update", [_double_if_reduced, _double_reduced_keys])
@pytest.mark.parametrize("builtin", [True, False])
def test_an_update_function_sees_what_its_reduce_returned(update, builtin):
    """The update function's ``nodes.data`` holds the reduce's results, as eager's (and DGL's) does: the
    compiled trace answered ``'o' in nodes.data`` from the graph's stored features alone, dropped the update
    and returned ``o`` undoubled, silently."""
    reduce = fn.sum("m", "o") if builtin else (lambda nodes: {"o": nodes.mailbox["m"].sum(1)})

    def run(g, flag):
        with g.local_scope():
            g.update_all(fn.copy_u("h", "m"), reduce, update, compile=flag)
            return g.ndata["o"]

    _both(run, _graph())


@pytest.mark.parametrize("stage", ["reduce", "update"])
def test_node_udfs_that_read_the_feature_they_overwrite(stage):
    g = _graph()
    lin = nn.Linear(2 * D, D).double()

    def reduce(nodes):
        return {"h": torch.relu(lin(torch.cat([nodes.data["h"], nodes.mailbox["m"].mean(1)], -1)))}

    def update(nodes):
        return {"h": torch.relu(lin(torch.cat([nodes.data["h"], nodes.data["s"]], -1)))}

    def run(g, flag):
        with g.local_scope():
            if stage == "reduce":
                g.update_all(fn.copy_u("h", "m"), reduce, compile=flag)
            else:
                g.update_all(fn.copy_u("h", "m"), fn.sum("m", "s"), update, compile=flag)
            return g.ndata["h"]

    _both(run, g, list(lin.parameters()))


@pytest.mark.parametrize("name", ["u_mul_e", "u_add_v", "u_sub_v", "u_dot_v", "e_mul_u", "v_div_e", "u_mul_v"])
def test_builtin_binary_messages_compile(name):
    g = _graph()
    g.ndata["h2"] = torch.randn(12, 2, D, dtype=torch.float64)  # rank 3 against rank 2: DGL's alignment
    lhs, rhs = name.split("_")[0], name.split("_")[2]
    fields = {"u": "h", "v": "h", "e": "w"}
    message = getattr(fn, name)(fields[lhs], fields[rhs], "m")
    _both(_sum_update(message), g)
    if "e" not in (lhs, rhs):
        _both(_sum_update(getattr(fn, name)("h2", "h", "m")), g)


# --------------------------------------------------------------- the plan cache's key
def _traces_after(call):
    before = len(compiled._TRACES)
    call()
    return len(compiled._TRACES) - before


def _make_closure(value):
    def message(edges):
        return {"m": edges.src["h"] * value}

    return message


def test_cache_key_covers_closure_values_defaults_and_globals(monkeypatch):
    compiled.clear_cache()  # counted by the caches' sizes, which stop growing at their bounds
    g = _graph()
    update = lambda m: g.update_all(m, fn.sum("m", "o"), compile=True)
    first = _make_closure(2.0)
    assert _traces_after(lambda: update(first)) == 1
    assert _traces_after(lambda: update(_make_closure(2.0))) == 0  # same code, same closure value
    assert _traces_after(lambda: update(_make_closure(3.0))) == 1
    torch.testing.assert_close(g.ndata["o"], 3.0 * _sum_by_dst(g, g.ndata["h"]))

    def with_default(edges, k=1.0):
        return {"m": edges.src["h"] * k}

    update(with_default)
    with_default.__defaults__ = (5.0,)
    assert _traces_after(lambda: update(with_default)) == 1
    torch.testing.assert_close(g.ndata["o"], 5.0 * _sum_by_dst(g, g.ndata["h"]))

    monkeypatch.setitem(globals(), "GLOBAL_LINEAR", nn.Linear(D, D).double())  # a global rebound
    assert _traces_after(lambda: update(_global_module_message)) == 1
    assert _traces_after(lambda: update(_global_module_message)) == 0


def _sum_by_dst(g, rows):
    src, dst = g.find_edges()
    return torch.zeros_like(rows).index_add_(0, dst, rows[src])


def test_cache_key_covers_module_mode_code_and_dtypes():
    compiled.clear_cache()  # counted by the caches' sizes, which stop growing at their bounds
    g = _graph()
    layer = nn.Sequential(nn.Linear(D, D), nn.Dropout(0.5)).double()
    message = lambda e: {"m": layer(e.src["h"])}
    update = lambda m: g.update_all(m, fn.sum("m", "o"), compile=True)
    layer.eval()
    update(message)
    layer.train()
    assert _traces_after(lambda: update(message)) == 1
    other = lambda e: {"m": layer(e.src["h"]) * 2}  # another code object
    assert _traces_after(lambda: update(other)) == 1
    plans = len(compiled._CACHE)
    layer.eval()
    g.ndata["h"] = g.ndata["h"].float()
    layer.float()
    update(message)
    assert len(compiled._CACHE) == plans + 1  # the dtype read is part of the plan's key
    assert g.ndata["o"].dtype == torch.float32


# --------------------------------------------------------------- errors read like eager's
def test_a_shape_error_reports_the_users_shapes_and_line():
    g = gnnc.graph(([0, 1, 2, 3], [1, 2, 3, 0]), num_nodes=4)
    g.ndata["h"] = torch.randn(4, 16)
    layer = nn.Linear(8, 4)

    def message(edges):
        return {"m": layer(edges.src["h"])}

    with pytest.raises(RuntimeError) as info:
        g.update_all(message, fn.sum("m", "o"), compile=True)
    assert "4x16 and 8x4" in str(info.value)
    text = "".join(traceback.format_exception(info.value))
    assert 'return {"m": layer(edges.src["h"])}' in text and "1039" not in text


def test_a_shape_error_in_the_node_udf_is_the_users_error_with_no_fallback_warning():
    """It used to warn first 'compiling failed ((1031x16 and 8x2); a gnnc bug)': the eager check that tells a
    user's error from the compiler's ran the message and reduce UDFs but not the apply_node_func."""
    g = gnnc.graph(([0, 1, 2, 3], [1, 2, 3, 0]), num_nodes=4)
    g.ndata["h"] = torch.randn(4, 16)
    layer = nn.Linear(8, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        with pytest.raises(RuntimeError, match=r"4x16 and 8x2"):
            g.update_all(
                fn.copy_u("h", "m"), fn.sum("m", "o"), lambda nodes: {"o": layer(nodes.data["o"])}, compile=True
            )
    assert "o" not in g.ndata


def test_a_message_scaled_by_its_row_count_compiles():
    """``x * x.shape[0]``: the size read off an edge tensor was taken for an edge weight to fuse."""

    def run(g, flag):
        g.update_all(
            lambda e: {"m": e.src["h"] * e.src["h"].shape[0]},
            lambda nodes: {"o": nodes.mailbox["m"].sum(1)},
            compile=flag,
        )
        return g.ndata["o"]

    _both(run, _graph())


def test_a_deferred_sddmm_whose_operand_is_a_module_call():
    """Found by the fuzzer: cross-call deferral pruned a graph holding a call_module before it had a module."""
    lin = nn.Linear(D, D).double()

    def run(g, flag):
        g.apply_edges(lambda e: {"a": F.leaky_relu(e.src["h"] - lin(e.dst["h"]), 0.1)}, compile=flag)
        return g.edata["a"]

    _both(run, _graph(), list(lin.parameters()))


def test_a_plan_that_failed_once_is_rebuilt_not_kept_eager():
    """An out-of-range relation index fails once (eager's IndexError); fixed, the next call compiles again."""
    g = _graph()
    weight = torch.randn(3, D, D, dtype=torch.float64)
    g.edata["rel"] = torch.full((g.num_edges(),), 7)

    def message(edges):
        return {"m": torch.bmm(edges.src["h"].unsqueeze(1), weight[edges.data["rel"]]).squeeze(1)}

    with pytest.raises(IndexError):
        g.update_all(message, fn.sum("m", "o"), compile=True)
    g.edata["rel"] = torch.arange(g.num_edges()) % 3
    with compiled.recording() as plans:
        g.update_all(message, fn.sum("m", "o"), compile=True)
    assert plans[0].module is not None
    fast = g.ndata["o"]
    g.update_all(message, fn.sum("m", "o"))
    torch.testing.assert_close(fast, g.ndata["o"])


# --------------------------------------------------------------- numpy constants in UDFs
NP_SCALE = np.float32(1.5)  # module-level numpy values UDFs read
NP_ROW = np.linspace(0.5, 2.0, D)
AVG_D = {"log": np.mean(np.log(np.array([2.0, 3.0, 5.0]) + 1))}  # PNA's average log-degree, computed by numpy


def _graph_in(dtype):
    g = _graph()
    g.ndata["h"] = g.ndata["h"].detach().to(dtype).requires_grad_()
    return g


def _plan_ran(run):
    """``run(g, flag)``, asserting that its compiled call ran a compiled plan."""

    def checked(g, flag):
        with compiled.recording() as plans:
            out = run(g, flag)
        assert not flag or any(p.dfg is not None for p in plans), "no compiled plan ran"
        return out

    return checked


@pytest.mark.parametrize(
    "message",
    [
        lambda e: {"m": e.src["h"] / np.float64(2.0)},
        lambda e: {"m": np.float32(1.7) * e.src["h"] - np.int64(3)},  # numpy on the left defers to the tensor
        lambda e: {
            "m": torch.exp((e.src["h"] * e.dst["h"] / np.sqrt(D)).clamp(np.float32(-5), 5))
        },  # graph transformer
        lambda e: {"m": e.src["h"] * np.bool_(True) + e.src["h"].abs() ** np.float32(1.5)},
        lambda e: {"m": e.src["h"] * NP_SCALE},
    ],
)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_numpy_scalars_in_a_message_compile_as_the_numbers_torch_reads(message, dtype):
    """A float32 feature divided by np.float64(2.0) stays float32, as eager's torch keeps it."""
    _both(_plan_ran(_sum_update(message)), _graph_in(dtype))


def _pna_degree_scalers(nodes):
    """PNA's scalers: numpy logs of the mailbox's degree, over a numpy average."""
    h = nodes.mailbox["m"]
    degree = h.shape[-2]
    h = torch.cat([torch.mean(h, dim=1), torch.max(h, dim=1)[0]], dim=1)
    return {"o": torch.cat([h * (np.log(degree + 1) / AVG_D["log"]), h * (AVG_D["log"] / np.log(degree + 1))], 1)}


@pytest.mark.parametrize(
    "reduce", [lambda nodes: {"o": nodes.mailbox["m"].sum(1) * np.float32(0.5)}, _pna_degree_scalers]
)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_numpy_in_a_reduce_udf_compiles(reduce, dtype):
    def run(g, flag):
        g.update_all(fn.copy_u("h", "m"), reduce, compile=flag)
        return g.ndata["o"]

    _both(_plan_ran(run), _graph_in(dtype))


@pytest.mark.parametrize(
    "message",
    [
        lambda e: {"m": e.src["h"] * torch.from_numpy(NP_ROW)},
        lambda e: {"m": e.src["h"] + torch.tensor(NP_ROW)},  # float32 features + a float64 row: float64, as torch
        lambda e: {"m": e.src["h"] * torch.as_tensor(NP_ROW.astype(np.float32))},
    ],
)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_numpy_arrays_made_tensors_in_a_message_compile(message, dtype):
    _both(_plan_ran(_sum_update(message)), _graph_in(dtype))


@pytest.mark.filterwarnings("ignore:__array_wrap__:DeprecationWarning")  # numpy's, on eager's product
def test_a_tensor_times_a_numpy_array_runs_as_eager_runs_it():
    """``h * array`` is numpy's product (numpy's dtypes, no gradient; eager raises for h that needs grad):
    it falls back, naming the fix, with eager's numbers."""
    g = _graph()
    g.ndata["h"] = g.ndata["h"].detach().float()

    def message(e):
        return {"m": e.src["h"] * NP_ROW}

    g.update_all(message, fn.sum("m", "o"))
    expected = g.ndata["o"]
    with pytest.warns(FallbackWarning, match="numpy array.*torch.from_numpy"):
        g.update_all(message, fn.sum("m", "o"), compile=True)
    torch.testing.assert_close(g.ndata["o"], expected)


def test_a_changed_numpy_constant_retraces(monkeypatch):
    """numpy values key the trace by type and content: a closure value 2.0 turned np.float64(2.0) (equal, yet
    ``torch.tensor([v])`` is float64), a global rebound, and an array changed in place all retrace."""
    g = _graph_in(torch.float32)

    def update(message):
        g.update_all(message, fn.sum("m", "o"), compile=True)

    def scaled_by(value):
        return lambda e: {"m": e.src["h"] * torch.tensor([value])}

    update(scaled_by(2.0))
    assert g.ndata["o"].dtype == torch.float32
    assert _traces_after(lambda: update(scaled_by(np.float64(2.0)))) == 1
    assert g.ndata["o"].dtype == torch.float64

    row = np.ones(D)

    def message(e):
        return {"m": e.src["h"] * torch.tensor(row) * torch.tensor(NP_SCALE)}

    update(message)
    row *= 3.0
    assert _traces_after(lambda: update(message)) == 1
    torch.testing.assert_close(g.ndata["o"], _sum_by_dst(g, g.ndata["h"].double() * 4.5))
    monkeypatch.setitem(globals(), "NP_SCALE", np.float32(0.5))
    assert _traces_after(lambda: update(message)) == 1
    torch.testing.assert_close(g.ndata["o"], _sum_by_dst(g, g.ndata["h"].double() * 1.5))


# --------------------------------------------------------------- idioms together, over optimizer steps
_REL_ATT = None  # a module-level tensor the edge UDF reads, rebound after every step


class _MixedIdioms(nn.Module):
    """HGT-style per-head relation matrices from a global, GATConv-style [1, H, F] attention vectors, a
    plain tensor attribute bound as a default argument, and a reduce that reads the feature it overwrites."""

    def __init__(self, heads, width):
        super().__init__()
        self.attn_l = nn.Parameter(torch.randn(1, heads, width, dtype=torch.float64))
        self.attn_r = nn.Parameter(torch.randn(1, heads, width, dtype=torch.float64))
        self.w = torch.randn(4, heads, width, width, dtype=torch.float64, requires_grad=True)

    def attention(self, edges):
        k = torch.matmul(edges.src["z"].unsqueeze(2), _REL_ATT[edges.data["t"]]).squeeze(2)
        e = (edges.src["z"] * self.attn_l).sum(-1) + (edges.dst["z"] * self.attn_r).sum(-1)
        return {"e": F.leaky_relu(e), "k": k}

    def forward(self, g, z):
        with g.local_scope():
            g.ndata["z"] = z
            g.apply_edges(self.attention)

            def message(edges, w=self.w):
                return {
                    "v": torch.matmul(edges.data["k"].unsqueeze(-2), w[edges.data["t"]]).squeeze(-2),
                    "e": edges.data["e"],
                }

            def reduce(nodes):
                alpha = torch.softmax(nodes.mailbox["e"], 1).unsqueeze(-1)
                return {"z": nodes.data["z"] + (alpha * nodes.mailbox["v"]).sum(1)}

            g.update_all(message, reduce)
            return g.ndata["z"]


def _mixed_idioms_steps(g, compiled):
    global _REL_ATT
    torch.manual_seed(1)
    net = _MixedIdioms(2, 3)
    _REL_ATT = torch.randn(4, 2, 3, 3, dtype=torch.float64, requires_grad=True)
    f = gnnc.compile(net) if compiled else net
    z = torch.randn(g.num_nodes(), 2, 3, dtype=torch.float64)
    seen = []
    for _ in range(3):
        out = f(g, z)
        grads = torch.autograd.grad(out.square().sum(), [*net.parameters(), net.w, _REL_ATT])
        with torch.no_grad():
            for p, grad in zip(net.parameters(), grads):
                p -= 0.01 * grad
        net.w = (net.w - 0.01 * grads[-2]).detach().requires_grad_()
        _REL_ATT = (_REL_ATT - 0.01 * grads[-1]).detach().requires_grad_()
        seen += [out.detach(), *grads]
    return seen


def test_mixed_idioms_match_eager_over_optimizer_steps_on_an_unsorted_graph():
    """The typed per-head lookup, compact pairs, internal-order edge data and merged attention dots all at
    once, with weights rebound between steps: every output and gradient of three steps equals eager's."""
    base = random_homograph(30, 120, 3)
    src, dst = base.edges()
    order = torch.randperm(src.numel(), generator=torch.Generator().manual_seed(0))
    g = gnnc.graph((src[order], dst[order]), num_nodes=30)  # user edge order differs from the internal one
    g.edata["t"] = torch.randint(0, 4, (g.num_edges(),), generator=torch.Generator().manual_seed(1))
    _steps_match_eager(_mixed_idioms_steps, g)


def _steps_match_eager(steps, g):
    """``steps(g, compiled)``'s outputs and gradients, compiled without a fallback, equal eager's."""
    want = steps(g, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        got = steps(g, True)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


_GATE = nn.Linear(D // 2, D // 2).double()  # a module-level module the message reaches


def _gated_message(edges):
    """A module-level message: GLU-style halves by ``torch.chunk``, padded back by a tensor of the rows."""
    a, b = torch.chunk(edges.src["h"], 2, dim=-1)
    pad = torch.zeros(a.shape[0], D // 2, dtype=a.dtype)
    return {"m": torch.cat([_GATE(a) * torch.sigmoid(b), pad], -1) + edges.dst["h"].flip(-1)}


class _NewFormsInUserStyles(nn.Module):
    """The forms compiled since the factories and less common operators, in styles of other authors: the
    module-level message above, a plain tensor attribute bound as a default argument and rebound after each
    step, and an update that reads the feature it overwrites with a gate made of the rows' count."""

    def __init__(self):
        super().__init__()
        self.scale = torch.rand(D, dtype=torch.float64, requires_grad=True)

    def forward(self, g, h):
        with g.local_scope():
            g.ndata["h"] = h

            def update(nodes, scale=self.scale):
                o = nodes.data["o"]
                gate = o.new_ones(o.size(0), 1) * 0.5
                return {"o": torch.clamp_min(o, -1.0) * scale * gate + torch.roll(nodes.data["h"], 1, -1)}

            g.update_all(_gated_message, fn.sum("m", "o"), update)
            g.apply_nodes(lambda nodes: {"o": nodes.data["o"] + torch.atan(nodes.data["o"])})
            return g.ndata["o"]


def _new_forms_steps(g, compiled):
    torch.manual_seed(2)
    net = _NewFormsInUserStyles()
    f = gnnc.compile(net) if compiled else net
    h = torch.randn(g.num_nodes(), D, dtype=torch.float64)
    params = [*_GATE.parameters()]
    saved = [p.detach().clone() for p in params]
    seen = []
    for _ in range(2):
        out = f(g, h)
        grads = torch.autograd.grad(out.square().sum(), [*params, net.scale])
        with torch.no_grad():
            for p, grad in zip(params, grads):
                p -= 0.01 * grad
        net.scale = (net.scale - 0.01 * grads[-1]).detach().requires_grad_()
        seen += [out.detach(), *grads]
    with torch.no_grad():
        for p, s in zip(params, saved):
            p.copy_(s)
    return seen


def test_new_forms_in_other_authors_styles_match_eager_over_optimizer_steps():
    _steps_match_eager(_new_forms_steps, random_homograph(20, 70, 5))


class _GINWithBatchNorm(nn.Module):
    """DGL's GIN example: sum of neighbours, then an apply-node MLP with batch norm (training mode)."""

    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(D, D), nn.BatchNorm1d(D), nn.ReLU()).double()

    @staticmethod
    def _reduce(nodes):
        return {"h": torch.relu(nodes.mailbox["m"].sum(1)).view(-1, D)}

    def _apply(self, nodes):
        return {"h": self.mlp(nodes.data["h"])}

    def forward(self, g, compile_flag):
        with g.local_scope():
            g.update_all(fn.copy_u("h", "m"), self._reduce, self._apply, compile=compile_flag)
            return g.ndata["h"]


@pytest.mark.parametrize("registered", [False, True])
def test_compiling_leaves_batch_norm_statistics_as_eager_leaves_them(registered, monkeypatch):
    """Compiling runs the UDFs on stand-in rows (shape propagation, the reduce's probe); batch norm's
    running statistics must see only the real calls, so a compiled model's state after training steps
    equals eager's, whether the call falls back (batch norm is no compiled operator) or compiles (a
    user registered a rule for it)."""
    if registered:
        monkeypatch.setitem(rules._USER_RULES, nn.BatchNorm1d, lambda node, res: ("Dense", res[0]))
    compiled.clear_cache()
    eager, fast = _GINWithBatchNorm(), _GINWithBatchNorm()
    fast.load_state_dict(eager.state_dict())
    g = _graph()
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error" if registered else "ignore", FallbackWarning)
            torch.testing.assert_close(fast(g, True), eager(g, False))
    compiled.clear_cache()
    for (name, a), b in zip(fast.state_dict().items(), eager.state_dict().values()):
        torch.testing.assert_close(a, b, msg=name)


@pytest.mark.parametrize("training", [False, True])
def test_batch_norm_in_a_message_mlp_compiles_in_eval_and_runs_eagerly_in_training(training):
    """PyG's EdgeConv ported to a UDF: an MLP with batch norm over cat([x_i, x_j - x_i]). In eval it normalizes
    each row by its running statistics (row-wise: compiled); in training by the batch's (all edges of a
    degree bucket in eager: it runs eagerly, with a FallbackWarning)."""
    mlp = nn.Sequential(nn.Linear(2 * D, D), nn.BatchNorm1d(D), nn.ReLU(), nn.Linear(D, D)).double()
    mlp[1].running_mean.uniform_(-0.5, 0.5)
    mlp[1].running_var.uniform_(0.5, 2.0)
    mlp.train(training)
    g = _graph()

    def run(g, flag):
        g.update_all(
            lambda e: {"m": mlp(torch.cat([e.dst["h"], e.src["h"] - e.dst["h"]], -1))}, fn.max("m", "o"), compile=flag
        )
        return g.ndata["o"]

    if not training:
        _both(run, g, list(mlp.parameters()))
        return
    with pytest.warns(FallbackWarning, match="BatchNorm1d"):
        fast = run(g, True)
    torch.testing.assert_close(fast, run(g, False))


@pytest.mark.parametrize("reduce", [fn.sum, fn.mean])
@pytest.mark.parametrize("edges", [6, 40])  # two sizes: the smallest graphs take the torch backend
def test_the_result_of_a_compiled_aggregation_can_be_written_in_place(reduce, edges):
    """``h = g.ndata['h']; h.mul_(2)`` after a sum or mean: eager allows it; the compiled result was a view made
    inside an autograd Function, which autograd refuses to let anyone write into."""
    g = random_homograph(12, edges, 7)
    x = torch.randn(12, 3, dtype=torch.float64, requires_grad=True)
    grads = []
    for compile_ in (False, True):
        g.ndata["x"] = x * 1.0
        g.edata["a"] = torch.linspace(-2.0, 2.0, g.num_edges(), dtype=torch.float64).unsqueeze(1)
        g.update_all(
            lambda edges: {"m": torch.sigmoid(edges.data["a"]) * edges.src["x"] + edges.dst["x"]},
            reduce("m", "h"),
            compile=compile_,
        )
        h = g.ndata["h"]
        h.mul_(2.0)
        grads.append(torch.autograd.grad(h.square().sum(), [x])[0])
    torch.testing.assert_close(grads[1], grads[0])

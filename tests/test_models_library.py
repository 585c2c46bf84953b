"""The DGL/PyG library layers (SAGEConv, GINConv, GATv2Conv, APPNPConv) and ``gnnc.ops.edge_softmax``.

Every layer, in float64 and eval mode, is checked three ways on awkward
graphs (zero in-degree nodes, self loops, multi-edges, no edges, one node):
compiled with backend torch and cpu equals eager (outputs and gradients of
every parameter and input, any FallbackWarning fails the test), and eager
equals an independent plain-torch reference (index_select / index_add /
scatter_reduce over ``g.find_edges()``). Graphs, parameter redrawing and
inputs are those of ``test_models_homo``.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import gnnc
import gnnc.function as fn
from gnnc.compiler.driver import FallbackWarning
from gnnc.models import APPNPConv, GATv2Conv, GINConv, SAGEConv

from .graphs import random_heterograph
from .reference_homo import edge_softmax as ref_softmax
from .reference_homo import scatter_max, scatter_sum
from .test_models_homo import GRAPHS, IN, Case, build, inputs

RTOL, ATOL = 1e-6, 1e-9
BACKENDS = ["torch", "cpu"]


# ------------------------------------------------------------------ references
def _mean(values, index, n):
    degree = torch.bincount(index, minlength=n).clamp(min=1).to(values.dtype)
    return scatter_sum(values, index, n) / degree.view((-1,) + (1,) * (values.dim() - 1))


def ref_sage(conv, g, x):
    src, dst = g.find_edges()
    n = g.num_nodes()
    if conv.aggregator_type == "mean":
        neigh = _mean(x[src], dst, n)
    elif conv.aggregator_type == "pool":
        neigh = scatter_max(torch.relu(x @ conv.fc_pool.weight.t() + conv.fc_pool.bias)[src], dst, n)
    else:
        degree = torch.bincount(dst, minlength=n).to(x.dtype).unsqueeze(-1)
        neigh = (scatter_sum(x[src], dst, n) + x) / (degree + 1)
    out = neigh @ conv.fc_neigh.weight.t()
    if conv.fc_self is not None:
        out = out + x @ conv.fc_self.weight.t()
    out = out if conv.bias is None else out + conv.bias
    out = out if conv.activation is None else conv.activation(out)
    return out if conv.norm is None else conv.norm(out)


def ref_gin(conv, g, x, edge_weight=None):
    src, dst = g.find_edges()
    n = g.num_nodes()
    msg = x[src] if edge_weight is None else x[src] * edge_weight
    reduce = {"sum": scatter_sum, "mean": _mean, "max": scatter_max}[conv.aggregator_type]
    out = (1 + conv.eps) * x + reduce(msg, dst, n)
    out = out if conv.apply_func is None else conv.apply_func(out)
    return out if conv.activation is None else conv.activation(out)


def gatv2_logits(conv, g, x):
    """Attention logits ``[E, heads]`` and source projections ``[N, heads, out]``."""
    src, dst = g.find_edges()
    s = F.linear(x, conv.fc_src.weight, conv.fc_src.bias).view(-1, conv.num_heads, conv.out_dim)
    d = F.linear(x, conv.fc_dst.weight, conv.fc_dst.bias).view(-1, conv.num_heads, conv.out_dim)
    raw = s[src] + d[dst]
    return (F.leaky_relu(raw, conv.leaky_relu.negative_slope) * conv.attn).sum(-1), s


def ref_gatv2(conv, g, x):
    src, dst = g.find_edges()
    logits, s = gatv2_logits(conv, g, x)
    alpha = ref_softmax(logits, dst, g.num_nodes())
    out = scatter_sum(alpha.unsqueeze(-1) * s[src], dst, g.num_nodes())
    if conv.res_fc is not None:
        out = out + conv.res_fc(x).view(-1, conv.num_heads, conv.out_dim)
    return out if conv.activation is None else conv.activation(out)


def ref_appnp(conv, g, x):
    src, dst = g.find_edges()
    n = g.num_nodes()
    coef = (
        torch.bincount(src, minlength=n).clamp(min=1).to(x.dtype).rsqrt()[src]
        * torch.bincount(dst, minlength=n).clamp(min=1).to(x.dtype).rsqrt()[dst]
    )
    h = x
    for _ in range(conv.k):
        h = (1 - conv.alpha) * scatter_sum(coef.view((-1,) + (1,) * (x.dim() - 1)) * h[src], dst, n) + conv.alpha * x
    return h


# ----------------------------------------------------------------------- cases
def _mlp():
    return nn.Sequential(nn.Linear(IN, 5), nn.ReLU(), nn.Linear(5, 3))


CASES = {
    "sage_mean": Case(lambda: SAGEConv(IN, 4, activation=torch.tanh), ref_sage),
    "sage_pool": Case(lambda: SAGEConv(IN, 3, "pool", norm=nn.LayerNorm(3)), ref_sage),
    "sage_gcn_no_bias": Case(lambda: SAGEConv(IN, 5, "gcn", bias=False), ref_sage),
    "gin_sum_mlp": Case(lambda: GINConv(_mlp(), learn_eps=True, init_eps=0.1), ref_gin),
    "gin_mean": Case(lambda: GINConv(nn.Linear(IN, 4), "mean", init_eps=0.5, activation=F.elu), ref_gin),
    "gin_max": Case(lambda: GINConv(None, "max", learn_eps=True), ref_gin),
    "gin_sum_edge_weight": Case(lambda: GINConv(nn.Linear(IN, 2), "sum"), ref_gin, edge_dim=1),
    "gatv2": Case(lambda: GATv2Conv(IN, 4, 3, activation=F.elu), ref_gatv2),
    "gatv2_shared_residual": Case(
        lambda: GATv2Conv(IN, 2, 2, negative_slope=0.1, residual=True, share_weights=True), ref_gatv2
    ),
    "gatv2_no_bias_identity_residual": Case(lambda: GATv2Conv(IN, 3, 2, residual=True, bias=False), ref_gatv2),
    "appnp": Case(lambda: APPNPConv(3, 0.1), ref_appnp),
}


def output_and_grads(run, module, args):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        out = run(*args)
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(7), dtype=out.dtype)
    wrt = list(module.parameters()) + list(args[1:])
    grads = torch.autograd.grad((out * weights).sum(), wrt, allow_unused=True, materialize_grads=True)
    return out, grads


def assert_same(module, got, want, what: str):
    (out, grads), (want_out, want_grads) = got, want
    assert torch.isfinite(out).all(), what
    torch.testing.assert_close(out, want_out, rtol=RTOL, atol=ATOL, msg=lambda m: f"{what} output: {m}")
    names = [n for n, _ in module.named_parameters()] + ["x", "edge input"]
    for name, a, b in zip(names, grads, want_grads):
        assert torch.isfinite(a).all(), f"{what}: grad of {name}"
        torch.testing.assert_close(a, b, rtol=RTOL, atol=ATOL, msg=lambda m: f"{what}: grad of {name}: {m}")


@pytest.mark.parametrize("graph_name", GRAPHS)
@pytest.mark.parametrize("case_name", CASES)
def test_eager_matches_reference(case_name, graph_name):
    case, g = CASES[case_name], GRAPHS[graph_name]()
    module = build(case)
    args = [g] + inputs(case, g)
    assert_same(
        module,
        output_and_grads(module, module, args),
        output_and_grads(lambda *a: case.reference(module, *a), module, args),
        "eager vs reference",
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("graph_name", GRAPHS)
@pytest.mark.parametrize("case_name", CASES)
def test_compiled_matches_eager(case_name, graph_name, backend):
    case, g = CASES[case_name], GRAPHS[graph_name]()
    module = build(case)
    args = [g] + inputs(case, g)
    compiled = gnnc.compile(module, backend=backend)
    assert_same(
        module,
        output_and_grads(compiled, module, args),
        output_and_grads(module, module, args),
        f"compiled ({backend}) vs eager",
    )


@pytest.mark.parametrize("backend", [None, *BACKENDS])
@pytest.mark.parametrize("case_name", ["gatv2", "gatv2_shared_residual"])
def test_gatv2_large_logits(case_name, backend):
    case, g = CASES[case_name], GRAPHS["homo-seed0"]()
    module = build(case)
    x = inputs(case, g, scale=1e3)[0]
    logits, _ = gatv2_logits(module, g, x.detach())
    assert logits.abs().max() > 800, "case too mild: naive exp of these logits would not overflow float64"
    run = module if backend is None else gnnc.compile(module, backend=backend)
    want = case.reference if backend is None else (lambda m, *a: m(*a))
    assert_same(
        module,
        output_and_grads(run, module, [g, x]),
        output_and_grads(lambda *a: want(module, *a), module, [g, x]),
        f"large logits ({backend})",
    )


def test_zero_in_degree_nodes():
    g = gnnc.graph(([0, 1], [1, 1]), num_nodes=3)  # nodes 0 and 2 receive nothing
    x = torch.randn(3, IN, dtype=torch.float64)
    sage = build(CASES["sage_mean"])
    torch.testing.assert_close(sage(g, x)[[0, 2]], torch.tanh(sage.fc_self(x[[0, 2]]) + sage.bias))
    gin = build(Case(lambda: GINConv(None, "max", init_eps=0.5), ref_gin))
    torch.testing.assert_close(gin(g, x)[[0, 2]], 1.5 * x[[0, 2]])
    gat = build(Case(lambda: GATv2Conv(IN, 3, 2), ref_gatv2))
    assert (gat(g, x)[[0, 2]] == 0).all()
    torch.testing.assert_close(APPNPConv(2, 0.25)(g, x)[[0, 2]], 0.25 * x[[0, 2]])


def test_constructor_errors_and_exports():
    with pytest.raises(ValueError, match="aggregator_type"):
        SAGEConv(IN, 2, "lstm")
    with pytest.raises(ValueError, match="aggregator_type"):
        GINConv(None, "min")
    assert {"SAGEConv", "GINConv", "GATv2Conv", "APPNPConv"} <= set(gnnc.models.__all__)
    shared = GATv2Conv(IN, 2, 2, share_weights=True)
    assert shared.fc_dst is shared.fc_src and len(list(shared.parameters())) == 3
    assert "eps" not in dict(GINConv().named_parameters()) and "eps" in dict(GINConv().named_buffers())


# ------------------------------------------------------------------ edge_softmax
@pytest.mark.parametrize("shape", [(), (3,), (2, 1)])
@pytest.mark.parametrize("graph_name", ["homo-seed0", "one-node-self-loop", "no-edges", "hetero-whole-graph"])
def test_edge_softmax_matches_reference(graph_name, shape):
    g = GRAPHS[graph_name]()
    src, dst = g.find_edges()
    gen = torch.Generator().manual_seed(0)
    for scale in (1.0, 1e4):  # 1e4: exp overflows float64 without the max shift
        logits = (scale * torch.randn((g.num_edges(),) + shape, generator=gen, dtype=torch.float64)).requires_grad_()
        weights = torch.randn(logits.shape, generator=gen, dtype=torch.float64)
        got, want = gnnc.ops.edge_softmax(g, logits), ref_softmax(logits, dst, g.num_nodes())
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)
        (g_got,) = torch.autograd.grad((got * weights).sum(), logits)
        (g_want,) = torch.autograd.grad((want * weights).sum(), logits)
        torch.testing.assert_close(g_got, g_want, rtol=RTOL, atol=ATOL)
    by_src = gnnc.ops.edge_softmax(g, logits.detach(), norm_by="src")
    torch.testing.assert_close(by_src, ref_softmax(logits.detach(), src, g.num_nodes()), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("relation", [None, "liked_by"])
def test_edge_softmax_takes_the_users_edge_order_without_permuting(relation, monkeypatch):
    """Logits in the user's edge order go to the kernel as they are: no feature is permuted in or out, and the
    result equals the softmax taken in internal order to the bit (a destination's edges keep their relative
    order); after ``add_edges`` the user-order ends are rebuilt."""
    g = random_heterograph(seed=1)
    block = g if relation is None else g[relation]
    lo, hi = (0, g.num_edges()) if relation is None else g.index.rel_range(g.etype_id(relation))
    assert not torch.equal(g.index.user_eid[lo:hi], torch.arange(lo, hi))  # the two orders differ here
    gen = torch.Generator().manual_seed(0)
    logits = 30 * torch.randn(hi - lo, 2, generator=gen, dtype=torch.float64)
    internal = g.index.from_user_order(logits, lo, hi)
    softmax = gnnc.backend.kernels().edge_softmax(internal, g.index.dst[lo:hi], g.num_nodes())
    want = g.index.to_user_order(softmax, lo, hi)
    permuted = []
    for name in ("from_user_order", "to_user_order"):
        real = getattr(g.index, name)
        monkeypatch.setattr(g.index, name, lambda x, *a, _r=real: permuted.append(x.is_floating_point()) or _r(x, *a))
    got = gnnc.ops.edge_softmax(block, logits)
    assert torch.equal(got, want) and True not in permuted
    g.add_edges(torch.tensor([0]), torch.tensor([1]), etype=relation or g.canonical_etypes[0])
    block = g if relation is None else g[relation]
    lo, hi = (0, g.num_edges()) if relation is None else g.index.rel_range(g.etype_id(relation))
    more = 30 * torch.randn(hi - lo, 2, generator=gen, dtype=torch.float64)
    dst = g.index.to_user_order(g.index.dst[lo:hi], lo, hi)
    torch.testing.assert_close(gnnc.ops.edge_softmax(block, more), ref_softmax(more, dst, g.num_nodes()))


def test_edge_softmax_per_relation_and_errors():
    g = random_heterograph(seed=1)
    logits = torch.randn(g.num_edges(), 2, dtype=torch.float64)
    whole = gnnc.ops.edge_softmax(g, logits)
    parts = dict(zip(g.canonical_etypes, logits.split([g.num_edges(k) for k in g.canonical_etypes])))
    by_name = gnnc.ops.edge_softmax(g, {k[1]: v for k, v in reversed(list(parts.items()))})
    as_tuple = gnnc.ops.edge_softmax(g, tuple(parts.values()))
    for i, key in enumerate(g.canonical_etypes):
        lo = sum(g.num_edges(k) for k in g.canonical_etypes[:i])
        torch.testing.assert_close(by_name[key], whole[lo : lo + g.num_edges(key)])  # keyed by canonical relation
        torch.testing.assert_close(as_tuple[i], whole[lo : lo + g.num_edges(key)])
    with pytest.raises(ValueError, match="missing"):
        gnnc.ops.edge_softmax(g, {"likes": parts[g.canonical_etypes[0]]})
    with pytest.raises(ValueError, match="num_edges"):
        gnnc.ops.edge_softmax(g, logits[1:])
    with pytest.raises(TypeError, match="floating"):
        gnnc.ops.edge_softmax(g, torch.ones(g.num_edges(), dtype=torch.int64))
    with pytest.raises(ValueError, match="norm_by"):
        gnnc.ops.edge_softmax(g, logits, norm_by="edge")


class DGLStyleGATv2(nn.Module):
    """GATv2 exactly as DGL's GATv2Conv writes it: built-ins, ``edge_softmax`` between the two calls."""

    def __init__(self, conv: GATv2Conv):
        super().__init__()
        self.conv = conv

    def forward(self, g, x):
        c = self.conv
        with g.local_scope():
            g.ndata_all["el"] = c.fc_src(x).view(-1, c.num_heads, c.out_dim)
            g.ndata_all["er"] = c.fc_dst(x).view(-1, c.num_heads, c.out_dim)
            g.apply_edges(fn.u_add_v("el", "er", "e"))
            e = (c.leaky_relu(g.edata_all.pop("e")) * c.attn).sum(-1).unsqueeze(-1)
            g.edata_all["a"] = gnnc.ops.edge_softmax(g, e)
            g.update_all(fn.u_mul_e("el", "a", "m"), fn.sum("m", "ft"))
            out = g.ndata_all["ft"]
        return out if c.activation is None else c.activation(out)


@pytest.mark.parametrize("backend", [None, *BACKENDS])
@pytest.mark.parametrize("graph_name", ["homo-seed0", "no-edges", "hetero-whole-graph"])
def test_edge_softmax_in_dgl_style_layer(graph_name, backend):
    """The DGL formulation (eager or compiled, no fallback) equals GATv2Conv's UDFs run eagerly."""
    case, g = CASES["gatv2"], GRAPHS[graph_name]()
    conv = build(case)
    dgl_style = DGLStyleGATv2(conv)
    run = dgl_style if backend is None else gnnc.compile(dgl_style, backend=backend)
    args = [g] + inputs(case, g, scale=30.0)
    assert_same(
        conv,
        output_and_grads(run, conv, args),
        output_and_grads(conv, conv, args),
        f"DGL-style GATv2 ({backend}) vs GATv2Conv",
    )


def test_function_module_exports_only_builtins():
    public = {n for n in dir(fn) if not n.startswith("_")}
    assert public == set(fn.__all__)
    assert {"torch", "dataclass", "annotations", "right_align"}.isdisjoint(public)
    assert {"copy_u", "u_mul_e", "sum", "max", "BuiltinReduce"} <= public

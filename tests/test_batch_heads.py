"""Per-head blocks of graph operations run as one (``passes.batch_heads``, ``runtime.head_blocks``,
``frontend.heads``), against the model run eagerly.

Models are written as users write a layer per head: DGL's GAT tutorial, module-level functions over per-head
tensors, per-head linears inside the message, multi-head views inside each head, built-ins, dropout, heads
that read the previous head's result. Outputs, every parameter gradient over two SGD steps and the graph's
features after the forward must equal eager's; where the heads cannot run as one they run one by one.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gnnc
import gnnc.function as fn
from gnnc.compiler.driver import FallbackWarning, recording
from gnnc.forward.capture import trace
from gnnc.forward.heads import Unbatchable, batch_udf
from gnnc.forward.passes import batch_heads, merge_linears

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import natural_models  # bench/ is no package

TutorialGAT = natural_models.MultiHeadGATLayer


@pytest.fixture(autouse=True)
def _fallbacks_fail():
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        yield


def _edges(n=30, e=150, seed=0, self_loops=True):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (e,), generator=gen)
    dst = torch.randint(0, max(n - 3, 1), (e,), generator=gen)  # the last nodes get no in-edges
    if self_loops:
        src, dst = torch.cat([src, torch.arange(min(3, n))]), torch.cat([dst, torch.arange(min(3, n))])
        src, dst = torch.cat([src, src[:5]]), torch.cat([dst, dst[:5]])  # multi-edges
    return src, dst, n


def _graph(edges, dtype=torch.float64):
    src, dst, n = edges
    g = gnnc.graph((src, dst), num_nodes=n)
    g.edata["w"] = torch.rand(src.shape[0], 1, generator=torch.Generator().manual_seed(1), dtype=dtype)
    return g


def _same(model, edges, x, steps=2, tol=1e-9, seed=None, **options):
    """Compiled and eager outputs, parameter gradients and the graph's features after the forward agree over
    ``steps`` SGD steps; returns the compiled module."""
    compiled = gnnc.compile(model, **options)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    params = [p for p in model.parameters() if p.requires_grad]
    for _ in range(steps):
        g_ref, g = _graph(edges, x.dtype), _graph(edges, x.dtype)
        if seed is not None:
            torch.manual_seed(seed)
        ref = model(g_ref, x)
        ref_grads = torch.autograd.grad(ref.square().sum(), params, allow_unused=True)
        if seed is not None:
            torch.manual_seed(seed)
        out = compiled(g, x)
        grads = torch.autograd.grad(out.square().sum(), params, allow_unused=True)
        torch.testing.assert_close(out, ref, rtol=tol, atol=tol)
        for a, b in zip(grads, ref_grads):
            assert (a is None) == (b is None)
            if b is not None:  # float32 gradients through saturated softmaxes: as far from float64 as eager's
                torch.testing.assert_close(a, b, rtol=tol, atol=tol * max(1.0, b.abs().max().item()))
        for frame in ("ndata", "edata"):
            mine, theirs = getattr(g, frame), getattr(g_ref, frame)
            assert sorted(mine.keys()) == sorted(theirs.keys())
            for key in theirs.keys():
                torch.testing.assert_close(mine[key], theirs[key], rtol=tol, atol=tol)
        opt.zero_grad()
        for p, gr in zip(params, ref_grads):
            p.grad = gr
        opt.step()
    return compiled


def _outcome(compiled) -> str:
    return next(line for line in compiled.forward_log if line.startswith("batch_heads"))


@pytest.mark.parametrize(
    "case", [dict(seed=0), dict(seed=1, n=1, e=1, self_loops=False), dict(seed=2, n=5, e=0), dict(seed=3, n=60, e=500)]
)
def test_tutorial_gat_heads_run_as_one(case):
    edges = _edges(**case)
    model = TutorialGAT(6, 4, 3).double()
    x = torch.randn(edges[2], 6, dtype=torch.float64)
    compiled = _same(model, edges, x)
    assert _outcome(compiled).endswith("(3 heads run as one)")


def test_large_logits_in_float32():
    """One step: an SGD step on gradients of 1e5 makes the next logits ~1e6, where float32 softmaxes saturate
    and eager and compiled round ties apart."""
    torch.manual_seed(0)
    edges = _edges(seed=4)
    model = TutorialGAT(6, 4, 4)
    with torch.no_grad():
        for head in model.heads:
            head.attn_fc.weight.mul_(200.0)
    x = torch.randn(edges[2], 6) * 10
    compiled = _same(model, edges, x, steps=1, tol=1e-3)
    assert _outcome(compiled).endswith("(4 heads run as one)")


def test_mean_merge_and_inference_mode():
    edges = _edges(seed=5)
    model = TutorialGAT(6, 4, 2, merge="mean").double()
    x = torch.randn(edges[2], 6, dtype=torch.float64)
    _same(model, edges, x)
    compiled = gnnc.compile(model)
    with torch.inference_mode():
        out = compiled(_graph(edges), x)
    with torch.no_grad():
        torch.testing.assert_close(out, model(_graph(edges), x))


# -------------------------------------------------------------------------- user styles of per-head code
def edge_score(edges):
    return {"e": F.leaky_relu((edges.src["z"] * edges.dst["z"]).sum(-1, keepdim=True), 0.2)}


def copy_scored(edges):
    return {"z": edges.src["z"] * edges.data["w"], "e": edges.data["e"]}


def softmax_sum(nodes):
    alpha = torch.softmax(nodes.mailbox["e"], dim=1)
    return {"h": (alpha * nodes.mailbox["z"]).sum(dim=1)}


class FunctionHeads(nn.Module):
    """Module-level UDFs (one object for all heads) over per-head columns of one product (split by a list of
    widths: a split by one width has as many parts as the shape gives, unknown while tracing)."""

    def __init__(self, d, f, k):
        super().__init__()
        self.fc, self.k, self.f = nn.Linear(d, f * k), k, f

    def forward(self, g, h):
        outs = []
        for z in self.fc(h).split([self.f] * self.k, -1):
            g.ndata["z"] = z
            g.apply_edges(edge_score)
            g.update_all(copy_scored, softmax_sum)
            outs.append(g.ndata.pop("h"))
        return torch.cat(outs, dim=-1)


class LinearMessageHead(nn.Module):
    """A per-head linear (with bias) inside the message, of a feature every head shares, and an update."""

    def __init__(self, d, f):
        super().__init__()
        self.W = nn.Linear(d, f)
        self.scale = nn.Parameter(torch.rand(f))

    def message(self, edges):
        return {"m": self.W(edges.src["h"]) * edges.data["w"]}

    def reduce(self, nodes):
        return {"o": nodes.mailbox["m"].mean(1) * self.scale}

    def update(self, nodes):
        return {"o": torch.tanh(nodes.data["o"]) + nodes.data["h"].sum(-1, keepdim=True)}


class LinearMessageHeads(nn.Module):
    def __init__(self, d, f, k):
        super().__init__()
        self.heads = nn.ModuleList(LinearMessageHead(d, f) for _ in range(k))

    def forward(self, g, h):
        outs = []
        for head in self.heads:
            g.ndata["h"] = h
            g.update_all(message_func=head.message, reduce_func=head.reduce, apply_node_func=head.update)
            outs.append(g.ndata.pop("o"))
        return torch.stack(outs, 1).flatten(1)


class ViewHead(nn.Module):
    """Each 'head' is itself a two-head attention written with ``view`` and a (1, 2, F/2) parameter."""

    def __init__(self, d, f):
        super().__init__()
        self.fc = nn.Linear(d, f, bias=False)
        self.attn = nn.Parameter(torch.randn(1, 2, f // 2))
        self.f = f

    def edge(self, edges):
        zs = edges.src["z"].view(-1, 2, self.f // 2)
        e = (zs * self.attn).sum(-1) + (edges.dst["z"].view(-1, 2, self.f // 2) * self.attn).sum(-1)
        return {"e": F.elu(e).unsqueeze(-1), "v": zs}

    def message(self, edges):
        return {"v": edges.data["v"], "e": edges.data["e"]}

    def reduce(self, nodes):
        alpha = F.softmax(nodes.mailbox["e"], 1)
        return {"h": torch.sum(alpha * nodes.mailbox["v"], 1).reshape(-1, self.f)}

    def forward(self, g, h):
        g.ndata["z"] = self.fc(h)
        g.apply_edges(self.edge)
        g.update_all(self.message, self.reduce)
        return g.ndata.pop("h")


class ViewHeads(nn.Module):
    def __init__(self, d, f, k):
        super().__init__()
        self.heads = nn.ModuleList(ViewHead(d, f) for _ in range(k))

    def forward(self, g, h):
        return torch.cat([head(g, h) for head in self.heads], 1)


class ScopedHead(natural_models.GATLayer):
    """DGL's usual layer body: everything inside ``with g.local_scope():``, the result read before leaving."""

    def forward(self, g, h):
        with g.local_scope():
            g.ndata["z"] = self.fc(h)
            g.apply_edges(self.edge_attention)
            g.update_all(self.message_func, self.reduce_func)
            return g.ndata["h"]


class ScopedHeads(TutorialGAT):
    def __init__(self, d, f, k):
        super().__init__(d, f, k)
        self.heads = nn.ModuleList(ScopedHead(d, f) for _ in range(k))


class UpdatingHead(natural_models.GATLayer):
    def update(self, nodes):
        return {"h": torch.tanh(nodes.data["h"]) * self.attn_fc.weight[0, 0]}


class BuiltinHeads(TutorialGAT):
    """Per-head built-ins (DGL's ``fn.u_mul_e``, a shared edge weight), then a per-head UDF update."""

    def __init__(self, d, f, k):
        super().__init__(d, f, k)
        self.heads = nn.ModuleList(UpdatingHead(d, f) for _ in range(k))

    def forward(self, g, h):
        outs = []
        for head in self.heads:
            g.ndata["z"] = head.fc(h)
            g.update_all(fn.u_mul_e("z", "w", "m"), fn.sum("m", "h"), head.update)
            outs.append(g.ndata.pop("h"))
        return torch.cat(outs, 1)


class WideEdgeHeads(TutorialGAT):
    """A built-in with an edge feature wider than a head's (``[E, 2, F]``): per head it broadcasts over the
    2, stacked it would meet the head axis; heads run one by one."""

    def forward(self, g, h):
        g.edata["w2"] = g.edata["w"].unsqueeze(-1).expand(-1, 2, self.heads[0].fc.out_features) * 1.0
        outs = []
        for head in self.heads:
            g.ndata["z"] = head.fc(h)
            g.update_all(fn.e_mul_u("w2", "z", "m"), fn.max("m", "h"))
            outs.append(g.ndata.pop("h"))
        return torch.cat(outs, 1).flatten(1)


@pytest.mark.parametrize(
    "model",
    [
        FunctionHeads(5, 4, 3),
        LinearMessageHeads(5, 3, 3),
        ViewHeads(5, 4, 2),
        ScopedHeads(5, 3, 3),
        BuiltinHeads(5, 4, 3),
    ],
    ids=["functions", "linear-message", "view-heads", "scoped", "builtins"],
)
def test_other_styles_run_as_one(model):
    edges = _edges(seed=6)
    x = torch.randn(edges[2], 5, dtype=torch.float64)
    compiled = _same(model.double(), edges, x)
    assert "heads run as one" in _outcome(compiled)


class DropoutHead(natural_models.GATLayer):
    def reduce_func(self, nodes):
        alpha = F.dropout(F.softmax(nodes.mailbox["e"], dim=1), 0.5, self.training)
        return {"h": torch.sum(alpha * nodes.mailbox["z"], dim=1)}


class DropoutHeads(TutorialGAT):
    """Dropout inside each head's reduce: one draw for all heads would differ from K draws in order."""

    def __init__(self, d, f, k):
        super().__init__(d, f, k)
        self.heads = nn.ModuleList(DropoutHead(d, f) for _ in range(k))


class ChainedHead(nn.Module):
    def message(self, edges):
        return {"m": edges.src["z"] + edges.src["acc"]}

    def reduce(self, nodes):
        return {"acc": nodes.mailbox["m"].max(1).values}


class ChainedHeads(nn.Module):
    """Each head reads what the previous one wrote (``acc``): the heads must run in order."""

    def __init__(self, d, k):
        super().__init__()
        self.fcs = nn.ModuleList(nn.Linear(d, 3) for _ in range(k))
        self.heads = [ChainedHead() for _ in range(k)]

    def forward(self, g, h):
        g.ndata["acc"] = torch.zeros(h.shape[0], 3, dtype=h.dtype)
        outs = []
        for fc, head in zip(self.fcs, self.heads):
            g.ndata["z"] = fc(h)
            g.update_all(head.message, head.reduce)
            outs.append(g.ndata["acc"])
        return torch.cat(outs, 1)


class UnequalHeads(TutorialGAT):
    """Heads of different widths: their features cannot be stacked."""

    def __init__(self, d):
        super().__init__(d, 2, 2)
        self.heads[1] = natural_models.GATLayer(d, 3)


@pytest.mark.parametrize(
    "model, why",
    [
        (WideEdgeHeads(5, 2, 2), "e_mul_u would broadcast"),
        (ChainedHeads(5, 3), "reads 'acc'"),
        (UnequalHeads(5), "differ in shape"),
    ],
    ids=["wide-edge-builtin", "chained", "unequal"],
)
def test_heads_that_cannot_run_as_one_run_one_by_one(model, why):
    edges = _edges(seed=7)
    x = torch.randn(edges[2], 5, dtype=torch.float64)
    compiled = _same(model.double(), edges, x)
    assert "heads run one by one" in _outcome(compiled) and why in _outcome(compiled)


def test_heads_drawing_dropout_run_one_by_one_in_order():
    """A compiled UDF's dropout draws otherwise than eager's (edges in another order); one by one, the heads
    draw as the same compiled calls without the pass do."""
    edges = _edges(seed=7)
    model = DropoutHeads(5, 4, 3).double()
    x = torch.randn(edges[2], 5, dtype=torch.float64)
    batched, plain, outs = gnnc.compile(model), gnnc.compile(model, batch_heads=False), []
    for compiled in (batched, plain):
        torch.manual_seed(11)
        outs.append(compiled(_graph(edges), x))
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-12, atol=1e-12)
    assert "heads run one by one: operator dropout has no head-batching rule" in _outcome(batched)


def test_user_reads_after_the_forward_see_the_last_head():
    edges = _edges(seed=8)
    model = TutorialGAT(5, 3, 3)
    x = torch.randn(edges[2], 5)
    g, g_ref = _graph(edges, x.dtype), _graph(edges, x.dtype)
    gnnc.compile(model)(g, x)
    model(g_ref, x)
    torch.testing.assert_close(g.edata["e"], g_ref.edata["e"])  # deferred: computed when read
    torch.testing.assert_close(g.ndata["z"], g_ref.ndata["z"])


def test_switched_off_and_explained():
    edges = _edges(seed=9)
    model = TutorialGAT(5, 3, 2).double()
    x = torch.randn(edges[2], 5, dtype=torch.float64)
    compiled = _same(model, edges, x, batch_heads=False)
    assert not any(line.startswith("batch_heads") for line in compiled.forward_log)
    text = gnnc.explain(model, _graph(edges), x)
    assert "== forward: batch_heads: 2 blocks of (ndata['z'] =, apply_edges, update_all, ndata.pop('h'))" in text
    assert "(2 heads run as one)" in text and "GATLayer.edge_attention), 2 heads as one" in text


# -------------------------------------------------------------------------- the pass as a pure function
class Interleaved(TutorialGAT):
    """Per-head blocks with user code between them: refused when that code reads a block's result or draws
    random numbers (it would run before the heads once they move to the last block)."""

    def __init__(self, between):
        super().__init__(4, 2, 2)
        self.between = between

    def forward(self, g, h, other):
        outs, extra = [], h.sum()
        for head in self.heads:
            outs.append(head(g, h))
            if self.between == "reads result":
                extra = extra + outs[-1].sum()
            elif self.between == "pure code":
                h = h * 1.0
            elif self.between == "random code":
                h = F.dropout(h, 0.1)
            elif self.between == "reads the graph passed again":  # maybe the same graph: it would see the last
                extra = extra + other.ndata["z"].sum()  # head's 'z', not this one's, once the heads moved
        return torch.cat(outs, 1), extra


@pytest.mark.parametrize(
    "between, rewritten",
    [
        ("nothing", True),
        ("reads result", False),
        ("pure code", True),
        ("random code", False),
        ("reads the graph passed again", False),
    ],
)
def test_pass_moves_blocks_only_past_plain_reads(between, rewritten):
    g = _graph(_edges(seed=10), torch.float32)
    graph, _ = trace(Interleaved(between), (g, torch.randn(g.num_nodes(), 4), g), {})
    before = str(graph)
    merged = merge_linears(graph).graph
    out, changed, log = batch_heads(merged)
    assert str(graph) == before  # pure
    assert bool(log) == rewritten == changed
    assert (out is merged) != rewritten


def test_pass_refuses_forwards_that_write_in_place():
    class InPlace(TutorialGAT):
        def forward(self, g, h):
            h = h.clone()
            h.mul_(2.0)
            return super().forward(g, h)

    g = _graph(_edges(seed=11), torch.float32)
    graph, _ = trace(InPlace(4, 2, 2), (g, torch.randn(g.num_nodes(), 4)), {})
    assert batch_heads(graph) == (graph, False, [])


# -------------------------------------------------------------------------- the UDF batching rules
def test_batched_udf_equals_each_head():
    heads = [ViewHead(5, 4).double() for _ in range(3)]
    e, n = 7, 4
    z = torch.randn(n, 3, 4, dtype=torch.float64)
    src, dst = torch.randint(0, n, (e,)), torch.randint(0, n, (e,))
    shapes = {("src", "z"): ((4,), torch.float64, True), ("dst", "z"): ((4,), torch.float64, True)}
    udf = batch_udf([h.edge for h in heads], shapes)

    class Batch:
        def __init__(self, src, dst):
            self.src, self.dst, self.data = src, dst, {}

    out = udf.run(Batch({"z": z[src]}, {"z": z[dst]}))
    for k, head in enumerate(heads):
        expected = head.edge(Batch({"z": z[src, k]}, {"z": z[dst, k]}))
        for key, value in expected.items():
            torch.testing.assert_close(out[key][:, k], value)
    assert udf.outputs == {"e": ((2, 1), torch.float64, True), "v": ((2, 2), torch.float64, True)}


@pytest.mark.parametrize(
    "body",
    [
        lambda self, edges: {"m": edges.src["z"].t()},  # moves rows
        lambda self, edges: {"m": edges.src["z"] @ self.w},  # a product with no rule
        lambda self, edges: {"m": edges.src["z"].sum()},  # over all dims
        lambda self, edges: {"m": edges.src["z"][: edges.src["z"].shape[0] // 2]},  # a row count
        lambda self, edges: {"m": torch.rand_like(edges.src["z"])},  # randomness
        lambda self, edges: {"m": edges.src["z"] * torch.rand(4)},  # a draw from nothing (it would freeze)
        lambda self, edges: {"m": edges.src["z"] * (edges.src["x"] * 1.0).shape[1]},  # maybe a row count
    ],
)
def test_batching_refuses_what_has_no_rule(body):
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(4, 4))

        def edge(self, edges):
            return body(self, edges)

    with pytest.raises(Unbatchable):
        batch_udf(
            [Head().edge, Head().edge],
            {("src", "z"): ((4,), torch.float32, True), ("src", "x"): ((4,), torch.float32, False)},
        )


@pytest.mark.parametrize("shared_input", [True, False])
@pytest.mark.parametrize("per_head", ["weight", "bias", "both"])
def test_linear_rule_with_shared_and_per_head_parts(shared_input, per_head):
    """``F.linear(x, W, b)`` in a UDF, each of x, W, b the same for every head or one per head."""

    class Head(nn.Module):
        def __init__(self, w, b):
            super().__init__()
            self.w, self.b = w, b

        def message(self, edges):
            return {"m": F.linear(edges.src["x" if shared_input else "z"], self.w, self.b)}

    torch.manual_seed(3)
    k, e = 3, 6
    shared_w, shared_b = nn.Parameter(torch.randn(2, 4)), nn.Parameter(torch.randn(2))
    heads = [
        Head(
            nn.Parameter(torch.randn(2, 4)) if per_head in ("weight", "both") else shared_w,
            nn.Parameter(torch.randn(2)) if per_head in ("bias", "both") else shared_b,
        )
        for _ in range(k)
    ]
    shapes = {("src", "x"): ((4,), torch.float32, False), ("src", "z"): ((4,), torch.float32, True)}
    udf = batch_udf([h.message for h in heads], shapes)
    x, z = torch.randn(e, 4), torch.randn(e, k, 4)

    class Batch:
        def __init__(self, src):
            self.src = src

    out = udf.run(Batch({"x": x, "z": z}))["m"]
    for i, head in enumerate(heads):
        expected = head.message(Batch({"x": x, "z": z[:, i]}))["m"]
        torch.testing.assert_close(out[:, i], expected)


GLOBAL_LIN = nn.Linear(3, 3).double()  # one module every head's message reaches as a global


class PlainTensorHead(nn.Module):
    """Plain tensor attributes (rebound by the user after each step), a global module in the message, and an
    update that reads the feature it overwrites."""

    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, 3).double()
        self.a = (torch.randn(3, dtype=torch.float64) * 0.5).requires_grad_()

    def edge(self, edges):
        return {"e": F.leaky_relu((edges.src["z"] * self.a).sum(-1, keepdim=True) + edges.dst["z"].sum(-1, True))}

    def message(self, edges):
        return {"m": GLOBAL_LIN(edges.src["z"]), "e": edges.data["e"]}

    def reduce(self, nodes):
        return {"z": torch.sum(torch.softmax(nodes.mailbox["e"], 1) * nodes.mailbox["m"], 1)}

    def update(self, nodes):
        return {"z": torch.relu(nodes.data["z"]) * self.a}

    def forward(self, g, h):
        g.ndata["z"] = self.fc(h)
        g.apply_edges(self.edge)
        g.update_all(self.message, self.reduce, self.update)
        return g.ndata.pop("z")


class PlainTensorHeads(nn.Module):
    def __init__(self, d, k):
        super().__init__()
        self.heads = nn.ModuleList(PlainTensorHead(d) for _ in range(k))

    def forward(self, g, h):
        return torch.cat([head(g, h) for head in self.heads], 1)


def test_plain_tensors_rebound_and_global_modules_over_two_steps():
    torch.manual_seed(5)
    edges = _edges(seed=12)
    model = PlainTensorHeads(4, 3)
    compiled = gnnc.compile(model)
    x = torch.randn(edges[2], 4, dtype=torch.float64)
    for _ in range(2):
        leaves = [*model.parameters(), *GLOBAL_LIN.parameters(), *(head.a for head in model.heads)]
        ref = model(_graph(edges), x)
        ref_grads = torch.autograd.grad(ref.square().sum(), leaves)
        out = compiled(_graph(edges), x)
        grads = torch.autograd.grad(out.square().sum(), leaves)
        torch.testing.assert_close(out, ref, rtol=1e-9, atol=1e-9)
        for a, b in zip(grads, ref_grads):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)
        with torch.no_grad():
            for p, gr in zip(leaves, ref_grads):
                p.sub_(0.1 * gr)
        for head in model.heads:  # as users of plain tensors do after a step
            head.a = (head.a.detach() + 0.05).requires_grad_()
    assert _outcome(compiled).endswith("(3 heads run as one)")


# -------------------------------------------------------------------------- layers in sequence are no heads
class SAGELayer(nn.Module):
    """A layer as DGL's GraphSAGE tutorial writes one: its reduce writes 'h', which the layer pops."""

    def __init__(self, dim):
        super().__init__()
        self.linear = nn.Linear(2 * dim, dim)

    def message_func(self, edges):
        return {"m": edges.src["h"]}

    def reduce_func(self, nodes):
        return {"h": self.linear(torch.cat([nodes.data["h"], nodes.mailbox["m"].mean(1)], 1))}

    def forward(self, g, h):
        g.ndata["h"] = h
        g.update_all(self.message_func, self.reduce_func)
        return g.ndata.pop("h")


class Sequential(nn.Module):
    """Layers of one class applied in sequence: each block writes what the block before it popped."""

    def __init__(self, dim, between):
        super().__init__()
        self.layers = nn.ModuleList([SAGELayer(dim) for _ in range(3)])
        self.between = between

    def forward(self, g, h):
        for layer in self.layers:
            h = layer(g, h)
            if self.between == "relu":
                h = torch.relu(h)
        return h


@pytest.mark.parametrize("between", ["nothing", "relu"])
def test_layers_in_sequence_are_not_taken_for_heads(between):
    edges = _edges(seed=12)
    model, x = Sequential(4, between).double(), torch.randn(edges[2], 4, dtype=torch.float64)
    compiled = _same(model, edges, x)
    assert not any(line.startswith("batch_heads") for line in compiled.forward_log)
    with recording() as plans:
        compiled(_graph(edges), x)
    assert len(plans) == 3 and all(plan.module is not None for plan in plans)

"""The forward passes on local scopes: release_features (features nothing reads again are dropped at the
scope's last message-passing call) and scope_deferral (apply_edges results may hold the call's inputs)."""

from __future__ import annotations

import operator
import warnings

import pytest
import torch
from torch import nn

import gnnc
from gnnc import function as fn
from gnnc.compiler.driver import FallbackWarning
from gnnc.forward.capture import trace
from gnnc.forward.passes import release_features, scope_deferral
from gnnc.runtime.deferred import DeferredEdges, forget_trusted, trust_next_apply_edges
from gnnc.runtime.feature_release import arm_drop, drop_feature, drop_features


def _graph(n=30, e=120, seed=0):
    """Zero in-degree nodes (the last ones), self loops and multi-edges."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.cat([torch.randint(0, n, (e,), generator=gen), torch.arange(3), torch.tensor([1, 1])])
    dst = torch.cat([torch.randint(0, n - 4, (e,), generator=gen), torch.arange(3), torch.tensor([2, 2])])
    g = gnnc.graph((src, dst), num_nodes=n)
    g.ndata["x0"] = torch.randn(n, 3, generator=gen, dtype=torch.float64)
    return g


class Attention(nn.Module):
    """DGL-tutorial style: everything in the graph inside a local scope; node and edge features share a name
    ('v'); the message reads a node feature ('k') the forward wrote before ``apply_edges``."""

    def __init__(self, d=4, after=("t",)):
        super().__init__()
        self.k, self.q, self.v = (nn.Linear(d, d).double() for _ in range(3))
        self.after = after

    def edge_attention(self, edges):
        return {"a": (edges.src["k"] * edges.dst["q"]).sum(-1, keepdim=True) * 8.0, "v": edges.src["v"]}

    def message(self, edges):
        return {"m": torch.sigmoid(edges.data["a"]) * edges.data["v"] + edges.src["k"]}

    def attend(self, g, h):
        g.ndata["k"], g.ndata["q"], g.ndata["v"] = self.k(h), self.q(h), self.v(h)
        g.apply_edges(self.edge_attention)
        g.update_all(self.message, fn.sum("m", "t"))

    def forward(self, g, h):
        with g.local_scope():
            self.attend(g, h)
            out = h * 0
            for key in self.after:
                out = out + (g.ndata.pop(key) if key == "q" else g.ndata[key])
            return out


def _log(model, g, x, pass_fn=release_features):
    graph, _ = trace(model, (g, x), {})
    before = str(graph)
    new, changed, log = pass_fn(graph)
    assert str(graph) == before  # pure
    assert changed == bool(log) == (new is not graph)
    return new, log


def test_drops_are_placed_around_the_scopes_last_call():
    new, log = _log(Attention(after=("t", "q")), _graph(), torch.randn(30, 4, dtype=torch.float64))
    names = [getattr(n.target, "__name__", n.target) for n in new.nodes]
    assert names.index("arm_drop") + 1 == names.index("update_all") == names.index("drop_features") - 1
    kept = next(n for n in new.nodes if n.target is drop_features).args[1]
    assert kept == (frozenset({"t", "q"}), frozenset())  # node and edge features apart: edata 'v' goes
    read = next(n for n in new.nodes if n.target is operator.getitem and n.args[1] == "t")
    assert read.next.target is drop_feature and read.next.args[1:] == (False, "t")  # after its last read
    assert len(log) == 1 and "ndata['k'], ndata['v'] written by the forward" in log[0], log


class NoScope(Attention):
    def forward(self, g, h):  # what the forward leaves on the graph is the user's: nothing is dropped
        self.attend(g, h)
        return g.ndata["t"]


class ReadsByGet(Attention):
    def forward(self, g, h):
        with g.local_scope():
            self.attend(g, h)
            return g.ndata.get("t")  # a read capture records, but not one by a constant key


class WritesOnlyWhatItReads(Attention):
    def forward(self, g, h):
        with g.local_scope():
            g.ndata["k"] = self.k(h)
            g.update_all(fn.copy_u("k", "m"), fn.sum("m", "t"))
            return g.ndata["t"] + g.ndata["k"]


@pytest.mark.parametrize("kind", [NoScope, ReadsByGet, WritesOnlyWhatItReads])
def test_nothing_is_dropped_where_a_later_read_is_unknown_or_nothing_would_be_freed(kind):
    new, log = _log(kind(), _graph(), torch.randn(30, 4, dtype=torch.float64))
    assert log == [] and not any(n.target in (arm_drop, drop_features) for n in new.nodes)


@pytest.mark.parametrize("after", [("t",), ("t", "q"), ("t", "v", "k")])
def test_compiled_forward_and_gradients_equal_eager_and_the_graph_is_left_as_it_was(after):
    g, x = _graph(seed=1), torch.randn(30, 4, dtype=torch.float64)
    g.ndata["t"] = torch.ones(30, 4, dtype=torch.float64)  # a feature the scope overwrites: restored at its end
    model = Attention(after=after)
    before = {k: v.clone() for k, v in g.ndata.items()}
    compiled = gnnc.compile(model)
    for _ in range(2):  # the second call is planned with the features the first one left
        out = compiled(g, x)
        ref = model(g, x)
        torch.testing.assert_close(out, ref)
        params = list(model.parameters())
        for a, b in zip(
            torch.autograd.grad(out.square().sum(), params), torch.autograd.grad(ref.square().sum(), params)
        ):
            torch.testing.assert_close(a, b)
        assert set(g.ndata) == set(before) and not len(g.edata)
        for k, v in before.items():
            assert torch.equal(g.ndata[k], v)
    assert any(line.startswith("release_features") for line in compiled.forward_log), compiled.forward_log


def test_an_armed_compiled_call_drops_what_neither_it_nor_the_forward_reads_and_disarms():
    g = _graph()
    g.ndata["keep"], g.ndata["spare"] = torch.ones(30, 1), torch.ones(30, 1)
    g.edata["w"] = torch.ones(g.num_edges(), 1)
    arm_drop(g, (frozenset({"keep"}), frozenset()))
    g.update_all(fn.copy_u("x0", "m"), fn.sum("m", "s"), compile=True)
    assert set(g.ndata) == {"keep", "x0", "s"} and not len(g.edata)
    drop_features(g, (frozenset({"keep", "x0", "s"}), frozenset()))
    g.ndata["spare"] = torch.ones(30, 1)
    g.update_all(fn.copy_u("x0", "m"), fn.sum("m", "s"), compile=True)  # disarmed: nothing dropped
    assert set(g.ndata) == {"keep", "x0", "s", "spare"}


def test_a_call_run_eagerly_drops_nothing_before_it_runs():
    g = _graph()
    g.ndata["keep"], g.ndata["spare"] = torch.ones(30, 1), torch.ones(30, 1)

    def message(edges):  # a data-dependent branch: runs eagerly
        return {"m": edges.src["x0"] * (2.0 if edges.src["x0"].sum().item() > 0 else 1.0)}

    arm_drop(g, (frozenset({"keep"}), frozenset()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        g.update_all(message, fn.sum("m", "s"), compile=True)
    assert set(g.ndata) == {"keep", "spare", "x0", "s"}
    drop_features(g, (frozenset({"keep"}), frozenset()))
    assert set(g.ndata) == {"keep"}


# ----------------------------------------------------------------------------- scope_deferral
def test_trust_is_placed_before_each_apply_edges_followed_only_by_plain_calls():
    new, log = _log(Attention(), _graph(), torch.randn(30, 4, dtype=torch.float64), scope_deferral)
    names = [getattr(n.target, "__name__", n.target) for n in new.nodes]
    assert names.index("trust_next_apply_edges") + 1 == names.index("apply_edges")
    assert names.index("forget_trusted") + 1 == names.index("exit_scope")
    assert len(log) == 1 and log[0].startswith("scope_deferral: 1 apply_edges on g0"), log


class WritesInPlace(Attention):
    def forward(self, g, h):
        with g.local_scope():
            self.attend(g, h)
            t = g.ndata["t"]
            t.mul_(2.0)
            return t


class ThenUncompiled(Attention):
    def forward(self, g, h):
        with g.local_scope():
            g.ndata["k"], g.ndata["q"], g.ndata["v"] = self.k(h), self.q(h), self.v(h)
            g.apply_edges(self.edge_attention)
            g.apply_edges(lambda edges: {"v": edges.data["v"] * 2.0}, compile=False)  # eager only
            g.update_all(self.message, fn.sum("m", "t"))
            return g.ndata["t"]


@pytest.mark.parametrize("kind", [NoScope, WritesInPlace, ThenUncompiled])
def test_no_trust_where_user_code_could_write_into_an_operand_first(kind):
    new, log = _log(kind(), _graph(), torch.randn(30, 4, dtype=torch.float64), scope_deferral)
    assert log == [] and not any(n.target is trust_next_apply_edges for n in new.nodes)


def _scores_graph():
    g = _graph(seed=4)
    g.ndata["el"], g.ndata["er"] = torch.randn(30, 2, dtype=torch.float64), torch.randn(30, 2, dtype=torch.float64)
    return g


def _scores(edges):
    return {"e": edges.src["el"] + edges.dst["er"]}


@pytest.mark.parametrize("trusted", [False, True])
def test_a_trusted_apply_edges_leaves_a_result_on_its_inputs_unwritten(trusted):
    g = _scores_graph()
    if trusted:
        trust_next_apply_edges(g)
    g.apply_edges(_scores, compile=True)
    assert isinstance(g._estore.peek_whole("e"), DeferredEdges) == trusted
    src, dst = g.find_edges()
    torch.testing.assert_close(g.edata["e"], g.ndata["el"][src] + g.ndata["er"][dst])
    forget_trusted(g)


def _branching_message(edges):  # a data-dependent branch: the call runs eagerly
    return {"m": edges.src["el"] * (2.0 if edges.src["el"].sum().item() > 0 else 1.0)}


@pytest.mark.parametrize("writer", ["message", "update"])
def test_user_code_writing_into_an_operand_first_computes_what_trust_left_unwritten(writer):
    """The write runs while the message is traced, or (the update) only in the eager run after the trace failed."""
    g = _scores_graph()
    trust_next_apply_edges(g)
    g.apply_edges(_scores, compile=True)
    src, dst = g.find_edges()
    expected = g.ndata["el"][src] + g.ndata["er"][dst]

    def message(edges):
        g.ndata["el"].mul_(0.0)
        return _branching_message(edges)

    def update(nodes):
        g.ndata["er"].mul_(0.0)
        return {"s": nodes.data["s"] * 2.0}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        if writer == "message":
            g.update_all(message, fn.sum("m", "s"), compile=True)
        else:
            g.update_all(_branching_message, fn.sum("m", "s"), update, compile=True)
    torch.testing.assert_close(g.edata["e"], expected)

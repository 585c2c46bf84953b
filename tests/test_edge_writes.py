"""Message UDFs that write ``edges.data[k] = v`` compile (issue 40): the write is an edge output of the plan,
stored in the graph where eager (and DGL) store it, in eager's order; elsewhere the call behaves as eager.

The fixed numbers were checked against DGL 2.1 (``import dgl`` in the peer interpreter, same graph and UDFs).
"""

import functools
import re
import warnings

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import gnnc
import gnnc.function as fn
from gnnc.compiler import driver as compiled
from gnnc.compiler.driver import FallbackWarning
from tests.graphs import random_heterograph, random_homograph

D = 5


class _GatedLayer(nn.Module):
    """A residual gated graph conv in benchmarking-gnns' shape: the message writes the new edge value into its
    batch (stored in ``g.edata['e']`` by the call), which the forward reads back and normalises."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c, self.d, self.e = (nn.Linear(D, D).double() for _ in range(5))
        self.norm_h, self.norm_e = nn.BatchNorm1d(D).double(), nn.BatchNorm1d(D).double()

    def message(self, edges):
        gate = edges.data["Ce"] + edges.src["Dh"] + edges.dst["Eh"]
        edges.data["e"] = gate
        return {"Bh_j": edges.src["Bh"], "e_ij": gate}

    def reduce(self, nodes):
        sigma = torch.sigmoid(nodes.mailbox["e_ij"])
        return {"h": nodes.data["Ah"] + (sigma * nodes.mailbox["Bh_j"]).sum(1) / (sigma.sum(1) + 1e-6)}

    def forward(self, g, h, e):
        g.ndata["h"], g.ndata["Ah"], g.ndata["Bh"] = h, self.a(h), self.b(h)
        g.ndata["Dh"], g.ndata["Eh"] = self.d(h), self.e(h)
        g.edata["e"], g.edata["Ce"] = e, self.c(e)
        g.update_all(self.message, self.reduce)
        h_new, e_new = F.relu(self.norm_h(g.ndata["h"])), F.relu(self.norm_e(g.edata["e"]))
        return h + h_new, e + e_new


def _compiled_plans_ran(run):
    """``run()`` with every fallback an error; asserts that compiled plans ran."""
    with warnings.catch_warnings(), compiled.recording() as plans:
        warnings.simplefilter("error", FallbackWarning)
        out = run()
    assert plans and all(p.module is not None for p in plans), "no compiled plan ran"
    return out


@pytest.mark.parametrize("edge_only", [False, True])
def test_the_gated_gcn_layer_compiles_with_eagers_values_and_gradients(edge_only):
    g = random_homograph(14, 50, seed=4)  # user edge order differs from the internal one
    torch.manual_seed(0)
    layer = _GatedLayer()
    h = torch.randn(14, D, dtype=torch.float64, requires_grad=True)
    e = torch.randn(g.num_edges(), D, dtype=torch.float64, requires_grad=True)
    if edge_only:  # the edge-feature-only variant: the gate reads node features alone
        layer.message = lambda edges: (
            edges.data.__setitem__("e", edges.src["Dh"] + edges.dst["Eh"]),
            {"Bh_j": edges.src["Bh"], "e_ij": edges.data["e"]},
        )[1]
    fast = gnnc.compile(layer)
    results = []
    for run in (lambda: layer(g, h, e), lambda: _compiled_plans_ran(lambda: fast(g, h, e))):
        for p in (h, e, *layer.parameters()):
            p.grad = None
        out_h, out_e = run()
        (out_h.pow(2).sum() + (out_e * torch.linspace(0, 1, D, dtype=torch.float64)).sum()).backward()
        results.append(
            [
                out_h.detach(),
                out_e.detach(),
                *(p.grad.clone() for p in (h, e, *layer.parameters()) if p.grad is not None),
            ]
        )
    assert len(results[0]) == len(results[1])
    for want, got in zip(*results):
        torch.testing.assert_close(got, want)


def _small_graph():
    g = gnnc.graph((torch.tensor([0, 1, 2, 3, 1, 0]), torch.tensor([1, 2, 3, 0, 1, 2])), num_nodes=4)
    g.ndata["h"] = torch.arange(8.0).reshape(4, 2)
    g.edata["e"] = torch.ones(6, 2)
    return g


def _writes_and_returns(edges):
    edges.data["e"] = edges.src["h"] * 2
    edges.data["w"] = edges.data["e"] + 1  # read back
    edges.data["a"] = edges.src["h"] + edges.dst["h"]  # an apply_edges result of this form would be deferred
    return {"e": edges.dst["h"] + 100, "x": edges.data["e"] * 10}


def _reads_then_writes(edges):
    edges.data["e"] = edges.data["e"] + edges.src["h"]
    return {"m": edges.data["e"]}


@pytest.mark.parametrize("flag", [False, True])
def test_writes_are_stored_in_dgls_order(flag):
    g = _small_graph()
    run = _compiled_plans_ran if flag else (lambda f: f())
    run(lambda: g.apply_edges(_writes_and_returns, compile=flag))
    # DGL 2.1: the returned 'e' is stored after the written one; 'w' read the written 'e'
    assert g.edata["e"][:, 0].tolist() == [102.0, 104.0, 106.0, 100.0, 102.0, 104.0]
    assert g.edata["w"][:, 0].tolist() == [1.0, 5.0, 9.0, 13.0, 5.0, 1.0]
    assert g.edata["x"][:, 0].tolist() == [0.0, 40.0, 80.0, 120.0, 40.0, 0.0]
    assert g.edata["a"][:, 1].tolist() == [4.0, 8.0, 12.0, 8.0, 6.0, 6.0]
    run(lambda: g.update_all(_reads_then_writes, lambda nodes: {"s": nodes.mailbox["m"].sum(1)}, compile=flag))
    assert g.edata["e"].tolist() == [
        [102.0, 104.0],
        [106.0, 108.0],
        [110.0, 112.0],
        [106.0, 108.0],
        [104.0, 106.0],
        [104.0, 106.0],
    ]
    assert g.ndata["s"].tolist() == [[106.0, 108.0], [206.0, 210.0], [210.0, 214.0], [110.0, 112.0]]


def _updating(edges):
    edges.data.update({"a": edges.src["h"] * 2}, b=edges.dst["h"])
    return {"c": edges.data["a"] + 1}


@pytest.mark.parametrize("flag", [False, True])
def test_edges_data_update_writes_as_dgls_frames(flag):
    g = gnnc.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])))
    g.ndata["h"] = torch.arange(3.0).reshape(3, 1)
    (_compiled_plans_ran if flag else (lambda f: f()))(lambda: g.apply_edges(_updating, compile=flag))
    assert [g.edata[k].flatten().tolist() for k in "abc"] == [[0.0, 2.0, 4.0], [1.0, 2.0, 0.0], [1.0, 3.0, 5.0]]


def _marking(edges):
    edges.data["z"] = edges.src["h"] * 3
    return {"m": edges.data["z"]}


class _Partial(nn.Module):
    """Partial calls (DGL's compute graphs): a message's write is not stored in the graph."""

    def forward(self, g):
        g.send_and_recv(torch.tensor([0, 2]), _marking, fn.sum("m", "t"))
        g.pull(torch.tensor([1]), _marking, fn.sum("m", "u"))
        g.apply_edges(_marking, torch.tensor([1, 3]))
        return g.ndata["t"] + g.ndata["u"], g.edata["m"]


def test_partial_calls_keep_the_write_to_the_call_as_dgl():
    outs = []
    for flag in (False, True):
        g = _small_graph()
        with warnings.catch_warnings(), compiled.recording() as plans:
            warnings.simplefilter("error", FallbackWarning)
            outs.append((gnnc.compile(_Partial()) if flag else _Partial())(g))
        assert "z" not in g.edata
        assert len(plans) == (3 if flag else 0) and all(p.module is not None for p in plans)
    for want, got in zip(*outs):
        torch.testing.assert_close(got, want)
    assert outs[0][0][:, 0].tolist() == [0.0, 6.0, 0.0, 12.0]
    assert outs[0][1][:, 0].tolist() == [0.0, 6.0, 0.0, 18.0, 0.0, 0.0]


def _relation_calls(g, flag):
    g.apply_edges(
        lambda e: (e.data.__setitem__("k", e.src["h"] * 3), {"q": e.src["h"]})[1], etype="likes", compile=flag
    )
    g.multi_update_all(
        {"likes": (_marking, fn.sum("m", "o")), "follows": (_marking, fn.sum("m", "o"))}, "sum", compile=flag
    )


def test_a_relations_write_is_stored_in_that_relation_only():
    outs = []
    for flag in (False, True):
        g = random_heterograph(1)
        g.nodes["user"].data["h"] = torch.randn(g.num_nodes("user"), D, generator=torch.Generator().manual_seed(2))
        if flag:
            _compiled_plans_ran(functools.partial(_relation_calls, g, flag))
        else:
            _relation_calls(g, flag)
        assert "k" not in g.edges["follows"].data
        outs.append(
            [
                g.edges["likes"].data["k"],
                g.edges["likes"].data["z"],
                g.edges["follows"].data["z"],
                g.nodes["item"].data["o"],
                g.nodes["user"].data["o"],
            ]
        )
    for want, got in zip(*outs):
        torch.testing.assert_close(got, want)
    src = g.find_edges(etype="likes")[0]
    torch.testing.assert_close(outs[1][0], g.nodes["user"].data["h"][src] * 3)


def test_a_write_eager_refuses_raises_eagers_error_when_compiled():
    g, table = _small_graph(), torch.ones(3, 2)
    with (
        pytest.warns(FallbackWarning, match="not one row per edge"),
        pytest.raises(ValueError, match=r"edges.data\['p'\] = ...: expected a tensor of 6 rows"),
    ):
        g.apply_edges(lambda e: (e.data.__setitem__("p", table), {"q": e.src["h"]})[1], compile=True)


@pytest.mark.parametrize(
    "udfs, said",
    [
        (
            (lambda e: (e.src.__setitem__("h", e.src["h"] * 2), {"m": e.src["h"]})[1], fn.sum("m", "o")),
            r"edges.src\['h'\] = ...: this space of a UDF's batch is read-only",
        ),
        (
            (fn.copy_u("h", "m"), lambda n: (n.data.__setitem__("k", n.mailbox["m"].sum(1)), {"o": n.data["k"]})[1]),
            r"nodes.data\['k'\] = ...: eager keeps a node UDF's write in its batch only",
        ),
    ],
)
def test_other_writes_into_the_batch_fall_back_saying_what_they_are(udfs, said):
    g = _small_graph()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FallbackWarning)
        try:
            g.update_all(*udfs, compile=True)
        except TypeError:
            pass  # eager's own refusal of the write
    messages = [str(w.message) for w in caught if issubclass(w.category, FallbackWarning)]
    assert messages and all("part of a tensor" not in m for m in messages)
    assert any(re.search(said, m) for m in messages), messages


class _WritingHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, D).double()

    def message(self, edges):
        edges.data["s"] = self.fc(edges.src["h"]) * edges.dst["h"]
        return {"m": edges.data["s"]}


class _WritingHeads(nn.Module):
    """Heads in the per-head style the forward passes batch (``passes.batch_heads``), whose messages write."""

    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList(_WritingHead() for _ in range(3))

    def forward(self, g, h):
        outs = []
        for head in self.heads:
            g.ndata["h"] = h
            g.update_all(head.message, fn.sum("m", "o"))
            outs.append(g.ndata.pop("o"))
        return torch.cat(outs, -1) * g.edata["s"].sum()  # the last head's write


def test_heads_whose_messages_write_run_one_by_one_with_their_writes():
    model, h = _WritingHeads(), torch.randn(12, D, dtype=torch.float64)
    want = model(random_homograph(12, 40, seed=5), h)
    fast = gnnc.compile(model)
    got = _compiled_plans_ran(lambda: fast(random_homograph(12, 40, seed=5), h))
    torch.testing.assert_close(got, want)
    assert any("writes edges.data" in line for line in fast.forward_log), fast.forward_log

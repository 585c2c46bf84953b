"""``passes.retype`` and deferred values on retyped blocks: DGL-style typed UDFs against eager.

The models are written as DGL users write them: per-relation tables indexed
by ``edges.data['rel_type']`` inside the UDFs, attention in two calls
(``apply_edges`` then ``update_all`` with a mailbox softmax). Every graph has
zero in-degree nodes, self loops, multi-edges and a relation without edges.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gnnc
import gnnc.function as fn
from gnnc.compiler.driver import FallbackWarning, recording
from gnnc.ir import operators as ops
from gnnc.runtime.deferred import DeferredEdges
from tests.graphs import random_homograph

NUM_RELS, IN, HEADS, OUT = 5, 6, 2, 3


def _graph(seed, num_nodes=16, num_edges=60, negative=False):
    g = random_homograph(num_nodes, num_edges, seed)
    gen = torch.Generator().manual_seed(seed)
    types = torch.randint(0, NUM_RELS - 1, (g.num_edges(),), generator=gen)  # the last relation is empty
    g.edata["rel_type"] = types - NUM_RELS if negative else types
    g.edata["norm"] = torch.rand(g.num_edges(), 1, dtype=torch.float64, generator=gen)
    return g


class TwoCallAttention(nn.Module):
    """DGL's two-call attention: ``apply_edges(edge_attention)`` gives logits 'e' and messages 'z', then
    ``update_all`` takes a softmax over each mailbox."""

    def forward(self, g, h):
        with g.local_scope():
            self.set_inputs(g, h)
            g.ndata["o"] = h.new_zeros(h.shape[0], HEADS * OUT) + h.sum() * 0  # kept without edges (as DGL)
            g.apply_edges(self.edge_attention)
            g.update_all(lambda edges: {"z": edges.data["z"], "e": edges.data["e"]}, self.reduce)
            return g.ndata["o"]

    @staticmethod
    def reduce(nodes):
        alpha = F.softmax(nodes.mailbox["e"], dim=1)
        return {"o": torch.sum(alpha.unsqueeze(-1) * nodes.mailbox["z"], dim=1).view(-1, HEADS * OUT)}


class RGAT(TwoCallAttention):
    """Relational GAT (DGL-user style), the tables looked up per edge."""

    def __init__(self, big_logits=False):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(NUM_RELS, IN, HEADS * OUT, dtype=torch.float64))
        self.attn = nn.Parameter(torch.randn(NUM_RELS, HEADS, 2 * OUT, dtype=torch.float64) * (30 if big_logits else 1))

    @staticmethod
    def set_inputs(g, h):
        g.ndata["h"] = h

    def edge_attention(self, edges):
        w = self.weight[edges.data["rel_type"]]
        z_src = torch.bmm(edges.src["h"].unsqueeze(1), w).squeeze(1).view(-1, HEADS, OUT)
        z_dst = torch.bmm(edges.dst["h"].unsqueeze(1), w).squeeze(1).view(-1, HEADS, OUT)
        e = (torch.cat([z_src, z_dst], dim=-1) * self.attn[edges.data["rel_type"]]).sum(-1)
        return {"e": F.leaky_relu(e, 0.2), "z": z_src}


class HGTAttention(TwoCallAttention):
    """DGL's HGT example edge UDF on a homogeneous graph with relation ids; k, q and v are the user's tensors."""

    def __init__(self):
        super().__init__()
        self.relation_pri = nn.Parameter(torch.rand(NUM_RELS, HEADS, dtype=torch.float64) + 0.5)
        self.relation_att = nn.Parameter(torch.randn(NUM_RELS, HEADS, OUT, OUT, dtype=torch.float64))
        self.relation_msg = nn.Parameter(torch.randn(NUM_RELS, HEADS, OUT, OUT, dtype=torch.float64))

    @staticmethod
    def set_inputs(g, h):
        g.ndata["k"], g.ndata["q"], g.ndata["v"] = (t.reshape(-1, HEADS, OUT) for t in h.chunk(3, dim=1))

    def edge_attention(self, edges):
        etype = edges.data["rel_type"]
        key = torch.matmul(edges.src["k"].unsqueeze(2), self.relation_att[etype]).squeeze(2)
        att = (edges.dst["q"] * key).sum(dim=-1) * self.relation_pri[etype] / math.sqrt(OUT)
        val = torch.matmul(edges.src["v"].unsqueeze(2), self.relation_msg[etype]).squeeze(2)
        return {"e": att, "z": val}


class TypedSum(nn.Module):
    """DGL's entity-classification message with its norm, under a built-in reduce."""

    def __init__(self, reduce="sum"):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(NUM_RELS, IN, OUT, dtype=torch.float64))
        self.reduce = reduce

    def forward(self, g, h):
        with g.local_scope():
            g.ndata["h"] = h
            g.update_all(
                lambda e: {
                    "m": torch.bmm(e.src["h"].unsqueeze(1), self.weight[e.data["rel_type"]]).squeeze(1) * e.data["norm"]
                },
                getattr(fn, self.reduce)("m", "o"),
            )
            return g.ndata["o"]


def _width(model):
    return 3 * HEADS * OUT if isinstance(model, HGTAttention) else IN


def _compare(model, g, backend="torch", x=None, **options):
    """Compiled against eager, outputs and gradients (input and parameters); the recorded plans."""
    x = torch.randn(g.num_nodes(), _width(model), dtype=torch.float64) if x is None else x
    x_e, x_c = x.clone().requires_grad_(), x.clone().requires_grad_()
    params = list(model.parameters())
    want = model(g, x_e)
    want_grads = torch.autograd.grad(want.square().sum(), [x_e] + params, allow_unused=True)
    with warnings.catch_warnings(), recording() as plans:
        warnings.simplefilter("error", FallbackWarning)
        got = gnnc.compile(model, backend=backend, **options)(g, x_c)
    torch.testing.assert_close(got, want)
    for a, b in zip(torch.autograd.grad(got.square().sum(), [x_c] + params, allow_unused=True), want_grads):
        assert (a is None) == (b is None)  # weights no edge uses (a graph without edges) have none
        if b is not None:
            torch.testing.assert_close(a, b)
    return plans


def _targets(plan):
    return [n.target for n in plan.dfg.graph.nodes]


@pytest.mark.parametrize("backend", ["torch", "cpu"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rgat_two_calls_run_as_the_layers_typed_plan(seed, backend):
    plans = _compare(RGAT(), _graph(seed, negative=seed == 2), backend)
    edges, aggregate = plans
    assert ops.retype in _targets(edges) and ops.etype_pair_matmul in _targets(edges)
    assert ops.index_gather_matmul not in _targets(edges)  # no per-edge typed matmul left
    assert set(edges.deferred) == {"e", "z"}  # neither [E, ...] value is written
    assert ops.sddmm_softmax_aggregate in _targets(aggregate)  # the pair-table logits are never written
    assert ops.edges_to not in _targets(aggregate) and ops.edges_from not in _targets(aggregate)


def test_rgat_with_large_logits():
    _compare(RGAT(big_logits=True), _graph(3))


@pytest.mark.parametrize("backend", ["torch", "cpu"])
@pytest.mark.parametrize("seed", [0, 1])
def test_hgt_two_calls_fold_the_relation_factors_into_a_bilinear_dot(seed, backend):
    plans = _compare(HGTAttention(), _graph(seed), backend)
    edges, aggregate = plans
    assert ops.etype_bilinear_dot in _targets(edges) and ops.scale_heads in _targets(edges)
    # k and q are the user's tensors: the scores are computed at once, kept in the regrouped edge order
    assert ops.edge_rows in _targets(aggregate) and ops.edges_to not in _targets(aggregate)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_typed_sum_runs_on_the_regrouped_block(reduce):
    plans = _compare(TypedSum(reduce), _graph(4))
    assert ops.etype_spmm in _targets(plans[0]) and ops.retype in _targets(plans[0])


def test_one_node_and_no_edges():
    for src, dst, n in (([0, 0], [0, 0], 1), ([], [], 3)):
        g = gnnc.graph((torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int64)), num_nodes=n)
        g.edata["rel_type"] = torch.tensor([1, 3][: len(src)], dtype=torch.int64)
        g.edata["norm"] = torch.rand(len(src), 1, dtype=torch.float64)
        for model in (RGAT(), TypedSum(), HGTAttention()):
            _compare(model, g)


def test_a_max_reduce_keeps_the_edge_order():
    """The first tied edge gets max's gradient: the plan is not regrouped (integer-valued ties)."""
    weight = nn.Parameter(torch.ones(NUM_RELS, IN, OUT, dtype=torch.float64))

    class TypedMax(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = weight

        def forward(self, g, h):
            with g.local_scope():
                g.ndata["h"] = h
                g.update_all(
                    lambda e: {"m": torch.bmm(e.src["h"].unsqueeze(1), self.weight[e.data["rel_type"]]).squeeze(1)},
                    fn.max("m", "o"),
                )
                return g.ndata["o"]

    g = _graph(5)
    plans = _compare(TypedMax(), g, x=torch.randint(0, 2, (g.num_nodes(), IN)).double())
    assert ops.retype not in _targets(plans[0])


def test_user_reads_of_deferred_values_come_back_in_user_order():
    model = RGAT()
    h = torch.randn(16, IN, dtype=torch.float64)
    g_eager, g_comp = _graph(6), _graph(6)
    g_eager.ndata["h"] = g_comp.ndata["h"] = h
    g_eager.apply_edges(model.edge_attention)
    g_comp.apply_edges(model.edge_attention, compile=True)
    for k in ("e", "z"):
        assert isinstance(g_comp._estore.peek_whole(k), DeferredEdges)
        torch.testing.assert_close(g_comp.edata[k], g_eager.edata[k])


def test_in_place_change_of_the_users_tensor_after_apply_edges():
    """HGT's k and q are the user's: changed in place before the aggregation, eager's scores stand."""
    model = HGTAttention()
    g = _graph(7)
    h = torch.randn(g.num_nodes(), 3 * HEADS * OUT, dtype=torch.float64)
    results = []
    for compile_ in (False, True):
        with g.local_scope():
            model.set_inputs(g, h.clone())
            g.apply_edges(model.edge_attention, compile=compile_)
            g.ndata["k"].mul_(2)
            g.ndata["q"].add_(1)
            g.update_all(lambda edges: {"z": edges.data["z"], "e": edges.data["e"]}, model.reduce, compile=compile_)
            results.append(g.ndata["o"])
    torch.testing.assert_close(results[1], results[0])


def test_values_from_two_regroupings_read_by_one_call():
    """Two apply_edges, each regrouped by its own type feature, feed one aggregation: each value is read in
    its own block's order; the same plan with both on one block is another plan."""
    model = RGAT()
    g = _graph(8)
    h = torch.randn(g.num_nodes(), IN, dtype=torch.float64)
    other = (g.edata["rel_type"] + 1) % (NUM_RELS - 1)

    def run(compile_, second_types):
        with g.local_scope():
            g.ndata["h"] = h
            g.apply_edges(lambda e: {"z": model.edge_attention(e)["z"]}, compile=compile_)
            g.edata["rel_type"] = second_types
            g.apply_edges(lambda e: {"e": model.edge_attention(e)["e"]}, compile=compile_)
            g.update_all(lambda e: {"z": e.data["z"], "e": e.data["e"]}, model.reduce, compile=compile_)
            return g.ndata["o"]

    for types in (other, g.edata["rel_type"]):
        torch.testing.assert_close(run(True, types), run(False, types))


def test_edge_scalars_kept_in_internal_order_follow_the_users_tensor():
    """Types and norms are permuted into the graph's edge order once and kept by the user's tensor's
    contents: an in-place change, a new tensor, and a norm that needs gradients are each seen at the next
    call."""
    from gnnc.runtime import plan as plan_runner

    model, g = TypedSum(), _graph(11)

    def kept(name):
        hit = plan_runner._INTERNAL_SCALARS.get(g.edata[name], (id(g.index), 0, g.num_edges()))
        return None if hit is None else hit[1]

    assert g.index.user_eid is not None  # the graph keeps its edges in another order than the user's
    _compare(model, g)
    first = kept("rel_type")
    _compare(model, g)
    assert first is not None and kept("rel_type") is first  # bound as the same object
    g.edata["rel_type"][:5] = (g.edata["rel_type"][:5] + 1) % (NUM_RELS - 1)  # in place: a new version
    g.edata["norm"].mul_(3.0)
    _compare(model, g)
    g.edata["rel_type"] = g.edata["rel_type"].flip(0).clone()  # a new tensor
    _compare(model, g)
    g.edata["norm"] = g.edata["norm"].clone().requires_grad_()  # never kept: its gradient must flow
    _compare(model, g)
    assert kept("norm") is None

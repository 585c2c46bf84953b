"""Typed linear layers indexed by an integer feature: ``weight[edges.data['rel_type']]`` (issue 13).

The pass alone on built MP-DFGs, the ``typed_index_matmul`` kernel against
a per-row reference, and DGL's entity-classification RGCN layer (closure
weights, basis decomposition computed in ``forward``) compiled against
eager, forward and gradients.
"""

import warnings

import pytest
import torch
from torch import nn

import gnnc
import gnnc.function as fn
from gnnc.backend.pytorch import clear_structure_cache, typed_index_matmul
from gnnc.backend.pytorch import index_matmul as kernel
from gnnc.compiler.build import build_apply_edges, build_update_all
from gnnc.compiler.driver import FallbackWarning, recording
from gnnc.compiler.passes import PIPELINE, FixedPoint, dce, index_typed
from gnnc.compiler.trace import trace_udf
from gnnc.ir import cost
from gnnc.ir import operators as ops
from tests.graphs import random_heterograph, random_homograph
from tests.test_passes import _check, _prepare, _targets

R, K, M, H = 5, 4, 3, 2
W = torch.randn(R, K, M, dtype=torch.float64)
WH = torch.randn(R, H, K, M, dtype=torch.float64)


def _graph(seed=0, num_nodes=10, num_edges=30):
    g = random_homograph(num_nodes, num_edges, seed)
    gen = torch.Generator().manual_seed(seed)
    g.ndata["x"] = torch.randn(num_nodes, K, dtype=torch.float64, generator=gen)
    g.ndata["t"] = torch.randint(0, R, (num_nodes,), generator=gen)
    g.ndata["xh"] = torch.randn(num_nodes, H, K, dtype=torch.float64, generator=gen)
    g.edata["y"] = torch.randn(g.num_edges(), K, dtype=torch.float64, generator=gen)
    g.edata["yh"] = torch.randn(g.num_edges(), H, K, dtype=torch.float64, generator=gen)
    g.edata["t"] = torch.randint(0, R - 1, (g.num_edges(),), generator=gen)  # type R-1 stays empty
    g.edata["norm"] = torch.rand(g.num_edges(), 1, dtype=torch.float64, generator=gen)
    return g


# --------------------------------------------------------------------------- the pass alone
MESSAGE_FORMS = {
    "bmm_squeeze1": lambda e: {"m": torch.bmm(e.src["x"].unsqueeze(1), W[e.data["t"]]).squeeze(1)},
    "matmul_squeeze-2": lambda e: {"m": torch.matmul(e.dst["x"].unsqueeze(1), W[e.data["t"]]).squeeze(-2)},
    "at_operator": lambda e: {"m": (e.src["x"].unsqueeze(1) @ W[e.data["t"]]).squeeze(1)},
    "method_bmm": lambda e: {"m": e.src["x"].unsqueeze(1).bmm(W[e.data["t"]]).squeeze(1)},
    "einsum": lambda e: {"m": torch.einsum("bi,bio->bo", e.src["x"], W[e.data["t"]])},
    "einsum_other_letters": lambda e: {"m": torch.einsum("ek, ekm -> em", e.dst["x"], W[e.data["t"]])},
    "edge_rows": lambda e: {"m": torch.bmm(e.data["y"].unsqueeze(1), W[e.data["t"]]).squeeze(1)},
    "squeeze_no_dim": lambda e: {"m": torch.bmm(e.src["x"].unsqueeze(1), W[e.data["t"]]).squeeze()},
    "source_node_type": lambda e: {"m": torch.bmm(e.src["x"].unsqueeze(1), W[e.src["t"]]).squeeze(1)},
    # HGT's per-relation, per-head matrices: [E, H, 1, K] @ [E, H, K, M]
    "heads_matmul_squeeze2": lambda e: {"m": torch.matmul(e.src["xh"].unsqueeze(2), WH[e.data["t"]]).squeeze(2)},
    "heads_at_squeeze-2": lambda e: {"m": (e.dst["xh"].unsqueeze(-2) @ WH[e.data["t"]]).squeeze(-2)},
    "heads_edge_rows_squeeze_no_dim": lambda e: {"m": e.data["yh"].unsqueeze(-2).matmul(WH[e.data["t"]]).squeeze()},
}
EXPECTED_OP = {"edge_rows": ops.index_matmul, "heads_edge_rows_squeeze_no_dim": ops.index_matmul}


@pytest.mark.parametrize("form", sorted(MESSAGE_FORMS))
def test_pass_lowers_every_form_without_per_edge_weights(form):
    g = _graph()
    msg = MESSAGE_FORMS[form]
    dfg = build_apply_edges(trace_udf(msg))
    inputs, _ = _prepare(g, dfg, (msg,))
    out = dce(index_typed(dfg).dfg).dfg
    targets = _targets(out)
    assert EXPECTED_OP.get(form, ops.index_gather_matmul) in targets
    assert "__getitem__" not in targets and torch.bmm not in targets and torch.einsum not in targets
    feature = "edges.src['t']" if form == "source_node_type" else "edges.data['t']"
    assert any(line.startswith("index_typed:") and feature in line for line in out.log)
    _check(dfg, out, inputs)


def test_pass_in_update_all_with_reduce_and_reordered_unsqueeze():
    """After ``reorder`` the unsqueeze runs per node, before the gather: still matched."""
    g = _graph(1)
    msg = lambda e: {"m": torch.bmm(e.src["x"].unsqueeze(1), W[e.data["t"]]).squeeze(1) * e.data["norm"]}
    red = lambda nb: {"h": nb.mailbox["m"].sum(1)}
    from gnnc.compiler.passes import reorder

    dfg = build_update_all(trace_udf(msg), trace_udf(red), None)
    inputs, annotate = _prepare(g, dfg, (msg, red, None))
    moved = reorder(dfg).dfg
    annotate(moved)
    assert any(n.target is ops.gather_src and n.args[1].target == "unsqueeze" for n in moved.graph.nodes)
    out = dce(index_typed(moved).dfg).dfg
    assert ops.index_gather_matmul in _targets(out)
    _check(dfg, out, inputs)


NOT_MATCHED = {
    # squeeze of another dim, a row embedding (no matmul), a 2-D index, a contraction over the other dim
    "squeeze2": lambda e: {"m": torch.bmm(e.src["x"].unsqueeze(1), W[e.data["t"]]).squeeze(2).sum(1)},
    "row_embedding": lambda e: {"m": e.src["x"] * W[e.data["t"]][:, :, 0]},
    "index_2d": lambda e: {
        "m": torch.matmul(e.src["x"].unsqueeze(1).unsqueeze(1), W[e.data["t"].unsqueeze(1)]).squeeze(2).squeeze(1)
    },
    "einsum_transposed": lambda e: {"m": torch.einsum("bo,bio->bi", e.src["x"][:, :M], W[e.data["t"]])},
    # heads broadcast against the weight's (x [E, 1, 1, K] @ [E, H, K, M]); the head dim squeezed instead
    "heads_broadcast": lambda e: {"m": torch.matmul(e.src["x"].unsqueeze(1).unsqueeze(1), WH[e.data["t"]]).squeeze(2)},
    "heads_squeeze1": lambda e: {"m": torch.matmul(e.src["xh"][:, :1].unsqueeze(2), WH[e.data["t"]][:, :1]).squeeze(1)},
}


@pytest.mark.parametrize("form", sorted(NOT_MATCHED))
def test_pass_leaves_other_forms_alone(form):
    g = _graph()
    msg = NOT_MATCHED[form]
    dfg = build_apply_edges(trace_udf(msg))
    _prepare(g, dfg, (msg,))
    out = index_typed(dfg).dfg
    assert not out.log
    assert ops.index_gather_matmul not in _targets(out) and ops.index_matmul not in _targets(out)


def test_pipeline_registers_the_pass_next_to_typed_linear():
    groups = [step.passes for step in PIPELINE if isinstance(step, FixedPoint) and "typed_linear" in step.passes]
    assert groups and all(names[names.index("typed_linear") + 1] == "index_typed" for names in groups)
    assert "typed_linear" not in PIPELINE  # only in those groups


# --------------------------------------------------------------------------- the kernel
def _reference(x, index, weight, types):
    rows = x if index is None else x[index]
    return torch.matmul(rows.unsqueeze(-2), weight[types]).squeeze(-2)


@pytest.mark.parametrize("heads", [(), (3,), (2, 3)])
@pytest.mark.parametrize("case", ["gathered", "rows", "sorted", "one_per_group", "negative", "int32", "chunked"])
def test_kernel_matches_per_row_reference_with_gradients(case, heads):
    gen = torch.Generator().manual_seed(3)
    n, e, t = 7, 40, 6  # 40 gathers of 7 rows: many repeated (row, type) pairs, computed once
    x = torch.randn((n,) + heads + (K,), dtype=torch.float64, generator=gen, requires_grad=True)
    weight = torch.randn((t,) + heads + (K, M), dtype=torch.float64, generator=gen, requires_grad=True)
    index = torch.randint(0, n, (e,), generator=gen)
    types = torch.randint(0, t - 2, (e,), generator=gen)  # two empty groups
    chunk = None
    if case == "rows":
        x = torch.randn((e,) + heads + (K,), dtype=torch.float64, generator=gen, requires_grad=True)
        index = None
    elif case == "sorted":
        types = types.sort().values
    elif case == "one_per_group":
        types = torch.tensor([4, 0, 2, 1], dtype=torch.int64)
        index = index[:4]
    elif case == "negative":
        types = types - 3  # indexing counts negatives from the end
    elif case == "int32":
        types = types.to(torch.int32)
    elif case == "chunked":
        chunk = 3
    out = typed_index_matmul(x, index, weight, types, chunk=chunk)
    ref = _reference(x, index, weight, types.long())
    torch.testing.assert_close(out, ref)
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, (x, weight), g)
    want = torch.autograd.grad(ref, (x, weight), g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def test_kernel_zero_rows_and_float32():
    x = torch.randn(3, K, requires_grad=True)
    weight = torch.randn(R, K, M, requires_grad=True)
    out = typed_index_matmul(x, torch.zeros(0, dtype=torch.int64), weight, torch.zeros(0, dtype=torch.int64))
    assert out.shape == (0, M)
    out.sum().backward()
    assert torch.count_nonzero(weight.grad) == 0 and torch.count_nonzero(x.grad) == 0
    types = torch.tensor([1, 0, 1])
    torch.testing.assert_close(typed_index_matmul(x, None, weight, types), _reference(x, None, weight, types))


def test_kernel_index_out_of_range_names_the_feature():
    x = torch.randn(3, K)
    with pytest.raises(IndexError, match=r"edges.data\['rel'\] has values in \[0, 5\]"):
        typed_index_matmul(x, None, torch.randn(R, K, M), torch.tensor([0, 5, 1]), name="edges.data['rel']")
    with pytest.raises(IndexError, match="-6"):
        typed_index_matmul(x, None, torch.randn(R, K, M), torch.tensor([0, -6, 1]))


def test_gather_computes_each_row_type_pair_once_cached_per_index_version():
    clear_structure_cache()
    types = torch.tensor([1, 0, 1, 1, 0, 1])
    index = torch.tensor([2, 2, 2, 0, 2, 2])
    gp = kernel.grouping(types, 2)
    pairs = gp.compact(index, 3)
    assert pairs.rows.tolist() == [2, 0, 2] and pairs.groups.offsets == (0, 1, 3)  # (2, t0), (0, t1), (2, t1)
    assert pairs.pair.tolist() == [2, 0, 2, 1, 0, 2]
    assert gp.compact(index, 3) is pairs
    index[3] = 1  # in place: the version counter moves
    assert gp.compact(index, 3).rows.tolist() == [2, 1, 2]
    x = torch.randn(3, K, dtype=torch.float64)
    weight = torch.randn(2, K, M, dtype=torch.float64)
    torch.testing.assert_close(typed_index_matmul(x, index, weight, types), _reference(x, index, weight, types))


def test_kernel_rejects_weights_whose_heads_differ_from_x():
    with pytest.raises(ValueError, match=r"weight must be \[T, \*B, K, M\]"):
        typed_index_matmul(torch.randn(3, 2, K), None, torch.randn(R, 3, K, M), torch.tensor([0, 1, 2]))


def test_grouping_cached_per_tensor_and_version_and_by_contents():
    clear_structure_cache()
    types = torch.tensor([2, 0, 1, 0, 2])
    first = kernel.grouping(types, 3)
    assert kernel.grouping(types, 3) is first  # same object, unchanged
    assert kernel.grouping(types.clone(), 3) is first  # a fresh tensor with equal contents
    types[0] = 1  # in place: the version counter moves
    changed = kernel.grouping(types, 3)
    assert changed is not first and changed.groups.offsets == (0, 2, 4, 5)
    assert torch.equal(changed.perm, torch.tensor([1, 3, 0, 2, 4]))  # stable
    assert kernel.grouping(torch.tensor([2, 0, 1, 0, 2]), 3) is first
    clear_structure_cache()
    assert kernel.grouping(types, 3) is not changed


def test_a_grouping_keeps_its_types_narrowed_and_tells_apart_values_that_wrap_to_them():
    """The copy kept to recognise equal contents is int8 for up to 128 types; a fresh tensor whose values are
    equal only after narrowing (3 + 256 wraps to 3) is not taken for the same types, and values out of range
    are reported as such."""
    clear_structure_cache()
    types = torch.tensor([3, 0, -1, 2, 3])
    first = kernel.grouping(types, 4)
    assert first.snapshot.dtype == torch.int8 and first.source_dtype == torch.int64
    assert kernel.grouping(types.clone(), 4) is first
    assert kernel.grouping(types.to(torch.int32), 4) is not first  # another dtype: built anew, same groups
    assert kernel.grouping(types.to(torch.int32), 4).groups.offsets == first.groups.offsets
    with pytest.raises(IndexError, match="259"):
        kernel.grouping(torch.tensor([3, 0, -1, 2, 3 + 256]), 4)
    assert kernel.grouping(torch.tensor([299, 0], dtype=torch.int16), 300).snapshot.dtype == torch.int16
    empty = kernel.grouping(torch.tensor([], dtype=torch.int64), 4)
    assert kernel.grouping(torch.tensor([], dtype=torch.int64), 4) is empty
    compact = first.compact(torch.tensor([1, 1, 0, 1, 1]), 2)  # the narrowed copy's types, as int64
    assert compact.rows.tolist() == [1, 1, 0, 1] and compact.groups.offsets == (0, 1, 1, 2, 4)


# --------------------------------------------------------------------------- end to end: DGL's RGCN layer
class RGCNLayer(nn.Module):
    """DGL's entity-classification RGCN layer (examples/pytorch/rgcn), as users write it."""

    def __init__(self, in_feat, out_feat, num_rels, num_bases=-1, bias=False, activation=None, form="bmm"):
        super().__init__()
        self.in_feat, self.out_feat, self.num_rels, self.num_bases = in_feat, out_feat, num_rels, num_bases
        self.activation, self.form = activation, form
        if self.num_bases <= 0 or self.num_bases > self.num_rels:
            self.num_bases = self.num_rels
        self.weight = nn.Parameter(torch.Tensor(self.num_bases, self.in_feat, self.out_feat))
        if self.num_bases < self.num_rels:
            self.w_comp = nn.Parameter(torch.Tensor(self.num_rels, self.num_bases))
            nn.init.xavier_uniform_(self.w_comp)
        nn.init.xavier_uniform_(self.weight)
        self.bias = nn.Parameter(torch.randn(out_feat)) if bias else None

    def forward(self, g, etype=None):
        if self.num_bases < self.num_rels:
            weight = self.weight.view(self.in_feat, self.num_bases, self.out_feat)
            weight = torch.matmul(self.w_comp, weight).view(self.num_rels, self.in_feat, self.out_feat)
        else:
            weight = self.weight
        form = self.form

        def message_func(edges):
            w = weight[edges.data["rel_type"]]
            if form == "bmm":
                msg = torch.bmm(edges.src["h"].unsqueeze(1), w).squeeze()
            elif form == "matmul":
                msg = torch.matmul(edges.src["h"].unsqueeze(1), w).squeeze(1)
            else:
                msg = torch.einsum("bi,bio->bo", edges.src["h"], w)
            msg = msg * edges.data["norm"]
            return {"msg": msg}

        def apply_func(nodes):
            h = nodes.data["h"]
            if self.bias is not None:
                h = h + self.bias
            if self.activation:
                h = self.activation(h)
            return {"h": h}

        g.update_all(message_func, fn.sum(msg="msg", out="h"), apply_func, etype=etype)


def _rgcn_graph(seed, num_rels, num_nodes=24, num_edges=90, dtype=torch.float64):
    g = random_homograph(num_nodes, num_edges, seed)
    gen = torch.Generator().manual_seed(seed)
    g.edata["rel_type"] = torch.randint(0, num_rels - 1, (g.num_edges(),), generator=gen)  # last relation empty
    g.edata["norm"] = torch.rand(g.num_edges(), 1, dtype=dtype, generator=gen)
    return g


def _run(model, g, x, compiled, backend="torch", **options):
    g.ndata["h"] = x
    (gnnc.compile(model, backend=backend, **options) if compiled else model)(g)
    return g.ndata["h"]


def _compare(model, g, x, params, backend="torch", **options):
    x_e = x.detach().clone().requires_grad_()
    x_c = x.detach().clone().requires_grad_()
    eager = _run(model, g, x_e, False)
    grads_e = torch.autograd.grad(eager.square().sum(), [x_e] + params)
    with warnings.catch_warnings(), recording() as plans:
        warnings.simplefilter("error", FallbackWarning)
        comp = _run(model, g, x_c, True, backend, **options)
    torch.testing.assert_close(comp, eager)
    grads_c = torch.autograd.grad(comp.square().sum(), [x_c] + params)
    for a, b in zip(grads_c, grads_e):
        torch.testing.assert_close(a, b)
    return plans


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("bases", [-1, 2])
@pytest.mark.parametrize("form", ["bmm", "matmul", "einsum"])
def test_dgl_rgcn_layer_compiles_to_a_typed_aggregation_and_matches_eager(seed, bases, form):
    num_rels = 6
    torch.manual_seed(seed)
    model = RGCNLayer(K, M, num_rels, num_bases=bases, bias=seed % 2 == 0, activation=torch.relu, form=form).double()
    g = _rgcn_graph(seed, num_rels)
    x = torch.randn(g.num_nodes(), K, dtype=torch.float64)
    plans = _compare(model, g, x, list(model.parameters()))
    targets = [n.target for n in plans[0].dfg.graph.nodes]
    # typed message and sum in one operator, on the block regrouped by the type feature
    assert ops.etype_spmm in targets and ops.retype in targets and "__getitem__" not in targets
    assert any(line.startswith("index_typed:") for line in plans[0].dfg.log)


def test_dgl_rgcn_layer_on_every_relation_of_a_heterograph():
    """Per-relation blocks (one of them empty), the type feature stored per relation."""
    g = random_heterograph(2)
    gen = torch.Generator().manual_seed(2)
    for rel in g.canonical_etypes:
        n = g.num_edges(rel)
        g.edges[rel].data["rel_type"] = torch.randint(0, 3, (n,), generator=gen)
        g.edges[rel].data["norm"] = torch.rand(n, 1, dtype=torch.float64, generator=gen)
    model = RGCNLayer(K, K, 3, num_bases=2).double()
    x = torch.randn(g.num_nodes(), K, dtype=torch.float64)
    for rel in g.canonical_etypes:  # ('tag', 'empty', 'user') has no edges
        _compare_rel(model, g, x, rel)


def _compare_rel(model, g, x, rel):
    params = list(model.parameters())
    outs, grads = [], []
    for compiled in (False, True):
        xx = x.detach().clone().requires_grad_()
        g.ndata_all["h"] = xx
        with warnings.catch_warnings():
            warnings.simplefilter("error", FallbackWarning)
            (gnnc.compile(model, backend="torch") if compiled else model)(g, etype=rel)
        h = g.ndata_all["h"]
        outs.append(h)
        grads.append(torch.autograd.grad(h.square().sum(), [xx] + params, allow_unused=True))
    torch.testing.assert_close(outs[1], outs[0])
    for a, b in zip(*grads):
        if a is None or b is None:
            assert a is None and b is None or torch.count_nonzero(a if a is not None else b) == 0
        else:
            torch.testing.assert_close(a, b)


@pytest.mark.parametrize("internal_order", [False, True])
def test_grouping_follows_in_place_changes_of_the_index_feature(internal_order):
    """With edges given in internal order the plan reads the user's tensor itself (cache by object and
    version counter); otherwise a reordered copy every call (cache by contents)."""
    torch.manual_seed(0)
    model = RGCNLayer(K, M, 4).double()
    g = _rgcn_graph(5, 4)
    if internal_order:
        src, dst = g.edges()
        order = torch.sort(dst, stable=True).indices
        g = gnnc.graph((src[order], dst[order]), num_nodes=g.num_nodes())
        g.edata["rel_type"] = torch.randint(0, 4, (g.num_edges(),))
        g.edata["norm"] = torch.rand(g.num_edges(), 1, dtype=torch.float64)
        assert g.index.user_eid is None
    x = torch.randn(g.num_nodes(), K, dtype=torch.float64)
    compiled = gnnc.compile(model, backend="torch")
    for step in range(3):
        if step == 1:
            g.edata["rel_type"].add_(1).remainder_(4)  # in place: same tensor, new contents
        if step == 2:
            g.edata["rel_type"] = torch.flip(g.edata["rel_type"], (0,))  # a new tensor
        g.ndata["h"] = x
        compiled(g)
        got = g.ndata["h"]
        torch.testing.assert_close(got, _run(model, g, x, False))


def test_index_out_of_range_raises_like_eager_and_names_the_feature():
    model = RGCNLayer(K, M, 3).double()
    g = _rgcn_graph(0, 3)
    g.edata["rel_type"][0] = 7
    x = torch.randn(g.num_nodes(), K, dtype=torch.float64)
    with pytest.raises(IndexError):
        _run(model, g, x, False)
    with pytest.raises(IndexError), warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        _run(model, g, x, True)
    # the lowered operator itself names the feature
    g = _graph()
    g.edata["t"][3] = R
    msg = MESSAGE_FORMS["bmm_squeeze1"]
    dfg = build_apply_edges(trace_udf(msg))
    inputs, _ = _prepare(g, dfg, (msg,))
    with pytest.raises(IndexError, match=r"edges.data\['t'\] \(indexing a weight at .*\) has values in \[0, 5\]"):
        dce(index_typed(dfg).dfg).dfg.module()(*inputs)


def test_graph_without_edges():
    model = RGCNLayer(K, M, 3, bias=True).double()
    g = gnnc.graph((torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64)), num_nodes=4)
    g.edata["rel_type"] = torch.zeros(0, dtype=torch.int64)
    g.edata["norm"] = torch.zeros(0, 1, dtype=torch.float64)
    x = torch.randn(4, K, dtype=torch.float64)
    _compare(model, g, x, list(model.parameters()))


# --------------------------------------------------------------------------- node UDFs
def test_node_udf_type_lookups_match_eager():
    emb = nn.Parameter(torch.randn(R, K, dtype=torch.float64))
    wn = nn.Parameter(torch.randn(R, K, K, dtype=torch.float64))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.wn = emb, wn

        def forward(self, g):
            def apply(nodes):
                h = nodes.data["h"] + self.emb[nodes.data["t"]]
                return {"h": torch.bmm(h.unsqueeze(1), self.wn[nodes.data["t"]]).squeeze(1)}

            g.update_all(fn.copy_u("x", "m"), fn.sum("m", "h"), apply)

    g = _graph(4)
    model = Model()
    x = g.ndata["x"]
    outs, grads = [], []
    for compiled in (False, True):
        xx = x.detach().clone().requires_grad_()
        g.ndata["x"] = xx
        with warnings.catch_warnings(), recording() as plans:
            warnings.simplefilter("error", FallbackWarning)
            (gnnc.compile(model, backend="torch") if compiled else model)(g)
        outs.append(g.ndata["h"])
        grads.append(torch.autograd.grad(outs[-1].square().sum(), [xx, emb, wn]))
    torch.testing.assert_close(outs[1], outs[0])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)
    assert ops.index_matmul in [n.target for n in plans[0].dfg.graph.nodes]


# --------------------------------------------------------------------------- end to end: HGT's per-head matrices
class HGTAttention(nn.Module):
    """DGL's HGT example, edge part: per-relation, per-head [d_k, d_k] matrices looked up by relation id."""

    def __init__(self, num_rels, heads, d_k):
        super().__init__()
        self.relation_att = nn.Parameter(torch.randn(num_rels, heads, d_k, d_k, dtype=torch.float64))
        self.relation_msg = nn.Parameter(torch.randn(num_rels, heads, d_k, d_k, dtype=torch.float64))
        self.relation_pri = nn.Parameter(torch.rand(num_rels, heads, dtype=torch.float64))
        self.out_dim = heads * d_k

    def edge_attention(self, edges):
        etype = edges.data["rel_type"]
        key = torch.matmul(edges.src["k"].unsqueeze(2), self.relation_att[etype]).squeeze(2)
        att = (edges.dst["q"] * key).sum(dim=-1) * self.relation_pri[etype]
        val = torch.matmul(edges.src["v"].unsqueeze(2), self.relation_msg[etype]).squeeze(2)
        return {"a": att, "v": val}

    def forward(self, g):
        g.apply_edges(self.edge_attention)
        g.update_all(
            lambda e: {"v": e.data["v"], "a": e.data["a"]},
            lambda nb: {
                "h": torch.sum(torch.softmax(nb.mailbox["a"], 1).unsqueeze(-1) * nb.mailbox["v"], 1).view(
                    -1, self.out_dim
                )
            },
        )


@pytest.mark.parametrize("seed", [0, 1])
def test_hgt_per_head_relation_matrices_compile_to_typed_matmuls_and_match_eager(seed):
    torch.manual_seed(seed)
    heads, d_k, num_rels = 2, 3, 4
    model = HGTAttention(num_rels, heads, d_k)
    g = _rgcn_graph(seed, num_rels)
    x = torch.randn(g.num_nodes(), heads, d_k, dtype=torch.float64)
    g.ndata["q"] = torch.randn(g.num_nodes(), heads, d_k, dtype=torch.float64)
    g.ndata["v"] = torch.randn(g.num_nodes(), heads, d_k, dtype=torch.float64)

    def run(compiled):
        k = x.detach().clone().requires_grad_()
        with g.local_scope():
            g.ndata["k"] = k
            with warnings.catch_warnings(), recording() as plans:
                warnings.simplefilter("error", FallbackWarning)
                (gnnc.compile(model, backend="torch") if compiled else model)(g)
            h = g.ndata["h"]
        return h, torch.autograd.grad(h.square().sum(), [k] + list(model.parameters())), plans

    want, want_grads, _ = run(False)
    got, got_grads, plans = run(True)
    torch.testing.assert_close(got, want)
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a, b)
    targets = [n.target for n in plans[0].dfg.graph.nodes]
    # relation_att and relation_msg: no [E, H, d, d] copies; the scores a bilinear dot on the regrouped block
    assert ops.index_gather_matmul not in targets and ops.etype_bilinear_dot in targets


# ------------------------------------------------------------ typed message + sum: index_spmm
class _TypedAggregation(nn.Module):
    """DGL's entity-classification message, with or without its norm, under any built-in sum or mean."""

    def __init__(self, reduce, with_norm):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(R, K, M, dtype=torch.float64))
        self.reduce, self.with_norm = reduce, with_norm

    def forward(self, g):
        weight = self.weight

        def message(edges):
            msg = torch.bmm(edges.src["h"].unsqueeze(1), weight[edges.data["rel_type"]]).squeeze()
            return {"m": msg * edges.data["norm"] if self.with_norm else msg}

        g.update_all(message, getattr(fn, self.reduce)("m", "h"))


def _forced_order(monkeypatch, order):
    """Make the cost model pick ``order`` for typed aggregations; returns the orders ``cost.choose`` ran."""
    monkeypatch.setattr(cost, "typed_aggregation", lambda *args, **kw: ([], order))
    ran, real = [], cost.choose
    monkeypatch.setattr(cost, "choose", lambda *args: ran.append(real(*args)) or ran[-1])
    return ran


@pytest.mark.parametrize("order", [cost.TRANSFORM_FIRST, cost.AGGREGATE_FIRST])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("with_norm", [True, False])
@pytest.mark.parametrize("negative", [False, True])
@pytest.mark.parametrize("backend", ["torch", "cpu"])
@pytest.mark.parametrize("retype", [True, False])
def test_typed_message_and_sum_fuse_and_match_eager_in_either_order(
    order, reduce, with_norm, negative, backend, retype, monkeypatch
):
    ran = _forced_order(monkeypatch, order)
    torch.manual_seed(0)
    model = _TypedAggregation(reduce, with_norm)
    g = _rgcn_graph(3, R)  # zero in-degree nodes, self loops, multi-edges, the last type without edges
    if negative:
        g.edata["rel_type"] = g.edata["rel_type"] - R  # counted from the end, as indexing allows
    x = torch.randn(g.num_nodes(), K, dtype=torch.float64)
    plans = _compare(model, g, x, [model.weight], backend, retype=retype)
    assert (ops.etype_spmm if retype else ops.index_spmm) in [n.target for n in plans[0].dfg.graph.nodes]
    assert ran and set(ran) == {order}


def test_typed_aggregation_regroups_the_block_once_per_type_tensor(monkeypatch):
    from gnnc.graph.index import GraphIndex

    model = _TypedAggregation("sum", True)
    g = _rgcn_graph(4, R)
    built, real = [], GraphIndex.from_relation_blocks
    monkeypatch.setattr(
        GraphIndex, "from_relation_blocks", classmethod(lambda cls, *a: built.append(1) or real.__func__(cls, *a))
    )
    compiled = gnnc.compile(model, backend="torch")
    outs = []
    for step in range(3):
        if step == 2:
            g.edata["rel_type"] = (g.edata["rel_type"] + 1) % R  # new types: regrouped once more
        g.ndata["h"] = torch.ones(g.num_nodes(), K, dtype=torch.float64)
        compiled(g)
        outs.append(g.ndata["h"])
    assert len(built) == 2
    torch.testing.assert_close(outs[0], outs[1])
    g.ndata["h"] = torch.ones(g.num_nodes(), K, dtype=torch.float64)
    model(g)
    torch.testing.assert_close(outs[2], g.ndata["h"])


def test_typed_aggregation_on_one_node_and_on_no_edges():
    model = _TypedAggregation("mean", True)
    for src, dst, n in (([0, 0], [0, 0], 1), ([], [], 3)):
        g = gnnc.graph((torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int64)), num_nodes=n)
        g.edata["rel_type"] = torch.tensor([1, 4][: len(src)], dtype=torch.int64)
        g.edata["norm"] = torch.rand(len(src), 1, dtype=torch.float64)
        _compare(model, g, torch.randn(n, K, dtype=torch.float64), [model.weight])


def test_typed_aggregation_fuses_a_one_wide_message_with_the_norm_on_either_side():
    """Width one: the product and the norm are both [E, 1] edge columns; either operand order fuses."""
    weight = nn.Parameter(torch.randn(R, K, 1, dtype=torch.float64))

    class NormFirst(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = weight

        def forward(self, g):
            def message(edges):
                msg = torch.bmm(edges.src["h"].unsqueeze(1), self.weight[edges.data["rel_type"]]).squeeze(1)
                return {"m": edges.data["norm"] * msg}

            g.update_all(message, fn.sum("m", "h"))

    g = _rgcn_graph(6, R)
    for retype, fused in ((True, ops.etype_spmm), (False, ops.index_spmm)):
        plans = _compare(NormFirst(), g, torch.randn(g.num_nodes(), K, dtype=torch.float64), [weight], retype=retype)
        assert fused in [n.target for n in plans[0].dfg.graph.nodes]

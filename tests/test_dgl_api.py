"""DGL API that tutorial code uses, eager and compiled: keyword names, srcdata/dstdata, per-type features.

The models are DGL's tutorials (heterograph RGCN, GAT) and examples (GatedGraphConv, HGT) with
``dgl`` renamed ``gnnc`` and nothing else changed; compiled runs must equal eager
runs, outputs and gradients, and must not fall back.
"""

import functools
import math
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import gnnc
import gnnc.function as fn
from gnnc.compiler.driver import recording
from gnnc.ir import operators as ops
from gnnc.ops import edge_softmax
from tests.graphs import random_heterograph, random_homograph


@pytest.fixture(autouse=True)
def _no_fallback():
    """A fallback here is a failure unless a test asks for one with pytest.warns."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        yield


def _acm_like(seed=0):
    """The tutorial's ACM schema: paper-author and paper-field relations both ways."""
    gen = torch.Generator().manual_seed(seed)
    sizes = {"paper": 14, "author": 9, "field": 4}

    def rand(s, d, m):
        return torch.randint(0, sizes[s], (m,), generator=gen), torch.randint(0, sizes[d], (m,), generator=gen)

    return gnnc.heterograph(
        {
            ("paper", "pa", "author"): rand("paper", "author", 30),
            ("author", "ap", "paper"): rand("author", "paper", 30),
            ("paper", "pf", "field"): rand("paper", "field", 16),
            ("field", "fp", "paper"): rand("field", "paper", 16),
        },
        sizes,
    )


# ------------------------------------------------------------ DGL tutorial: heterograph RGCN (5_hetero)
class HeteroRGCNLayer(nn.Module):
    def __init__(self, in_size, out_size, etypes):
        super().__init__()
        # W_r for each relation
        self.weight = nn.ModuleDict({name: nn.Linear(in_size, out_size) for name in etypes})

    def forward(self, G, feat_dict):
        # The input is a dictionary of node features for each type
        funcs = {}
        for srctype, etype, dsttype in G.canonical_etypes:
            # Compute W_r * h
            Wh = self.weight[etype](feat_dict[srctype])
            # Save it in graph for message passing
            G.nodes[srctype].data[f"Wh_{etype}"] = Wh
            # Specify per-relation message passing functions: (message_func, reduce_func).
            funcs[etype] = (fn.copy_u(f"Wh_{etype}", "m"), fn.mean("m", "h"))
        # Trigger message passing of multiple types.
        G.multi_update_all(funcs, "sum")
        # return the updated node feature dictionary
        return {ntype: G.nodes[ntype].data["h"] for ntype in G.ntypes}


class HeteroRGCN(nn.Module):
    def __init__(self, G, in_size, hidden_size, out_size):
        super().__init__()
        # Use trainable node embeddings as featureless inputs.
        embed_dict = {ntype: nn.Parameter(torch.Tensor(G.number_of_nodes(ntype), in_size)) for ntype in G.ntypes}
        for key, embed in embed_dict.items():
            nn.init.xavier_uniform_(embed)
        self.embed = nn.ParameterDict(embed_dict)
        # create layers
        self.layer1 = HeteroRGCNLayer(in_size, hidden_size, G.etypes)
        self.layer2 = HeteroRGCNLayer(hidden_size, out_size, G.etypes)

    def forward(self, G):
        h_dict = self.layer1(G, self.embed)
        h_dict = {k: F.leaky_relu(h) for k, h in h_dict.items()}
        h_dict = self.layer2(G, h_dict)
        # get paper logits
        return h_dict["paper"]


# ------------------------------------------------------------ DGL tutorial: GAT (9_gat)
class GATLayer(nn.Module):
    def __init__(self, g, in_dim, out_dim):
        super().__init__()
        self.g = g
        # equation (1)
        self.fc = nn.Linear(in_dim, out_dim, bias=False)
        # equation (2)
        self.attn_fc = nn.Linear(2 * out_dim, 1, bias=False)
        self.reset_parameters()

    def reset_parameters(self):
        """Reinitialize learnable parameters."""
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_normal_(self.fc.weight, gain=gain)
        nn.init.xavier_normal_(self.attn_fc.weight, gain=gain)

    def edge_attention(self, edges):
        # edge UDF for equation (2)
        z2 = torch.cat([edges.src["z"], edges.dst["z"]], dim=1)
        a = self.attn_fc(z2)
        return {"e": F.leaky_relu(a)}

    def message_func(self, edges):
        # message UDF for equation (3) & (4)
        return {"z": edges.src["z"], "e": edges.data["e"]}

    def reduce_func(self, nodes):
        # reduce UDF for equation (3) & (4)
        # equation (3)
        alpha = F.softmax(nodes.mailbox["e"], dim=1)
        # equation (4)
        h = torch.sum(alpha * nodes.mailbox["z"], dim=1)
        return {"h": h}

    def forward(self, h):
        # equation (1)
        z = self.fc(h)
        self.g.ndata["z"] = z
        # equation (2)
        self.g.apply_edges(self.edge_attention)
        # equation (3) & (4)
        self.g.update_all(self.message_func, self.reduce_func)
        return self.g.ndata.pop("h")


class MultiHeadGATLayer(nn.Module):
    def __init__(self, g, in_dim, out_dim, num_heads, merge="cat"):
        super().__init__()
        self.heads = nn.ModuleList()
        for i in range(num_heads):
            self.heads.append(GATLayer(g, in_dim, out_dim))
        self.merge = merge

    def forward(self, h):
        head_outs = [attn_head(h) for attn_head in self.heads]
        if self.merge == "cat":
            # concat on the output feature dimension (dim=1)
            return torch.cat(head_outs, dim=1)
        else:
            # merge using average
            return torch.mean(torch.stack(head_outs))


class GAT(nn.Module):
    def __init__(self, g, in_dim, hidden_dim, out_dim, num_heads):
        super().__init__()
        self.layer1 = MultiHeadGATLayer(g, in_dim, hidden_dim, num_heads)
        # Be aware that the input dimension is hidden_dim*num_heads since
        # multiple head outputs are concatenated together. Also, only
        # one attention head in the output layer.
        self.layer2 = MultiHeadGATLayer(g, hidden_dim * num_heads, out_dim, 1)

    def forward(self, h):
        h = self.layer1(h)
        h = F.elu(h)
        h = self.layer2(h)
        return h


def _outputs_and_grads(model, run, *inputs):
    out = run(*inputs)
    weights = torch.linspace(-1, 1, out.numel()).view_as(out)
    params = [p for p in model.parameters()] + [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]
    grads = torch.autograd.grad((out * weights).sum(), params, allow_unused=True)  # RGCN: only paper logits
    return out.detach(), [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]


def _assert_compiled_equals_eager(model, *inputs):
    eager_out, eager_grads = _outputs_and_grads(model, model, *inputs)
    compiled = gnnc.compile(model)
    for _ in range(2):  # the second call reuses the cached plans
        out, grads = _outputs_and_grads(model, compiled, *inputs)
        torch.testing.assert_close(out, eager_out, atol=1e-5, rtol=1e-5)
        for g_compiled, g_eager in zip(grads, eager_grads):
            torch.testing.assert_close(g_compiled, g_eager, atol=1e-5, rtol=1e-5)


def test_hetero_rgcn_tutorial_compiled_equals_eager():
    torch.manual_seed(0)
    G = _acm_like()
    _assert_compiled_equals_eager(HeteroRGCN(G, 10, 8, 3), G)


def test_gat_tutorial_compiled_equals_eager():
    torch.manual_seed(0)
    g = random_homograph(num_nodes=20, num_edges=70)
    _assert_compiled_equals_eager(
        GAT(g, in_dim=5, hidden_dim=4, out_dim=3, num_heads=2), torch.randn(20, 5, requires_grad=True)
    )


# ------------------------------------------------------------ keyword names
def _msg(edges):
    return {"m": edges.src["x"] * 2}


def _red(nodes):
    return {"h": nodes.mailbox["m"].sum(1)}


def _upd(nodes):
    return {"h2": nodes.data["h"] + 1}


@pytest.mark.parametrize("compile_", [False, True])
def test_update_all_dgl_keywords_equal_positional(compile_):
    g = random_homograph()
    g.ndata["x"] = torch.randn(g.num_nodes(), 3)
    g.update_all(_msg, _red, _upd, compile=compile_)
    want = g.ndata["h2"]
    assert "h" not in g.ndata  # as DGL: with an update, only its results are written
    for call in (
        lambda: g.update_all(message_func=_msg, reduce_func=_red, apply_node_func=_upd, compile=compile_),
        lambda: g.update_all(_msg, reduce_func=_red, update=_upd, compile=compile_),
        lambda: g.update_all(message=_msg, reduce=_red, apply_node_func=_upd, compile=compile_),
    ):
        del g.ndata["h2"]
        call()
        torch.testing.assert_close(g.ndata["h2"], want)


@pytest.mark.parametrize("compile_", [False, True])
def test_apply_edges_and_apply_nodes_func_keyword(compile_):
    g = random_homograph()
    g.ndata["x"] = torch.randn(g.num_nodes(), 3)
    g.apply_edges(func=_msg, compile=compile_)
    src, _ = g.edges()
    torch.testing.assert_close(g.edata["m"], g.ndata["x"][src] * 2)
    g.apply_nodes(func=lambda nodes: {"y": nodes.data["x"] - 1})
    torch.testing.assert_close(g.ndata["y"], g.ndata["x"] - 1)


@pytest.mark.parametrize("compile_", [False, True])
def test_multi_update_all_dgl_signature(compile_):
    g = random_heterograph()
    for t in g.ntypes:
        g.nodes[t].data["x"] = torch.randn(g.num_nodes(t), 3)
    funcs = {"likes": (fn.copy_u("x", "m"), fn.sum("m", "h")), "follows": (fn.copy_u("x", "m"), fn.max("m", "h"))}
    g.multi_update_all(funcs, "sum", compile=compile_)
    want_item, want_user = g.nodes["item"].data["h"], g.nodes["user"].data["h"]
    g.multi_update_all(
        etype_dict=funcs, cross_reducer="sum", apply_node_func=lambda n: {"h": n.data["h"] * 3}, compile=compile_
    )
    torch.testing.assert_close(g.nodes["item"].data["h"], want_item * 3)
    torch.testing.assert_close(g.nodes["user"].data["h"], want_user * 3)
    g.multi_update_all(funcs, "sum", lambda n: {"h": -n.data["h"]}, compile=compile_)  # DGL's third positional
    torch.testing.assert_close(g.nodes["item"].data["h"], -want_item)


@pytest.mark.parametrize("compile_", [False, True])
def test_update_all_etype_unchanged(compile_):
    g = random_heterograph()
    g.nodes["user"].data["x"] = torch.randn(g.num_nodes("user"), 3)
    g.update_all(message_func=fn.copy_u("x", "m"), reduce_func=fn.sum("m", "h"), etype="likes", compile=compile_)
    src, dst = g.edges(etype="likes")
    want = torch.zeros(g.num_nodes("item"), 3).index_add(0, dst, g.nodes["user"].data["x"][src])
    torch.testing.assert_close(g.nodes["item"].data["h"], want)
    assert "h" not in g.nodes["user"].data


def test_message_and_reduce_passed_the_wrong_way_round_say_so():
    g = gnnc.graph(([0, 1, 2], [1, 2, 0]), num_nodes=3)
    g.ndata["h"] = torch.randn(3, 2)
    with pytest.raises(TypeError, match=r"sum is a reduce function but was passed as the message function"):
        g.update_all(fn.sum("m", "o"), fn.copy_u("h", "m"))
    with pytest.raises(TypeError, match=r"copy_u is a message function but was passed as the reduce function"):
        g.update_all(fn.copy_u("h", "m"), fn.copy_u("h", "m"))
    with pytest.raises(AttributeError, match=r"edges have no mailbox: is a reduce function passed as the message"):
        g.update_all(lambda nodes: {"o": nodes.mailbox["m"].sum(1)}, lambda edges: {"m": edges.src["h"]})


@pytest.mark.parametrize("compile_", [False, True])
def test_a_reduce_keeping_the_degree_dim_and_relations_of_different_widths_are_named(compile_):
    g = gnnc.graph(([0, 1, 2, 2], [1, 2, 0, 1]), num_nodes=3)
    g.ndata["h"] = torch.randn(3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gnnc.FallbackWarning)
        with pytest.raises(ValueError, match=r"returned 'o' of shapes \{1: \(2, 1, 2\), 2: \(1, 2, 2\)\} by in-degree"):
            g.update_all(fn.copy_u("h", "m"), lambda nodes: {"o": nodes.mailbox["m"]}, compile=compile_)
    hg = gnnc.heterograph({("u", "f", "u"): ([0, 1], [1, 2]), ("i", "b", "u"): ([0], [0])}, num_nodes={"u": 3, "i": 1})
    hg.nodes["u"].data["h"], hg.nodes["i"].data["h"] = torch.randn(3, 4), torch.randn(1, 5)
    with pytest.raises(ValueError, match=r"'sum': relations into node type 'u' produced 'o' of different shapes"):
        hg.multi_update_all(
            {"f": (fn.copy_u("h", "m"), fn.sum("m", "o")), "b": (fn.copy_u("h", "m"), fn.sum("m", "o"))},
            "sum",
            compile=compile_,
        )


def test_unknown_or_doubled_keyword_is_a_type_error_naming_it():
    g = random_homograph()
    g.ndata["x"] = torch.randn(g.num_nodes(), 3)
    with pytest.raises(TypeError, match="'msg_func'"):
        g.update_all(msg_func=_msg, reduce_func=_red)
    with pytest.raises(TypeError, match="'func'"):
        g.update_all(func=_msg, reduce_func=_red)
    with pytest.raises(TypeError, match="'inplace'"):
        g.apply_edges(func=_msg, inplace=False)
    with pytest.raises(TypeError, match="'apply_func'"):
        g.multi_update_all({"_E": (_msg, _red)}, "sum", apply_func=_upd)
    with pytest.raises(TypeError, match="'message' twice"):
        g.update_all(_msg, _red, message_func=_msg)
    with pytest.raises(TypeError, match="missing required argument 'reduce'.*'reduce_func'"):
        g.update_all(message_func=_msg)


# ------------------------------------------------------------ srcdata / dstdata / node views
def test_srcdata_dstdata_are_ndata_with_one_node_type():
    g = random_homograph()
    g.srcdata["x"] = torch.ones(g.num_nodes(), 2)
    assert g.dstdata["x"] is g.ndata["x"]
    assert g.number_of_nodes() == g.num_nodes() and g.number_of_edges() == g.num_edges()
    assert torch.equal(g.srcnodes(), g.nodes()) and g.srctypes == g.dsttypes == g.ntypes


def test_srcdata_dstdata_on_a_unibipartite_graph_are_the_side_types():
    g = gnnc.heterograph(
        {("user", "plays", "game"): ([0, 1, 2], [1, 0, 1]), ("developer", "develops", "game"): ([0, 1], [0, 1])},
        {"user": 3, "developer": 2, "game": 2},
    )
    assert g.is_unibipartite and g.srctypes == ["developer", "user"] and g.dsttypes == ["game"]  # sorted (DGL)
    g.dstdata["h"] = torch.ones(2, 1)
    assert torch.equal(g.nodes["game"].data["h"], torch.ones(2, 1))
    assert torch.equal(g.dstnodes(), torch.arange(2)) and torch.equal(g.srcnodes("developer"), torch.arange(2))
    g.srcdata["x"] = {"user": torch.zeros(3, 4)}
    assert set(g.srcdata["x"]) == {"user"} and list(g.srcdata) == ["x"]
    with pytest.raises(TypeError, match="several types"):
        g.srcdata["y"] = torch.zeros(5, 4)
    with pytest.raises(KeyError, match="'game'"):
        g.srcdata["x"] = {"game": torch.zeros(2, 4)}
    with pytest.raises(KeyError, match="not among"):
        g.srcnodes["game"]
    with pytest.raises(ValueError, match="name the node type"):
        g.srcnodes()
    del g.srcdata["x"]
    assert "x" not in g.nodes["user"].data


def test_srcdata_spans_every_type_when_not_unibipartite():
    g = random_heterograph()
    assert not g.is_unibipartite and g.srctypes == g.dsttypes == g.ntypes
    g.nodes["item"].data["x"] = torch.ones(g.num_nodes("item"), 2)
    assert list(g.srcdata["x"]) == ["item"]
    assert g.dstdata["nope"] == {}  # as DGL: the types holding it, none here


# ------------------------------------------------------------ features on some node types only
@pytest.mark.parametrize("compile_", [False, True])
def test_feature_on_source_type_only_read_by_relation(compile_):
    """Eager and compiled read the relation's source type; an update may read the reduce result."""
    g = random_heterograph()
    x = torch.randn(g.num_nodes("user"), 3)
    g.nodes["user"].data["Wh_likes"] = x
    g.update_all(
        fn.copy_u("Wh_likes", "m"), fn.sum("m", "h"), lambda n: {"h2": n.data["h"] * 2}, etype="likes", compile=compile_
    )
    src, dst = g.edges(etype="likes")
    want = torch.zeros(g.num_nodes("item"), 3).index_add(0, dst, x[src])
    torch.testing.assert_close(g.nodes["item"].data["h2"], want * 2)


@pytest.mark.parametrize("compile_", [False, True])
def test_missing_feature_names_feature_and_node_type(compile_):
    g = random_heterograph()
    g.nodes["user"].data["x"] = torch.randn(g.num_nodes("user"), 3)
    with pytest.raises(KeyError, match=r"'x'.*type 'item'"):
        g.update_all(lambda e: {"m": e.src["x"] + e.dst["x"]}, fn.sum("m", "h"), etype="likes", compile=compile_)
    with pytest.raises(KeyError, match=r"'y'.*type 'user'"):
        g.multi_update_all({"likes": (fn.copy_u("y", "m"), fn.sum("m", "h"))}, "sum", compile=compile_)
    with pytest.raises(KeyError, match=r"'x'.*type 'item'"):
        g.update_all(
            fn.copy_u("x", "m"), lambda n: {"h": n.mailbox["m"].sum(1) + n.data["x"]}, etype="likes", compile=compile_
        )


def test_widths_differing_between_the_relation_ends_fall_back_to_eager():
    g = random_heterograph()
    g.nodes["user"].data["x"] = torch.randn(g.num_nodes("user"), 3)
    g.nodes["item"].data["x"] = torch.randn(g.num_nodes("item"), 2)

    def message(edges):
        return {"m": torch.cat([edges.src["x"], edges.dst["x"]], 1)}

    g.update_all(message, fn.sum("m", "h"), etype="likes")
    want = g.nodes["item"].data["h"]
    with pytest.warns(gnnc.FallbackWarning, match="different shape per type"):
        g.update_all(message, fn.sum("m", "h"), etype="likes", compile=True)
    torch.testing.assert_close(g.nodes["item"].data["h"], want)


# ------------------------------------------------------------ edge and node subsets (DGL's edges= / v=)
class GatedGraphConv(nn.Module):
    """DGL's GatedGraphConv forward, ``dgl`` renamed ``gnnc``: a linear per edge type, each applied
    with ``apply_edges`` on that type's edge ids, then a GRU cell."""

    def __init__(self, in_feats, out_feats, n_steps, n_etypes):
        super().__init__()
        self._out_feats, self._n_steps, self._n_etypes = out_feats, n_steps, n_etypes
        self.linears = nn.ModuleList([nn.Linear(out_feats, out_feats) for _ in range(n_etypes)])
        self.gru = nn.GRUCell(out_feats, out_feats, bias=True)

    def forward(self, graph, feat, etypes):
        with graph.local_scope():
            zero_pad = feat.new_zeros((feat.shape[0], self._out_feats - feat.shape[1]))
            feat = torch.cat([feat, zero_pad], -1)
            for _ in range(self._n_steps):
                graph.ndata["h"] = feat
                for i in range(self._n_etypes):
                    eids = torch.nonzero(etypes == i, as_tuple=False).view(-1)
                    if len(eids) > 0:
                        graph.apply_edges(lambda edges: {"W_e*h": self.linears[i](edges.src["h"])}, eids)
                graph.update_all(fn.copy_e("W_e*h", "m"), fn.sum("m", "a"))
                a = graph.ndata.pop("a")
                feat = self.gru(a, feat)
            return feat


def test_gated_graph_conv_edge_subsets_equal_a_per_type_reference():
    torch.manual_seed(0)
    g = random_homograph(num_nodes=15, num_edges=50)  # edges given unsorted: user order != internal order
    etypes = torch.randint(0, 3, (g.num_edges(),))
    model = GatedGraphConv(4, 6, n_steps=2, n_etypes=3)
    x = torch.randn(15, 4, requires_grad=True)
    src, dst = g.edges()
    feat = torch.cat([x, x.new_zeros(15, 2)], -1)
    for _ in range(2):
        msg = torch.zeros(g.num_edges(), 6)
        for i, lin in enumerate(model.linears):
            msg = torch.where((etypes == i).unsqueeze(1), lin(feat[src]), msg)
        feat = model.gru(torch.zeros(15, 6).index_add(0, dst, msg), feat)
    torch.testing.assert_close(model(g, x, etypes), feat)
    with warnings.catch_warnings(), recording() as plans:  # each relation's chosen edges run compiled
        warnings.simplefilter("error", gnnc.FallbackWarning)
        _assert_compiled_equals_eager(model, g, x, etypes)
    assert plans and all(plan.module is not None for plan in plans)


def test_apply_edges_on_chosen_edges_writes_those_rows_only():
    g = random_homograph()
    g.ndata["x"] = torch.randn(g.num_nodes(), 3)
    src, _ = g.edges()
    ids = torch.tensor([5, 0, 7])
    g.apply_edges(_msg, ids)  # DGL's second positional argument: the edges
    want = torch.zeros(g.num_edges(), 3)
    want[ids] = g.ndata["x"][src[ids]] * 2
    torch.testing.assert_close(g.edata["m"], want)  # a new feature is zero elsewhere
    g.apply_edges(lambda e: {"m": -e.data["m"] - 1}, edges=[0, 1])
    want[[0, 1]] = -want[[0, 1]] - 1
    torch.testing.assert_close(g.edata["m"], want)  # an existing one keeps its other rows
    g.apply_edges(lambda e: {"id": e.edges()[2].float().unsqueeze(1)}, 4)
    assert g.edata["id"][4].item() == 4 and g.edata["id"].abs().sum().item() == 4


def test_apply_edges_on_chosen_edges_of_one_relation():
    g = random_heterograph()
    g.nodes["user"].data["x"] = torch.randn(g.num_nodes("user"), 3)
    src, _ = g.edges(etype="follows")
    g.apply_edges(lambda e: {"m": e.src["x"] + 1}, torch.tensor([2, 3]), etype="follows")
    got = g.edges["follows"].data["m"]
    assert got.shape == (g.num_edges("follows"), 3)
    torch.testing.assert_close(got[[2, 3]], g.nodes["user"].data["x"][src[[2, 3]]] + 1)
    assert got[[0, 1]].abs().sum() == 0
    with pytest.raises(ValueError, match=r"edge id 99 at position 0 is out of range \[0, 28\)"):
        g.apply_edges(lambda e: {"m": e.src["x"]}, [99], etype="follows")


def test_apply_nodes_on_chosen_nodes():
    g = random_heterograph()
    x = torch.randn(g.num_nodes("item"), 2)
    g.nodes["item"].data["x"] = x
    g.apply_nodes(lambda n: {"y": n.data["x"] * 3, "x": n.data["x"] + 1}, torch.tensor([1, 4]), ntype="item")
    want_y = torch.zeros_like(x)
    want_y[[1, 4]] = x[[1, 4]] * 3
    want_x = x.clone()
    want_x[[1, 4]] += 1
    torch.testing.assert_close(g.nodes["item"].data["y"], want_y)
    torch.testing.assert_close(g.nodes["item"].data["x"], want_x)


def test_chosen_edges_bad_input_names_the_culprit():
    g = random_homograph()
    g.ndata["x"] = torch.randn(g.num_nodes(), 3)
    with pytest.raises(ValueError, match="edge id -1 at position 1"):
        g.apply_edges(_msg, [0, -1])
    with pytest.raises(ValueError, match="integer edge ids"):
        g.apply_edges(_msg, torch.tensor([0.5]))
    with pytest.raises(ValueError, match=r"edge_ids: \(0, 1\) at position 0 does not form an edge"):
        g.apply_edges(_msg, (torch.tensor([0]), torch.tensor([1])))
    g.edata["m"] = torch.zeros(g.num_edges(), 5)
    with pytest.raises(ValueError, match=r"feature 'm' holds \(5,\) torch.float32 per row.*\(3,\)"):
        g.apply_edges(_msg, [0])
    with pytest.raises(ValueError, match="node id 12 at position 0"):
        g.apply_nodes(lambda n: {"y": n.data["x"]}, [12])


# ------------------------------------------------------------ relation slices: G[srctype, etype, dsttype]
class HGTLayer(nn.Module):
    """DGL's HGT example layer (examples/pytorch/hgt/model.py), ``dgl`` renamed ``gnnc``: relation slices,
    einsum'd relation matrices, ``edge_softmax`` on each slice, a mean over relations."""

    def __init__(self, in_dim, out_dim, node_dict, edge_dict, n_heads, dropout=0.2, use_norm=False):
        super().__init__()
        self.in_dim, self.out_dim = in_dim, out_dim
        self.node_dict, self.edge_dict = node_dict, edge_dict
        self.num_types, self.num_relations = len(node_dict), len(edge_dict)
        self.n_heads = n_heads
        self.d_k = out_dim // n_heads
        self.sqrt_dk = math.sqrt(self.d_k)
        self.k_linears, self.q_linears = nn.ModuleList(), nn.ModuleList()
        self.v_linears, self.a_linears = nn.ModuleList(), nn.ModuleList()
        self.norms = nn.ModuleList()
        self.use_norm = use_norm
        for t in range(self.num_types):
            self.k_linears.append(nn.Linear(in_dim, out_dim))
            self.q_linears.append(nn.Linear(in_dim, out_dim))
            self.v_linears.append(nn.Linear(in_dim, out_dim))
            self.a_linears.append(nn.Linear(out_dim, out_dim))
            if use_norm:
                self.norms.append(nn.LayerNorm(out_dim))
        self.relation_pri = nn.Parameter(torch.ones(self.num_relations, self.n_heads))
        self.relation_att = nn.Parameter(torch.Tensor(self.num_relations, n_heads, self.d_k, self.d_k))
        self.relation_msg = nn.Parameter(torch.Tensor(self.num_relations, n_heads, self.d_k, self.d_k))
        self.skip = nn.Parameter(torch.ones(self.num_types))
        self.drop = nn.Dropout(dropout)
        nn.init.xavier_uniform_(self.relation_att)
        nn.init.xavier_uniform_(self.relation_msg)

    def forward(self, G, h):
        with G.local_scope():
            node_dict, edge_dict = self.node_dict, self.edge_dict
            for srctype, etype, dsttype in G.canonical_etypes:
                sub_graph = G[srctype, etype, dsttype]
                k_linear = self.k_linears[node_dict[srctype]]
                v_linear = self.v_linears[node_dict[srctype]]
                q_linear = self.q_linears[node_dict[dsttype]]
                k = k_linear(h[srctype]).view(-1, self.n_heads, self.d_k)
                v = v_linear(h[srctype]).view(-1, self.n_heads, self.d_k)
                q = q_linear(h[dsttype]).view(-1, self.n_heads, self.d_k)
                e_id = self.edge_dict[etype]
                relation_att = self.relation_att[e_id]
                relation_pri = self.relation_pri[e_id]
                relation_msg = self.relation_msg[e_id]
                k = torch.einsum("bij,ijk->bik", k, relation_att)
                v = torch.einsum("bij,ijk->bik", v, relation_msg)
                sub_graph.srcdata["k"] = k
                sub_graph.dstdata["q"] = q
                sub_graph.srcdata[f"v_{e_id}"] = v
                sub_graph.apply_edges(fn.v_dot_u("q", "k", "t"))
                attn_score = sub_graph.edata.pop("t").sum(-1) * relation_pri / self.sqrt_dk
                attn_score = edge_softmax(sub_graph, attn_score, norm_by="dst")
                sub_graph.edata["t"] = attn_score.unsqueeze(-1)
            G.multi_update_all(
                {etype: (fn.u_mul_e(f"v_{e_id}", "t", "m"), fn.sum("m", "t")) for etype, e_id in edge_dict.items()},
                cross_reducer="mean",
            )
            new_h = {}
            for ntype in G.ntypes:
                n_id = node_dict[ntype]
                alpha = torch.sigmoid(self.skip[n_id])
                t = G.nodes[ntype].data["t"].view(-1, self.out_dim)
                trans_out = self.drop(self.a_linears[n_id](t))
                trans_out = trans_out * alpha + h[ntype] * (1 - alpha)
                new_h[ntype] = self.norms[n_id](trans_out) if self.use_norm else trans_out
            return new_h


class _HGTOutputs(nn.Module):
    """The example layer's outputs of every node type, concatenated (one tensor to compare)."""

    def __init__(self, G, dim):
        super().__init__()
        self.layer = HGTLayer(
            dim,
            dim,
            {t: i for i, t in enumerate(G.ntypes)},
            {e: i for i, e in enumerate(G.etypes)},
            n_heads=2,
            dropout=0.0,
            use_norm=True,
        )

    def forward(self, G, h_paper, h_author, h_field):
        out = self.layer(G, {"paper": h_paper, "author": h_author, "field": h_field})
        return torch.cat([out[t] for t in G.ntypes])


def test_dgl_hgt_example_with_relation_slices_compiled_equals_eager():
    torch.manual_seed(0)
    G = _acm_like()
    feats = [torch.randn(G.num_nodes(t), 8, requires_grad=True) for t in ("paper", "author", "field")]
    _assert_compiled_equals_eager(_HGTOutputs(G, 8), G, *feats)


def test_relation_slice_shares_features_and_runs_on_its_relation_only():
    g = random_heterograph()
    sub = g["user", "likes", "item"]
    assert sub.canonical_etypes == [("user", "likes", "item")] and sub.ntypes == ["user", "item"]
    assert (sub.num_src_nodes(), sub.num_dst_nodes(), sub.num_edges()) == (9, 7, g.num_edges("likes"))
    sub.srcdata["x"] = torch.randn(9, 2)
    assert g.nodes["user"].data["x"] is sub.srcdata["x"]
    sub.update_all(fn.copy_u("x", "m"), fn.sum("m", "h"))
    src, dst = g.edges(etype="likes")
    want = torch.zeros(7, 2).index_add(0, dst, g.nodes["user"].data["x"][src])
    torch.testing.assert_close(g.nodes["item"].data["h"], want)
    assert "h" not in g.nodes["user"].data  # only the relation's destination type is written
    sub.apply_edges(lambda e: {"s": e.src["x"].sum(1)})
    assert g.edges["likes"].data["s"].shape == (g.num_edges("likes"),)
    follows = g["follows"]
    assert follows.is_homogeneous and follows.ndata is not None
    torch.testing.assert_close(follows.in_degrees(), g.in_degrees(etype="follows"))
    with pytest.raises(KeyError, match="not this slice's relation"):
        sub.update_all(fn.copy_u("x", "m"), fn.sum("m", "h"), etype="follows")
    with pytest.raises(ValueError, match="name the node type"):
        sub.num_nodes()


@pytest.mark.parametrize("compile_", [False, True])
def test_a_relation_slices_local_scope_keeps_its_writes_from_the_parent_as_dgl(compile_):
    # DGL 2.1 (checked): a slice's scope clones the slice's frames, not the parent's
    g = random_heterograph()
    g.nodes["user"].data["x"] = torch.ones(9, 2)
    sub = g["likes"]
    with recording() as plans, sub.local_scope():
        sub.srcdata["x"] = torch.zeros(9, 2)  # shadows the parent's 'x' inside the slice only
        sub.edata["w"] = torch.ones(g.num_edges("likes"), 1)
        sub.update_all(fn.u_mul_e("x", "w", "m"), fn.sum("m", "h"), compile=compile_)
        g.nodes["item"].data["p"] = torch.ones(7)  # the parent's own write: it stays
        g["likes"].srcdata["q"] = torch.ones(9)  # through another slice, which shares the parent's frames
        assert torch.equal(sub.dstdata["h"], torch.zeros(7, 2))
        assert "p" not in sub.dstdata and "q" not in sub.srcdata
        assert "h" not in g.nodes["item"].data and "w" not in g.edges["likes"].data
        assert torch.equal(g.nodes["user"].data["x"], torch.ones(9, 2))
    assert sum(plan.module is not None for plan in plans) == compile_  # the slice's call ran compiled
    assert set(g.nodes["item"].data.keys()) == {"p"} and set(g.nodes["user"].data.keys()) == {"x", "q"}
    assert torch.equal(sub.srcdata["x"], torch.ones(9, 2)) and not g.edges["likes"].data.keys()


def test_edge_softmax_on_a_relation_slice_normalizes_within_the_relation():
    g = random_heterograph()
    logits = torch.randn(g.num_edges("liked_by"), 3) * 30  # large logits: the per-node max is subtracted
    got = edge_softmax(g["liked_by"], logits)
    _, dst = g.edges(etype="liked_by")
    want = torch.empty_like(logits)
    for v in dst.unique():
        mask = dst == v
        want[mask] = torch.softmax(logits[mask], 0)
    torch.testing.assert_close(got, want)


# ------------------------------------------------------------ {type: tensor} writes (DGL's heterograph form)
class HeteroDotProductPredictor(nn.Module):
    """DGL's link-prediction tutorial (heterograph), ``dgl`` renamed ``gnnc``."""

    def forward(self, graph, h, etype):
        # h contains the node representations for each node type computed from the GNN defined
        # in the node classification section (Section 5.1).
        with graph.local_scope():
            graph.ndata["h"] = h
            graph.apply_edges(fn.u_dot_v("h", "h", "score"), etype=etype)
            return graph.edges[etype].data["score"]


@pytest.mark.parametrize("compile_", [False, True])
def test_dict_feature_writes_per_type_as_dgl_link_prediction_does(compile_):
    g = random_heterograph(1)
    h = {t: torch.randn(g.num_nodes(t), 4, dtype=torch.float64) for t in g.ntypes}
    model = HeteroDotProductPredictor()
    run = gnnc.compile(model) if compile_ else model
    for etype in ("likes", ("user", "follows", "user"), "empty"):
        score = run(g, h, etype)
        src_t, _, dst_t = g.canonical_etypes[g.etype_id(etype)]
        s, d = g.edges(etype=etype)
        torch.testing.assert_close(score.squeeze(-1), (h[src_t][s] * h[dst_t][d]).sum(-1))
    assert "h" not in g.nodes["user"].data


def test_dict_feature_write_errors_name_the_type_or_rows():
    g = random_heterograph()
    g.edata["w"] = {("user", "likes", "item"): torch.ones(g.num_edges("likes"))}
    assert g.edges["likes"].data["w"].shape == (g.num_edges("likes"),)
    with pytest.raises(KeyError, match="unknown node type 'nope'"):
        g.ndata["x"] = {"nope": torch.ones(3)}
    with pytest.raises(ValueError, match="for type 'item' has 2 rows but the type has 7 nodes"):
        g.ndata["x"] = {"item": torch.ones(2)}


# ----------------------------------------------- DGL 0.5's RelGraphConv: edge types passed by functools.partial
# DGL 0.5-0.7's layer, unchanged but for ``th`` -> ``torch``: its message function reads ``etypes``, a tensor with
# one entry per edge id, bound with functools.partial: the UDF must see edges in edge-id order, as DGL gives them.


def bmm_maybe_select(A, B, index):
    if A.dtype == torch.int64 and len(A.shape) == 1:
        B = B.view(-1, B.shape[2])
        flatidx = index * B.shape[1] + A
        return B.index_select(0, flatidx)
    else:
        BB = B.index_select(0, index)
        return torch.bmm(A.unsqueeze(1), BB).squeeze()


class RelGraphConv(nn.Module):
    def __init__(self, in_feat, out_feat, num_rels, num_bases=None, bias=True, activation=None, self_loop=False):
        super().__init__()
        self.in_feat, self.out_feat, self.num_rels = in_feat, out_feat, num_rels
        self.num_bases = num_bases if num_bases is not None and 0 < num_bases <= num_rels else num_rels
        self.bias, self.activation, self.self_loop = bias, activation, self_loop
        self.weight = nn.Parameter(torch.Tensor(self.num_bases, self.in_feat, self.out_feat))
        nn.init.xavier_uniform_(self.weight, gain=nn.init.calculate_gain("relu"))
        if self.num_bases < self.num_rels:
            self.w_comp = nn.Parameter(torch.Tensor(self.num_rels, self.num_bases))
            nn.init.xavier_uniform_(self.w_comp, gain=nn.init.calculate_gain("relu"))
        self.message_func = self.basis_message_func
        if self.bias:
            self.h_bias = nn.Parameter(torch.Tensor(out_feat))
            nn.init.zeros_(self.h_bias)
        if self.self_loop:
            self.loop_weight = nn.Parameter(torch.Tensor(in_feat, out_feat))
            nn.init.xavier_uniform_(self.loop_weight, gain=nn.init.calculate_gain("relu"))

    def basis_message_func(self, edges, etypes):
        if self.num_bases < self.num_rels:
            weight = self.weight.view(self.num_bases, self.in_feat * self.out_feat)
            weight = torch.matmul(self.w_comp, weight).view(self.num_rels, self.in_feat, self.out_feat)
        else:
            weight = self.weight
        h = edges.src["h"]
        msg = bmm_maybe_select(h, weight, etypes)
        if "norm" in edges.data:
            msg = msg * edges.data["norm"]
        return {"msg": msg}

    def forward(self, g, feat, etypes, norm=None):
        with g.local_scope():
            g.srcdata["h"] = feat
            if norm is not None:
                g.edata["norm"] = norm
            if self.self_loop:
                loop_message = torch.matmul(feat[: g.number_of_dst_nodes()], self.loop_weight)
            g.update_all(functools.partial(self.message_func, etypes=etypes), fn.sum(msg="msg", out="h"))
            node_repr = g.dstdata["h"]
            if self.bias:
                node_repr = node_repr + self.h_bias
            if self.self_loop:
                node_repr = node_repr + loop_message
            if self.activation:
                node_repr = self.activation(node_repr)
            return node_repr


@pytest.mark.parametrize("bases", [None, 2])
def test_dgl05_rel_graph_conv_reads_its_edge_types_in_edge_id_order(bases):
    torch.manual_seed(0)
    n, e, r = 30, 150, 5
    src, dst = torch.randint(0, n, (e,)), torch.randint(0, n - 5, (e,))  # unsorted: internal order differs
    g = gnnc.graph((src, dst), num_nodes=n)
    etypes, norm = torch.randint(0, r, (e,)), torch.rand(e, 1, dtype=torch.float64)
    conv = RelGraphConv(8, 4, r, num_bases=bases, self_loop=True, activation=torch.relu).double()
    x = torch.randn(n, 8, dtype=torch.float64)
    w = conv.weight if bases is None else (conv.w_comp @ conv.weight.view(bases, -1)).view(r, 8, 4)
    msg = torch.bmm(x[src].unsqueeze(1), w[etypes]).squeeze(1) * norm
    want = torch.relu(
        torch.zeros(n, 4, dtype=torch.float64).index_add_(0, dst, msg) + conv.h_bias + x @ conv.loop_weight
    )
    torch.testing.assert_close(conv(g, x, etypes, norm), want)
    with warnings.catch_warnings(), recording() as plans:
        warnings.simplefilter("error", gnnc.FallbackWarning)  # its dtype branch is resolved on the graph
        torch.testing.assert_close(gnnc.compile(conv)(g, x, etypes, norm), want)
    assert ops.etype_spmm in [n.target for n in plans[0].dfg.graph.nodes]  # per-edge weights never formed


def _per_edge_closure_model(scale):
    class Scaled(nn.Module):
        def forward(self, g, etype=None):
            g.update_all(lambda edges: {"m": edges.src["h"] * scale}, fn.sum("m", "o"), etype=etype)

    return Scaled()


@pytest.mark.parametrize("backend", ["torch", "cpu"])
def test_a_tensor_with_a_row_per_edge_reached_from_the_udf_compiles_in_edge_id_order(backend):
    g = random_homograph(12, 40, 3)
    src, dst, _ = g.edges("all")
    scale = torch.randn(g.num_edges(), 1, dtype=torch.float64)
    h = torch.randn(12, 5, dtype=torch.float64, requires_grad=True)
    g.ndata["h"] = h
    want = torch.zeros(12, 5, dtype=torch.float64).index_add(0, dst, h[src] * scale)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        gnnc.compile(_per_edge_closure_model(scale), backend=backend)(g)  # no fallback: it compiles
    torch.testing.assert_close(g.ndata["o"], want)
    torch.testing.assert_close(torch.autograd.grad(g.ndata["o"].sum(), h)[0], torch.autograd.grad(want.sum(), h)[0])


def test_a_tensor_with_a_row_per_edge_of_one_relation():
    g = random_heterograph(4)
    rel = ("user", "follows", "user")
    src, dst = g.edges(etype=rel)
    scale = torch.randn(g.num_edges(rel), 1, dtype=torch.float64)
    h = torch.randn(g.num_nodes("user"), 3, dtype=torch.float64)
    g.nodes["user"].data["h"] = h
    want = torch.zeros_like(h).index_add(0, dst, h[src] * scale)
    for compile_ in (False, True):
        model = _per_edge_closure_model(scale)
        (gnnc.compile(model) if compile_ else model)(g, etype=rel)
        torch.testing.assert_close(g.nodes["user"].data["o"], want)


def test_edges_takes_dgl_forms_and_orders():
    g = gnnc.graph((torch.tensor([2, 0, 2, 1]), torch.tensor([1, 3, 0, 1])), num_nodes=4)
    src, dst, eid = g.edges(form="all")
    assert src.tolist() == [2, 0, 2, 1] and dst.tolist() == [1, 3, 0, 1] and eid.tolist() == [0, 1, 2, 3]
    assert g.edges("eid").tolist() == [0, 1, 2, 3]
    src, dst, eid = g.edges("all", order="srcdst")
    assert list(zip(src.tolist(), dst.tolist())) == [(0, 3), (1, 1), (2, 0), (2, 1)] and eid.tolist() == [1, 3, 2, 0]
    with pytest.raises(ValueError, match="order"):
        g.edges(order="dst")


# ------------------------------------------------- send_and_recv, pull, push
def _reference_on_edges(g, key, eids, message, reduce):
    """update_all on a graph of edges ``eids`` only: each destination's reduce over those edges."""
    src, dst = g.find_edges(key)
    part = gnnc.heterograph({key: (src[eids], dst[eids])}, {t: g.num_nodes(t) for t in g.ntypes})
    for t in g.ntypes:
        for name, value in g.nodes[t].data.items():
            part.nodes[t].data[name] = value
    for name, value in g.edges[key].data.items():
        part.edges[key].data[name] = value[eids]
    part.update_all(message, reduce, etype=key)
    return part.nodes[key[2]].data


def _typed_features(g):
    gen = torch.Generator().manual_seed(0)
    for t in g.ntypes:
        g.nodes[t].data["h"] = torch.randn(g.num_nodes(t), 3, generator=gen, dtype=torch.float64)
        g.nodes[t].data["old"] = torch.randn(g.num_nodes(t), 3, generator=gen, dtype=torch.float64)
    for key in g.canonical_etypes:
        g.edges[key].data["w"] = torch.rand(g.num_edges(key), 1, generator=gen, dtype=torch.float64)


def _weighted_message(edges):
    return {"old": edges.src["h"] * edges.data["w"]}


def _max_reduce(nodes):
    return {"old": nodes.mailbox["old"].max(1).values}


@pytest.mark.parametrize("hetero", [False, True])
def test_send_and_recv_updates_only_the_destinations_of_the_edges(hetero):
    g = random_heterograph(seed=1) if hetero else random_homograph(12, 40, seed=3)
    key = ("user", "likes", "item") if hetero else g.canonical_etypes[0]
    _typed_features(g)
    eids = torch.tensor([5, 0, 3, 3, 7])  # unsorted, repeated
    before = g.nodes[key[2]].data["old"].clone()
    expected = _reference_on_edges(g, key, eids, _weighted_message, _max_reduce)["old"]
    g.send_and_recv(
        eids, _weighted_message, _max_reduce, lambda n: {"old": n.data["old"] + 1}, etype=key if hetero else None
    )
    got = g.nodes[key[2]].data["old"]
    receivers = g.find_edges(key)[1][eids].unique()
    others = torch.ones(got.shape[0], dtype=torch.bool)
    others[receivers] = False
    torch.testing.assert_close(got[receivers], expected[receivers] + 1)
    assert torch.equal(got[others], before[others])


def test_pull_reduces_over_all_in_edges_and_gives_zeros_without_any():
    g = random_homograph(12, 40, seed=3)  # nodes 9.. receive nothing
    _typed_features(g)
    g.ndata["new"] = torch.full((12, 3), 7.0, dtype=torch.float64)
    everything = _reference_on_edges(
        g, g.canonical_etypes[0], torch.arange(g.num_edges()), fn.u_mul_e("h", "w", "m"), fn.sum("m", "new")
    )["new"]
    g.pull([2, 10, 2], message_func=fn.u_mul_e("h", "w", "m"), reduce_func=fn.sum("m", "new"))
    torch.testing.assert_close(g.ndata["new"][2], everything[2])
    assert torch.equal(g.ndata["new"][10], torch.zeros(3, dtype=torch.float64))
    assert (g.ndata["new"][[0, 1, 3, 11]] == 7.0).all()


def test_push_sends_along_out_edges_and_a_new_feature_is_zero_elsewhere():
    g = random_homograph(12, 40, seed=3)
    _typed_features(g)
    out = g.out_edges([1, 4], form="eid")
    expected = _reference_on_edges(g, g.canonical_etypes[0], out, fn.copy_u("h", "m"), fn.mean("m", "pushed"))
    g.push(torch.tensor([1, 4]), fn.copy_u("h", "m"), fn.mean("m", "pushed"))
    torch.testing.assert_close(g.ndata["pushed"], expected["pushed"])  # zeros where nothing arrived, as DGL


def test_send_and_recv_errors_name_the_argument():
    g = random_heterograph(seed=1)
    _typed_features(g)
    with pytest.raises(ValueError, match="etype="):
        g.send_and_recv([0], _weighted_message, _max_reduce)
    with pytest.raises((ValueError, IndexError), match="send_and_recv"):
        g.send_and_recv([999], _weighted_message, _max_reduce, etype="likes")
    with pytest.raises(TypeError, match="missing required argument 'reduce'"):
        g.pull([0], _weighted_message, etype="likes")


def test_a_csr_indptr_declares_its_rows_node_count_as_dgls():
    """DGL counts a csr graph's rows from its indptr (trailing rows without edges are nodes) and refuses a
    num_nodes that disagrees; gnnc counted max id + 1 (2 nodes here where DGL has 4), silently."""
    indptr, indices = torch.tensor([0, 2, 3, 3, 3]), torch.tensor([1, 0, 1])
    g = gnnc.graph(("csr", (indptr, indices, [])))
    assert (g.num_nodes(), g.num_edges()) == (4, 3)  # DGL 2.1's figures
    assert [t.tolist() for t in gnnc.graph(("csc", (indptr, indices, []))).edges()] == [[1, 0, 1], [0, 0, 1]]
    assert gnnc.graph(("csr", (indptr, indices, [])), num_nodes=4).num_nodes() == 4
    for wrong in (3, 5):
        with pytest.raises(ValueError, match="indptr declares 4 source nodes"):
            gnnc.graph(("csr", (indptr, indices, [])), num_nodes=wrong)
    h = gnnc.heterograph({("u", "r", "v"): ("csr", (indptr, indices, []))})
    assert (h.num_nodes("u"), h.num_nodes("v")) == (4, 2)

"""DGL's transform classes, positional encodings and shortest_dist (gnnc.graph.transform_classes, positional,
diffusion, shortest_paths). Expected numbers and orders are DGL 2.1's, printed by the same calls on real DGL."""

import math

import pytest
import torch

import gnnc
from gnnc.compat import dgl as alias
from gnnc.graph import transform_classes as T
from gnnc.graph.positional import lap_pe, random_walk_pe, svd_pe
from gnnc.graph.shortest_paths import shortest_dist


def _edges(g, etype=None):
    src, dst = g.edges(etype=etype)
    return src.tolist(), dst.tolist()


@pytest.fixture
def g4():
    g = gnnc.graph(([1, 1, 0, 2], [1, 2, 2, 2]), num_nodes=4)
    g.ndata["h"] = torch.arange(8.0).reshape(4, 2)
    g.edata["w"] = torch.tensor([1.0, 2.0, 3.0, 4.0])
    return g


@pytest.fixture
def hg():
    g = gnnc.heterograph(
        {
            ("person", "author", "paper"): ([0, 0, 1], [1, 2, 2]),
            ("paper", "accepted", "venue"): ([1], [0]),
            ("paper", "rejected", "venue"): ([2], [1]),
            ("paper", "cites", "paper"): ([0, 1, 2], [1, 1, 0]),
        }
    )
    g.edges["author"].data["x"] = torch.tensor([1.0, 2.0, 3.0])
    g.edges["cites"].data["x"] = torch.tensor([1.0, 2.0, 3.0])
    g.nodes["venue"].data["h"] = torch.ones(2, 1)
    return g


def test_self_loops(g4):
    out = T.AddSelfLoop()(g4)
    assert _edges(out) == ([1, 0, 0, 1, 2, 3], [2, 2, 0, 1, 2, 3])
    assert out.edata["w"].tolist() == [2.0, 3.0, 1.0, 1.0, 1.0, 1.0]
    assert torch.equal(out.ndata["h"], g4.ndata["h"]) and g4.num_edges() == 4
    out = T.AddSelfLoop(allow_duplicate=True, fill_data="mean")(g4)
    assert _edges(out) == ([1, 1, 0, 2, 0, 1, 2, 3], [1, 2, 2, 2, 0, 1, 2, 3])
    assert out.edata["w"].tolist() == [1.0, 2.0, 3.0, 4.0, 0.0, 1.0, 3.0, 0.0]
    out = T.RemoveSelfLoop()(g4)
    assert _edges(out) == ([1, 0], [2, 2]) and out.edata["w"].tolist() == [2.0, 3.0]


def test_self_loop_relations(hg):
    out = T.AddSelfLoop(new_etypes=True)(hg)
    assert out.canonical_etypes == [
        ("paper", "accepted", "venue"),
        ("paper", "cites", "paper"),
        ("paper", "rejected", "venue"),
        ("paper", "self", "paper"),
        ("person", "author", "paper"),
        ("person", "self", "person"),
        ("venue", "self", "venue"),
    ]
    assert _edges(out, "cites") == ([0, 2, 0, 1, 2], [1, 0, 0, 1, 2])
    assert out.edges["cites"].data["x"].tolist() == [1.0, 3.0, 1.0, 1.0, 1.0]
    assert _edges(out, ("venue", "self", "venue")) == ([0, 1], [0, 1])
    assert out.edges["author"].data["x"].tolist() == [1.0, 2.0, 3.0]
    assert out.nodes["venue"].data["h"].tolist() == [[1.0], [1.0]]


def test_add_reverse(g4, hg):
    out = T.AddReverse()(g4)
    assert _edges(out) == ([1, 1, 0, 2, 1, 2, 2, 2], [1, 2, 2, 2, 1, 1, 0, 2])
    assert out.edata["w"].tolist() == [1.0, 2.0, 3.0, 4.0, 0.0, 0.0, 0.0, 0.0]
    assert T.AddReverse(copy_edata=True)(g4).edata["w"].tolist() == [1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0]
    out = T.AddReverse(copy_edata=True)(hg)
    assert _edges(out, "cites") == ([0, 1, 2, 1, 1, 0], [1, 1, 0, 0, 1, 2])
    assert _edges(out, "rev_author") == ([1, 2, 2], [0, 0, 1])
    assert out.edges["rev_author"].data["x"].tolist() == [1.0, 2.0, 3.0]
    out = T.AddReverse(sym_new_etype=True)(hg)
    assert _edges(out, "rev_cites") == ([1, 1, 0], [0, 1, 2])
    assert "x" not in out.edges["rev_cites"].data and "x" in out.edges["cites"].data


def test_structural_wrappers(g4):
    out = T.ToSimple()(g4)
    assert _edges(out) == ([0, 1, 1, 2], [2, 1, 2, 2])
    assert out.edata["count"].tolist() == [1, 1, 1, 1] and out.edata["w"].tolist() == [3.0, 1.0, 2.0, 4.0]
    out = T.LineGraph()(g4)
    assert _edges(out) == ([0, 1, 2], [1, 3, 3]) and out.ndata["w"].tolist() == [1.0, 2.0, 3.0, 4.0]
    out = T.Compose([T.AddReverse(), T.AddSelfLoop()])(gnnc.graph(([0, 1], [1, 2])))
    assert out.num_edges() == 7
    assert "AddReverse()" in repr(T.Compose([T.AddReverse(), T.AddSelfLoop()]))


def test_add_metapaths(hg):
    paths = {"acc": [("person", "author", "paper"), ("paper", "accepted", "venue")]}
    out = T.AddMetaPaths(paths)(hg)
    assert ("person", "acc", "venue") in out.canonical_etypes and len(out.canonical_etypes) == 5
    assert _edges(out, "acc") == ([0], [0])
    assert out.edges["author"].data["x"].tolist() == [1.0, 2.0, 3.0]
    out = T.AddMetaPaths(paths, keep_orig_edges=False)(hg)
    assert out.canonical_etypes == [("person", "acc", "venue")] and out.ntypes == ["paper", "person", "venue"]
    assert out.nodes["venue"].data["h"].tolist() == [[1.0], [1.0]]


def test_gcn_norm(g4, hg):
    out = T.GCNNorm()(T.AddSelfLoop()(g4))
    assert torch.allclose(out.edata["w"], torch.tensor([0.8164966, 1.2247448, 1.0, 1.0, 0.1666667, 1.0]))
    g = gnnc.graph(([1, 1, 0, 2], [1, 2, 2, 2]), num_nodes=4)
    T.GCNNorm()(g)
    assert torch.allclose(g.edata["w"], torch.tensor([1.0, 1 / math.sqrt(3), 0.0, 1 / 3]))
    T.GCNNorm("x")(hg)
    assert torch.allclose(hg.edges["cites"].data["x"], torch.tensor([1 / 3, 2 / 3, 0.0]))
    assert hg.edges["author"].data["x"].tolist() == [1.0, 2.0, 3.0]  # joins two node types: left alone


def test_diffusions():
    g = gnnc.graph(([0, 1, 2, 3, 4], [2, 3, 4, 5, 3]))
    g.ndata["h"] = torch.arange(12.0).reshape(6, 2)
    out = T.PPR(avg_degree=2)(g)
    assert _edges(out) == ([0, 1, 0, 2, 1, 2, 3, 4, 0, 2, 4, 1, 3, 4, 5], [0, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 5, 5, 5, 5])
    assert torch.allclose(out.edata["w"][:4], torch.tensor([0.15, 0.15, 0.1275, 0.15]))
    assert torch.equal(out.ndata["h"], g.ndata["h"])
    assert torch.allclose(T.GDC([0.1, 0.2, 0.1], avg_degree=1)(g).edata["w"][:3], torch.tensor([0.1, 0.1, 0.2]))
    g.edata["w"] = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5])
    out = T.PPR(avg_degree=2)(g)
    assert _edges(out) == ([0, 1, 2, 1, 2, 3, 4, 2, 4, 3, 4, 5], [0, 1, 2, 3, 3, 3, 3, 4, 4, 5, 5, 5])
    assert torch.allclose(out.edata["w"][3:5], torch.tensor([0.0255, 0.01625625]))
    assert _edges(T.GDC([0.1, 0.2, 0.1], avg_degree=1)(g)) == ([0, 1, 2, 3, 4, 4, 5], [0, 1, 2, 3, 3, 4, 5])
    bidirected = gnnc.graph(([0, 1, 2, 3], [1, 0, 3, 2]))
    bidirected.edata["w"] = torch.tensor([0.1, 0.2, 0.3, 0.4])
    out = T.HeatKernel(avg_degree=3)(bidirected)
    assert out.num_edges() == 16
    assert torch.allclose(out.edata["w"][:2], torch.tensor([0.14630723, 0.0555893]))


def test_sign_diffusion():
    g = gnnc.graph(([0, 1, 2, 3, 2, 0], [1, 2, 3, 0, 0, 0]), num_nodes=5)
    g.ndata["h"] = torch.arange(10.0).reshape(5, 2)
    g.edata["sw"] = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    g.edata["w"] = torch.full((6,), 9.0)  # without eweight_name, gcn and ppr ignore a "w" (as DGL's)
    expected = {  # (diffuse_op, eweight_name): out_feat_2 (DGL 2.1)
        ("raw", "sw"): [[332.0, 444.0], [44.0, 59.0], [0.0, 2.0], [12.0, 18.0], [0.0, 0.0]],
        ("rw", None): [[3.1111109, 4.1111112], [3.3333333, 4.3333335], [0.0, 1.0], [2.0, 3.0], [0.0, 0.0]],
        ("gcn", None): [[5.3886023, 7.0393143], [3.333333, 4.19245], [0.0, 0.57735026], [2.0, 3.0], [0.0, 0.0]],
        ("ppr", "sw"): [
            [6.529377, 8.817212],
            [1.5946045, 2.1513991],
            [1.2525483, 1.9125175],
            [4.200862, 5.7053337],
            [1.6, 1.8],
        ],
    }
    for (op, name), want in expected.items():
        out = T.SIGNDiffusion(k=2, in_feat_name="h", eweight_name=name, diffuse_op=op)(g.clone())
        assert torch.allclose(out.ndata["out_feat_2"], torch.tensor(want), atol=1e-5), (op, name)
    assert g.edata["w"].eq(9.0).all()
    out = T.SIGNDiffusion(k=1, in_feat_name="h", eweight_name="sw", diffuse_op="rw")(g.clone())
    assert torch.isnan(out.ndata["out_feat_1"][4]).all()  # no in-edge: 0 / 0, as DGL
    with pytest.raises(ValueError, match="diffuse_op"):
        T.SIGNDiffusion(k=1, diffuse_op="heat")


def test_positional_encodings():
    g = gnnc.graph(([0, 1, 1, 2, 2], [1, 1, 0, 0, 3]), num_nodes=5)
    assert torch.allclose(random_walk_pe(g, 3)[:2], torch.tensor([[0.0, 0.5, 0.25], [0.5, 0.75, 0.625]]))
    g.edata["ew"] = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    assert torch.allclose(random_walk_pe(g, 3, "ew")[:2], torch.tensor([[0.0, 0.6, 0.24], [0.4, 0.76, 0.544]]))
    g = gnnc.graph(([2, 1, 0, 3, 1, 1], [3, 1, 1, 2, 1, 0]))
    pe, eigval = lap_pe(g, 5, padding=True, return_eigval=True)
    assert torch.allclose(
        pe.abs(),
        torch.tensor(
            [[0.5, 0.8660254, 0, 0, 0], [0.8660254, 0.5, 0, 0, 0], [0, 0, 0.70710677, 0, 0], [0, 0, 0.70710677, 0, 0]]
        ),
    )
    assert torch.allclose(eigval[:3], torch.tensor([0.0, 4 / 3, 2.0]), atol=1e-6) and eigval[3:].isnan().all()
    with pytest.raises(ValueError, match="padding"):
        lap_pe(g, 4)
    ring = gnnc.graph(
        ([0, 1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 4, 5, 6, 7, 0], [1, 2, 3, 4, 5, 6, 7, 0, 0, 1, 2, 3, 4, 5, 6, 7])
    )
    assert torch.allclose(lap_pe(ring, 2, return_eigval=True)[1], torch.tensor([0.2929, 0.2929]), atol=1e-4)
    g = gnnc.graph(([0, 0, 1, 1, 2, 2, 2, 2, 3, 3, 4, 4], [2, 3, 0, 2, 0, 2, 3, 4, 3, 4, 0, 1]))
    assert torch.allclose(
        svd_pe(g, 2, random_flip=False)[:2],
        torch.tensor([[-0.6669, 0.3068, -0.7979, -0.8477], [-0.6311, -0.6101, -0.1248, -0.5137]]),
        atol=1e-4,
    )
    assert svd_pe(g, 6, padding=True).shape == (5, 12)
    out = T.LapPE(2, feat_name="pe", eigval_name="ev")(ring)
    assert out.ndata["pe"].shape == (8, 2) and out.ndata["ev"].shape == (8, 2)


def test_shortest_dist():
    g = gnnc.graph(([0, 1, 1, 2, 0], [2, 0, 3, 3, 2]))
    assert shortest_dist(g, root=0).tolist() == [0, -1, 1, 2]
    dist, paths = shortest_dist(g, root=1, return_paths=True)
    assert dist.tolist() == [1, 0, 2, 1] and paths.tolist() == [[1, -1], [-1, -1], [1, 0], [2, -1]]
    dist, paths = shortest_dist(g, return_paths=True)
    assert dist.tolist() == [[0, -1, 1, 2], [1, 0, 2, 1], [-1, -1, 0, 1], [-1, -1, -1, 0]]
    assert paths[0].tolist() == [[-1, -1], [-1, -1], [0, -1], [0, 3]] and paths[3].eq(-1).all()


def test_levi_graph():
    g = gnnc.graph(([0, 1, 2, 3], [1, 2, 3, 0]))
    g.ndata["h"] = torch.ones(4, 1)
    g.edata["w"] = torch.arange(4.0)
    out = T.ToLevi()(g)
    assert out.ntypes == ["edge", "node"]
    assert out.canonical_etypes == [("edge", "e2n", "node"), ("node", "n2e", "edge")]
    assert _edges(out, "e2n") == ([0, 1, 2, 3], [1, 2, 3, 0]) and _edges(out, "n2e") == ([0, 1, 2, 3], [0, 1, 2, 3])
    assert out.nodes["edge"].data["w"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_feature_transforms_per_type():
    g = gnnc.graph(([0, 1], [1, 2]))
    g.ndata["h"] = torch.tensor([[1.0, 2.0], [-1.0, 3.0], [0.0, 0.0]])
    g.edata["w"] = torch.tensor([[2.0, 2.0], [0.5, 0.25]])
    T.RowFeatNormalizer(subtract_min=True, node_feat_names=["h"], edge_feat_names=["w"])(g)
    assert torch.allclose(g.ndata["h"], torch.tensor([[0.4, 0.6], [0.0, 1.0], [0.5, 0.5]]))
    assert torch.allclose(g.edata["w"], torch.tensor([[0.5, 0.5], [0.25, 0.0]]))
    hg = gnnc.heterograph({("user", "follows", "user"): ([1, 2], [3, 4]), ("player", "plays", "game"): ([2], [1])})
    hg.nodes["game"].data["h"] = torch.tensor([[1.0, 3.0], [5.0, 7.0]])  # "h" on some types only, as DGL's test
    T.RowFeatNormalizer(subtract_min=True, node_feat_names=["h"])(hg)  # the min is per type
    assert torch.allclose(hg.nodes["game"].data["h"], torch.tensor([[0.0, 1.0], [0.4, 0.6]]))
    hg.nodes["player"].data["h"] = torch.ones(3, 50)
    T.FeatMask(node_feat_names=["h"])(hg)
    masked = hg.nodes["player"].data["h"]
    assert masked.shape == (3, 50) and (masked == masked[:1]).all() and 0 < int(masked[0].sum()) < 50


def test_random_structure_transforms():
    torch.manual_seed(0)
    g = gnnc.heterograph(
        {("A", "r1", "B"): ([0, 1, 2, 3, 4], [1, 2, 3, 4, 5]), ("C", "r2", "C"): ([0, 1, 2, 3, 4], [1, 2, 3, 4, 5])},
        idtype=torch.int32,
    )
    g.nodes["B"].data["h"] = torch.arange(6.0)
    before = (g.num_nodes(), g.num_edges())
    out = T.AddEdge()(g)
    assert out.num_edges(("A", "r1", "B")) == 6 and out.idtype == torch.int32
    dropped = T.DropEdge(p=0.5)(g)
    assert 0 < dropped.num_edges() < 10 and dropped.canonical_etypes == g.canonical_etypes
    dropped = T.DropNode(p=0.5)(g)
    assert dropped.num_nodes() < before[0] and dropped.ntypes == g.ntypes
    shuffled = T.NodeShuffle()(g)
    assert sorted(shuffled.nodes["B"].data["h"].tolist()) == list(range(6))
    assert (g.num_nodes(), g.num_edges()) == before and g.nodes["B"].data["h"].tolist() == list(range(6))
    assert T.DropEdge(p=0)(g).num_edges() == 10 and T.AddEdge(ratio=0.0)(g) is g


def test_dgl_alias_names():
    modules = alias._alias_modules()
    for name in ("AddSelfLoop", "Compose", "SIGNDiffusion", "shortest_dist", "random_walk_pe", "lap_pe", "svd_pe"):
        assert getattr(modules["dgl"], name) is getattr(modules["dgl.transforms"], name)
    assert modules["dgl"].LapPE is T.LapPE

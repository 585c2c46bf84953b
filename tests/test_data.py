"""gnnc.data: synthetic replicas, Planetoid / KG / edge-list / npz loaders."""

from __future__ import annotations

import io
import math
import os
import pickle
import tarfile
from collections import defaultdict

import numpy as np
import pytest
import scipy.sparse
import torch

import gnnc.data as D
from gnnc.graph import Graph
from tests.graphs import random_heterograph, random_homograph

SMALL_EDGES = 20_000  # edges per replica in the per-dataset checks


def small_scale(name: str) -> float:
    return min(1.0, SMALL_EDGES / D.DATASETS[name].num_edges)


def expected_counts(info, scale):
    nodes = max(info.num_ntypes, math.floor(info.num_nodes * scale + 0.5))
    return nodes, math.floor(info.num_edges * scale + 0.5)


def edges_of(g):
    return [tuple(t.tolist() for t in g.find_edges(k)) for k in g.canonical_etypes]


# ------------------------------------------------------------------ registry
def test_registry_lists_every_dataset_with_consistent_figures():
    names = [info.name for info in D.list_datasets()]
    assert names == [
        "cora",
        "pubmed",
        "ppi",
        "arxiv",
        "reddit",
        "proteins",
        "aifb",
        "mutag",
        "bgs",
        "am",
        "biokg",
        "fb15k",
        "mag",
        "wikikg2",
    ]
    for info in D.list_datasets():
        assert info.kind in ("homogeneous", "heterogeneous") and info.paper
        if info.ntype_counts is not None:
            assert sum(c for _, c in info.ntype_counts) == info.num_nodes
            assert len(info.ntype_counts) == info.num_ntypes
        if info.relation_counts is not None:
            assert sum(c for _, c in info.relation_counts) == info.num_edges
    assert D.DATASETS["reddit"].num_edges == 114_615_892
    assert (D.DATASETS["wikikg2"].num_nodes, D.DATASETS["wikikg2"].num_relations) == (2_500_604, 535)


# ----------------------------------------------------------------- synthetic
@pytest.mark.parametrize("name", list(D.DATASETS))
def test_synthetic_matches_scaled_figures(name):
    info = D.DATASETS[name]
    scale = small_scale(name)
    ds = D.synthetic(name, scale=scale, seed=1)
    g = ds.graph
    nodes, edges = expected_counts(info, scale)
    assert (g.num_nodes(), g.num_edges()) == (nodes, edges)
    assert (len(g.ntypes), len(g.canonical_etypes)) == (info.num_ntypes, info.num_relations)
    assert all(g.num_nodes(t) >= 1 for t in g.ntypes)
    assert all(g.num_edges(k) >= 1 for k in g.canonical_etypes)  # edges >= relations here
    if info.kind == "homogeneous":
        assert g.is_homogeneous and ds.target_ntype == g.ntypes[0]
    feat = g.ndata_all["feat"]
    assert feat.dtype == torch.float32 and feat.shape == (nodes, info.feat_dim)
    data = ds.target_data
    n_target = g.num_nodes(ds.target_ntype)
    assert data["label"].dtype == torch.int64 and data["label"].shape == (n_target,)
    assert 0 <= int(data["label"].min()) and int(data["label"].max()) < ds.num_classes == info.num_classes
    masks = torch.stack([data["train_mask"], data["val_mask"], data["test_mask"]])
    assert masks.dtype == torch.bool and bool((masks.sum(0) == 1).all())
    assert int(data["train_mask"].sum()) == math.floor(0.6 * n_target + 0.5)


def test_synthetic_is_deterministic_per_seed():
    for name in ("cora", "aifb"):
        a, b = D.synthetic(name, 0.5, seed=3), D.synthetic(name, 0.5, seed=3)
        c = D.synthetic(name, 0.5, seed=4)
        assert edges_of(a.graph) == edges_of(b.graph)
        assert torch.equal(a.graph.ndata_all["feat"], b.graph.ndata_all["feat"])
        assert torch.equal(a.target_data["label"], b.target_data["label"])
        assert edges_of(a.graph) != edges_of(c.graph)
        assert not torch.equal(a.graph.ndata_all["feat"], c.graph.ndata_all["feat"])


def test_hetero_schema_depends_on_seed_not_scale():
    small, large = D.synthetic("bgs", 0.01, seed=7), D.synthetic("bgs", 0.02, seed=7)
    assert small.graph.canonical_etypes == large.graph.canonical_etypes
    assert small.target_ntype == large.target_ntype
    ratio = [
        large.graph.num_edges(k) / max(small.graph.num_edges(k), 1)
        for k in small.graph.canonical_etypes
        if small.graph.num_edges(k) >= 200
    ]
    assert ratio and all(1.8 < r < 2.2 for r in ratio)
    other = D.synthetic("bgs", 0.01, seed=8)
    assert other.graph.canonical_etypes != small.graph.canonical_etypes


def test_in_degree_is_heavy_tailed():
    g = D.synthetic("arxiv", 0.05, seed=0, with_features=False).graph
    deg = g.in_degrees().double()
    assert deg.max() > 20 * deg.mean()
    top = deg.sort(descending=True).values[: g.num_nodes() // 100]
    assert top.sum() > 0.1 * deg.sum()  # top 1% of nodes take > 10% of the edges
    # Uniform destinations would give neither: same sizes, maximum near the mean.
    draws = torch.randint(0, g.num_nodes(), (g.num_edges(),), generator=torch.Generator().manual_seed(0))
    uniform = torch.bincount(draws, minlength=g.num_nodes())
    assert uniform.max() < 5 * deg.mean()


def test_hetero_relations_are_heavy_tailed_per_destination():
    g = D.synthetic("mag", 0.005, seed=0, with_features=False).graph
    deg = g.in_degrees(etype=("paper", "cites", "paper")).double()
    assert deg.max() > 20 * deg.mean()


def test_synthetic_features_do_not_depend_on_the_type_order():
    """Drawn in the schema's order: the values gnnc gave when graphs kept that order (before DGL's)."""
    g = D.synthetic("mag", 0.001, seed=0, feat_dim=4).graph
    first = {t: [round(v, 4) for v in g.nodes[t].data["feat"][0].tolist()] for t in g.ntypes}
    assert first == {
        "author": [-0.5293, 2.1058, -0.0602, 0.2427],
        "field_of_study": [0.6296, 0.6181, -0.0953, 2.0561],
        "institution": [-1.0564, 0.0115, -0.3046, -1.1709],
        "paper": [-0.044, 1.8343, 1.0176, 3.3133],
    }


def test_mag_schema():
    scale = 0.001
    ds = D.synthetic("mag", scale, seed=0, feat_dim=16)
    g = ds.graph
    assert g.ntypes == ["author", "field_of_study", "institution", "paper"]  # DGL's order, as its ogbn-mag
    assert g.canonical_etypes == [
        ("author", "affiliated_with", "institution"),
        ("author", "writes", "paper"),
        ("paper", "cites", "paper"),
        ("paper", "has_topic", "field_of_study"),
    ]
    info = D.DATASETS["mag"]
    for t, count in info.ntype_counts:
        assert abs(g.num_nodes(t) - count * scale) <= 1
    for key, count in info.relation_counts:
        assert abs(g.num_edges(key) - count * scale) <= 1
    assert ds.target_ntype == "paper" and ds.num_classes == 349
    assert g.nodes["paper"].data["label"].shape == (g.num_nodes("paper"),)
    assert "label" not in g.nodes["author"].data
    assert g.ndata_all["feat"].shape == (g.num_nodes(), 16)


def test_tiny_replicas_keep_every_type_and_relation():
    g = D.synthetic("aifb", 1e-7).graph
    assert [g.num_nodes(t) for t in g.ntypes] == [1] * 7 and g.num_edges() == 0
    assert len(g.canonical_etypes) == 104
    scale = 500 / D.DATASETS["fb15k"].num_edges
    g = D.synthetic("fb15k", scale).graph
    assert g.num_edges() == 500 and min(g.num_edges(k) for k in g.canonical_etypes) >= 1
    assert D.synthetic("cora", 1e-6).graph.num_nodes() == 1


def test_synthetic_options_and_errors():
    g = D.synthetic("pubmed", 0.01, with_features=False).graph
    assert "feat" not in g.ndata and "label" in g.ndata
    assert D.synthetic("pubmed", 0.01, feat_dim=3).graph.ndata["feat"].shape[1] == 3
    with pytest.raises(KeyError, match="cora.*wikikg2"):
        D.synthetic("citeseer-x")
    for scale in (0, -0.5, 1.5, float("nan"), True, "0.5"):
        with pytest.raises(ValueError, match="scale"):
            D.synthetic("cora", scale)
    with pytest.raises(ValueError, match="seed"):
        D.synthetic("cora", 0.1, seed=-1)
    with pytest.raises(ValueError, match="feat_dim"):
        D.synthetic("cora", 0.1, feat_dim=0)


# ----------------------------------------------------------------- planetoid
PLANETOID = {  # nodes, edges, features, classes, train, val, test
    "cora": (2708, 10556, 1433, 7, 140, 500, 1000),
    "citeseer": (3327, 9104, 3703, 6, 120, 500, 1000),
}


@pytest.mark.parametrize("name", list(PLANETOID))
def test_planetoid_figures(shared_data, name):
    ds = D.load_planetoid(name, shared_data / "planetoid")
    g = ds.graph
    nodes, edges, feats, classes, n_train, n_val, n_test = PLANETOID[name]
    assert (g.num_nodes(), g.num_edges(), ds.num_classes) == (nodes, edges, classes)
    x = g.ndata["feat"]
    assert x.shape == (nodes, feats) and x.dtype == torch.float32
    assert set(torch.unique(x).tolist()) <= {0.0, 1.0}  # raw bag-of-words, not normalized
    masks = [g.ndata[k] for k in ("train_mask", "val_mask", "test_mask")]
    assert [int(m.sum()) for m in masks] == [n_train, n_val, n_test]
    assert not bool((masks[0] & masks[2]).any() or (masks[1] & masks[2]).any())
    src, dst = g.find_edges()
    assert not bool((src == dst).any())
    assert torch.unique(src * nodes + dst).numel() == edges
    labels = g.ndata["label"]
    # Test labels and features must sit on the right nodes: linked test nodes mostly agree.
    both_test = masks[2][src] & masks[2][dst]
    assert (labels[src][both_test] == labels[dst][both_test]).double().mean() > 0.7
    unit = torch.nn.functional.normalize(x, dim=1)
    linked = (unit[src[both_test]] * unit[dst[both_test]]).sum(1).mean()
    shuffled = dst[both_test][torch.randperm(int(both_test.sum()), generator=torch.Generator().manual_seed(0))]
    assert linked > 2 * (unit[src[both_test]] * unit[shuffled]).sum(1).mean()


def test_citeseer_isolated_test_nodes_are_zero_padded(shared_data):
    g = D.load_planetoid("citeseer", shared_data / "planetoid").graph
    empty = g.ndata["feat"].sum(1) == 0
    assert int(empty.sum()) == 15
    assert bool((g.ndata["label"][empty] == 0).all()) and not bool(g.ndata["test_mask"][empty].any())


def test_planetoid_root_falls_back_to_gnnc_data(shared_data, monkeypatch, tmp_path, no_default_data):
    monkeypatch.setenv("GNNC_DATA", str(shared_data))
    assert D.load_planetoid("Cora").graph.num_nodes() == 2708
    monkeypatch.delenv("GNNC_DATA")
    with pytest.raises(FileNotFoundError, match="GNNC_DATA"):
        D.load_planetoid("cora")
    with pytest.raises(FileNotFoundError, match=r"ind\.cora\.x"):
        D.load_planetoid("cora", tmp_path)


class _Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_restricted_unpickler_refuses_code(tmp_path):
    marker = tmp_path / "pwned"
    evil = tmp_path / "ind.evil.x"
    evil.write_bytes(pickle.dumps(_Exploit(marker), protocol=2))
    with pytest.raises(pickle.UnpicklingError, match=r"system"):
        D.safe_load(evil)
    with pytest.raises(pickle.UnpicklingError, match=r"ind\.evil\.x.*system"):
        D.load_planetoid("evil", tmp_path)
    assert not marker.exists()
    harmless_but_unlisted = tmp_path / "set.pkl"
    harmless_but_unlisted.write_bytes(pickle.dumps({1, 2}, protocol=2))
    with pytest.raises(pickle.UnpicklingError, match="set"):
        D.safe_load(harmless_but_unlisted)


def test_restricted_unpickler_reads_allowed_objects(tmp_path):
    # Python 3 spellings of the allowed globals (the shared files use the Python 2 ones).
    adjacency = defaultdict(list, {0: [1, 2], 2: [0]})
    arrays = [np.arange(6, dtype=np.int32).reshape(2, 3), scipy.sparse.csr_matrix(np.eye(3, dtype=np.float32))]
    path = tmp_path / "ok.pkl"
    for obj in (adjacency, *arrays):
        path.write_bytes(pickle.dumps(obj, protocol=4))
        back = D.safe_load(path)
        if scipy.sparse.issparse(obj):
            assert (back != obj).nnz == 0
        elif isinstance(obj, np.ndarray):
            assert np.array_equal(back, obj) and back.dtype == obj.dtype
        else:
            assert back == obj and back.default_factory is list


# ------------------------------------------------------------------------ KG
def test_fb15k237_with_inverse_relations(shared_data):
    kg = D.load_kg(shared_data / "kg" / "FB15k-237.tar.gz", add_inverse=True)
    g = kg.graph
    assert kg.name == "FB15k-237" and (kg.num_entities, kg.num_relations) == (14541, 237)
    assert {s: t.shape for s, t in kg.triples.items()} == {
        "train": (272115, 3),
        "valid": (17535, 3),
        "test": (20466, 3),
    }
    assert g.ntypes == ["entity"] and g.num_nodes() == 14541
    assert len(g.canonical_etypes) == 474 and g.num_edges() == 620_232
    rel = kg.relations[5]
    fwd, inv = g.find_edges(("entity", rel, "entity")), g.find_edges(("entity", rel + "_inv", "entity"))
    assert torch.equal(fwd[0], inv[1]) and torch.equal(fwd[1], inv[0])
    train = kg.triples["train"]
    first = train[train[:, 1] == 5][0]
    assert (int(fwd[0][0]), int(fwd[1][0])) == (int(first[0]), int(first[2]))


def test_wn18rr_by_short_name(shared_data, monkeypatch):
    monkeypatch.setenv("GNNC_DATA", str(shared_data))
    kg = D.load_kg("WN18RR", splits=("train",))
    assert (kg.num_entities, kg.num_relations) == (40943, 11)
    assert kg.graph.num_edges() == 86835 and len(kg.graph.canonical_etypes) == 11
    assert sum(t.shape[0] for t in kg.triples.values()) == 86835 + 3034 + 3134


def _write_kg(folder, lines_by_split):
    folder.mkdir(parents=True, exist_ok=True)
    for split, lines in lines_by_split.items():
        (folder / f"{split}.txt").write_text("".join(line + "\n" for line in lines))


SMALL_KG = {"train": ["a\tlikes\tb", "b\tlikes\tc"], "valid": ["c\thates\ta"], "test": ["d\tknows\ta", ""]}


def test_kg_folder_and_nested_tarball(tmp_path):
    _write_kg(tmp_path / "kg" / "inner", SMALL_KG)
    archive = tmp_path / "small.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "kg", arcname="small")
    for source in (tmp_path / "kg" / "inner", archive):
        kg = D.load_kg(source, splits=("train",))
        assert kg.entities == ["a", "b", "c", "d"] and kg.relations == ["likes", "hates", "knows"]
        assert kg.triples["test"].tolist() == [[3, 2, 0]]
        g = kg.graph
        assert [k[1] for k in g.canonical_etypes] == ["hates", "knows", "likes"]  # the graph's: DGL's sorted order
        assert g.num_nodes() == 4 and g.num_edges() == 2 and g.num_edges("hates") == 0
    assert D.load_kg(archive, add_inverse=True).graph.num_edges("likes_inv") == 2


def test_kg_errors(tmp_path, monkeypatch, no_default_data):
    _write_kg(tmp_path / "bad", {**SMALL_KG, "valid": ["c\thates\ta", "c hates a"]})
    with pytest.raises(ValueError, match=r"valid\.txt, line 2: expected 3"):
        D.load_kg(tmp_path / "bad")
    _write_kg(tmp_path / "ragged", {**SMALL_KG, "train": ["a\tlikes", "b\tlikes\tc\td"]})
    with pytest.raises(ValueError, match=r"train\.txt, line 1: expected 3 .* got 2"):
        D.load_kg(tmp_path / "ragged")
    _write_kg(tmp_path / "blank", {**SMALL_KG, "test": ["d\t\ta"]})
    with pytest.raises(ValueError, match=r"test\.txt, line 1: empty field"):
        D.load_kg(tmp_path / "blank")
    _write_kg(tmp_path / "partial", {"train": SMALL_KG["train"], "test": SMALL_KG["test"]})
    with pytest.raises(FileNotFoundError, match="valid.txt"):
        D.load_kg(tmp_path / "partial")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        D.load_kg(tmp_path / "nowhere")
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"definitely not gzip")
    with pytest.raises(ValueError, match=r"junk\.tar\.gz: not a readable tar archive"):
        D.load_kg(junk)
    with pytest.raises(ValueError, match="unknown KG split"):
        D.load_kg(tmp_path / "bad", splits=("training",))
    monkeypatch.delenv("GNNC_DATA", raising=False)
    with pytest.raises(FileNotFoundError, match="GNNC_DATA"):
        D.load_kg("FB15k-237")


# ----------------------------------------------------------------- edge list
def test_edge_list_round_trip(tmp_path):
    g = random_homograph(10, 30, seed=2)
    src, dst = g.find_edges()
    path = tmp_path / "edges.txt"
    body = "".join(f"{s}\t{d}  # edge {i}\n" for i, (s, d) in enumerate(zip(src.tolist(), dst.tolist())))
    path.write_text("# src dst\n\n" + body)
    back = D.load_edge_list(path, num_nodes=10)
    assert back.num_nodes() == 10 and back.is_homogeneous
    assert all(torch.equal(a, b) for a, b in zip(back.find_edges(), (src, dst)))
    path.write_text("0,3\n2, 1\n")
    assert D.load_edge_list(path, delimiter=",").find_edges()[1].tolist() == [3, 1]
    assert D.load_edge_list(path, delimiter=",").num_nodes() == 4


@pytest.mark.parametrize(
    "text, message",
    [
        ("0 1\n1 2 3\n", r"line 2: expected 2 columns"),
        ("0 1\n\n1 x\n", r"line 3: node id 'x' is not an integer"),
        ("0 1.5\n", r"line 1: node id '1.5' is not an integer"),
        ("0 1\n-1 2\n", r"line 2: node id -1 is negative"),
        ("0 1\n1 7\n", r"line 2: node id 7 is not below num_nodes=5"),
    ],
)
def test_edge_list_errors_name_file_and_line(tmp_path, text, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"bad\.txt, " + message):
        D.load_edge_list(path, num_nodes=5)


def test_edge_list_missing_and_empty(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        D.load_edge_list(tmp_path / "missing.txt")
    (tmp_path / "empty.txt").write_text("# nothing\n")
    g = D.load_edge_list(tmp_path / "empty.txt", num_nodes=3)
    assert (g.num_nodes(), g.num_edges()) == (3, 0)


# ----------------------------------------------------------------------- npz
def _assert_same_graph(a, b):
    assert a.ntypes == b.ntypes and a.canonical_etypes == b.canonical_etypes
    assert [a.num_nodes(t) for t in a.ntypes] == [b.num_nodes(t) for t in b.ntypes]
    assert edges_of(a) == edges_of(b)


def test_npz_round_trip_homogeneous(tmp_path):
    g = random_homograph(12, 40, seed=1)
    g.ndata["h"] = torch.randn(12, 4)
    g.edata["w"] = torch.randn(g.num_edges())
    path = tmp_path / "homo.graph"
    D.save_npz(g, path)
    assert path.is_file()  # the exact name, no suffix added
    back = D.load_npz(path)
    _assert_same_graph(g, back)
    assert back.is_homogeneous
    assert torch.equal(back.ndata["h"], g.ndata["h"]) and torch.equal(back.edata["w"], g.edata["w"])


def test_npz_round_trip_heterograph_per_type_features(tmp_path):
    g = random_heterograph(seed=3)
    g.nodes["user"].data["h"] = torch.randn(9, 3)
    g.nodes["item"].data["h"] = torch.randn(7, 5)  # another width; 'tag' has no 'h'
    g.nodes["user"].data["half"] = torch.randn(9, 2).to(torch.bfloat16)
    g.ndata_all["id"] = torch.arange(g.num_nodes())
    g.edata_all["w"] = torch.randn(g.num_edges(), 2)
    g.edges[("user", "likes", "item")].data["n"] = torch.arange(g.num_edges(("user", "likes", "item")))
    g.ntype_data["bias"] = torch.randn(3, 4)
    g.etype_data["scale"] = torch.randn(5)
    D.save_npz(g, tmp_path / "hetero.npz")
    back = D.load_npz(tmp_path / "hetero.npz")
    _assert_same_graph(g, back)
    for t in ("user", "item"):
        assert torch.equal(back.nodes[t].data["h"], g.nodes[t].data["h"])
    assert "h" not in back.nodes["tag"].data
    assert back.nodes["user"].data["half"].dtype == torch.bfloat16
    assert torch.equal(back.nodes["user"].data["half"], g.nodes["user"].data["half"])
    assert torch.equal(back.ndata_all["id"], g.ndata_all["id"]) and torch.equal(back.edata_all["w"], g.edata_all["w"])
    likes = ("user", "likes", "item")
    assert torch.equal(back.edges[likes].data["n"], g.edges[likes].data["n"])
    assert "n" not in back.edges[("user", "follows", "user")].data
    assert torch.equal(back.ntype_data["bias"], g.ntype_data["bias"])
    assert torch.equal(back.etype_data["scale"], g.etype_data["scale"])


def legacy_order_graph():
    """A graph in the type order gnnc kept before it followed DGL's (the dict's: 'user' before 'item',
    'follows' before 'buys'), built below ``heterograph`` as files written then hold it; features whole
    and per type, and type parameters."""
    relations = [
        (("user", "follows", "user"), torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])),
        (("user", "buys", "item"), torch.tensor([2, 0]), torch.tensor([1, 0])),
    ]
    g = Graph._build(["user", "item"], [3, 2], relations, "cpu")
    g.ndata_all["id"] = torch.arange(5)  # the users' rows first
    g.nodes["item"].data["price"] = torch.tensor([1.5, 2.5])
    g.edata_all["w"] = torch.arange(5.0)  # the follows edges first
    g.ntype_data["bias"] = torch.tensor([[1.0], [2.0]])  # user, item
    g.etype_data["scale"] = torch.tensor([10.0, 20.0])  # follows, buys
    return g


def assert_legacy_order_graph_by_name(g):
    """``g`` holds :func:`legacy_order_graph`'s structure and data, by name, in DGL's order."""
    buys, follows = ("user", "buys", "item"), ("user", "follows", "user")
    assert g.ntypes == ["item", "user"] and g.canonical_etypes == [buys, follows]
    assert [t.tolist() for t in g.find_edges(follows)] == [[0, 1, 2], [1, 2, 0]]
    assert [t.tolist() for t in g.find_edges(buys)] == [[2, 0], [1, 0]]
    assert g.nodes["user"].data["id"].tolist() == [0, 1, 2] and g.nodes["item"].data["id"].tolist() == [3, 4]
    assert g.nodes["item"].data["price"].tolist() == [1.5, 2.5]
    assert g.edges[follows].data["w"].tolist() == [0.0, 1.0, 2.0] and g.edges[buys].data["w"].tolist() == [3.0, 4.0]
    assert g.ntype_data["bias"].flatten().tolist() == [2.0, 1.0]
    assert g.etype_data["scale"].tolist() == [20.0, 10.0]


def test_npz_written_in_the_old_type_order_loads_by_name(tmp_path):
    D.save_npz(legacy_order_graph(), tmp_path / "old.npz")
    assert_legacy_order_graph_by_name(D.load_npz(tmp_path / "old.npz"))


def test_npz_round_trip_synthetic_dataset(tmp_path):
    ds = D.synthetic("mutag", 0.01, seed=5)
    D.save_npz(ds.graph, tmp_path / "mutag.npz")
    back = D.load_npz(tmp_path / "mutag.npz")
    _assert_same_graph(ds.graph, back)
    assert torch.equal(back.nodes[ds.target_ntype].data["label"], ds.target_data["label"])
    assert torch.equal(back.ndata_all["feat"], ds.graph.ndata_all["feat"])


def test_npz_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="absent.npz"):
        D.load_npz(tmp_path / "absent.npz")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip archive at all")
    with pytest.raises(ValueError, match="junk.npz"):
        D.load_npz(junk)
    other = tmp_path / "other.npz"
    np.savez(other, x=np.arange(3))
    with pytest.raises(ValueError, match=r"other\.npz.*'format'"):
        D.load_npz(other)
    pickled = tmp_path / "pickled.npz"
    buf = io.BytesIO()
    np.savez(buf, format=np.array(D.npz.FORMAT), ntypes=np.array([{"a": 1}], dtype=object))
    pickled.write_bytes(buf.getvalue())
    with pytest.raises(ValueError, match=r"pickled\.npz.*'ntypes'"):
        D.load_npz(pickled)

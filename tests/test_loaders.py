"""Loaders for downloaded graph formats: OGB raw folders, PyG torch.save files, dgl.save_graphs files."""

import gzip
import struct

import numpy as np
import pytest
import torch

import gnnc
from gnnc.data import load_dgl_graphs, load_graph_file, load_ogbn, load_pyg_file, save_npz
from gnnc.data.dgl_files import FILE_MAGIC, HETERO_MAGIC, write_dgl_graphs


def _csv(path, rows, header=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ([",".join(header)] if header else []) + [",".join(str(v) for v in row) for row in rows]
    with gzip.open(path, "wt") as f:
        f.write("".join(line + "\n" for line in lines))


# ------------------------------------------------------------------ OGB
EDGES = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (1, 3)]
FEAT = np.arange(15, dtype=np.float32).reshape(5, 3) / 4


def _arxiv(tmp_path, name="arxiv"):
    """An ogbn-arxiv-shaped folder: 5 nodes, 6 edges, 3 float features, year, 'time' split."""
    root = tmp_path / name
    raw = root / "raw"
    _csv(raw / "edge.csv.gz", EDGES)
    _csv(raw / "num-node-list.csv.gz", [[5]])
    _csv(raw / "num-edge-list.csv.gz", [[6]])
    _csv(raw / "node-feat.csv.gz", [[f"{v:.6f}" for v in row] for row in FEAT])
    _csv(raw / "node-label.csv.gz", [[2], [0], [1], [2], [0]])
    _csv(raw / "node_year.csv.gz", [[2010], [2011], [2012], [2019], [2020]])
    for split, idx in (("train", [0, 1, 2]), ("valid", [3]), ("test", [4])):
        _csv(root / "split" / "time" / f"{split}.csv.gz", [[i] for i in idx])
    return root


def test_ogb_homogeneous_folder(tmp_path):
    ds = load_ogbn(_arxiv(tmp_path))
    g = ds.graph
    assert (ds.name, ds.num_classes, ds.target_ntype) == ("arxiv", 3, "_N")
    assert g.num_nodes() == 5 and g.num_edges() == 6
    src, dst = g.find_edges()
    assert list(zip(src.tolist(), dst.tolist())) == EDGES
    assert g.ndata["feat"].dtype == torch.float32 and torch.allclose(g.ndata["feat"], torch.from_numpy(FEAT))
    assert g.ndata["label"].tolist() == [2, 0, 1, 2, 0]
    assert g.ndata["year"].tolist() == [2010, 2011, 2012, 2019, 2020]
    assert g.ndata["train_mask"].tolist() == [True, True, True, False, False]
    assert g.ndata["val_mask"].tolist() == [False, False, False, True, False]
    assert g.ndata["test_mask"].tolist() == [False, False, False, False, True]
    assert load_graph_file(tmp_path / "arxiv").num_edges() == 6


def test_ogb_inverse_edges_and_edge_features(tmp_path):
    root = _arxiv(tmp_path, "products")  # OGB adds inverse edges for ogbn-products
    _csv(root / "raw" / "edge-feat.csv.gz", [[i, 10 * i] for i in range(6)])
    g = load_ogbn(root).graph
    src, dst = g.find_edges()
    assert g.num_edges() == 12
    assert (src[0::2].tolist(), dst[0::2].tolist()) == ([s for s, _ in EDGES], [d for _, d in EDGES])
    assert torch.equal(src[1::2], dst[0::2]) and torch.equal(dst[1::2], src[0::2])
    assert g.edata["feat"].dtype == torch.int64 and g.edata["feat"][:4].tolist() == [[0, 0], [0, 0], [1, 10], [1, 10]]
    assert load_ogbn(root, add_inverse_edge=False).graph.num_edges() == 6


def test_ogb_split_choice(tmp_path):
    root = _arxiv(tmp_path)
    (root / "split" / "other").mkdir()
    with pytest.raises(FileNotFoundError, match=r"one split scheme folder, found \['other', 'time'\]"):
        load_ogbn(root)
    assert load_ogbn(root, split="time").graph.ndata["train_mask"].sum() == 3
    with pytest.raises(FileNotFoundError, match=r"split.nope is missing"):
        load_ogbn(root, split="nope")


def test_ogb_missing_and_corrupt_files(tmp_path):
    root = _arxiv(tmp_path)
    (root / "raw" / "num-edge-list.csv.gz").unlink()
    with pytest.raises(FileNotFoundError, match=r"num-edge-list\.csv\.gz is missing"):
        load_ogbn(root)
    _csv(root / "raw" / "num-edge-list.csv.gz", [[7]])
    with pytest.raises(ValueError, match=r"edge\.csv\.gz: 6 rows, but the graph has 7 edges"):
        load_ogbn(root)
    _csv(root / "raw" / "num-edge-list.csv.gz", [[6]])
    _csv(root / "raw" / "node-feat.csv.gz", FEAT[:4])
    with pytest.raises(ValueError, match=r"node-feat\.csv\.gz: 4 rows, but the graph has 5 nodes"):
        load_ogbn(root)
    _csv(root / "raw" / "node-feat.csv.gz", FEAT)
    _csv(root / "raw" / "edge.csv.gz", EDGES[:5] + [(1, 5)])
    with pytest.raises(ValueError, match=r"edge\.csv\.gz, row 6: destination node id 5 is outside \[0, 5\)"):
        load_ogbn(root)
    _csv(root / "raw" / "edge.csv.gz", EDGES)
    _csv(root / "split" / "time" / "test.csv.gz", [[9]])
    with pytest.raises(ValueError, match=r"test\.csv\.gz, row 1: node id 9 is outside \[0, 5\)"):
        load_ogbn(root)
    (root / "split" / "time" / "test.csv.gz").write_bytes(b"not gzip")
    with pytest.raises(ValueError, match=r"test\.csv\.gz: not a gzipped CSV of numbers"):
        load_ogbn(root)
    _csv(root / "raw" / "num-node-list.csv.gz", [[3], [2]])
    with pytest.raises(ValueError, match="at least 2 rows, but the graph has 1 graph; only node-property folders"):
        load_ogbn(root)


def _mag(tmp_path):
    """An ogbn-mag-shaped folder: 4 node types, 4 relations, paper features / year / labels / split."""
    root = tmp_path / "mag"
    raw = root / "raw"
    counts = {"author": 3, "field_of_study": 2, "institution": 1, "paper": 4}
    _csv(raw / "num-node-dict.csv.gz", [list(counts.values())], header=list(counts))
    rels = {
        ("author", "affiliated_with", "institution"): [(0, 0), (2, 0)],
        ("author", "writes", "paper"): [(0, 0), (1, 1), (2, 3), (0, 2)],
        ("paper", "cites", "paper"): [(1, 0), (2, 0), (3, 1)],
        ("paper", "has_topic", "field_of_study"): [(0, 1), (3, 0)],
    }
    _csv(raw / "triplet-type-list.csv.gz", list(rels))
    for k, (rel, edges) in enumerate(rels.items()):
        folder = raw / "relations" / "___".join(rel)
        _csv(folder / "edge.csv.gz", edges)
        _csv(folder / "num-edge-list.csv.gz", [[len(edges)]])
        _csv(folder / "edge_reltype.csv.gz", [[k]] * len(edges))
    _csv(raw / "node-feat" / "paper" / "node-feat.csv.gz", [[0.5, -1.0], [1.5, 2.0], [0.0, 0.25], [3.0, 1e-3]])
    _csv(raw / "node-feat" / "paper" / "node_year.csv.gz", [[2015], [2016], [2017], [2018]])
    _csv(raw / "nodetype-has-label.csv.gz", [["False", "False", "False", "True"]], header=list(counts))
    _csv(raw / "node-label" / "paper" / "node-label.csv.gz", [[3], [1], [0], [1]])
    split = root / "split" / "time"
    _csv(split / "nodetype-has-split.csv.gz", [["False", "False", "False", "True"]], header=list(counts))
    for name, idx in (("train", [0, 1]), ("valid", [2]), ("test", [3])):
        _csv(split / "paper" / f"{name}.csv.gz", [[i] for i in idx])
    return root, rels


def test_ogb_heterogeneous_mag_folder(tmp_path):
    root, rels = _mag(tmp_path)
    ds = load_ogbn(root)
    g = ds.graph
    assert (ds.num_classes, ds.target_ntype) == (4, "paper")
    assert g.ntypes == ["author", "field_of_study", "institution", "paper"]
    assert g.canonical_etypes == sorted(rels)
    for rel, edges in rels.items():
        src, dst = g.find_edges(rel)
        assert list(zip(src.tolist(), dst.tolist())) == edges
    paper = g.nodes["paper"].data
    assert paper["feat"].shape == (4, 2) and paper["feat"][3, 1].item() == pytest.approx(1e-3)
    assert paper["year"].tolist() == [2015, 2016, 2017, 2018]
    assert paper["label"].tolist() == [3, 1, 0, 1]
    assert paper["train_mask"].tolist() == [True, True, False, False]
    assert paper["test_mask"].tolist() == [False, False, False, True]
    assert g.edges[("paper", "cites", "paper")].data["reltype"].tolist() == [2, 2, 2]
    assert "label" not in g.nodes["author"].data


def test_ogb_heterogeneous_errors(tmp_path):
    root, _ = _mag(tmp_path)
    cites = root / "raw" / "relations" / "paper___cites___paper"
    _csv(cites / "edge.csv.gz", [(1, 0), (2, 0), (3, 4)])
    with pytest.raises(ValueError, match=r"paper___cites___paper.edge\.csv\.gz, row 3: destination node id 4 "):
        load_ogbn(root)
    (cites / "edge.csv.gz").unlink()
    with pytest.raises(FileNotFoundError, match=r"paper___cites___paper.edge\.csv\.gz is missing"):
        load_ogbn(root)
    _csv(cites / "edge.csv.gz", [(1, 0), (2, 0), (3, 1)])
    _csv(root / "raw" / "node-label" / "paper" / "node-label.csv.gz", [[3], [1], [0]])
    with pytest.raises(ValueError, match=r"paper.node-label\.csv\.gz: 3 rows, but the graph has 4 nodes"):
        load_ogbn(root)


def test_ogb_binary_papers100m_layout(tmp_path):
    raw = tmp_path / "papers100M-bin" / "raw"
    raw.mkdir(parents=True)
    np.savez(
        raw / "data.npz",
        edge_index=np.array(EDGES).T,
        num_nodes_list=np.array([5]),
        num_edges_list=np.array([6]),
        node_feat=FEAT,
        node_year=np.arange(5)[:, None],
    )
    np.savez(raw / "node-label.npz", node_label=np.array([[1.0], [np.nan], [0.0], [np.nan], [2.0]]))
    _csv(tmp_path / "papers100M-bin" / "split" / "time" / "train.csv.gz", [[0], [4]])
    _csv(tmp_path / "papers100M-bin" / "split" / "time" / "valid.csv.gz", [[2]])
    _csv(tmp_path / "papers100M-bin" / "split" / "time" / "test.csv.gz", [])
    ds = load_ogbn(tmp_path / "papers100M-bin")
    assert ds.graph.ndata["label"].tolist() == [1, -1, 0, -1, 2] and ds.num_classes == 3
    assert ds.graph.ndata["year"].tolist() == list(range(5)) and ds.graph.ndata["test_mask"].sum() == 0


# ------------------------------------------------------------------ PyG
def test_pyg_data_file(tmp_path):
    from torch_geometric.data import Data

    data = Data(
        x=torch.randn(4, 3),
        edge_index=torch.tensor([[0, 1, 2, 3, 0], [1, 2, 3, 0, 2]]),
        edge_attr=torch.randn(5, 2),
        y=torch.tensor([0, 1, 1, 0]),
        train_mask=torch.tensor([True, False, True, False]),
    )
    torch.save(data, tmp_path / "g.pt")
    for g in (load_pyg_file(tmp_path / "g.pt"), load_graph_file(tmp_path / "g.pt")):
        assert g.num_nodes() == 4 and g.num_edges() == 5
        assert torch.equal(torch.stack(g.find_edges()), data.edge_index)
        assert torch.equal(g.ndata["x"], data.x) and torch.equal(g.edata["edge_attr"], data.edge_attr)
        assert torch.equal(g.ndata["y"], data.y) and torch.equal(g.ndata["train_mask"], data.train_mask)


def test_pyg_hetero_data_file(tmp_path):
    from torch_geometric.data import HeteroData

    data = HeteroData()
    data["paper"].x = torch.randn(3, 2)
    data["paper"].y = torch.tensor([1, 0, 1])
    data["author"].num_nodes = 2
    data["author", "writes", "paper"].edge_index = torch.tensor([[0, 1, 1], [0, 1, 2]])
    data["author", "writes", "paper"].edge_attr = torch.tensor([1.0, 2.0, 3.0])
    torch.save(data, tmp_path / "h.pt")
    g = load_graph_file(tmp_path / "h.pt")
    assert g.ntypes == ["author", "paper"] and g.canonical_etypes == [("author", "writes", "paper")]
    assert g.num_nodes("author") == 2 and g.num_nodes("paper") == 3
    assert torch.equal(g.nodes["paper"].data["x"], data["paper"].x)
    assert g.edges[("author", "writes", "paper")].data["edge_attr"].tolist() == [1.0, 2.0, 3.0]


class Payload:
    """A class outside the allow-list: loading must refuse to rebuild it."""


def test_pyg_file_refuses_other_classes(tmp_path):
    torch.save({"graph": Payload()}, tmp_path / "evil.pt")
    with pytest.raises(ValueError, match=r"evil\.pt: refused to unpickle .*Payload"):
        load_pyg_file(tmp_path / "evil.pt")
    torch.save({"x": torch.zeros(2)}, tmp_path / "dict.pt")
    with pytest.raises(ValueError, match=r"dict\.pt: holds a dict, not a PyG Data or HeteroData"):
        load_graph_file(tmp_path / "dict.pt")


# ------------------------------------------------------------------ DGL
def _hetero_graph():
    g = gnnc.heterograph(
        {("user", "follows", "user"): ([0, 1, 2], [1, 2, 0]), ("user", "buys", "item"): ([2, 0, 1, 2], [1, 0, 0, 3])},
        num_nodes={"user": 3, "item": 4},
    )
    g.nodes["user"].data["h"] = torch.randn(3, 2)
    g.nodes["item"].data["price"] = torch.tensor([1.5, 2.0, 0.5, 4.0], dtype=torch.float64)
    g.nodes["item"].data["mask"] = torch.tensor([True, False, True, True])
    g.edges[("user", "buys", "item")].data["count"] = torch.tensor([1, 2, 3, 4], dtype=torch.int32)
    g.edges[("user", "follows", "user")].data["w"] = torch.tensor([0.5, 1.0, 2.0]).to(torch.bfloat16)
    return g


@pytest.mark.parametrize("formats", [("coo",), ("csr",), ("csc",), ("csr", "csc")])
def test_dgl_file_round_trip(tmp_path, formats):
    home = gnnc.graph(([0, 1, 2, 3], [1, 2, 3, 0]), num_nodes=5)
    home.ndata["feat"] = torch.randn(5, 3)
    home.edata["w"] = torch.arange(4.0)
    hetero = _hetero_graph()
    write_dgl_graphs(tmp_path / "g.bin", [home, hetero], {"glabel": torch.tensor([0, 1])}, formats=formats)
    graphs, labels = load_dgl_graphs(tmp_path / "g.bin")
    assert labels["glabel"].tolist() == [0, 1] and len(graphs) == 2
    a, b = graphs
    assert a.ntypes == ["_N"] and a.num_nodes() == 5
    assert [t.tolist() for t in a.find_edges()] == [[0, 1, 2, 3], [1, 2, 3, 0]]
    assert torch.equal(a.ndata["feat"], home.ndata["feat"]) and a.edata["w"].tolist() == [0, 1, 2, 3]
    assert b.ntypes == ["item", "user"] and b.canonical_etypes == hetero.canonical_etypes
    for rel in hetero.canonical_etypes:
        assert [t.tolist() for t in b.find_edges(rel)] == [t.tolist() for t in hetero.find_edges(rel)]
    assert torch.equal(b.nodes["user"].data["h"], hetero.nodes["user"].data["h"])
    assert b.nodes["item"].data["price"].dtype == torch.float64
    assert b.nodes["item"].data["mask"].tolist() == [1, 0, 1, 1]  # DGL stores bool as uint8
    assert b.edges[("user", "buys", "item")].data["count"].dtype == torch.int32
    assert b.edges[("user", "follows", "user")].data["w"].dtype == torch.bfloat16


def test_dgl_file_layout_landmarks(tmp_path):
    write_dgl_graphs(tmp_path / "g.bin", [gnnc.graph(([0], [1]))])
    raw = (tmp_path / "g.bin").read_bytes()
    assert raw[:8] == bytes.fromhex("3fa1b446f04f2edd") and struct.unpack("<Q", raw[:8])[0] == FILE_MAGIC
    assert struct.unpack("<3Q", raw[8:32]) == (2, 2, 1) and raw[32:4096] == bytes(4064)
    start = struct.unpack("<Q", raw[4096:4104])[0]
    assert start == 4112 and struct.unpack("<Q", raw[4104:4112])[0] == 0  # no labels
    assert struct.unpack("<Q", raw[start : start + 8])[0] == HETERO_MAGIC
    size = struct.unpack("<Q", raw[-8:])[0]
    assert struct.unpack("<2Q", raw[-8 - size : -8]) == (1, start)  # graph offsets, read from the end
    g = load_graph_file(tmp_path / "g.bin")
    assert g.num_edges() == 1


def test_dgl_file_errors(tmp_path):
    write_dgl_graphs(tmp_path / "g.bin", [_hetero_graph()])
    raw = (tmp_path / "g.bin").read_bytes()
    (tmp_path / "cut.bin").write_bytes(raw[:5000])
    with pytest.raises(ValueError, match=r"cut\.bin, byte \d+: truncated DGL graph file"):
        load_dgl_graphs(tmp_path / "cut.bin")
    (tmp_path / "v1.bin").write_bytes(raw[:8] + struct.pack("<Q", 1) + raw[16:])
    with pytest.raises(ValueError, match=r"format version 1 \(DGL < 0\.5\); load and re-save"):
        load_graph_file(tmp_path / "v1.bin")
    bad = bytearray(raw)
    bad[4112:4120] = bytes(8)
    (tmp_path / "bad.bin").write_bytes(bytes(bad))
    with pytest.raises(ValueError, match=r"bad\.bin, byte 4112: expected a heterograph \(magic"):
        load_dgl_graphs(tmp_path / "bad.bin")
    write_dgl_graphs(tmp_path / "ring.bin", [gnnc.graph(([0, 1, 2], [1, 2, 0]))])
    ring = (tmp_path / "ring.bin").read_bytes()
    counts = struct.pack("<QqQQ", 1, 3, 1, 0)  # node counts [3], then one node type without tensors
    at = ring.rfind(counts)
    (tmp_path / "ring.bin").write_bytes(ring[:at] + struct.pack("<QqQQ", 1, 2, 1, 0) + ring[at + 32 :])
    with pytest.raises(ValueError, match=r"ring\.bin, byte \d+: node types, .* the relations' node counts do not"):
        load_dgl_graphs(tmp_path / "ring.bin")
    write_dgl_graphs(tmp_path / "two.bin", [_hetero_graph(), _hetero_graph()])
    with pytest.raises(ValueError, match="a DGL file of 2 graphs; use load_dgl_graphs"):
        load_graph_file(tmp_path / "two.bin")


# ------------------------------------------------------------------ dispatch
def test_load_graph_file_dispatch_and_errors(tmp_path):
    g = gnnc.graph(([0, 1], [1, 2]))
    save_npz(g, tmp_path / "g.npz")
    assert load_graph_file(tmp_path / "g.npz").num_edges() == 2
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match=r"notes\.txt: unrecognized graph format; accepted: an unzipped OGB"):
        load_graph_file(tmp_path / "notes.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"empty: unrecognized graph format"):
        load_graph_file(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match=r"missing\.bin does not exist"):
        load_graph_file(tmp_path / "missing.bin")

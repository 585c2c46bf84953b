"""Loaders validate before they allocate (issue 41 item 5): each case a hostile or careless file gives a
ValueError naming the file, without the allocation it asks for."""

import gzip
import io
import struct

import numpy as np
import pytest
import scipy.sparse
import torch

from gnnc.data import (
    limits,
    load_dgl_graphs,
    load_edge_list,
    load_npz,
    load_ogbn,
    load_pyg_file,
)
from gnnc.data.dgl_files import write_dgl_graphs

from .hostile_files import (
    dgl_with_indptr_end,
    load_in_child,
    small_graph,
    write_npz,
    write_planetoid,
)

MiB = 1 << 20


def _csv(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write(text)


def _ogb(root, edges="0,1\n1,2\n", nodes="3\n", labels="0\n1\n2\n", edge_count="2\n"):
    raw = root / "raw"
    _csv(raw / "edge.csv.gz", edges)
    _csv(raw / "num-node-list.csv.gz", nodes)
    _csv(raw / "num-edge-list.csv.gz", edge_count)
    _csv(raw / "node-label.csv.gz", labels)
    for split in ("train", "valid", "test"):
        _csv(root / "split" / "s" / f"{split}.csv.gz", "0\n")
    return root


def test_an_edge_file_longer_than_declared_stops_one_row_past_the_count(tmp_path):
    root = _ogb(tmp_path / "long", edges="0,1\n" * 2_000_000, edge_count="1\n")
    with pytest.raises(ValueError, match=r"edge\.csv\.gz: at least 2 rows, but the graph has 1 edges"):
        load_ogbn(root)


def test_an_edge_file_decompressing_past_its_declared_rows_is_refused(tmp_path):
    root = _ogb(tmp_path / "bomb", edges="0" * (8 * MiB) + ",1\n", edge_count="1\n")
    with pytest.raises(ValueError, match=r"edge\.csv\.gz: decompresses to more than the [\d,]+ bytes"):
        load_ogbn(root)


@pytest.mark.parametrize("label, shown", [("inf", "inf"), ("-5", "-5"), ("1e9", "1000000000"), ("1.5", "1.5")])
def test_ogb_labels_must_be_class_indices(tmp_path, label, shown):
    root = _ogb(tmp_path / "labels", labels=f"0\n{label}\n1\n")
    with pytest.raises(ValueError, match=rf"node-label\.csv\.gz, row 2: label \[{shown}.*is not a class index"):
        load_ogbn(root)


def test_unlabelled_nodes_keep_minus_one(tmp_path):
    ds = load_ogbn(_ogb(tmp_path / "nan", labels="0\nnan\n2\n"))
    assert ds.graph.ndata["label"].tolist() == [0, -1, 2] and ds.num_classes == 3


def test_declared_node_counts_beyond_the_limit_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"num-node-list\.csv\.gz: declares 1000000000000 nodes; .*limits"):
        load_ogbn(_ogb(tmp_path / "ogb", nodes="1000000000000\n"))
    path = write_npz(tmp_path / "g.npz")
    data = dict(np.load(path))
    data["ntype_counts"] = np.array([10**12, 3])
    np.savez(path, **data)
    with pytest.raises(ValueError, match=r"g\.npz, entry 'ntype_counts': declares 1000000000000 nodes"):
        load_npz(path)
    (tmp_path / "edges.txt").write_text("0 1000000000000\n")
    with pytest.raises(ValueError, match=r"edges\.txt: declares 1000000000001 nodes"):
        load_edge_list(tmp_path / "edges.txt")
    write_dgl_graphs(tmp_path / "g.bin", [small_graph()])
    with limits.configure(max_nodes=2), pytest.raises(ValueError, match=r"g\.bin, byte \d+: declares 3 nodes; "):
        load_dgl_graphs(tmp_path / "g.bin")
    assert limits.LIMITS.max_nodes == 1 << 32  # restored after the block


def test_a_dgl_indptr_declaring_2_to_the_28_edges_is_refused_before_allocating(tmp_path):
    path = dgl_with_indptr_end(tmp_path / "indptr.bin", 1 << 28)
    assert path.stat().st_size < 8192
    with pytest.raises(ValueError, match=r"indptr\.bin, byte \d+: CSR indptr of 4 entries is not 0, "):
        load_dgl_graphs(path)


def test_a_planetoid_matrix_of_50k_by_50k_is_refused_before_densifying(tmp_path):
    root = write_planetoid(tmp_path / "big", allx=scipy.sparse.csr_matrix((50_000, 50_000), dtype=np.float32))
    from gnnc.data import load_planetoid

    with pytest.raises(ValueError, match=r"shapes disagree: .*allx \(50000, 50000\)"):
        load_planetoid("toy", root)


def test_hostile_files_stay_within_a_memory_bound_in_a_child_under_rlimit_as(tmp_path):
    cases = [
        ("dgl", dgl_with_indptr_end(tmp_path / "indptr.bin", 1 << 28)),
        (
            "planetoid",
            write_planetoid(tmp_path / "big", allx=scipy.sparse.csr_matrix((50_000, 50_000), dtype=np.float32))
            / "toy.x",
        ),
        ("ogb", _ogb(tmp_path / "long", edges="0,1\n" * 2_000_000, edge_count="1\n")),
    ]
    report = load_in_child(cases, headroom=512 * MiB)
    assert [c["outcome"].split(":")[0] for c in report["cases"]] == ["ValueError"] * 3, report
    assert report["peak_rss"] - report["peak_rss_after_imports"] < 64 * MiB, report


def test_a_pyg_file_with_more_feature_rows_than_nodes_is_refused(tmp_path):
    from torch_geometric.data import Data

    torch.save(Data(x=torch.randn(10, 2), edge_index=torch.tensor([[0, 1], [1, 2]]), num_nodes=3), tmp_path / "x.pt")
    with pytest.raises(ValueError, match=r"x\.pt: 'x' has 10 rows for 3 nodes"):
        load_pyg_file(tmp_path / "x.pt")


@pytest.mark.parametrize("keep", [0.5, 0.9, 0.0])
def test_a_truncated_pyg_file_is_a_value_error_naming_it(tmp_path, keep):
    from torch_geometric.data import Data

    buf = io.BytesIO()
    torch.save(Data(x=torch.randn(100, 8), edge_index=torch.tensor([[0, 1], [1, 2]])), buf)
    data = buf.getvalue()
    (tmp_path / "cut.pt").write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(ValueError, match=r"cut\.pt: not a readable torch\.save file"):
        load_pyg_file(tmp_path / "cut.pt")


def test_a_planetoid_pickle_declaring_a_huge_bytes_field_is_refused(tmp_path):
    root = write_planetoid(tmp_path / "p")
    # BINBYTES8 declaring 2**40 bytes: the unpickler would allocate them before reading
    (root / "ind.toy.x").write_bytes(b"\x80\x04\x8e" + struct.pack("<Q", 1 << 40) + b"x" * 16 + b".")
    from gnnc.data import load_planetoid

    with pytest.raises(ValueError, match=r"ind\.toy\.x: not a readable pickle"):
        load_planetoid("toy", root)

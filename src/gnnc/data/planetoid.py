"""Planetoid citation graphs (Cora, Citeseer, Pubmed) from ``ind.<name>.*`` files.

Processing follows Kipf & Welling's and PyG's: features are ``allx`` then
``tx`` with row i at node ``test.index[i]``; Citeseer's ids inside the
test range that ``test.index`` skips get zero features and label 0;
edges come from the adjacency dict without self-loops or duplicates, sorted
by (src, dst) (with ``dgl_edges``: made symmetric and self-loops kept, as DGL's
``CitationGraphDataset`` builds them through networkx). Public split: the ``x`` rows train, the next 500
validate, ``test.index`` tests. Features are kept raw (no normalization;
``gnnc.data.CoraGraphDataset`` row-normalises them as DGL does).

Every file's shape is checked against the others' (``allx`` must hold the
training and the validation rows) and the node count
against ``gnnc.data.limits`` before a dense array is built.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import scipy.sparse
import torch

from ..graph import graph
from .dataset import Dataset, index_mask
from .integrity import check_file
from .limits import check_count, check_dense
from .paths import ENV_VAR, resolve
from .safe_pickle import safe_load

NUM_VAL = 500


def load_planetoid(name: str, root=None, dgl_edges: bool = False) -> Dataset:
    """Load ``ind.<name>.*`` from ``root`` (default ``<data folder>/planetoid``, the folder by
    ``gnnc.data.paths``'s rule).

    Returns a homogeneous graph with ``ndata['feat']`` (float32), ``label``
    (int64) and the public ``train_mask`` / ``val_mask`` / ``test_mask``.
    """
    name = name.lower()
    root = resolve(root, "planetoid", f"Planetoid folder for {name!r}")
    parts = {
        key: _load_part(root, name, key, kind)
        for key, kind in (
            ("x", "matrix"),
            ("y", "matrix"),
            ("tx", "matrix"),
            ("ty", "matrix"),
            ("allx", "matrix"),
            ("ally", "matrix"),
            ("graph", "dict"),
        )
    }
    test_index = _read_index(_file(root, name, "test.index"))

    features, onehot = _node_rows(root, name, parts, test_index)
    labels = onehot.argmax(1).astype(np.int64)

    num_nodes = labels.size
    src, dst = _edges(parts["graph"], num_nodes, _file(root, name, "graph"), dgl_edges)
    g = graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=num_nodes)
    n_train = parts["y"].shape[0]
    g.ndata["feat"] = torch.from_numpy(features)
    g.ndata["label"] = torch.from_numpy(labels)
    g.ndata["train_mask"] = index_mask(num_nodes, np.arange(n_train))
    g.ndata["val_mask"] = index_mask(num_nodes, np.arange(n_train, n_train + NUM_VAL))
    g.ndata["test_mask"] = index_mask(num_nodes, test_index)
    return Dataset(name, g, onehot.shape[1], g.ntypes[0])


def _file(root: Path, name: str, key: str) -> Path:
    path = root / f"ind.{name}.{key}"
    if not path.is_file():
        raise FileNotFoundError(
            f"Planetoid file {path} is missing (root={root}; the default root is ${ENV_VAR}/planetoid)"
        )
    check_file(path)
    return path


def _load_part(root: Path, name: str, key: str, kind: str):
    path = _file(root, name, key)
    obj = safe_load(path)
    if kind == "dict" and not isinstance(obj, dict):
        raise ValueError(f"{path}: expected a dict of adjacency lists, got {type(obj).__name__}")
    is_matrix = (scipy.sparse.issparse(obj) or isinstance(obj, np.ndarray)) and obj.ndim == 2
    if kind == "matrix" and not is_matrix:
        raise ValueError(f"{path}: expected a 2-D array or sparse matrix, got {type(obj).__name__}")
    return obj


def _read_index(path: Path) -> np.ndarray:
    values = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            values.append(int(line))
        except ValueError:
            raise ValueError(f"{path}, line {lineno}: expected one integer node index, got {line!r}") from None
    if not values:
        raise ValueError(f"{path}: holds no test indices")
    return np.array(values, dtype=np.int64)


def _dense(m) -> np.ndarray:
    arr = m.toarray() if scipy.sparse.issparse(m) else np.asarray(m)
    return np.ascontiguousarray(arr, dtype=np.float32)


def _node_rows(root: Path, name: str, parts: dict, test_index: np.ndarray):
    """(features, one-hot labels) of every node, test rows at their test indices.

    ``tx`` row i belongs to node ``test_index[i]`` (as in Kipf's and PyG's
    loaders); ids in the test range that no test index names (Citeseer's
    isolated nodes) get zero rows.
    """
    x, y, allx, ally, tx, ty = (parts[k].shape for k in ("x", "y", "allx", "ally", "tx", "ty"))
    test_file = root / f"ind.{name}.test.index"
    if not (
        allx[0] == ally[0]
        and tx[0] == ty[0] == test_index.size
        and allx[1] == tx[1] == x[1]
        and ally[1] == ty[1] == y[1]
        and x[0] == y[0]
        and x[0] + NUM_VAL <= allx[0]
    ):
        raise ValueError(
            f"Planetoid {name!r} in {root}: shapes disagree: x {x}, y {y}, allx {allx}, ally "
            f"{ally}, tx {tx}, ty {ty}, {test_index.size} test indices"
        )
    known, order = allx[0], np.sort(test_index)
    num_nodes = check_count(known + int(order[-1] - order[0]) + 1, "nodes", test_file)
    if order[0] < 0 or order[-1] >= num_nodes or np.any(order[1:] == order[:-1]):
        raise ValueError(f"{test_file}: test indices must be distinct and within [0, {num_nodes})")
    check_count(ally[1], "classes", root / f"ind.{name}.ally")
    for key, width in (("allx", allx[1]), ("ally", ally[1])):
        check_dense((num_nodes, width), 4, root / f"ind.{name}.{key}")
    allx, ally, tx, ty = (_dense(parts[k]) for k in ("allx", "ally", "tx", "ty"))
    slots = known + order - order[0]
    out = []
    for head, tail in ((allx, tx), (ally, ty)):
        rows = np.zeros((num_nodes, head.shape[1]), dtype=np.float32)
        rows[:known], rows[slots] = head, tail
        rows[test_index] = rows[order]
        out.append(rows)
    return tuple(out)


def _edges(adjacency: dict, num_nodes: int, path: Path, dgl_edges: bool) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique (src, dst) pairs of the adjacency dict, self-loops dropped (``dgl_edges``: kept, and
    every edge's reverse added)."""
    try:
        src = np.fromiter(
            itertools.chain.from_iterable(itertools.repeat(int(k), len(v)) for k, v in adjacency.items()),
            dtype=np.int64,
        )
        dst = np.fromiter(itertools.chain.from_iterable(adjacency.values()), dtype=np.int64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: adjacency lists must map node ids to lists of node ids ({err})") from None
    bad = (src < 0) | (src >= num_nodes) | (dst < 0) | (dst >= num_nodes)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{path}: edge ({src[i]}, {dst[i]}) is outside the {num_nodes} nodes")
    if dgl_edges:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    else:
        keep = src != dst
        src, dst = src[keep], dst[keep]
    key = np.unique(src * num_nodes + dst)
    return key // num_nodes, key % num_nodes

"""OGB node-property folders (ogbn-arxiv, -products, -proteins, -mag, -papers100M) as unzipped.

Layout read (from OGB's ``ogb/io/read_graph_raw.py`` and
``ogb/nodeproppred/dataset_pyg.py``), all CSVs gzipped and without header
unless said:

- homogeneous: ``raw/edge.csv.gz`` (src,dst rows), ``raw/num-node-list.csv.gz``,
  ``raw/num-edge-list.csv.gz``, optional ``raw/node-feat.csv.gz`` and
  ``raw/edge-feat.csv.gz``, extra per-node / per-edge files
  ``raw/node_<name>.csv.gz`` / ``raw/edge_<name>.csv.gz`` (ogbn-proteins'
  ``species.csv.gz`` counts as ``node_species``), labels in
  ``raw/node-label.csv.gz``; split indices in ``split/<scheme>/{train,valid,test}.csv.gz``.
- binary homogeneous (ogbn-papers100M): ``raw/data.npz`` (``edge_index``,
  ``num_nodes_list``, ``num_edges_list``, ``node_*`` / ``edge_*`` arrays) and
  ``raw/node-label.npz`` (``node_label``).
- heterogeneous (ogbn-mag): ``raw/num-node-dict.csv.gz`` (a header of node
  types, one row of counts), ``raw/triplet-type-list.csv.gz`` (head,relation,tail
  rows), per relation ``raw/relations/<head>___<rel>___<tail>/edge.csv.gz`` +
  ``num-edge-list.csv.gz`` (+ ``edge-feat.csv.gz``, ``edge_<name>.csv.gz``),
  per node type ``raw/node-feat/<type>/node-feat.csv.gz`` (+ ``node_<name>.csv.gz``),
  ``raw/node-label/<type>/node-label.csv.gz`` and
  ``split/<scheme>/<type>/{train,valid,test}.csv.gz``. Node types and
  relations are taken in sorted order, as OGB does.

gnnc names: ``feat`` for node-feat / edge-feat, the file name without its
``node_`` / ``edge_`` prefix for extras (``year``, ``reltype``, ``species``),
``label`` and ``train_mask`` / ``val_mask`` / ``test_mask`` on the labelled
node type. One-column files become 1-D tensors. Only single-graph folders
(node-property prediction) are read; graph-property folders are refused.

Counts are read first and checked against ``gnnc.data.limits``; a CSV of
rows whose count is declared is parsed only up to that count (one row more
is an error, found as soon as it is read), and its decompressed text is
bounded by ``_ROW_BYTES`` per value and row. Labels must be finite,
integral and non-negative (NaN marks an unlabelled node), their count of
classes within the limit. The CSVs and npz archives carry no checksum that
gnnc checks beyond zip's CRC-32: a changed digit that keeps a file valid
cannot be detected.
"""

from __future__ import annotations

import gzip
import io
import re
import warnings
import zlib
from pathlib import Path

import numpy as np
import torch

from ..graph import heterograph
from .dataset import Dataset, index_mask
from .integrity import check_file
from .limits import LIMITS, check_count
from .npz_members import read_npz

SPLITS = (("train", "train_mask"), ("valid", "val_mask"), ("test", "test_mask"))
# OGB's master.csv sets add_inverse_edge for these downloads (folder names).
INVERSE_BY_DEFAULT = ("proteins", "products", "ogbn_proteins", "ogbn_products")
_FLOAT_TEXT = re.compile(r"[.eEnNiI]")
_TABLE_BYTES = 1 << 24  # bound on the text of a small table (node type counts, relation lists)
_FIRST_LINE = 1 << 20  # the longest first row read to tell ints from floats and count columns
_READ_AHEAD = 1 << 22  # what the text reader may take beyond the last row it parses
_ROW_BYTES = 32  # bound on the text of one value (with its separator); a row adds one for its newline


def is_ogb_folder(path) -> bool:
    """Whether ``path`` looks like an unzipped OGB node-property download."""
    raw = Path(path) / "raw"
    return raw.is_dir() and any(
        (raw / f).exists() for f in ("edge.csv.gz", "num-node-dict.csv.gz", "data.npz", "relations")
    )


def load_ogbn(path, split: str | None = None, add_inverse_edge: bool | None = None) -> Dataset:
    """Read an unzipped OGB node-property folder (the one holding ``raw/`` and ``split/``).

    ``split`` names the folder under ``split/`` (default: the only one there).
    ``add_inverse_edge`` follows each edge by its reverse, as OGB's loaders
    do for ogbn-proteins and ogbn-products (the default for folders named
    ``proteins`` / ``products``, off otherwise). Labels are int64 (NaN, for
    unlabelled papers100M nodes, becomes -1) and ``num_classes`` is the
    largest label + 1.

    FileNotFoundError naming the missing file; ValueError naming the file for
    unreadable CSVs, row counts that disagree and node ids out of range.
    """
    root = Path(path)
    if not is_ogb_folder(root):
        raise FileNotFoundError(
            f"{root} is not an OGB node-property folder (no raw/edge.csv.gz, raw/num-node-dict.csv.gz or raw/data.npz)"
        )
    if add_inverse_edge is None:
        add_inverse_edge = root.name.lower() in INVERSE_BY_DEFAULT
    raw = root / "raw"
    hetero = (raw / "num-node-dict.csv.gz").exists() or (raw / "relations").is_dir()
    if hetero:
        g, labels = _hetero(raw, add_inverse_edge)
    elif (raw / "edge.csv.gz").exists():
        g, labels = _homo_csv(raw, add_inverse_edge)
    else:
        g, labels = _homo_npz(raw, add_inverse_edge)
    scheme = _split_dir(root, split)
    num_classes = 0
    for ntype, label in labels.items():
        g.nodes[ntype].data["label"] = label
        num_classes = max(num_classes, int(label.max()) + 1 if label.numel() else 0)
        where = scheme / ntype if hetero else scheme
        if where.is_dir():
            for stem, key in SPLITS:
                file = where / f"{stem}.csv.gz"
                idx = _column(file, g.num_nodes(ntype))
                g.nodes[ntype].data[key] = index_mask(g.num_nodes(ntype), idx)
    return Dataset(root.name, g, num_classes, next(iter(labels)))


# ------------------------------------------------------------------ CSV files
class _Bounded(io.RawIOBase):
    """A read-only stream that refuses to give more than ``limit`` bytes of ``raw``."""

    def __init__(self, raw, limit: int | None, path: Path):
        self.raw, self.left, self.path, self.limit = raw, limit, path, limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        got = self.raw.readinto(buffer)
        if self.left is not None:
            self.left -= got
            if self.left < 0:
                raise ValueError(
                    f"{self.path}: decompresses to more than the {self.limit:,} bytes its declared rows can fill"
                )
        return got


def _open_text(path: Path, limit: int | None = None):
    """The gzipped text of ``path``; reading more than ``limit`` decompressed bytes is a ValueError."""
    if not path.is_file():
        raise FileNotFoundError(f"OGB file {path} is missing")
    check_file(path)
    return io.TextIOWrapper(io.BufferedReader(_Bounded(gzip.open(path, "rb"), limit, path)))


def read_csv(
    path: Path,
    kind: str = "auto",
    columns: int | None = None,
    rows: int | None = None,
    exact: bool = True,
    what: str = "rows",
) -> np.ndarray:
    """2-D array of a gzipped, header-less CSV of numbers.

    ``kind`` 'int' gives int64, 'float' float32, 'auto' int64 when the file
    holds only integers (OGB's rule, via pandas' type inference) else float32.
    ``rows``: the declared row count of ``what`` (exactly, or at most unless
    ``exact``); parsing stops one row past it and the text read is bounded by it.
    """
    first = ""
    try:
        with _open_text(path, _TABLE_BYTES) as f:
            first = f.readline(_FIRST_LINE)
        width = columns or first.count(",") + 1
        limit = None if rows is None else (rows + 1) * (width * _ROW_BYTES + 1) + len(first) + _READ_AHEAD
        guess = kind == "auto"
        if guess:
            kind = "float" if _FLOAT_TEXT.search(first) else "int"
        try:
            arr = _loadtxt(path, np.int64 if kind == "int" else np.float64, rows, limit)
        except ValueError:
            if not (guess and kind == "int"):
                raise
            arr = _loadtxt(path, np.float64, rows, limit)  # an integer-looking first row, floats further on
    except (ValueError, OSError, EOFError, zlib.error) as err:
        if isinstance(err, FileNotFoundError) or str(err).startswith(str(path)):
            raise
        raise ValueError(f"{path}: not a gzipped CSV of numbers ({err})") from None
    if arr.size == 0:
        arr = arr.reshape(0, columns or (first.count(",") + 1 if first.strip() else 1))
    if columns is not None and arr.shape[1] != columns:
        raise ValueError(f"{path}: expected {columns} column(s), found {arr.shape[1]}")
    if rows is not None and (arr.shape[0] > rows or exact and arr.shape[0] != rows):
        more = "at least " if arr.shape[0] > rows else ""
        raise ValueError(f"{path}: {more}{arr.shape[0]} rows, but the graph has {rows} {what}")
    return arr.astype(np.float32) if arr.dtype == np.float64 else arr


def _loadtxt(path: Path, dtype, rows: int | None, limit: int | None) -> np.ndarray:
    with _open_text(path, limit) as f, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "input contained no data"
        return np.loadtxt(f, delimiter=",", dtype=dtype, ndmin=2, max_rows=None if rows is None else rows + 1)


def _column(path: Path, num_nodes: int) -> np.ndarray:
    """A one-column file of node indices, checked against ``num_nodes``."""
    idx = read_csv(path, "int", 1, rows=num_nodes, exact=False, what="nodes")[:, 0]
    _check_ids(idx, num_nodes, path)
    return idx


def _check_ids(ids: np.ndarray, count: int, path: Path, what: str = "node id") -> None:
    bad = (ids < 0) | (ids >= count)
    if bad.any():
        row = int(np.flatnonzero(bad.reshape(len(ids), -1).any(1))[0])
        value = ids.reshape(len(ids), -1)[row][bad.reshape(len(ids), -1)[row]][0]
        raise ValueError(f"{path}, row {row + 1}: {what} {value} is outside [0, {count})")


def _one_graph(path: Path, counts: list[int]) -> int:
    if len(counts) != 1:
        raise ValueError(f"{path}: lists {len(counts)} graphs; only node-property folders with one graph can be read")
    return counts[0]


def _count(path: Path, kind: str) -> int:
    """The one count of ``path`` (num-node-list / num-edge-list), within the ``kind`` limit."""
    counts = read_csv(
        path, "int", 1, rows=1, exact=False, what="graph; only node-property folders with one graph can be read"
    )
    return check_count(_one_graph(path, counts[:, 0].tolist()), kind, path)


def _rows(arr: np.ndarray, expected: int, path: Path, what: str) -> np.ndarray:
    if arr.shape[0] != expected:
        raise ValueError(f"{path}: {arr.shape[0]} rows, but the graph has {expected} {what}")
    return arr


def _tensor(arr: np.ndarray) -> torch.Tensor:
    arr = arr[:, 0] if arr.ndim == 2 and arr.shape[1] == 1 else arr
    return torch.from_numpy(np.ascontiguousarray(arr))


def _interleave(edges: np.ndarray) -> np.ndarray:
    """[E, 2] -> [2E, 2]: each edge followed by its reverse (OGB's add_inverse_edge)."""
    out = np.repeat(edges, 2, axis=0)
    out[1::2] = edges[:, ::-1]
    return out


def _edges(folder: Path, src_count: int, dst_count: int) -> np.ndarray:
    """``edge.csv.gz`` of ``folder``, checked against ``num-edge-list`` and the node counts."""
    path = folder / "edge.csv.gz"
    edges = read_csv(path, "int", 2, rows=_count(folder / "num-edge-list.csv.gz", "edges"), what="edges")
    _check_ids(edges[:, :1], src_count, path, "source node id")
    _check_ids(edges[:, 1:], dst_count, path, "destination node id")
    return edges


def _features(folder: Path, feat_file: str, prefix: str, expected: int, what: str, inverse: bool):
    """{name: tensor} of ``feat_file`` ('feat') and ``<prefix><name>.csv.gz`` files (name)."""
    out = {}
    files = [(folder / feat_file, "feat")] + [
        (p, p.name[len(prefix) : -len(".csv.gz")]) for p in sorted(folder.glob(f"{prefix}*.csv.gz"))
    ]
    if prefix == "node_" and (folder / "species.csv.gz").is_file() and "species" not in dict(files).values():
        files.append((folder / "species.csv.gz", "species"))  # ogbn-proteins ships node_species so
    for path, name in files:
        if path.is_file():
            arr = read_csv(path, rows=expected, what=what)
            out[name] = _tensor(np.repeat(arr, 2, axis=0) if inverse else arr)
    return out


def _label(path: Path, num_nodes: int) -> torch.Tensor:
    return _checked_labels(read_csv(path, rows=num_nodes, what="nodes"), path)


def _checked_labels(arr: np.ndarray, path: Path) -> torch.Tensor:
    """int64 labels (-1 for NaN, an unlabelled node); ValueError naming ``path`` and the row of the first
    label that is infinite, not an integer, negative or a class beyond ``max_classes``."""
    missing = np.isnan(arr) if arr.dtype.kind == "f" else np.zeros(arr.shape, dtype=bool)
    bad = ~missing & ((arr < 0) | (arr >= LIMITS.max_classes) | (arr != np.floor(arr)))
    if bad.any():
        row = int(np.flatnonzero(bad.reshape(len(arr), -1).any(1))[0])
        raise ValueError(
            f"{path}, row {row + 1}: label {arr.reshape(len(arr), -1)[row].tolist()} is not a class "
            f"index (an integer in [0, {LIMITS.max_classes:,}) or NaN for unlabelled)"
        )
    return _tensor(np.where(missing, -1, arr).astype(np.int64))


# ----------------------------------------------------------- homogeneous
def _homo_csv(raw: Path, inverse: bool):
    num_nodes = _count(raw / "num-node-list.csv.gz", "nodes")
    edges = _edges(raw, num_nodes, num_nodes)
    node_feats = _features(raw, "node-feat.csv.gz", "node_", num_nodes, "nodes", False)
    edge_feats = _features(raw, "edge-feat.csv.gz", "edge_", len(edges), "edges", inverse)
    return _homo_graph(edges, num_nodes, node_feats, edge_feats, inverse), {
        "_N": _label(raw / "node-label.csv.gz", num_nodes)
    }


def _homo_npz(raw: Path, inverse: bool):
    arrays = _npz(raw / "data.npz")
    path = raw / "data.npz"
    missing = [k for k in ("edge_index", "num_nodes_list", "num_edges_list") if k not in arrays]
    if missing:
        raise ValueError(f"{path}: entries {missing} are missing")
    num_nodes = check_count(_one_graph(path, arrays["num_nodes_list"].tolist()), "nodes", path)
    num_edges = check_count(_one_graph(path, arrays["num_edges_list"].tolist()), "edges", path)
    if arrays["edge_index"].shape != (2, num_edges):
        raise ValueError(
            f"{path}: edge_index of shape {arrays['edge_index'].shape}, num_edges_list declares {num_edges} edges"
        )
    edges = np.ascontiguousarray(arrays["edge_index"].T.astype(np.int64))
    _check_ids(edges, num_nodes, path)
    node_feats, edge_feats = {}, {}
    for key, value in arrays.items():
        if key in ("edge_index", "num_nodes_list", "num_edges_list"):
            continue
        for prefix, feats, count in (("node_", node_feats, num_nodes), ("edge_", edge_feats, len(edges))):
            if key.startswith(prefix):
                value = _rows(value, count, path, f"{prefix[:-1]}s (entry {key!r})")
                feats[key[len(prefix) :]] = _tensor(
                    np.repeat(value, 2, axis=0) if inverse and prefix == "edge_" else value
                )
    labels = _npz(raw / "node-label.npz")
    if "node_label" not in labels:
        raise ValueError(f"{raw / 'node-label.npz'}: entry 'node_label' is missing")
    label = _rows(labels["node_label"], num_nodes, raw / "node-label.npz", "nodes")
    label = _checked_labels(label.astype(np.float64) if label.dtype.kind == "f" else label, raw / "node-label.npz")
    return _homo_graph(edges, num_nodes, node_feats, edge_feats, inverse), {"_N": label}


def _npz(path: Path) -> dict:
    if not path.is_file():
        raise FileNotFoundError(f"OGB file {path} is missing")
    return read_npz(path)


def _homo_graph(edges, num_nodes, node_feats, edge_feats, inverse):
    edges = _interleave(edges) if inverse else edges
    rel = ("_N", "_E", "_N")
    g = heterograph(
        {rel: (torch.from_numpy(edges[:, 0].copy()), torch.from_numpy(edges[:, 1].copy()))}, num_nodes={"_N": num_nodes}
    )
    for k, v in node_feats.items():
        g.ndata[k] = v
    for k, v in edge_feats.items():
        g.edata[k] = v
    return g


# --------------------------------------------------------- heterogeneous
def _header_table(path: Path) -> dict[str, list[str]]:
    """{column name: values} of a small gzipped CSV with a header row."""
    try:
        with _open_text(path, _TABLE_BYTES) as f:
            lines = [line.strip().split(",") for line in f if line.strip()]
    except (OSError, EOFError, zlib.error) as err:
        if isinstance(err, FileNotFoundError):
            raise
        raise ValueError(f"{path}: not a gzipped CSV ({err})") from None
    if not lines or any(len(row) != len(lines[0]) for row in lines):
        raise ValueError(f"{path}: expected a header row and rows of as many values")
    return {name: [row[i] for row in lines[1:]] for i, name in enumerate(lines[0])}


def _marked_types(table_path: Path, folder: Path) -> list[str]:
    """Node types marked True in ``table_path`` (e.g. nodetype-has-label), else the subfolders of ``folder``."""
    if table_path.is_file():
        return sorted(t for t, v in _header_table(table_path).items() if v and v[0].strip() == "True")
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def _triplets(raw: Path) -> list[tuple[str, str, str]]:
    path = raw / "triplet-type-list.csv.gz"
    if path.is_file():
        with _open_text(path, _TABLE_BYTES) as f:
            rows = [tuple(line.strip().split(",")) for line in f if line.strip()]
    else:
        rows = [tuple(p.name.split("___")) for p in (raw / "relations").iterdir() if p.is_dir()]
    bad = [r for r in rows if len(r) != 3]
    if bad:
        raise ValueError(f"{path}: relation {bad[0]} is not head,relation,tail")
    return sorted(rows)


def _hetero(raw: Path, inverse: bool):
    path = raw / "num-node-dict.csv.gz"
    try:
        counts = {
            t: check_count(_one_graph(path, [int(v) for v in vs]), "nodes", path)
            for t, vs in sorted(_header_table(path).items())
        }
    except ValueError as err:
        raise err if str(path) in str(err) else ValueError(f"{path}: node counts must be integers ({err})") from None
    relations, edge_feats = {}, {}
    for rel in _triplets(raw):
        unknown = [t for t in (rel[0], rel[2]) if t not in counts]
        if unknown:
            raise ValueError(
                f"{raw / 'relations'}: relation {rel} uses node type {unknown[0]!r}, which {path} does not list"
            )
        folder = raw / "relations" / "___".join(rel)
        edges = _edges(folder, counts[rel[0]], counts[rel[2]])
        edge_feats[rel] = _features(folder, "edge-feat.csv.gz", "edge_", len(edges), "edges", inverse)
        edges = _interleave(edges) if inverse else edges
        relations[rel] = (torch.from_numpy(edges[:, 0].copy()), torch.from_numpy(edges[:, 1].copy()))
    g = heterograph(relations, num_nodes=counts)
    for rel, feats in edge_feats.items():
        for k, v in feats.items():
            g.edges[rel].data[k] = v
    for ntype, n in counts.items():
        for k, v in _features(raw / "node-feat" / ntype, "node-feat.csv.gz", "node_", n, "nodes", False).items():
            g.nodes[ntype].data[k] = v
    labelled = _marked_types(raw / "nodetype-has-label.csv.gz", raw / "node-label")
    if not labelled:
        raise FileNotFoundError(f"OGB folder {raw.parent}: no node labels (raw/node-label/<type>/node-label.csv.gz)")
    labels = {t: _label(raw / "node-label" / t / "node-label.csv.gz", counts.get(t, 0)) for t in labelled}
    return g, labels


def _split_dir(root: Path, split: str | None) -> Path:
    folder = root / "split"
    schemes = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    if split is None:
        if len(schemes) != 1:
            raise FileNotFoundError(
                f"{folder}: expected one split scheme folder, found {schemes}; pass split=<name>"
                if schemes
                else f"OGB split folder {folder} is missing or empty"
            )
        split = schemes[0]
    if split not in schemes:
        raise FileNotFoundError(f"OGB split folder {folder / split} is missing (schemes there: {schemes})")
    return folder / split

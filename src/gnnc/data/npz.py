"""Save and load any gnnc graph as a pickle-free ``.npz`` archive.

Loading reads plain arrays only (``npz_members``: declared sizes checked
before allocating, zip's CRC-32 checked), checks node counts against
``gnnc.data.limits`` and turns anything malformed into a ValueError naming
the file.

The archive keeps node types and counts, canonical relations in order, each
relation's local (src, dst) in user edge order, node / edge features (whole
graph or per type, any dtype) and the type-indexed parameters
``ntype_data`` / ``etype_data``. Loading uses ``allow_pickle=False``. The
loaded graph has DGL's type order; an archive written in another order (by
gnnc before it followed DGL's) has its per-type rows moved to it by name.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..graph import Graph, heterograph
from ..graph.type_order import type_rows
from .limits import check_count
from .npz_members import read_npz

FORMAT = "gnnc-graph-v1"
# Tensors whose dtype numpy lacks (bfloat16, float8) travel as same-size integers.
_RAW_INTS = {1: torch.int8, 2: torch.int16}


def save_npz(g: Graph, path) -> None:
    """Write ``g`` to ``path`` (exactly that name; no suffix is added)."""
    arrays = {
        "format": np.array(FORMAT),
        "ntypes": np.array(g.ntypes, dtype=str),
        "ntype_counts": np.array([g.num_nodes(t) for t in g.ntypes], dtype=np.int64),
        "etypes": np.array(g.canonical_etypes, dtype=str).reshape(-1, 3),
    }
    for r, key in enumerate(g.canonical_etypes):
        src, dst = g.find_edges(key)
        arrays[f"src_{r}"], arrays[f"dst_{r}"] = _to_numpy(src), _to_numpy(dst)
    kinds, types, keys, dtypes = [], [], [], []
    for j, (kind, t, key, value) in enumerate(_features(g)):
        kinds.append(kind)
        types.append(t)
        keys.append(key)
        dtypes.append(str(value.dtype).removeprefix("torch."))
        arrays[f"feat_{j}"] = _to_numpy(value, f"{kind} feature {key!r}")
    arrays["feat_kind"] = np.array(kinds, dtype=str)
    arrays["feat_type"] = np.array(types, dtype=np.int64)
    arrays["feat_key"] = np.array(keys, dtype=str)
    arrays["feat_dtype"] = np.array(dtypes, dtype=str)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def load_npz(path) -> Graph:
    """Read a graph written by ``save_npz`` (on the CPU).

    FileNotFoundError for a missing file; ValueError naming the file for
    anything that is not such an archive.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"graph archive {path} does not exist")
    try:
        return _read(_Entries(path, read_npz(path)))
    except (KeyError, TypeError, IndexError, RuntimeError) as err:
        raise ValueError(f"{path}: not a consistent gnnc graph archive ({type(err).__name__}: {err})") from None
    except ValueError as err:
        if str(path) in str(err):
            raise
        raise ValueError(f"{path}: not a consistent gnnc graph archive ({err})") from None


class _Entries:
    """Archive members with errors that name the file and the entry."""

    def __init__(self, path: Path, arrays: dict):
        self.path, self.arrays = path, arrays

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.arrays:
            raise ValueError(f"{self.path}: not a gnnc graph archive (entry {name!r} is missing)")
        return self.arrays[name]


def _read(entries: _Entries) -> Graph:
    if str(entries["format"]) != FORMAT:
        raise ValueError(f"{entries.path}: format {str(entries['format'])!r}, expected {FORMAT!r}")
    ntypes = entries["ntypes"].tolist()
    counts = [
        check_count(n, "nodes", f"{entries.path}, entry 'ntype_counts'")
        for n in np.atleast_1d(entries["ntype_counts"]).tolist()
    ]
    etypes = [tuple(k) for k in entries["etypes"].tolist()]
    relations = {
        key: (torch.from_numpy(entries[f"src_{r}"]), torch.from_numpy(entries[f"dst_{r}"]))
        for r, key in enumerate(etypes)
    }
    g = heterograph(relations, num_nodes=dict(zip(ntypes, counts)))
    if g.canonical_etypes != sorted(etypes):
        raise ValueError(f"{entries.path}: relations {etypes} do not rebuild (a relation is listed twice)")
    edge_counts = [relations[key][0].numel() for key in etypes]
    saved = {
        "node": (ntypes, counts),
        "edge": (etypes, edge_counts),
        "ntype_param": (ntypes, [1] * len(ntypes)),
        "etype_param": (etypes, [1] * len(etypes)),
    }
    columns = zip(
        entries["feat_kind"].tolist(),
        entries["feat_type"].tolist(),
        entries["feat_key"].tolist(),
        entries["feat_dtype"].tolist(),
    )
    for j, (kind, t, key, dtype_name) in enumerate(columns):
        value = _to_torch(entries[f"feat_{j}"], dtype_name, entries.path, key)
        _store(g, kind, t, key, value, entries.path, saved)
    return g


def _features(g: Graph):
    """(kind, type index or -1 for whole, key, tensor) for every stored tensor."""
    for kind, store in (("node", g._nstore), ("edge", g._estore)):
        for key in list(store.whole):
            yield kind, -1, key, store.get_whole(key)
        for key, parts in store.typed.items():
            for t, value in parts.items():
                yield kind, t, key, value
    for kind, params in (("ntype_param", g.ntype_data), ("etype_param", g.etype_data)):
        for key, value in params.items():
            yield kind, -1, key, value


def _store(g: Graph, kind: str, t: int, key: str, value: torch.Tensor, path: Path, saved: dict) -> None:
    """Store one archive tensor in ``g``; ``saved[kind]``: the archive's (type names, rows per type)."""
    if kind not in saved:
        raise ValueError(f"{path}: feature {key!r} has unknown kind {kind!r}")
    names, counts = saved[kind]
    if t >= 0 and kind in ("node", "edge"):
        target = g.nodes[names[t]].data if kind == "node" else g.edges[names[t]].data
    else:
        target = {"node": g.ndata_all, "edge": g.edata_all, "ntype_param": g.ntype_data, "etype_param": g.etype_data}[
            kind
        ]
        rows = type_rows(names, counts, g.ntypes if kind in ("node", "ntype_param") else g.canonical_etypes)
        if rows is not None:
            value = value.index_select(0, rows)
    target[key] = value


def _to_numpy(t: torch.Tensor, what: str = "edge ids") -> np.ndarray:
    t = t.detach().cpu()
    try:
        return t.numpy()
    except TypeError:
        if t.element_size() not in _RAW_INTS:
            raise TypeError(f"cannot save {what}: dtype {t.dtype} has no numpy equivalent") from None
        return t.view(_RAW_INTS[t.element_size()]).numpy()


def _to_torch(arr: np.ndarray, dtype_name: str, path: Path, key: str) -> torch.Tensor:
    dtype = getattr(torch, dtype_name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"{path}: feature {key!r} has unknown dtype {dtype_name!r}")
    value = torch.from_numpy(np.ascontiguousarray(arr))
    return value if value.dtype == dtype else value.view(dtype)

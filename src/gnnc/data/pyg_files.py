"""Graphs that PyTorch Geometric users saved with ``torch.save(data, path)``.

Reading uses ``torch.load(..., weights_only=True)``: the unpickler rebuilds
tensors, plain containers and only the allow-listed PyG container classes
(``Data``, ``HeteroData`` and their storages / attribute records), so a file
cannot run arbitrary code while it is read. A file holding any other class
is refused with an error naming it; convert such files where you trust them.
Node counts are checked against ``gnnc.data.limits``, and a tensor whose
rows match neither its store's nodes nor its edges (which ``from_pyg``
would drop as graph-level) is an error unless it has one row. Zip's
CRC-32 of each record is what torch checks; a flipped bit inside tensor data
may still load.
"""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import torch

from ..graph import Graph, from_pyg
from .integrity import check_file
from .limits import check_count

# What torch.load raises for a damaged archive: the zip reader, the unpickler and storage rebuilding.
_DAMAGED = (
    RuntimeError,
    EOFError,
    OSError,
    zipfile.BadZipFile,
    ValueError,
    TypeError,
    KeyError,
    AttributeError,
    IndexError,
    OverflowError,
    MemoryError,
)


def _allowed_classes() -> list:
    from torch_geometric.data import Data, HeteroData, storage
    from torch_geometric.data import data as data_mod
    from torch_geometric.data.feature_store import TensorAttr
    from torch_geometric.data.graph_store import EdgeAttr

    return [
        Data,
        HeteroData,
        data_mod.DataEdgeAttr,
        data_mod.DataTensorAttr,
        TensorAttr,
        EdgeAttr,
        storage.BaseStorage,
        storage.GlobalStorage,
        storage.NodeStorage,
        storage.EdgeStorage,
    ]


def is_torch_file(path) -> bool:
    """Whether ``path`` is a ``torch.save`` archive (a zip with a ``data.pkl`` member)."""
    try:
        with zipfile.ZipFile(path) as z:
            return any(n.endswith("/data.pkl") or n == "data.pkl" for n in z.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def load_pyg_file(path) -> Graph:
    """Graph of a ``torch.save``d PyG ``Data`` or ``HeteroData`` (needs torch_geometric).

    Node / edge tensors keep their names (``x``, ``y``, ``edge_attr``,
    ``train_mask``...) as node / edge features, per type for ``HeteroData``;
    see ``gnnc.graph.from_pyg`` for the mapping. FileNotFoundError for a
    missing file; ValueError naming the file when it is not a torch archive,
    holds a class outside the allow-list, or holds something else than a
    single ``Data`` / ``HeteroData``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"PyG file {path} does not exist")
    check_file(path)
    try:
        allowed = _allowed_classes()
    except ImportError as err:
        raise ImportError(f"reading {path} needs PyTorch Geometric: pip install torch_geometric") from err
    try:
        with torch.serialization.safe_globals(allowed):
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        reason = str(err).split("WeightsUnpickler error: ")[-1].split(". Please use")[0]
        raise ValueError(
            f"{path}: refused to unpickle ({reason}); only tensors and PyG Data / HeteroData may appear in a graph file"
        ) from None
    except FileNotFoundError:
        raise
    except _DAMAGED as err:
        raise ValueError(f"{path}: not a readable torch.save file ({type(err).__name__}: {err})") from None
    from torch_geometric.data import Data, HeteroData

    if not isinstance(obj, (Data, HeteroData)):
        raise ValueError(f"{path}: holds a {type(obj).__name__}, not a PyG Data or HeteroData")
    stores = obj.node_stores if isinstance(obj, HeteroData) else [obj]
    try:
        for store in stores:
            _check_store(store, path)
        return from_pyg(obj)
    except (TypeError, KeyError, IndexError, RuntimeError, AttributeError) as err:
        raise ValueError(f"{path}: not a consistent PyG graph ({type(err).__name__}: {err})") from None
    except ValueError as err:
        if str(path) in str(err):
            raise
        raise ValueError(f"{path}: {err}") from None


def _check_store(store, path: Path) -> None:
    """Node count within the limits; no tensor with several rows that is neither node- nor edge-level."""
    where = f"{path}" if getattr(store, "_key", None) is None else f"{path}, node type {store._key!r}"
    nodes = check_count(store.num_nodes if store.num_nodes is not None else 0, "nodes", where)
    for key, value in store.items():
        if (
            isinstance(value, torch.Tensor)
            and value.dim()
            and key != "edge_index"
            and value.shape[0] > 1
            and not store.is_node_attr(key)
            and not store.is_edge_attr(key)
        ):
            raise ValueError(f"{where}: {key!r} has {value.shape[0]} rows for {nodes} nodes")

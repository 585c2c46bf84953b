"""``load_graph_file``: one entry point for the graph files people download, told apart by content."""

from __future__ import annotations

import zipfile
from pathlib import Path

from ..graph import Graph
from .dgl_files import is_dgl_file, load_dgl_graphs
from .npz import load_npz
from .ogb_raw import is_ogb_folder, load_ogbn
from .pyg_files import is_torch_file, load_pyg_file

FORMATS = (
    "an unzipped OGB node-property folder (raw/ + split/)",
    "a torch.save'd PyG Data / HeteroData",
    "a dgl.save_graphs file",
    "a gnnc save_npz archive",
)


def load_graph_file(path) -> Graph:
    """The graph in ``path``, whichever of the accepted formats it is in.

    - an OGB node-property folder (``load_ogbn``): the graph with ``feat``,
      ``label`` and split masks; call ``load_ogbn`` for ``num_classes`` or
      another split scheme;
    - a PyG ``torch.save`` file (``load_pyg_file``, read with weights_only);
    - a ``dgl.save_graphs`` file holding one graph (``load_dgl_graphs`` gives
      all graphs of a file and its graph labels);
    - a gnnc ``.npz`` archive (``load_npz``).

    The format is recognized by content, not by name. FileNotFoundError for a
    missing path; ValueError naming the path and the accepted formats for
    anything else.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"graph file {path} does not exist")
    if path.is_dir():
        if is_ogb_folder(path):
            return load_ogbn(path).graph
    elif is_dgl_file(path):
        graphs, _ = load_dgl_graphs(path)
        if len(graphs) != 1:
            raise ValueError(f"{path}: a DGL file of {len(graphs)} graphs; use load_dgl_graphs to get them all")
        return graphs[0]
    elif is_torch_file(path):
        return load_pyg_file(path)
    elif _is_npz(path):
        return load_npz(path)
    raise ValueError(f"{path}: unrecognized graph format; accepted: {'; '.join(FORMATS)}")


def _is_npz(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as z:
            return "format.npy" in z.namelist()
    except (zipfile.BadZipFile, OSError):
        return False

"""DGL's citation datasets in DGL's shape: ``CoraGraphDataset()[0]`` is the graph, ``num_classes`` its classes.

As DGL 2.1's ``CitationGraphDataset``: one graph (``len`` 1) with ``ndata`` ``feat`` (float32, rows
normalised to sum 1, all-zero rows kept zero), ``label`` (int64) and the public ``train_mask`` /
``val_mask`` / ``test_mask``; every edge in both directions and the files' self-loops kept (Citeseer's
124), so the counts are DGL's (Cora 10,556 edges, Citeseer 9,228). ``raw_dir`` is gnnc's data folder
(the one holding ``planetoid/``; default by ``gnnc.data.paths``'s rule); missing files are downloaded
there as DGL does (``gnnc.data.download``), present ones are checked against their sha256 on every load.

Where gnnc differs: edges are sorted by (src, dst) where DGL keeps networkx's order; nothing is cached
(``force_reload`` changes nothing); ``reverse_edge=False`` and ``reorder=True`` are refused.
``row_normalize=False`` (a gnnc switch) keeps the files' raw features.
"""

from __future__ import annotations

import torch

from . import downloads
from .dataset import OneGraphDataset
from .paths import data_root
from .planetoid import load_planetoid


def normalize_rows(feat: torch.Tensor) -> torch.Tensor:
    """Each row divided by its sum, as DGL's and Kipf's ``preprocess_features``; rows summing to 0 stay 0."""
    total = feat.sum(1, keepdim=True)
    return feat * torch.where(total == 0, torch.zeros_like(total), total.reciprocal())


class CitationGraphDataset(OneGraphDataset):
    """Planetoid ``name`` ('cora', 'citeseer', 'pubmed') as DGL's class of that name holds it."""

    def __init__(
        self,
        name,
        raw_dir=None,
        force_reload=False,
        verbose=True,
        reverse_edge=True,
        transform=None,
        reorder=False,
        row_normalize=True,
    ):
        name = name.lower()
        if name not in ("cora", "citeseer", "pubmed"):
            raise ValueError(f"CitationGraphDataset takes 'cora', 'citeseer' or 'pubmed', not {name!r}")
        if not reverse_edge or reorder:
            raise NotImplementedError(
                "gnnc's citation datasets hold every edge in both directions in (src, dst) "
                "order: reverse_edge=False and reorder=True are not supported; build "
                "from the graph with gnnc's transforms instead"
            )
        if downloads.is_present(name, raw_dir):
            downloads.verify(name, raw_dir)
        else:
            downloads.download(name, raw_dir, progress=verbose)
        loaded = load_planetoid(name, data_root(raw_dir) / "planetoid", dgl_edges=True)
        g = loaded.graph
        if row_normalize:
            g.ndata["feat"] = normalize_rows(g.ndata["feat"])
        self.name, self.raw_dir, self.verbose = name, raw_dir, verbose
        super().__init__(g, loaded.num_classes, transform)
        if verbose:
            print(
                f"  NumNodes: {g.num_nodes()}\n  NumEdges: {g.num_edges()}\n"
                f"  NumFeats: {g.ndata['feat'].shape[1]}\n  NumClasses: {self.num_classes}\n"
                + "".join(
                    f"  Num{what}Samples: {int(g.ndata[mask].sum())}\n"
                    for what, mask in (("Training", "train_mask"), ("Validation", "val_mask"), ("Test", "test_mask"))
                ),
                end="",
            )


class _OneCitationGraph(CitationGraphDataset):
    """DGL's signature of the per-dataset classes: the name is the class's."""

    NAME = ""

    def __init__(
        self,
        raw_dir=None,
        force_reload=False,
        verbose=True,
        reverse_edge=True,
        transform=None,
        reorder=False,
        row_normalize=True,
    ):
        super().__init__(self.NAME, raw_dir, force_reload, verbose, reverse_edge, transform, reorder, row_normalize)


class CoraGraphDataset(_OneCitationGraph):
    """Cora: 2,708 nodes, 10,556 edges, 1,433 features, 7 classes (140 / 500 / 1,000 split)."""

    NAME = "cora"


class CiteseerGraphDataset(_OneCitationGraph):
    """Citeseer: 3,327 nodes, 9,228 edges, 3,703 features, 6 classes (120 / 500 / 1,000 split)."""

    NAME = "citeseer"


class PubmedGraphDataset(_OneCitationGraph):
    """Pubmed: 19,717 nodes, 88,651 edges, 500 features, 3 classes (60 / 500 / 1,000 split)."""

    NAME = "pubmed"


def processing_note(name: str) -> str | None:
    """What ``load_planetoid`` (``gnnc info``, ``gnnc train``) gives for Planetoid ``name`` and what the DGL
    classes give, for ``gnnc info``; None for other names."""
    classes = {"cora": CoraGraphDataset, "citeseer": CiteseerGraphDataset, "pubmed": PubmedGraphDataset}
    cls = classes.get(name.lower())
    if cls is None:
        return None
    return (
        f"processing: features as the files hold them (not normalised) and no self-loops, as "
        f"gnnc.data.load_planetoid and PyG read them; gnnc.data.{cls.__name__}() (dgl.data.{cls.__name__} "
        f"through the alias) row-normalises the features and keeps the files' self-loops as DGL does "
        f"(row_normalize=False keeps the features raw)"
    )

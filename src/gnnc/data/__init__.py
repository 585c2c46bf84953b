"""Datasets: seeded synthetic replicas of benchmark graphs and loaders for real files.

Synthetic: ``synthetic(name, scale, seed)``, with the published figures in
``DATASETS`` / ``list_datasets()``. Real files: ``load_planetoid`` (Cora,
Citeseer), ``load_kg`` (FB15k-237, WN18RR), ``load_edge_list``, and
``save_npz`` / ``load_npz`` for any gnnc graph; downloaded formats:
``load_ogbn`` (OGB's raw node-property folders), ``load_pyg_file``
(``torch.save``'d PyG graphs), ``load_dgl_graphs`` (``dgl.save_graphs``
files) and ``load_graph_file``, which tells them apart by content. Loaders
read an explicit path or the data folder of ``gnnc.data.paths``'s rule.
Getting the files: ``download(name)`` (``gnnc datasets download NAME``) fetches a dataset of
``SOURCES`` into that folder, checked against its sha256; DGL's classes ``CoraGraphDataset``,
``CiteseerGraphDataset``, ``PubmedGraphDataset`` load (and fetch) Planetoid as DGL does, ``AIFBDataset``,
``MUTAGDataset``, ``BGSDataset``, ``AMDataset`` DGL's RDF heterographs (``gnnc.data.rdf``).
Mini-batch: ``NeighborSampler(g, fanouts, target_ntype).sample(seeds)`` gives per-layer ``Block``s.
"""

from .citation import CitationGraphDataset, CiteseerGraphDataset, CoraGraphDataset, PubmedGraphDataset
from .dataset import Dataset, KGDataset
from .dgl_files import load_dgl_graphs
from .downloads import ChecksumError, DownloadError, download, verify
from .edge_list import load_edge_list
from .files import load_graph_file
from .kg import load_kg
from .neighbor_sampler import Block, NeighborSampler, forward_blocks
from .npz import load_npz, save_npz
from .ogb_raw import load_ogbn
from .planetoid import load_planetoid
from .pyg_files import load_pyg_file
from .rdf import AIFBDataset, AMDataset, BGSDataset, MUTAGDataset, RDFGraphDataset
from .registry import DATASETS, DatasetInfo, get_info, list_datasets
from .safe_pickle import RestrictedUnpickler, safe_load
from .sources import SOURCES
from .synthetic import synthetic

__all__ = [
    "Dataset",
    "KGDataset",
    "DatasetInfo",
    "DATASETS",
    "get_info",
    "list_datasets",
    "synthetic",
    "load_planetoid",
    "load_kg",
    "load_edge_list",
    "save_npz",
    "load_npz",
    "load_ogbn",
    "load_pyg_file",
    "load_dgl_graphs",
    "load_graph_file",
    "RestrictedUnpickler",
    "safe_load",
    "Block",
    "NeighborSampler",
    "forward_blocks",
    "download",
    "verify",
    "DownloadError",
    "ChecksumError",
    "SOURCES",
    "CitationGraphDataset",
    "CoraGraphDataset",
    "CiteseerGraphDataset",
    "PubmedGraphDataset",
    "RDFGraphDataset",
    "AIFBDataset",
    "MUTAGDataset",
    "BGSDataset",
    "AMDataset",
]

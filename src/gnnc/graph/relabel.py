"""DGL's transforms that renumber a graph's nodes: ``compact_graphs`` (only the nodes edges use) and
``reorder_graph`` (a permutation of nodes and edges), with DGL 2.1's orders and features."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph
import torch

from .core import Graph
from .partition import metis_partition_assignment
from .subgraph import ID, first_seen, gathered_graph, node_subgraph

__all__ = ["compact_graphs", "metis_perm", "rcmk_perm", "reorder_graph"]


def _as_tensor(ids, device) -> torch.Tensor:
    return torch.as_tensor(np.asarray(ids) if not isinstance(ids, torch.Tensor) else ids, device=device).long()


def compact_graphs(graphs, always_preserve=None, copy_ndata: bool = True, copy_edata: bool = True):
    """DGL's ``compact_graphs``: each graph with only the nodes its edges use, all graphs over the same
    nodes; a graph given alone gives one graph back, a list a list.

    A node type's kept nodes are ``always_preserve``'s (a dict by type, or the
    ids of the only type) in the order given, then the others in order of first
    appearance over the graphs, relation by relation, sources then
    destinations. ``copy_ndata``: their features and parent ids (``_ID``);
    ``copy_edata``: the edges' features. The graphs must share node types,
    idtype and device."""
    single = isinstance(graphs, Graph)
    graphs = [graphs] if single else list(graphs)
    if not graphs:
        return []
    first = graphs[0]
    if first.is_block:
        raise TypeError("compact_graphs: a block is not compacted (nor is DGL's); compact the graphs it came from")
    for g in graphs[1:]:
        if (g.ntypes, g.idtype, g.device) != (first.ntypes, first.idtype, first.device):
            raise ValueError(
                "compact_graphs: the graphs must have the same node types (in order), idtype and "
                f"device; got {first.ntypes}, {first.idtype}, {first.device} and {g.ntypes}, "
                f"{g.idtype}, {g.device}"
            )
    if always_preserve is not None and not isinstance(always_preserve, Mapping):
        if len(first.ntypes) > 1:
            raise ValueError("compact_graphs: give always_preserve as a dict by node type when there are several")
        always_preserve = {first.ntypes[0]: always_preserve}
    preserve = {first.ntype_id(t): _as_tensor(ids, first.device) for t, ids in (always_preserve or {}).items()}
    arrays = [
        [preserve.get(t, torch.zeros(0, dtype=torch.int64, device=first.device))] for t in range(len(first.ntypes))
    ]
    slots = []  # (graph, relation, end, node type) of every array after the preserved ones
    for i, g in enumerate(graphs):
        for r, key in enumerate(g.canonical_etypes):
            ends = [t.long() for t in g.find_edges(key)]
            for end in (0, 1):
                t = g.ntype_id(key[2 * end])
                arrays[t].append(ends[end])
                slots.append((i, r, end, t))
    kept, renamed = zip(*(first_seen(parts, first.device) for parts in arrays))
    position = [1] * len(first.ntypes)
    local = {}
    for i, r, end, t in slots:
        local[i, r, end] = renamed[t][position[t]]
        position[t] += 1
    out = [_compacted(g, i, list(kept), local, copy_ndata, copy_edata) for i, g in enumerate(graphs)]
    return out[0] if single else out


def _compacted(g: Graph, i: int, kept: list, local: dict, copy_ndata: bool, copy_edata: bool) -> Graph:
    relations = [(local[i, r, 0], local[i, r, 1]) for r in range(len(g.canonical_etypes))]
    out = gathered_graph(g, kept, [None] * len(relations), relations, store_ids=True)
    fresh = Graph(out.index)
    fresh.idtype = g.idtype
    if copy_ndata:
        fresh._nstore = out._nstore
    if copy_edata:
        fresh._estore = out._estore
    return fresh


def rcmk_perm(g: Graph) -> np.ndarray:
    """DGL's ``rcmk_perm``: the nodes in reverse Cuthill-McKee order of ``g``'s adjacency, given to SciPy as
    DGL's CSR holds it (a row's entries in edge-id order, parallel edges apart: the order depends on both)."""
    src, dst = (t.long().cpu().numpy() for t in g.find_edges())
    order = np.argsort(src, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=g.num_nodes()))])
    adj = sp.csr_matrix((np.ones(src.size), dst[order], indptr), shape=(g.num_nodes(),) * 2)
    return scipy.sparse.csgraph.reverse_cuthill_mckee(adj).copy()


def metis_perm(g: Graph, k: int) -> np.ndarray:
    """DGL's ``metis_perm``: the nodes grouped by their METIS partition of ``k`` parts."""
    return np.argsort(metis_partition_assignment(g.to("cpu"), k).numpy(), kind="stable")


def reorder_graph(
    g: Graph, node_permute_algo=None, edge_permute_algo: str = "src", store_ids: bool = True, permute_config=None
) -> Graph:
    """DGL's ``reorder_graph`` of a homogeneous graph: nodes permuted by ``node_permute_algo`` (None: kept;
    ``'rcmk'``, ``'metis'`` with ``permute_config['k']`` parts, ``'custom'`` with
    ``permute_config['nodes_perm']``), then edges by ``edge_permute_algo`` (``'src'`` or ``'dst'``: sorted
    by that end, ``'custom'``: ``permute_config['edges_perm']``, ids of ``g``'s edges). Features follow;
    ``store_ids`` records the old ids as ``_ID``. ``g`` is left as it was."""
    if not g.is_homogeneous:
        raise ValueError("reorder_graph: only a homogeneous graph is reordered (as in DGL)")
    config = permute_config or {}
    if node_permute_algo not in (None, "rcmk", "metis", "custom"):
        raise ValueError(
            f"reorder_graph: node_permute_algo must be None, 'rcmk', 'metis' or 'custom', got {node_permute_algo!r}"
        )
    if edge_permute_algo not in ("src", "dst", "custom"):
        raise ValueError(
            f"reorder_graph: edge_permute_algo must be 'src', 'dst' or 'custom', got {edge_permute_algo!r}"
        )
    for algo, name, needed in (
        (node_permute_algo, "metis", "k"),
        (node_permute_algo, "custom", "nodes_perm"),
        (edge_permute_algo, "custom", "edges_perm"),
    ):
        if algo == name and needed not in config:
            raise ValueError(f"reorder_graph: {name!r} needs permute_config[{needed!r}]")
    n = g.num_nodes()
    if node_permute_algo is None:
        perm = torch.arange(n, device=g.device)
    elif node_permute_algo == "custom":
        perm = _as_tensor(config["nodes_perm"], g.device)
        if perm.numel() != n:
            raise ValueError(f"reorder_graph: nodes_perm has {perm.numel()} ids for {n} nodes")
    else:
        perm = _as_tensor(rcmk_perm(g) if node_permute_algo == "rcmk" else metis_perm(g, config["k"]), g.device)
    eids = (
        node_subgraph(g, perm, store_ids=True).edata[ID].long()
        if node_permute_algo
        else torch.arange(g.num_edges(), device=g.device)
    )
    new_id = torch.empty_like(perm)
    new_id[perm] = torch.arange(n, device=g.device)
    src, dst = (new_id[t.long()] for t in g.find_edges())
    if edge_permute_algo == "custom":
        eids = _as_tensor(config["edges_perm"], g.device)
    else:
        eids = eids[torch.argsort((src if edge_permute_algo == "src" else dst)[eids], stable=True)]
    return gathered_graph(g, [perm], [eids], [(src[eids], dst[eids])], store_ids)

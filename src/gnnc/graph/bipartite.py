"""DGL's constructors of a uni-bipartite graph (one relation from node type ``utype`` to node type ``vtype``)
from a SciPy matrix (``bipartite_from_scipy``) or a networkx graph (``bipartite_from_networkx``)."""

from __future__ import annotations

import numpy as np
import torch

from .convert import _import_networkx, _place_by_id, _stack_attr
from .core import Graph, heterograph

__all__ = ["bipartite_from_networkx", "bipartite_from_scipy"]


def _bipartite(utype, etype, vtype, src, dst, num_src: int, num_dst: int, idtype, device) -> Graph:
    if utype == vtype:
        raise ValueError(f"a bipartite graph joins two node types; utype and vtype are both {utype!r}")
    return heterograph({(utype, etype, vtype): (src, dst)}, {utype: num_src, vtype: num_dst}, device, idtype=idtype)


def bipartite_from_scipy(sp_mat, utype, etype, vtype, eweight_name=None, idtype=None, device=None) -> Graph:
    """A graph of ``sp_mat.shape[0]`` ``utype`` nodes (the rows), ``sp_mat.shape[1]`` ``vtype`` nodes (the
    columns) and an edge from row to column per stored entry, in stored order (as :func:`gnnc.graph.from_scipy`);
    with ``eweight_name``, the entries become that edge feature."""
    import scipy.sparse as sp

    if not sp.issparse(sp_mat):
        raise TypeError(f"bipartite_from_scipy expects a scipy.sparse matrix or array, got {type(sp_mat).__name__}")
    coo = sp_mat.tocoo()
    src = torch.from_numpy(coo.row.astype(np.int64))
    dst = torch.from_numpy(coo.col.astype(np.int64))
    g = _bipartite(utype, etype, vtype, src, dst, sp_mat.shape[0], sp_mat.shape[1], idtype, device)
    if eweight_name is not None:
        g.edata[eweight_name] = torch.from_numpy(np.array(coo.data)).to(g.device)
    return g


def bipartite_from_networkx(
    nx_graph,
    utype,
    etype,
    vtype,
    u_attrs=None,
    e_attrs=None,
    v_attrs=None,
    edge_id_attr_name=None,
    idtype=None,
    device=None,
) -> Graph:
    """A graph from a directed networkx graph whose nodes carry ``bipartite`` 0 (``utype``) or 1 (``vtype``)
    and whose edges go from the 0 side to the 1 side. Each side's nodes are numbered in sorted label order;
    edges come in ``nx_graph.edges`` order, or by their ``edge_id_attr_name`` attribute (each id 0..E-1 once).
    ``u_attrs`` / ``v_attrs`` / ``e_attrs`` name attributes stacked into the two sides' and the edges' features.
    ValueError names a node without a side or an edge against the direction."""
    nx = _import_networkx()
    if not isinstance(nx_graph, nx.Graph) or not nx_graph.is_directed():
        raise ValueError("bipartite_from_networkx expects a directed networkx graph")
    sides = ([], [])
    for label, data in nx_graph.nodes(data=True):
        if data.get("bipartite") not in (0, 1):
            raise ValueError(
                f"bipartite_from_networkx: node {label!r} needs attribute bipartite=0 or 1, "
                f"got {data.get('bipartite')!r}"
            )
        sides[data["bipartite"]].append(label)
    top, bottom = ({label: i for i, label in enumerate(sorted(side))} for side in sides)
    edges = []
    for u, v, data in nx_graph.edges(data=True):
        if u not in top or v not in bottom:
            raise ValueError(
                f"bipartite_from_networkx: edge {(u, v)!r} must go from a bipartite=0 node to a bipartite=1 node"
            )
        edges.append((top[u], bottom[v], data))
    if edge_id_attr_name is not None:
        edges = _place_by_id(edges, edge_id_attr_name)
    src = torch.tensor([u for u, _, _ in edges], dtype=torch.int64)
    dst = torch.tensor([v for _, v, _ in edges], dtype=torch.int64)
    g = _bipartite(utype, etype, vtype, src, dst, len(top), len(bottom), idtype, device)
    for ntype, side, names in ((utype, top, u_attrs), (vtype, bottom, v_attrs)):
        for name in names or ():
            rows = _stack_attr([(label, nx_graph.nodes[label]) for label in side], name, "node")
            g.nodes[ntype].data[name] = rows.to(g.device)
    for name in e_attrs or ():
        g.edata[name] = _stack_attr([((u, v), d) for u, v, d in edges], name, "edge").to(g.device)
    return g

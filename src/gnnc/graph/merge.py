"""``merge``: graphs laid over one another (DGL's ``dgl.merge``), unlike ``batch``, which puts them side by side.

Node ids are shared: node v of every graph is node v of the result. The
result has every graph's edges, relation by relation in the graphs' order
(multi-edges kept), and as many nodes of each type as the largest graph.
Node features are written graph by graph, so a later graph's rows replace
an earlier one's; rows no graph wrote are zeros (the initializer's). Edge
features are those the first graph has, which every graph must have.
"""

from __future__ import annotations

import torch

from .core import Graph, heterograph


def merge(graphs) -> Graph:
    """One graph holding the edges and the node features of ``graphs`` (see the module).

    The graphs need the first graph's node types and relations; a KeyError names
    the one a graph lacks, as does one missing edge feature of the first graph's.
    """
    graphs = list(graphs)
    if not graphs:
        raise ValueError("merge needs at least one graph")
    ref = graphs[0]
    out = heterograph(
        {key: ([], []) for key in ref.canonical_etypes}, {t: 0 for t in ref.ntypes}, ref.device, idtype=ref.idtype
    )
    for key in ref.canonical_etypes:
        ends = [g.find_edges(key) for g in graphs]
        data = {name: torch.cat([g.edges[key].data[name] for g in graphs]) for name in ref.edges[key].data}
        out.add_edges(torch.cat([s for s, _ in ends]), torch.cat([d for _, d in ends]), data or None, etype=key)
    for g in graphs:
        for t in ref.ntypes:
            count = g.num_nodes(t)
            if count > out.num_nodes(t):
                out.add_nodes(count - out.num_nodes(t), ntype=t)
            rows = out.nodes[torch.arange(count, device=out.device), t].data
            for name, value in g.nodes[t].data.items():
                rows[name] = value
    return out

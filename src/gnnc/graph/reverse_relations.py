"""``add_reverse_relations(g)``: a graph whose every relation can also pass messages backwards (ogbn-mag in
Heta: 4 relations + 3 reverses), the graph mini-batch training and the partitioners work on."""

from __future__ import annotations

import numpy as np
import torch

from .core import Graph, heterograph


def add_reverse_relations(g: Graph, prefix: str = "rev_", symmetrize_same_type: bool = True) -> Graph:
    """New graph where messages of every relation can also flow backwards.

    A relation (s, r, d) between two node types gets (d, prefix + r, s) with
    the same edges flipped, unless some relation (d, x, s) already holds
    exactly those flipped edges. A relation within one node type is made
    symmetric in place (its missing flipped edges appended, as Heta's
    ogbn-mag does for 'cites') when ``symmetrize_same_type``; otherwise it is
    treated like the others. Node features, edge features (a flipped edge
    copies its edge's row) and type parameters (a reverse relation copies its
    relation's row) are kept. ValueError when a reverse name is taken.
    """
    ends = {rel: g.find_edges(rel) for rel in g.canonical_etypes}
    codes = {rel: _pair_codes(src, dst, g.num_nodes(rel[2])) for rel, (src, dst) in ends.items()}
    relations, rows = {}, {}  # rows: rel -> (parent relation, edge rows of it)
    for rel, (src, dst) in ends.items():
        relations[rel], rows[rel] = (src, dst), (rel, torch.arange(src.numel()))
    for rel in g.canonical_etypes:
        s, r, d = rel
        src, dst = ends[rel]
        flipped = _pair_codes(dst, src, g.num_nodes(s))
        if any(other[0] == d and other[2] == s and torch.equal(codes[other], flipped) for other in ends):
            continue
        if s == d and symmetrize_same_type:
            missing = _missing_flips(src, dst, g.num_nodes(s))
            relations[rel] = (torch.cat([src, dst[missing]]), torch.cat([dst, src[missing]]))
            rows[rel] = (rel, torch.cat([rows[rel][1], missing]))
            continue
        rev = (d, prefix + r, s)
        if rev in ends:
            raise ValueError(f"cannot add reverse of {rel}: relation {rev} exists and is not its reverse")
        relations[rev], rows[rev] = (dst, src), (rel, torch.arange(src.numel()))
    out = heterograph(relations, num_nodes={t: g.num_nodes(t) for t in g.ntypes})
    _copy_node_features(g, out)
    for rel, (parent, idx) in rows.items():
        for key, value in g.edges[parent].data.items():
            out.edges[rel].data[key] = value.index_select(0, idx)
    for key, value in g.ntype_data.items():
        out.ntype_data[key] = value
    # the new graph's relations are in DGL's sorted order, reverse ones among the others
    parent_row = torch.tensor([g.etype_id(rows[rel][0]) for rel in out.canonical_etypes], dtype=torch.int64)
    for key, value in g.etype_data.items():
        out.etype_data[key] = value.index_select(0, parent_row.to(value.device))
    return out


def _copy_node_features(src: Graph, dst: Graph) -> None:
    whole = list(src.ndata_all)
    for key in whole:
        dst.ndata_all[key] = src.ndata_all[key]
    for t in src.ntypes:
        for key, value in src.nodes[t].data.items():
            if key not in whole:
                dst.nodes[t].data[key] = value


def _pair_codes(src: torch.Tensor, dst: torch.Tensor, num_dst: int) -> torch.Tensor:
    """Sorted ``src * num_dst + dst``: equal exactly when the edge multisets are equal."""
    return torch.sort(src * max(num_dst, 1) + dst).values


def _missing_flips(src: torch.Tensor, dst: torch.Tensor, n: int) -> torch.Tensor:
    """Positions of the edges whose flips make a same-type relation symmetric.

    A pair (u, v) seen c(u, v) times needs c(u, v) - c(v, u) more (v, u)
    edges when positive: the last that many copies of (u, v) are flipped.
    """
    if src.numel() == 0:
        return torch.zeros(0, dtype=torch.int64)
    fwd = (src * n + dst).numpy()
    back = (dst * n + src).numpy()
    keys, counts = np.unique(fwd, return_counts=True)
    pos = np.minimum(np.searchsorted(keys, back), keys.size - 1)
    reverse_count = np.where(keys[pos] == back, counts[pos], 0)
    order = np.argsort(fwd, kind="stable")
    sorted_fwd = fwd[order]
    rank = np.empty(fwd.size, dtype=np.int64)
    rank[order] = np.arange(fwd.size) - np.searchsorted(sorted_fwd, sorted_fwd, side="left")
    return torch.from_numpy(np.nonzero(rank >= reverse_count)[0]).to(torch.int64)

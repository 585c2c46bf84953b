"""DGL's traversal generators: node and edge frontiers of BFS, topological order and DFS.

Each returns a list of int64 tensors, one per frontier, on a graph with one relation (``reverse``: follow
in-edges instead of out-edges). Edges of a node are visited in edge-id order; within a frontier, nodes and
edges are in the order they were reached. DFS from several sources (one per connected component, as DGL
asks) merges their i-th steps into the i-th frontier.
"""

from __future__ import annotations

import torch

from .validate import as_ids, check_range

FORWARD, REVERSE, NONTREE = 0, 1, 2  # DGL's DFS edge labels


def _adjacency(g, reverse: bool, call: str):
    """(ptr, neighbour, eid) lists by node: out-edges (in-edges with ``reverse``) in edge-id order."""
    if len(g.canonical_etypes) != 1:
        raise ValueError(f"{call} supports graphs with one relation; this one has {g.canonical_etypes}")
    src, dst = g.find_edges(g.canonical_etypes[0])
    ends, others = (dst, src) if reverse else (src, dst)
    order = torch.argsort(ends, stable=True)
    ptr = torch.zeros(g.num_nodes() + 1, dtype=torch.int64)
    ptr[1:] = torch.cumsum(torch.bincount(ends, minlength=g.num_nodes()), 0)
    return ptr.tolist(), others[order].tolist(), order.tolist()


def _sources(g, source, call: str) -> list[int]:
    ids = as_ids(torch.as_tensor(source).reshape(-1), f"{call}(source)")
    check_range(ids, g.num_nodes(), f"{call}(source)")
    return ids.tolist()


def _bfs(g, source, reverse: bool, call: str):
    """(node layers, edge layers): layer 0 the sources; edge layer i the edges that reached node layer i+1."""
    ptr, nbr, eid = _adjacency(g, reverse, call)
    layer = list(dict.fromkeys(_sources(g, source, call)))
    seen = set(layer)
    nodes, edges = [layer], []
    while True:
        reached, used = [], []
        for u in layer:
            for i in range(ptr[u], ptr[u + 1]):
                if nbr[i] not in seen:
                    seen.add(nbr[i])
                    reached.append(nbr[i])
                    used.append(eid[i])
        if not reached:
            return nodes, edges
        nodes.append(reached)
        edges.append(used)
        layer = reached


def _tensors(frontiers) -> list[torch.Tensor]:
    return [torch.tensor(f, dtype=torch.int64) for f in frontiers]


def bfs_nodes_generator(g, source, reverse: bool = False) -> list[torch.Tensor]:
    """Nodes by breadth-first layer from ``source`` (a node or several)."""
    return _tensors(_bfs(g, source, reverse, "bfs_nodes_generator")[0])


def bfs_edges_generator(g, source, reverse: bool = False) -> list[torch.Tensor]:
    """Edges by breadth-first layer: frontier i holds the edges that first reached the nodes of layer i+1."""
    return _tensors(_bfs(g, source, reverse, "bfs_edges_generator")[1])


def topological_nodes_generator(g, reverse: bool = False) -> list[torch.Tensor]:
    """Nodes by topological layer: layer 0 those without in-edges (out-edges with ``reverse``), layer i+1 those
    whose last predecessor is in layer i. ValueError on a graph with a cycle."""
    ptr, nbr, _ = _adjacency(g, reverse, "topological_nodes_generator")
    remaining = [0] * g.num_nodes()
    for v in nbr:
        remaining[v] += 1
    layer = [v for v in range(g.num_nodes()) if remaining[v] == 0]
    layers, done = [], 0
    while layer:
        layers.append(layer)
        done += len(layer)
        following = []
        for u in layer:
            for i in range(ptr[u], ptr[u + 1]):
                remaining[nbr[i]] -= 1
                if remaining[nbr[i]] == 0:
                    following.append(nbr[i])
        layer = following
    if done != g.num_nodes():
        raise ValueError("topological_nodes_generator: the graph has a cycle")
    return _tensors(layers)


def dfs_labeled_edges_generator(
    g,
    source,
    reverse: bool = False,
    has_reverse_edge: bool = False,
    has_nontree_edge: bool = False,
    return_labels: bool = True,
):
    """DFS edges from each source, one per step: a tree edge when first taken (FORWARD), again when its end is
    finished (REVERSE, with ``has_reverse_edge``), an edge to a node already reached (NONTREE, with
    ``has_nontree_edge``). Returns (edge frontiers, label frontiers), or the edge frontiers alone."""
    ptr, nbr, eid = _adjacency(g, reverse, "dfs_labeled_edges_generator")
    seen: set = set()
    steps = []
    for s in _sources(g, source, "dfs_labeled_edges_generator"):
        seen.add(s)
        walk, stack = [], [(s, ptr[s], None)]  # (node, next edge position, tree edge into it)
        while stack:
            u, i, into = stack[-1]
            if i == ptr[u + 1]:
                stack.pop()
                if has_reverse_edge and into is not None:
                    walk.append((into, REVERSE))
                continue
            stack[-1] = (u, i + 1, into)
            v = nbr[i]
            if v not in seen:
                seen.add(v)
                walk.append((eid[i], FORWARD))
                stack.append((v, ptr[v], eid[i]))
            elif has_nontree_edge:
                walk.append((eid[i], NONTREE))
        steps.append(walk)
    depth = max((len(w) for w in steps), default=0)
    edges = _tensors([[w[k][0] for w in steps if k < len(w)] for k in range(depth)])
    if not return_labels:
        return edges
    return edges, _tensors([[w[k][1] for w in steps if k < len(w)] for k in range(depth)])


def dfs_edges_generator(g, source, reverse: bool = False) -> list[torch.Tensor]:
    """The tree edges of a DFS from each source, one per step (DGL's ``dfs_edges_generator``)."""
    return dfs_labeled_edges_generator(g, source, reverse, return_labels=False)

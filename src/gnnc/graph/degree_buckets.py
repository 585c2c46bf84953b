"""A block's destinations grouped by in-degree, for running a reduce UDF once per degree (as DGL does)."""

from __future__ import annotations

import torch


class Buckets:
    """Degree buckets of a block, with gathers done once per tensor rather than once per bucket.

    Mailboxes and node rows are gathered for all buckets in one
    ``index_select`` and then ``split``: the backward is one scatter plus
    one concatenation, where per-bucket indexing would zero-fill a full-size
    gradient for every bucket.
    """

    def __init__(self, index, rel, node_lo: int):
        self.list = index.degree_buckets(rel)
        self.nodes = [b.nodes for b in self.list]
        self.edge_order = torch.cat([b.edge_pos.flatten() for b in self.list]) if self.list else None
        self.edge_sizes = [b.edge_pos.numel() for b in self.list]
        self.all_nodes = torch.cat(self.nodes) if self.list else torch.zeros(0, dtype=torch.int64, device=index.device)
        self.local = self.all_nodes - node_lo
        self.node_sizes = [n.numel() for n in self.nodes]

    def mailboxes(self, msgs: dict):
        """(nodes, {k: [n, degree, ...]}) per bucket; none when nothing arrives (as DGL, a reduce UDF is never
        called on nodes without in-edges, so a block without edges has no results)."""
        if self.edge_order is None:
            return
        split = {k: v.index_select(0, self.edge_order).split(self.edge_sizes) for k, v in msgs.items()}
        for i, b in enumerate(self.list):
            yield (
                b.nodes,
                {
                    k: parts[i].view((b.nodes.numel(), b.degree) + tuple(parts[i].shape[1:]))
                    for k, parts in split.items()
                },
            )

    def reader(self, fetch, node_lo: int, by=None):
        """``read(k)[i]``: rows of ``fetch(k)`` for bucket i's nodes (``by`` re-indexes the rows)."""
        cache: dict = {}
        index = self.local if by is None else by(self.all_nodes)

        def read(k):
            if k not in cache:
                cache[k] = fetch(k).index_select(0, index).split(self.node_sizes)
            return cache[k]

        return read

    def assemble(self, parts: dict, num_rows: int, initial=None) -> dict:
        """Per-bucket outputs -> one tensor per key over the block's destinations; elsewhere zeros, or
        ``initial(key, rows, like)`` (the graph's initializer)."""
        result = {}
        for k, vs in parts.items():
            if len(vs) != len(self.nodes):
                raise ValueError(f"reduce function returned {k!r} for some degree buckets but not others")
            rows = {tuple(v.shape[1:]) for v in vs}
            if len(rows) > 1:
                by_degree = {b.degree: tuple(v.shape) for b, v in zip(self.list, vs)}
                raise ValueError(
                    f"reduce function returned {k!r} of shapes {by_degree} by in-degree: a reduce must "
                    "drop the mailbox's degree dimension (dim 1), e.g. mailbox['m'].sum(1)"
                )
            v = torch.cat(vs)
            rows = v.new_zeros((num_rows,) + tuple(v.shape[1:])) if initial is None else initial(k, num_rows, v)
            result[k] = rows.index_copy(0, self.local, v)
        return result

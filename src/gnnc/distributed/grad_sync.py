"""``GradSync``: the dense gradients of a model summed over ranks in one all-reduce (DDP's), optionally leaving
rank-private rows out."""

from __future__ import annotations

import torch

from .collectives import Comm


class GradSync:
    """Sums the dense gradients of ``params`` over ranks, in one all-reduce.

    ``synced_rows[id(p)]`` restricts parameter ``p`` to those rows (first
    dimension): its other rows are used by one rank at most and keep their
    local gradient. A gradient that is None on every rank stays None (so
    Adam skips the parameter, as in single process); where some rank has
    one, ranks without get the sum as well.
    """

    def __init__(self, comm: Comm, params, synced_rows: dict | None = None):
        self.comm, self.params = comm, list(params)
        synced_rows = synced_rows or {}
        self.rows = [None if id(p) not in synced_rows else synced_rows[id(p)].to(p.device) for p in self.params]
        dtypes = {p.dtype for p in self.params}
        if len(dtypes) > 1:
            raise ValueError(f"GradSync: parameters of several dtypes {sorted(map(str, dtypes))}")

    def __call__(self) -> None:
        if self.comm.world == 1 or not self.params:
            return
        pieces, present = [], []
        for p, rows in zip(self.params, self.rows):
            g = p.grad if p.grad is not None else torch.zeros_like(p)
            pieces.append((g if rows is None else g.index_select(0, rows)).reshape(-1))
            present.append(float(p.grad is not None))
        buf = torch.cat(pieces + [torch.tensor(present, dtype=self.params[0].dtype, device=self.params[0].device)])
        self.comm.all_reduce(buf)
        counts = buf[len(buf) - len(self.params) :]
        offset = 0
        for k, (p, rows) in enumerate(zip(self.params, self.rows)):
            summed = buf[offset : offset + pieces[k].numel()]
            offset += pieces[k].numel()
            if counts[k] == 0:
                p.grad = None
            elif rows is None:
                p.grad = summed.view_as(p).clone()
            else:
                g = p.grad.clone() if p.grad is not None else torch.zeros_like(p)
                g[rows] = summed.view(rows.numel(), *p.shape[1:])
                p.grad = g

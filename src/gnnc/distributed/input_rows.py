"""``InputRows``: every first-layer input row kept with one owner rank; the rows a rank samples fetched from
their owners, and their gradients sent back."""

from __future__ import annotations

import torch
from torch import nn

from ..nn.embedding import FetchedRows
from .cache import add_sparse_grad
from .collectives import Comm


class InputRows(nn.Module):
    """First-layer inputs of the nodes a rank samples, each row stored by one rank.

    For node type ``t``: ``local_row[t][i]`` is the row of node ``i`` (a
    type-local parent id) in this rank's store ``features[t]`` (read-only) or
    ``tables[t]`` (learnable, sparse gradients), or -1 when the row lives on
    rank ``owner[t][i]``. ``learnable`` lists the learnable types (their
    tables live with the rows' owners). ``remote_types`` (the same on every
    rank) are the types any rank may fetch from another; they fix the
    exchanges, which every rank joins on every ``fetch`` and ``push_grads``.
    ``projections`` map each type to ``hidden`` as ``TypedEmbedding`` does.

    ``fetch(ids)`` returns the rows of global ids; remote learnable rows are
    leaves whose gradients ``push_grads()`` (after backward) sends to their
    owners, where they join the table's sparse gradient. The stores, the
    ownership maps and the ids stay on the host; the rows ``fetch`` returns
    (and those served to other ranks) lie on ``device``, the projections'.

    With a ``FeatureCache`` over this rank's stores (``attach_cache``; its
    node types are the keys of ``stores()``, its rows the store rows) every
    read of a stored row, for this rank's batch or to serve another rank,
    goes through the cache, and gradients received for cached learnable rows
    join the cache's table; call ``write_back()`` after every optimizer step
    so the stores stay current. Values and updates are those without cache.
    """

    def __init__(
        self,
        comm: Comm,
        ntypes: list,
        counts: dict,
        projections: nn.ModuleDict,
        features: dict,
        tables: dict,
        local_row: dict,
        owner: dict,
        remote_types: list,
        learnable: list,
    ):
        super().__init__()
        self.comm, self.ntypes = comm, list(ntypes)
        offsets = [0]
        for t in self.ntypes:
            offsets.append(offsets[-1] + int(counts[t]))
        self.register_buffer("offsets", torch.tensor(offsets, dtype=torch.int64), persistent=False)
        self.projections = projections
        self.hidden_dim = next(iter(projections.values())).out_features
        self.features = features
        self.tables = nn.ModuleDict(tables)
        self.local_row, self.owner, self.remote_types = local_row, owner, list(remote_types)
        self._learnable_types = set(learnable)
        self._pending: list = []  # (owner rank, type, leaf rows) of remote learnable rows fetched
        self._served: list = []  # per requesting rank: [(type, local rows)] of learnable rows served
        self.cache = None

    def stores(self) -> dict:
        """``{type: rows}`` of the non-empty stores of this rank: read-only features and learnable table weights."""
        out = dict(self.features)
        out.update({t: table.weight for t, table in self.tables.items()})
        return {t: out[t] for t in self.ntypes if t in out and out[t].shape[0] > 0}

    def attach_cache(self, cache) -> None:
        """Serve reads of stored rows from ``cache`` (a ``FeatureCache`` over ``stores()``)."""
        unknown = set(cache.ntypes) - set(self.stores())
        if unknown:
            raise ValueError(
                f"InputRows.attach_cache: the cache holds types {sorted(unknown)} that rank "
                f"{self.comm.rank} does not store"
            )
        self.cache = cache

    @property
    def device(self) -> torch.device:
        """Where fetched rows go: the device of the projections (which the trainer moves)."""
        return self.projections[self.ntypes[0]].weight.device

    def _cached(self, t: str) -> bool:
        return self.cache is not None and t in self.cache.ntypes

    def write_back(self) -> None:
        """Copy cached learnable rows updated since the last call (and their optimizer state) to the stores."""
        if self.cache is not None:
            self.cache.write_back()

    def sparse_parameters(self) -> list:
        return [table.weight for table in self.tables.values()]

    def dense_parameters(self) -> list:
        return list(self.projections.parameters())

    def _width(self, t: str) -> int:
        return self.projections[t].in_features

    def _split_by_type(self, gids: torch.Tensor):
        types = torch.searchsorted(self.offsets[1:], gids, right=True)
        for i, t in enumerate(self.ntypes):
            pos = torch.nonzero(types == i).squeeze(1)
            if pos.numel():
                yield i, t, pos, gids.index_select(0, pos) - self.offsets[i]

    def _local_rows(self, t: str, rows: torch.Tensor) -> torch.Tensor:
        """Stored rows on ``device``; a table lookup records the sparse gradient."""
        if self._cached(t):
            return self.cache.fetch(t, rows).to(self.device)
        if t in self.tables:
            return self.tables[t](rows).to(self.device)
        return self.features[t].index_select(0, rows).to(self.device)

    def _served_rows(self, t: str, rows: torch.Tensor) -> torch.Tensor:
        if self._cached(t):
            return self.cache.fetch(t, rows).detach().to(self.device)
        store = self.tables[t].weight if t in self.tables else self.features[t]
        return store.detach().index_select(0, rows).to(self.device)

    def fetch(self, gids: torch.Tensor) -> FetchedRows:
        """Raw rows of global ids ``gids`` (any device), on ``device``: local ones looked up, the rest
        fetched from owners."""
        gids = gids.to(self.offsets.device, torch.int64)
        world = self.comm.world
        parts, asked = [], [[] for _ in range(world)]  # asked[q]: (type index, positions, local ids)
        for i, t, pos, ids in self._split_by_type(gids):
            if t not in self.local_row:
                raise ValueError(
                    f"rank {self.comm.rank} holds no {t!r} inputs, but {pos.numel()} {t!r} nodes were sampled"
                )
            rows = self.local_row[t].index_select(0, ids)
            here = rows >= 0
            if bool(here.any()):
                parts.append((i, pos[here], self._local_rows(t, rows[here])))
            if not bool(here.all()):
                if t not in self.remote_types:
                    raise ValueError(
                        f"rank {self.comm.rank}: {t!r} rows are missing locally and {t!r} is not a remote type"
                    )
                owners = self.owner[t].index_select(0, ids[~here])
                for q in range(world):
                    mine = owners == q
                    if bool(mine.any()):
                        asked[q].append((i, pos[~here][mine], ids[~here][mine]))
        if self.remote_types:
            parts += self._fetch_remote(asked)
        return FetchedRows(gids.numel(), [(i, pos.to(self.device), rows) for i, pos, rows in parts])

    def _fetch_remote(self, asked: list) -> list:
        """One exchange of requested global ids, one of flattened rows; records learnable leaves."""
        world = self.comm.world
        requests = [
            torch.cat([ids + self.offsets[i] for i, _, ids in asked[q]])
            if asked[q]
            else torch.zeros(0, dtype=torch.int64)
            for q in range(world)
        ]
        incoming = self.comm.exchange(requests)
        replies, self._served = [], []
        for gids in incoming:
            pieces, served = [], []
            for _, t, _, ids in self._split_by_type(gids):
                rows = self.local_row[t].index_select(0, ids)
                if bool((rows < 0).any()):
                    raise ValueError(f"rank {self.comm.rank} was asked for {t!r} rows it does not store")
                pieces.append(self._served_rows(t, rows).reshape(-1))
                if t in self.tables:
                    served.append((t, rows))
            replies.append(torch.cat(pieces) if pieces else self._empty())
            self._served.append(served)
        sizes = [sum(ids.numel() * self._width(self.ntypes[i]) for i, _, ids in asked[q]) for q in range(world)]
        answers = self.comm.exchange(replies, incoming_rows=sizes)
        parts, self._pending = [], []
        for q in range(world):
            flat = answers[q].split([ids.numel() * self._width(self.ntypes[i]) for i, _, ids in asked[q]])
            for (i, pos, ids), values in zip(asked[q], flat):
                t = self.ntypes[i]
                rows = values.view(ids.numel(), self._width(t))
                if t in self._learnable_types:
                    rows = rows.clone().requires_grad_(True)
                    self._pending.append((q, t, rows))
                parts.append((i, pos, rows))
        return parts

    def _empty(self) -> torch.Tensor:
        return self.projections[self.ntypes[0]].weight.new_zeros(0)

    def push_grads(self) -> None:
        """Send the gradients of fetched learnable rows to their owners; add the ones received here."""
        if not any(t in self._learnable_types for t in self.remote_types):
            return
        world = self.comm.world
        outgoing = [[] for _ in range(world)]
        for q, t, rows in self._pending:
            grad = rows.grad if rows.grad is not None else torch.zeros_like(rows)
            outgoing[q].append(grad.reshape(-1))
        outgoing = [torch.cat(g) if g else self._empty() for g in outgoing]
        sizes = [sum(rows.numel() * self._width(t) for t, rows in served) for served in self._served]
        incoming = self.comm.exchange(outgoing, incoming_rows=sizes)
        for served, flat in zip(self._served, incoming):
            for (t, rows), values in zip(served, flat.split([r.numel() * self._width(t) for t, r in served])):
                self._add_sparse_grad(t, rows, values.view(rows.numel(), self._width(t)))
        self._pending, self._served = [], []

    def _add_sparse_grad(self, t: str, rows: torch.Tensor, values: torch.Tensor) -> None:
        if self._cached(t):
            self.cache.accumulate_grad(t, rows, values)
        else:
            add_sparse_grad(self.tables[t].weight, rows, values)

    def project(self, fetched: FetchedRows) -> torch.Tensor:
        """``[num_nodes, hidden]``: each type's rows through its own linear layer (as TypedEmbedding)."""
        out = self.projections[self.ntypes[0]].weight.new_zeros((fetched.num_nodes, self.hidden_dim))
        for i, pos, rows in fetched.parts:
            out = out.index_copy(0, pos, self.projections[self.ntypes[i]](rows))
        return out

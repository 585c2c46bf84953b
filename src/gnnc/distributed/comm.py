"""Instrumented collectives for distributed training over ``torch.distributed``.

``Comm`` wraps one process group (gloo, or NCCL on the worker's GPU) or,
with ``Comm.local()``, a single process with no group at all (every
collective is then the identity). ``Comm.device`` is where the group's
collectives take tensors (the current GPU under NCCL, else the CPU); a
tensor lying elsewhere is copied there and its result copied back, so
callers may hand over host tensors (row counts, ids, losses) under NCCL.
Each collective counts the bytes this rank sends and receives and files
them, with wall time, under the current step and stage (``with
comm.meter.stage("forward"):``; ``comm.meter.end_step()`` closes a step; on
a GPU a stage waits for its kernels before reading the clock). Byte model,
payload only:

* ``exchange`` (all-to-all of rows, used for fetches and replies): exactly
  the rows that leave for / arrive from other ranks, plus the row counts
  when the receiver does not know them;
* ``all_reduce`` of ``n`` bytes: a ring all-reduce, ``2 (p - 1) / p * n``
  sent and received;
* ``all_gather`` of ``n`` bytes per rank: ``(p - 1) * n`` sent and received;
* ``reduce`` to / ``broadcast`` from a root of ``n`` bytes: a tree,
  ``(p - 1) * n`` bytes on the wire: each other rank sends (reduce) or
  receives (broadcast) ``n``, the root the rest.

A collective that fails because a peer died, or that does not complete
within the timeout (under gloo the whole collective, not only each wait
for a chunk: a slow link that still trickles bytes counts), raises
``PeerFailure`` naming this
rank and its machine (hostname, torchrun's node rank), the collective, the
stage, the step and, when gloo's error gives a peer's address, that peer's
machine, so a dead worker or a lost link makes the others exit with a clear
error instead of hanging. (Under NCCL a collective returns before it
completes; NCCL's watchdog then ends a process whose collective failed or
timed out, with NCCL's own message.)

``init_from_env`` joins the group torchrun describes, on the worker's
device (``worker_device``: ``cuda:LOCAL_RANK`` for CUDA) with its backend
(``backend_for``: NCCL for CUDA, gloo otherwise);
``leave`` ends a worker process once its work is done (see there why it
does not return).

``sum_over_ranks`` is the autograd-aware sum of partial aggregations:
forward, every rank gets the sum of all ranks' tensors; backward, the
gradient of each rank's input is the sum over ranks of the gradients of the
output, so gradients reach the ranks that produced the partials.
``sum_to_root`` is its designated-worker form (Heta's Algorithm 1) for
results only rank 0 goes on with: forward, a reduce to rank 0; backward,
rank 0's gradient is broadcast to every rank. Backward collectives are
chained through a token (``Comm.tie``) so that every rank runs them in the
same order.

Two protocols both trainers build on: ``GradSync`` sums dense gradients over
ranks (DDP's all-reduce, optionally leaving rank-private rows out), and
``InputRows`` keeps every first-layer input row with one owner rank, fetches
the rows a rank samples from their owners and sends their gradients back.
"""

from __future__ import annotations

import datetime
import math
import os
import re
import socket
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import nn

from ..nn.embedding import FetchedRows
from .cache import add_sparse_grad


class PeerFailure(RuntimeError):
    """A collective failed: a peer process died or did not answer in time."""


# ------------------------------------------------------------------ metering
@dataclass
class StepRecord:
    """Bytes sent / received and seconds of one step, by stage."""

    sent: dict = field(default_factory=dict)
    received: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)

    def add(self, record: dict, stage: str, value: float) -> None:
        record[stage] = record.get(stage, 0) + value


class Meter:
    """Per-step, per-stage bytes and seconds of one rank.

    What is counted between two ``end_step`` calls is one step; what runs
    inside ``outside_steps`` (evaluation, reporting) goes to ``self.outside``.
    On a CUDA ``device`` a stage's time includes the kernels it queued.
    """

    def __init__(self, device="cpu"):
        self.device = torch.device(device)
        self.steps: list[StepRecord] = []
        self.current = StepRecord()
        self.outside = StepRecord()
        self.stage_name = "setup"
        self._in_steps = True

    @contextmanager
    def stage(self, name: str):
        """File the bytes and the wall time of the block under stage ``name``."""
        previous, self.stage_name = self.stage_name, name
        start = time.perf_counter()
        try:
            yield
        finally:
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            record = self.current if self._in_steps else self.outside
            record.add(record.seconds, name, time.perf_counter() - start)
            self.stage_name = previous

    @contextmanager
    def outside_steps(self):
        """Count what runs inside this block apart from the training steps."""
        previous, self._in_steps = self._in_steps, False
        try:
            yield
        finally:
            self._in_steps = previous

    def count(self, sent: float, received: float) -> None:
        record = self.current if self._in_steps else self.outside
        record.add(record.sent, self.stage_name, sent)
        record.add(record.received, self.stage_name, received)

    def end_step(self) -> StepRecord:
        """Close the current step and return its record."""
        done, self.current = self.current, StepRecord()
        self.steps.append(done)
        return done

    def summary(self, first: int = 0) -> dict:
        """Over steps ``first``...: their number, mean bytes sent / received per step and total seconds,
        by stage."""
        steps = self.steps[first:]
        n = max(len(steps), 1)
        stages = sorted({s for r in steps for s in (*r.sent, *r.received)})
        return {
            "steps": len(steps),
            "sent_per_step": {s: sum(r.sent.get(s, 0) for r in steps) / n for s in stages},
            "received_per_step": {s: sum(r.received.get(s, 0) for r in steps) / n for s in stages},
            "seconds": {s: sum(r.seconds.get(s, 0.0) for r in steps) for s in {k for r in steps for k in r.seconds}},
        }


# ---------------------------------------------------------------- collectives
class Comm:
    """Instrumented collectives of one process group; see the module docstring.

    ``timeout_s`` is the group's collective timeout (reported in errors).
    """

    def __init__(self, group=None, timeout_s: float | None = None, *, _local: bool = False):
        if _local:
            self.rank, self.world = 0, 1
            self.device = torch.device("cpu")
        else:
            if not dist.is_initialized():
                raise RuntimeError(
                    "Comm: torch.distributed is not initialized; call init_from_env() first "
                    "or use Comm.local() for one process"
                )
            self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
            self.device = collective_device(dist.get_backend(group))
        self.group = group
        self.timeout_s = timeout_s
        self.meter = Meter(self.device)
        self._token: torch.Tensor | None = None

    @classmethod
    def local(cls) -> Comm:
        """A one-rank Comm without torch.distributed: every collective is the identity."""
        return cls(_local=True)

    # ------------------------------------------------------------- helpers
    def _run(self, what: str, fn):
        """Run collective ``fn`` (issued with ``async_op=True``; returns its work) to completion. With gloo
        the whole collective must end within ``timeout_s``: gloo's own timeout bounds each wait for a
        chunk, so a link that trickles bytes (a slow link, not a dead one) would never trip it."""
        try:
            work = fn()
            if self.timeout_s and self.device.type == "cpu":
                work.wait(timeout=datetime.timedelta(seconds=self.timeout_s))
            else:
                work.wait()
        except RuntimeError as err:
            limit = f"within {self.timeout_s:g} s" if self.timeout_s else "in time"
            raise PeerFailure(
                f"rank {self.rank} of {self.world} on {machine_name()}: {what} in stage {self.meter.stage_name!r} "
                f"of step {len(self.meter.steps)} failed: a peer process died or did not answer {limit}"
                f"{peer_machines(str(err))} ({err})"
            ) from err

    def _staged(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` on ``self.device``: itself, or a copy when it lies elsewhere."""
        return t if t.device == self.device else t.to(self.device)

    def _in_place(self, what: str, t: torch.Tensor, collective) -> torch.Tensor:
        """Run the in-place ``collective`` on ``t`` (on a staged copy, copied back, when ``t`` lies
        elsewhere); returns ``t``."""
        wire = self._staged(t)
        self._run(what, lambda: collective(wire))
        if wire is not t:
            t.copy_(wire)
        return t

    # --------------------------------------------------------- collectives
    def barrier(self) -> None:
        """Wait until every rank has reached this call (no payload)."""
        if self.world > 1:
            self._run("barrier", lambda: dist.barrier(group=self.group, async_op=True))

    def all_reduce(self, t: torch.Tensor, op: str = "sum") -> torch.Tensor:
        """In-place all-reduce (``op``: 'sum' or 'max') of a contiguous tensor; returns it."""
        ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}
        if op not in ops:
            raise ValueError(f"all_reduce: op must be one of {list(ops)}, got {op!r}")
        if self.world == 1:
            return t
        if not t.is_contiguous():
            raise ValueError("all_reduce: the tensor must be contiguous (it is reduced in place)")
        nbytes = t.numel() * t.element_size()
        ring = 2 * (self.world - 1) / self.world * nbytes
        self._in_place(
            f"all_reduce({op}) of {tuple(t.shape)}",
            t,
            lambda wire: dist.all_reduce(wire, ops[op], group=self.group, async_op=True),
        )
        self.meter.count(ring, ring)
        return t

    def all_gather(self, t: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's ``t`` (same shape and dtype on all ranks), in rank order."""
        if self.world == 1:
            return [t]
        wire = self._staged(t.contiguous())
        out = [torch.empty_like(wire) for _ in range(self.world)]
        self._run(
            f"all_gather of {tuple(t.shape)}", lambda: dist.all_gather(out, wire, group=self.group, async_op=True)
        )
        nbytes = (self.world - 1) * t.numel() * t.element_size()
        self.meter.count(nbytes, nbytes)
        return [o.to(t.device) for o in out]

    def reduce(self, t: torch.Tensor, root: int = 0) -> torch.Tensor:
        """In-place sum of a contiguous tensor into rank ``root``'s copy; returns it (other ranks' copies
        are left undefined)."""
        if self.world == 1:
            return t
        nbytes = t.numel() * t.element_size()
        self._in_place(
            f"reduce of {tuple(t.shape)} to rank {root}",
            t,
            lambda wire: dist.reduce(wire, root, group=self.group, async_op=True),
        )
        self.meter.count(0 if self.rank == root else nbytes, (self.world - 1) * nbytes if self.rank == root else 0)
        return t

    def broadcast(self, t: torch.Tensor, root: int = 0) -> torch.Tensor:
        """In-place: every rank's ``t`` becomes rank ``root``'s; returns it."""
        if self.world == 1:
            return t
        nbytes = t.numel() * t.element_size()
        self._in_place(
            f"broadcast of {tuple(t.shape)} from rank {root}",
            t,
            lambda wire: dist.broadcast(wire, root, group=self.group, async_op=True),
        )
        self.meter.count((self.world - 1) * nbytes if self.rank == root else 0, 0 if self.rank == root else nbytes)
        return t

    def exchange(self, outgoing: list[torch.Tensor], incoming_rows: list[int] | None = None) -> list[torch.Tensor]:
        """All-to-all: ``outgoing[q]`` goes to rank ``q``; returns what each rank sent here.

        Tensors share dtype and trailing shape on every rank, and a device on
        this rank, where the received ones are returned; their first
        dimensions may differ. ``incoming_rows[q]`` (when the receiver
        already knows it) saves the exchange of row counts.
        """
        if len(outgoing) != self.world:
            raise ValueError(f"exchange: {len(outgoing)} outgoing tensors for {self.world} ranks")
        if self.world == 1:
            return [outgoing[0]]
        rows_out = [int(t.shape[0]) for t in outgoing]
        if incoming_rows is None:
            counts = torch.tensor(rows_out, dtype=torch.int64, device=self.device)
            got = torch.empty_like(counts)
            self._run(
                "exchange of row counts", lambda: dist.all_to_all_single(got, counts, group=self.group, async_op=True)
            )
            self.meter.count(8 * (self.world - 1), 8 * (self.world - 1))
            incoming_rows = got.tolist()
        send = self._staged(torch.cat([t.contiguous() for t in outgoing]))
        recv = send.new_empty((sum(incoming_rows), *send.shape[1:]))
        self._run(
            f"exchange of {sum(rows_out)} rows of shape {tuple(send.shape[1:])}",
            lambda: dist.all_to_all_single(recv, send, incoming_rows, rows_out, group=self.group, async_op=True),
        )
        row_bytes = math.prod(send.shape[1:]) * send.element_size()
        self.meter.count(
            row_bytes * (sum(rows_out) - rows_out[self.rank]),
            row_bytes * (sum(incoming_rows) - incoming_rows[self.rank]),
        )
        return list(recv.to(outgoing[0].device).split(incoming_rows))

    # ------------------------------------------------ autograd-aware sums
    def sum_over_ranks(self, x: torch.Tensor) -> torch.Tensor:
        """Sum of ``x`` over ranks on every rank; differentiable (see the module docstring).

        With grad mode on, the call joins this step's backward chain whether
        or not ``x`` requires grad (so every rank runs the same backward
        collectives); call ``tie(loss)`` on the loss before ``backward``.
        """
        if self.world == 1:
            return x
        if not torch.is_grad_enabled():
            return self.all_reduce(x.detach().clone())
        y, self._token = _SumOverRanks.apply(x, self._chain(x), self)
        return y

    def sum_to_root(self, x: torch.Tensor) -> torch.Tensor:
        """Rank 0 gets the sum of ``x`` over ranks; differentiable (see the module docstring).

        Other ranks get their own ``x`` back as a placeholder: whatever they
        compute from it must not reach their loss (backpropagate zero there),
        because the gradient their ``x`` receives is rank 0's, broadcast.
        """
        if self.world == 1:
            return x
        if not torch.is_grad_enabled():
            return self._reduce_or_keep(x)
        y, self._token = _SumToRoot.apply(x, self._chain(x), self)
        return y

    def _reduce_or_keep(self, x: torch.Tensor) -> torch.Tensor:
        total = self.reduce(x.detach().clone())
        return total if self.rank == 0 else x.detach().clone()

    def _chain(self, x: torch.Tensor) -> torch.Tensor:
        if self._token is None:
            self._token = torch.zeros((), dtype=x.dtype, device=x.device, requires_grad=True)
        return self._token

    def tie(self, loss: torch.Tensor) -> torch.Tensor:
        """``loss`` joined to the backward chain of this step's ``sum_over_ranks`` calls.

        Backward then runs their all-reduces last-to-first on every rank.
        Resets the chain for the next step.
        """
        token, self._token = self._token, None
        return loss if token is None else loss + 0.0 * token


class _SumOverRanks(torch.autograd.Function):
    """y = sum over ranks of x; dx = sum over ranks of dy. ``token`` orders the backward all-reduces."""

    @staticmethod
    def forward(ctx, x, token, comm):
        ctx.comm = comm
        return comm.all_reduce(x.detach().clone()), token.detach().clone()

    @staticmethod
    def backward(ctx, grad_y, grad_token):
        return ctx.comm.all_reduce(grad_y.contiguous().clone()), grad_token, None


class _SumToRoot(torch.autograd.Function):
    """y = sum over ranks of x on rank 0 (x elsewhere); dx = rank 0's dy on every rank."""

    @staticmethod
    def forward(ctx, x, token, comm):
        ctx.comm = comm
        return comm._reduce_or_keep(x), token.detach().clone()

    @staticmethod
    def backward(ctx, grad_y, grad_token):
        return ctx.comm.broadcast(grad_y.contiguous().clone()), grad_token, None


# ------------------------------------------------------------------ startup
def backend_for(device) -> str:
    """The process-group backend for collectives on tensors of ``device``: 'nccl' for CUDA, else 'gloo'."""
    return "nccl" if torch.device(device).type == "cuda" else "gloo"


def collective_device(backend: str) -> torch.device:
    """Where a group of ``backend`` takes its tensors: the current GPU for 'nccl', else the CPU."""
    return torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")


def worker_device(requested, local_rank: int, cuda_devices: int) -> torch.device:
    """The device a worker computes on: for a CUDA ``requested``, GPU ``local_rank`` of its machine (one
    GPU per worker; ``cuda_devices`` GPUs there), else the CPU.

    ValueError for another device type; RuntimeError when the machine has
    no GPU ``local_rank``.
    """
    kind = torch.device(requested).type
    if kind == "cpu":
        return torch.device("cpu")
    if kind != "cuda":
        raise ValueError(f"distributed workers compute on 'cpu' or 'cuda', not {str(requested)!r}")
    if local_rank >= cuda_devices:
        raise RuntimeError(
            f"the worker of LOCAL_RANK {local_rank} needs GPU cuda:{local_rank}, but this machine "
            f"has {cuda_devices} CUDA device(s); start at most {cuda_devices} workers per machine "
            "(--nproc)"
        )
    return torch.device("cuda", local_rank)


def machine_name() -> str:
    """This process's machine as errors name it: hostname, and torchrun's node rank when torchrun started it."""
    node = os.environ.get("GROUP_RANK")
    return socket.gethostname() + (f" (node {node})" if node is not None else "")


_ADDRESS = re.compile(r"\[?(\d{1,3}(?:\.\d{1,3}){3})\]?:\d+")


def peer_machines(error: str) -> str:
    """'; peer <host> (<address>)' for each address:port a gloo error names, other than this machine's."""
    mine = {"127.0.0.1"}
    try:
        mine |= set(socket.gethostbyname_ex(socket.gethostname())[2])
    except OSError:
        pass
    found = []
    for address in dict.fromkeys(_ADDRESS.findall(error)):
        if address in mine:
            continue
        try:
            host = socket.gethostbyaddr(address)[0]
        except OSError:
            host = "unknown host"
        found.append(f"; peer {host} ({address})")
    return "".join(found)


def init_from_env(timeout_s: float = 300.0, device="cpu", join_timeout_s: float = 300.0) -> Comm:
    """Join the process group torchrun describes (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT).

    ``device`` 'cuda' makes GPU LOCAL_RANK of this machine (``worker_device``)
    the current device and joins with NCCL bound to it; 'cpu' joins with
    gloo. The returned ``Comm.device`` names the device, where the trainers
    launched by ``gnnc train --dist`` then compute. Joining waits up to
    ``join_timeout_s`` seconds for the other ranks (they may still be
    starting), every collective after that ``timeout_s`` seconds: it must
    exceed the longest time a rank spends between two collectives the
    others wait in (an epoch's evaluation, a checkpoint write). On a host
    with several interfaces, GLOO_SOCKET_IFNAME names the one gloo uses.
    """
    missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing:
        raise RuntimeError(
            f"init_from_env: environment variables {missing} are not set; "
            "start workers with torchrun (gnnc train --dist)"
        )
    device = worker_device(device, int(os.environ.get("LOCAL_RANK", 0)), torch.cuda.device_count())
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend_for(device),
        timeout=datetime.timedelta(seconds=max(timeout_s, join_timeout_s)),
        device_id=device if device.type == "cuda" else None,
    )
    dist.distributed_c10d._set_pg_timeout(datetime.timedelta(seconds=timeout_s))
    return Comm(timeout_s=timeout_s)


def leave(comm: Comm, code: int = 0):
    """End this worker process with exit status ``code`` once every rank is done; does not return.

    A barrier first (no rank still waits for this one's sockets), then the
    process group is destroyed, stdout and stderr are flushed and the
    process exits at once (``os._exit``): no interpreter finalization and no
    C++ static destructors run. Returning instead is unsafe: once
    ``torch._dynamo`` is imported after the group was created (creating a
    ``torch.optim`` optimizer does that), ``destroy_process_group`` no longer
    ends the gloo threads, which then run on through interpreter
    finalization and exit-time destructors.
    """
    comm.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# ------------------------------------------------------------ gradient sums
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


# ------------------------------------------------------------- input rows
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

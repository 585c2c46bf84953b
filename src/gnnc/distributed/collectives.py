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
a GPU a stage waits for its kernels before reading the clock), with its
rounds: the message latencies it waits for one after another. Byte model,
payload only, and rounds:

* ``exchange`` (all-to-all of rows, used for fetches and replies): exactly
  the rows that leave for / arrive from other ranks, plus the row counts
  when the receiver does not know them; one round (every pair at once),
  two with the row counts;
* ``all_reduce`` of ``n`` bytes: a ring all-reduce, ``2 (p - 1) / p * n``
  sent and received, ``2 (p - 1)`` rounds;
* ``all_gather`` of ``n`` bytes per rank: ``(p - 1) * n`` sent and received,
  a ring of ``p - 1`` rounds;
* ``reduce`` to / ``broadcast`` from a root of ``n`` bytes: a tree,
  ``(p - 1) * n`` bytes on the wire: each other rank sends (reduce) or
  receives (broadcast) ``n``, the root the rest; ``ceil(log2 p)`` rounds.

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

``sum_over_ranks`` is the autograd-aware sum of partial aggregations:
forward, every rank gets the sum of all ranks' tensors; backward, the
gradient of each rank's input is the sum over ranks of the gradients of the
output, so gradients reach the ranks that produced the partials.
``sum_to_root`` is its designated-worker form (Heta's Algorithm 1) for
results only rank 0 goes on with: forward, a reduce to rank 0; backward,
rank 0's gradient is broadcast to every rank. Backward collectives are
chained through a token (``Comm.tie``) so that every rank runs them in the
same order.

Joining a group: ``gnnc.distributed.process_group``; the protocols built on
these collectives: ``grad_sync`` and ``input_rows``.
"""

from __future__ import annotations

import datetime
import math

import torch
import torch.distributed as dist

from .devices import collective_device
from .meter import Meter
from .peer_failure import PeerFailure, machine_name, peer_machines


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

    def _tree_rounds(self) -> int:
        """Rounds of a tree reduce or broadcast over this group: ``ceil(log2 p)``."""
        return math.ceil(math.log2(self.world))

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
        self.meter.count(ring, ring, 2 * (self.world - 1))
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
        self.meter.count(nbytes, nbytes, self.world - 1)
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
        self.meter.count(
            0 if self.rank == root else nbytes,
            (self.world - 1) * nbytes if self.rank == root else 0,
            self._tree_rounds(),
        )
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
        self.meter.count(
            (self.world - 1) * nbytes if self.rank == root else 0,
            0 if self.rank == root else nbytes,
            self._tree_rounds(),
        )
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
            self.meter.count(8 * (self.world - 1), 8 * (self.world - 1), 1)
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
            1,
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

"""A worker's life in the process group torchrun describes: ``init_from_env`` joins it on the worker's device
with its backend and returns the ``Comm``; ``leave`` ends the worker process once its work is done (see there
why it does not return)."""

from __future__ import annotations

import datetime
import os
import sys

import torch
import torch.distributed as dist

from .collectives import Comm
from .devices import backend_for, worker_device


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

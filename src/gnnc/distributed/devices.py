"""Where a worker computes (``worker_device``: GPU LOCAL_RANK of its machine for CUDA, else the CPU) and what
its collectives use (``backend_for``: NCCL for CUDA, gloo otherwise; ``collective_device``: where a group of
that backend takes its tensors)."""

from __future__ import annotations

import torch


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

"""What machine a run used (the GPU too with ``--device cuda``), and its measured copy bandwidth and matmul
rate on the run's device."""

from __future__ import annotations

import hashlib
import os
import platform
from pathlib import Path

import torch

from . import devices

REPO = Path(__file__).resolve().parents[2]
COPY_FLOATS = 64 * 2**20  # a 256 MiB buffer: far beyond any cache
MATMUL_N = 2048


def cpu_model() -> str:
    """The ``model name`` line of ``/proc/cpuinfo`` (else what ``platform`` says)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit(repo: Path = REPO) -> str | None:
    """The commit checked out in ``repo``, read from ``.git`` without running git; None if unknown.

    In a worktree ``.git`` is a file naming the worktree's git dir, whose
    ``commondir`` holds the refs it shares with the main checkout.
    """
    git = common = repo / ".git"
    try:
        if git.is_file():
            git = (repo / git.read_text().split(":", 1)[1].strip()).resolve()
            common = (git / (git / "commondir").read_text().strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[len("ref: ") :]
        for loose in (git / ref, common / ref):
            if loose.exists():
                return loose.read_text().strip()
        for line in (common / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    except OSError:
        return None
    return None


def gnnc_source_digest() -> str:
    """SHA-256 of the imported gnnc package's Python files (relative paths and contents): what a run
    measured, also from an uncommitted tree or an installed copy, where the git commit cannot tell."""
    import gnnc

    root = Path(gnnc.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def gpu_info() -> dict:
    """The GPU a cuda run uses: its name, memory, CUDA version and triton's version."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {
        "gpu": props.name,
        "gpu_memory_gib": props.total_memory / 2**30,
        "cuda": torch.version.cuda,
        "triton": triton_version,
    }


def machine_info(device: str = "cpu") -> dict:
    """CPU model, cores, threads, library versions, git commit, the device timed (with ``gpu_info`` on cuda)
    and the backend gnnc.compile picks there by default (``compiled_backend``)."""
    import gnnc
    from gnnc import backend

    try:
        import torch_geometric
        import torch_geometric.typing as pyg_typing

        pyg = torch_geometric.__version__
        # PyG falls back to plain torch without these compiled extensions.
        extensions = {
            "pyg_lib": pyg_typing.WITH_PYG_LIB,
            "torch_scatter": pyg_typing.WITH_TORCH_SCATTER,
            "torch_sparse": pyg_typing.WITH_TORCH_SPARSE,
        }
    except ImportError:
        pyg, extensions = None, {}
    try:
        import numba  # gnnc.compile's CPU kernels when present

        numba_version = numba.__version__
    except ImportError:
        numba_version = None
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "gnnc": gnnc.__version__,
        "torch_geometric": pyg,
        "pyg_extensions": extensions,
        "numba": numba_version,
        "git_commit": git_commit(),
        "gnnc_source": gnnc_source_digest(),
        "platform": platform.platform(),
        "device": device,
        "compiled_backend": backend.resolve("auto", device),
        **(gpu_info() if device == "cuda" else {}),
    }


def _best_seconds(fn, repeats: int, clock) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        fn()
        best = min(best, clock() - start)
    return best


def _copy_bytes_per_s(device: str, clock) -> float:
    src = torch.empty(COPY_FLOATS, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    return 2 * COPY_FLOATS * 4 / _best_seconds(lambda: dst.copy_(src), 5, clock)


def _matmul_flops_per_s(device: str, clock) -> float:
    a, b = torch.randn(MATMUL_N, MATMUL_N, device=device), torch.randn(MATMUL_N, MATMUL_N, device=device)
    return 2 * MATMUL_N**3 / _best_seconds(lambda: a @ b, 3, clock)


def measure_rates(device: str = "cpu") -> dict:
    """Achievable memory bandwidth (large copy: bytes read + written per second) and fp32 matmul FLOP/s on
    ``device``, timed on its meter's clock (on cuda: after the GPU's queued work)."""
    clock = devices.meter(device).now
    return {
        "copy_bytes_per_s": _copy_bytes_per_s(device, clock),
        "matmul_flops_per_s": _matmul_flops_per_s(device, clock),
    }

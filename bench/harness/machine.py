"""What machine a run used, and its measured copy bandwidth and matmul rate."""
from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import torch

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
        ref = head[len("ref: "):]
        for loose in (git / ref, common / ref):
            if loose.exists():
                return loose.read_text().strip()
        for line in (common / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    except OSError:
        return None
    return None


def machine_info() -> dict:
    """CPU model, cores, threads, library versions and git commit."""
    import gnnc

    try:
        import torch_geometric
        import torch_geometric.typing as pyg_typing
        pyg = torch_geometric.__version__
        # PyG falls back to plain torch without these compiled extensions.
        extensions = {"pyg_lib": pyg_typing.WITH_PYG_LIB, "torch_scatter": pyg_typing.WITH_TORCH_SCATTER,
                      "torch_sparse": pyg_typing.WITH_TORCH_SPARSE}
    except ImportError:
        pyg, extensions = None, {}
    try:
        import numba  # gnnc.compile's CPU kernels when present
        numba_version = numba.__version__
    except ImportError:
        numba_version = None
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(), "torch": torch.__version__, "gnnc": gnnc.__version__,
            "torch_geometric": pyg, "pyg_extensions": extensions, "numba": numba_version,
            "git_commit": git_commit(),
            "platform": platform.platform()}


def _best_seconds(fn, repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _copy_bytes_per_s() -> float:
    src = torch.empty(COPY_FLOATS, dtype=torch.float32).uniform_()
    dst = torch.empty_like(src)
    return 2 * COPY_FLOATS * 4 / _best_seconds(lambda: dst.copy_(src), 5)


def _matmul_flops_per_s() -> float:
    a, b = torch.randn(MATMUL_N, MATMUL_N), torch.randn(MATMUL_N, MATMUL_N)
    return 2 * MATMUL_N**3 / _best_seconds(lambda: a @ b, 3)


def measure_rates() -> dict:
    """Achievable memory bandwidth (large copy: bytes read + written per second) and fp32 matmul FLOP/s."""
    return {"copy_bytes_per_s": _copy_bytes_per_s(), "matmul_flops_per_s": _matmul_flops_per_s()}

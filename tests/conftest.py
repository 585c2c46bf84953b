"""Shared pytest configuration: float64 reference checks and data location."""
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    """Real datasets: $GNNC_DATA, else ../shared/data beside the repository."""
    return Path(os.environ.get("GNNC_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture
def shared_data() -> Path:
    root = data_dir()
    if not root.is_dir():
        pytest.skip(f"real datasets not found at {root} (set GNNC_DATA)")
    return root


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Tiny test tensors run faster on one thread, and a busy 2-core CI box does not thrash."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)

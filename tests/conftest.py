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

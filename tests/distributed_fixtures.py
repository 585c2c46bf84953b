"""Shared pieces of the multi-process tests: the tiny mag replica and a free localhost port."""
from __future__ import annotations

import socket

import pytest

from gnnc.data import synthetic


@pytest.fixture(scope="module")
def dataset():
    """The mag replica at scale 0.001 with 8-wide features (a few hundred papers)."""
    return synthetic("mag", scale=0.001, seed=0, feat_dim=8)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

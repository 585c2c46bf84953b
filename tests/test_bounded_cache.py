"""``BoundedCache`` alone, and the compiler's caches past their bounds: evicted entries are rebuilt and the
numbers stay eager's."""

import threading
import warnings

import pytest
import torch

import gnnc.function as fn
from gnnc.bounded_cache import BoundedCache
from gnnc.compiler import driver
from gnnc.failures import FallbackWarning
from tests.graphs import random_homograph


def test_keeps_the_most_recently_used():
    cache = BoundedCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # now "b" is the oldest
    cache.put("c", 3)
    assert len(cache) == 2
    assert cache.get("b") is None
    assert cache.items() == [("a", 1), ("c", 3)]
    assert cache.setdefault("a", 9) == 1
    assert cache.setdefault("d", 4) == 4
    assert cache.values() == [1, 4]
    assert cache.pop("a") == 1 and cache.pop("a") is None
    cache.clear()
    assert len(cache) == 0


def test_refuses_no_room():
    with pytest.raises(ValueError, match="at least one"):
        BoundedCache(0)


def test_threads_never_exceed_the_bound():
    cache = BoundedCache(8)

    def fill(start):
        for i in range(start, start + 2000):
            cache.put(i, i)
            assert cache.setdefault(i % 13, i % 13) is not None

    threads = [threading.Thread(target=fill, args=(k * 10_000,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 8
    assert all(key == value for key, value in cache.items())


def _scaled(k):
    def message(edges):
        return {"m": edges.src["h"] * k}

    return message


def _norm_if_present(edges):
    m = edges.src["h"]
    if "norm" in edges.data:  # traced per feature schema
        m = m * edges.data["norm"]
    return {"m": m}


def _graph(norm):
    g = random_homograph(12, 40, 0)
    g.ndata["h"] = torch.randn(12, 3, dtype=torch.float64)
    if norm:
        g.edata["norm"] = torch.rand(g.num_edges(), 1, dtype=torch.float64)
    return g


def _update(g, message, compiled):
    g.update_all(message, fn.sum("m", "out"), compile=compiled)
    return g.ndata.pop("out")


def test_compiler_caches_past_their_bounds(monkeypatch):
    monkeypatch.setattr(driver, "_CACHE", BoundedCache(2))
    monkeypatch.setattr(driver, "_TRACES", BoundedCache(2))
    g = _graph(norm=False)
    messages = [_scaled(k) for k in (1.0, 2.0, 3.0)]  # one code, three closure values: three traces
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        for _ in range(2):
            for message in messages:
                torch.testing.assert_close(_update(g, message, True), _update(g, message, False), rtol=0, atol=0)
                assert len(driver._CACHE) <= 2 and len(driver._TRACES) <= 2


def test_specializations_past_their_bound(monkeypatch):
    monkeypatch.setattr(driver, "_SPECIALIZED", BoundedCache(1))
    monkeypatch.setattr(driver, "_VARIANTS", 1)  # the graph with norms evicts the one without, and back
    graphs = [_graph(norm=False), _graph(norm=True)]
    for _ in range(2):
        for g in graphs:
            torch.testing.assert_close(
                _update(g, _norm_if_present, True), _update(g, _norm_if_present, False), rtol=0, atol=0
            )
    (variants,) = driver._SPECIALIZED.values()
    assert len(variants) == 1

"""Vectorized building blocks of the synthetic generators.

Destinations follow a clipped Zipf law over a random "popularity" order of
the nodes, which gives a power-law in-degree; sources are mildly skewed the
same way. Nothing here loops over nodes or edges in Python.
"""

from __future__ import annotations

import numpy as np

DST_EXPONENT = 0.7  # Zipf exponent a: in-degree tail P(d) ~ d^-(1 + 1/a), about d^-2.4
SRC_EXPONENT = 0.3  # mild out-degree skew
HUB_FRACTION = 0.1  # expected in-degree of a hub is capped at max(N/10, 2 * mean degree)
CHUNK = 1 << 23  # edges per source-sampling chunk: bounds the float64 temporaries


def apportion(total: int, weights, minimum: int = 0) -> np.ndarray:
    """Integers proportional to ``weights`` summing exactly to ``total``.

    Largest-remainder rounding, then every entry is raised to ``minimum`` by
    taking from the largest entries; needs ``total >= minimum * len(weights)``.
    """
    w = np.asarray(weights, dtype=np.float64)
    if total < minimum * w.size:
        raise ValueError(f"cannot give {w.size} parts at least {minimum} each out of {total}")
    share = total * w / w.sum()
    counts = np.floor(share).astype(np.int64)
    short = total - int(counts.sum())
    if short:
        counts[np.argsort(counts - share, kind="stable")[:short]] += 1
    while (counts < minimum).any():
        counts[np.argmin(counts)] += 1
        counts[np.argmax(counts)] -= 1
    return counts


class Popularity:
    """Zipf popularity over the ``n`` nodes of one type, in a random order.

    ``order[k]`` is the node of rank k, drawn with weight ``(k + 1) ** -DST_EXPONENT``.
    The weights are computed once per node type and shared by its relations.
    """

    def __init__(self, rng: np.random.Generator, n: int):
        self.order = rng.permutation(n)
        self.p = np.arange(1, n + 1, dtype=np.float64) ** -DST_EXPONENT
        self.p /= self.p.sum()
        self.cdf = np.cumsum(self.p)

    def probabilities(self, num_edges: int) -> tuple[np.ndarray, np.ndarray]:
        """(p, cdf) for ``num_edges`` draws: no node expects more than
        ``max(HUB_FRACTION * n, 2 * num_edges / n)`` of them."""
        n = self.p.size
        cap = max(HUB_FRACTION * n / max(num_edges, 1), 2.0 / n)
        if self.p[0] <= cap:  # p is decreasing: nothing to clip
            return self.p, self.cdf
        p = np.minimum(self.p, cap)
        p /= p.sum()
        return p, np.cumsum(p)

    def sample(self, rng: np.random.Generator, num_edges: int) -> np.ndarray:
        """``num_edges`` destination ids, sorted.

        Dense draws use one multinomial over the ranks (O(n)); sparse ones
        search the CDF (O(E log n)), so many small relations stay cheap.
        """
        n = self.p.size
        p, cdf = self.probabilities(num_edges)
        if num_edges >= n:
            per_node = np.empty(n, dtype=np.int64)
            per_node[self.order] = rng.multinomial(num_edges, p)
            return np.repeat(np.arange(n, dtype=np.int64), per_node)
        # Sorted keys make the binary searches cache-friendly; the draws' order is irrelevant.
        ranks = np.searchsorted(cdf, np.sort(rng.random(num_edges)) * cdf[-1], side="right")
        np.minimum(ranks, n - 1, out=ranks)  # guards rounding at the top of the CDF
        return np.sort(self.order[ranks])


def sample_sources(rng: np.random.Generator, activity: np.ndarray, num_edges: int, progress=None) -> np.ndarray:
    """``num_edges`` source ids with a mild Zipf skew over the order ``activity``.

    Rank ``floor(n * u ** (1 / (1 - SRC_EXPONENT)))`` for uniform u has density
    proportional to ``rank ** -SRC_EXPONENT``.
    """
    n = activity.size
    out = np.empty(num_edges, dtype=np.int64)
    power = 1.0 / (1.0 - SRC_EXPONENT)
    for lo in range(0, num_edges, CHUNK):
        hi = min(lo + CHUNK, num_edges)
        u = rng.random(hi - lo)
        np.power(u, power, out=u)
        u *= n
        ranks = u.astype(np.int64)
        np.minimum(ranks, n - 1, out=ranks)
        out[lo:hi] = activity[ranks]
        if progress is not None:
            progress.update(hi - lo)
    return out

"""Argument checks, feature broadcasting, edge chunking and element-wise op rules
shared by the PyTorch primitives."""

from __future__ import annotations

import math
import operator

import torch

from ...bounded_cache import BoundedCache

# Edge chunks hold about this many message elements; small enough to stay in
# CPU caches (measured fastest at 2**20 on a 2-core AVX-512 machine).
CPU_CHUNK_ELEMENTS = 1 << 20
# Accelerators want fewer, larger launches.
DEVICE_CHUNK_ELEMENTS = 1 << 24

REDUCES = ("sum", "mean", "max", "min")
BINARY_OPS = ("add", "sub", "mul", "div")


def check_float(name: str, t: torch.Tensor, min_dim: int = 1) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"{name} must be floating point, got {t.dtype}")
    if t.dim() < min_dim:
        raise ValueError(f"{name} needs at least {min_dim} dim(s) (leading dim = rows), got shape {tuple(t.shape)}")


def check_same(device: torch.device, dtype: torch.dtype, **tensors) -> None:
    for name, t in tensors.items():
        if t is None:
            continue
        if t.device != device:
            raise ValueError(f"{name} is on {t.device}, expected {device}")
        if t.dtype != dtype:
            raise TypeError(f"{name} has dtype {t.dtype}, expected {dtype}")


def check_index(name: str, index: torch.Tensor, bound: int, device: torch.device, length: int | None = None) -> None:
    """1-D int64 on ``device`` with entries in [0, bound) (and ``length`` entries if given)."""
    if not isinstance(index, torch.Tensor):
        raise TypeError(f"{name} must be a 1-D int64 tensor, got {type(index).__name__}")
    if index.dtype != torch.int64 or index.dim() != 1:
        raise TypeError(f"{name} must be a 1-D int64 tensor, got {index.dtype} of shape {tuple(index.shape)}")
    if index.device != device:
        raise ValueError(f"{name} is on {index.device}, expected {device}")
    if length is not None and index.numel() != length:
        raise ValueError(f"{name} has {index.numel()} entries, expected {length}")
    if index.numel():
        lo, hi = index_range(index)
        if lo < 0 or hi >= bound:
            raise IndexError(f"{name} has entries in [{lo}, {hi}], outside [0, {bound})")


# identity -> (index, (min, max)); holding the index keeps its storage (and so the key's
# data pointer) from being reused while the entry exists.
RANGE_CACHE_SIZE = 32
_ranges: BoundedCache[tuple] = BoundedCache(RANGE_CACHE_SIZE)


def index_range(index: torch.Tensor) -> tuple[int, int]:
    """(min, max) of a non-empty index tensor, remembered per tensor identity: a plan passes
    the same graph index tensors every call, and a device sync per check adds up."""
    key = tensor_identity(index)
    hit = None if key is None else _ranges.get(key)
    if hit is not None:
        return hit[1]
    lo, hi = (int(v) for v in torch.aminmax(index))
    if key is not None:
        _ranges.put(key, (index, (lo, hi)))
    return lo, hi


def clear_index_ranges() -> None:
    _ranges.clear()


def tensor_identity(t: torch.Tensor):
    """A key that changes whenever ``t``'s contents may have changed through torch
    (data pointer, shape, strides, version counter); None for inference tensors (no version)."""
    if t.is_inference():
        return None
    return (t.device, t.data_ptr(), tuple(t.shape), t.stride(), t._version)


def check_count(name: str, n) -> int:
    """``n`` as a Python int (anything with __index__ but bool), which must be >= 0."""
    try:
        count = operator.index(n)
    except TypeError:
        count = None
    if isinstance(n, bool) or count is None or count < 0:
        raise ValueError(f"{name} must be a non-negative int, got {n!r}")
    return count


def check_choice(name: str, value: str, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def broadcast_shape(shape_a, shape_b) -> tuple[int, ...]:
    """Right-aligned broadcast of two shapes (``torch.broadcast_shapes``' rule, without its
    per-call overhead, which dominated primitives on small graphs); ValueError if they do not."""
    ndim = max(len(shape_a), len(shape_b))
    out = []
    for a, b in zip(pad_features(shape_a, ndim), pad_features(shape_b, ndim)):
        if a != b and a != 1 and b != 1:
            raise ValueError(f"shapes {tuple(shape_a)} and {tuple(shape_b)} do not broadcast")
        out.append(b if a == 1 else a)
    return tuple(out)


def broadcast_features(name_a: str, shape_a, name_b: str, shape_b) -> tuple[int, ...]:
    """Right-aligned (DGL-style) broadcast of two feature shapes."""
    try:
        return broadcast_shape(shape_a, shape_b)
    except ValueError:
        raise ValueError(
            f"feature shapes of {name_a} {tuple(shape_a)} and {name_b} {tuple(shape_b)} "
            "do not broadcast (right-aligned)"
        ) from None


def pad_features(shape, ndim: int) -> tuple[int, ...]:
    """Feature shape left-padded with 1s to ``ndim`` dims."""
    return (1,) * (ndim - len(shape)) + tuple(shape)


def sum_to(t: torch.Tensor, feat) -> torch.Tensor:
    """Sum ``t`` of shape [rows, *B] down to [rows, *feat] over the broadcast dims."""
    feat = tuple(feat)
    full = tuple(t.shape[1:])
    if full == feat:
        return t
    return t.sum_to_size((t.shape[0],) + pad_features(feat, len(full))).reshape((t.shape[0],) + feat)


def flat_positions(feat, full, device) -> torch.Tensor:
    """For each position of broadcast shape ``full``, its flat offset inside one row of ``feat``."""
    feat = tuple(feat)
    return torch.arange(math.prod(feat), device=device).reshape(pad_features(feat, len(full))).expand(tuple(full))


def chunk_rows(num_edges: int, row_elements: int, device: torch.device, chunk: int | None):
    """(start, end) edge ranges: ``chunk`` edges each, or sized by the element budget."""
    if chunk is None:
        budget = CPU_CHUNK_ELEMENTS if device.type == "cpu" else DEVICE_CHUNK_ELEMENTS
        chunk = max(1, budget // max(1, row_elements))
    elif isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be a positive int (edges per chunk), got {chunk!r}")
    return [(s, min(s + chunk, num_edges)) for s in range(0, num_edges, chunk)]


def rows_view(index: torch.Tensor, ndim: int) -> torch.Tensor:
    """Index [c] viewed as [c, 1, ..., 1] with ``ndim`` dims in total."""
    return index.view((-1,) + (1,) * (ndim - 1))


def binary(op: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    return a / b


def binary_grad_lhs(op: str, g: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """d(a op b)/da applied to ``g`` (broadcast shape, not yet reduced)."""
    if op in ("add", "sub"):
        return g
    if op == "mul":
        return g * b
    return g / b


def binary_grad_rhs(op: str, g: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """d(a op b)/db applied to ``g`` (broadcast shape, not yet reduced)."""
    if op == "add":
        return g
    if op == "sub":
        return -g
    if op == "mul":
        return g * a
    return -g * a / (b * b)


def lift(t: torch.Tensor, ndim: int) -> torch.Tensor:
    """[rows, *feat] viewed as [rows, 1, ..., 1, *feat] with ``ndim`` feature dims, for right-aligned ops."""
    return t.reshape((t.shape[0],) + pad_features(t.shape[1:], ndim))


def head_layout(weight_feat, full) -> int:
    """Number ``k`` of leading dims of ``full`` that are heads: the smallest k such that
    the weight (feature shape ``weight_feat``) is constant over ``full[k:]``."""
    padded = pad_features(weight_feat, len(full))
    k = len(full)
    while k > 0 and padded[k - 1] == 1:
        k -= 1
    return k


def as_heads(t: torch.Tensor, full, k: int) -> torch.Tensor:
    """Features [rows, *feat] broadcast to ``full`` and viewed as [rows, H, F] (H = prod(full[:k]))."""
    full = tuple(full)
    rows = t.shape[0]
    return lift(t, len(full)).expand((rows,) + full).reshape(rows, math.prod(full[:k]), math.prod(full[k:]))


def weight_as_heads(w: torch.Tensor, full, k: int) -> torch.Tensor:
    """Weight [E, *wf], constant over ``full[k:]``, as [E, H] with H = prod(full[:k])."""
    full = tuple(full)
    rows = w.shape[0]
    heads = pad_features(w.shape[1:], len(full))[:k]
    return w.reshape((rows,) + heads).expand((rows,) + full[:k]).reshape(rows, math.prod(full[:k]))


def heads_to_weight(grad: torch.Tensor, weight_shape, full, k: int) -> torch.Tensor:
    """Inverse of ``weight_as_heads`` for gradients: [E, H] summed back to ``weight_shape``."""
    full = tuple(full)
    heads = pad_features(tuple(weight_shape[1:]), len(full))[:k]
    return sum_to(grad.reshape((grad.shape[0],) + full[:k]), heads).reshape(weight_shape)

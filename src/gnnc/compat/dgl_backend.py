"""``dgl.backend`` under gnnc's DGL alias: DGL's tensor helpers for its PyTorch backend, gnnc's own code.

These are the helpers DGL's own tests reach through ``from dgl.backend import *`` (their ``backend as F``
module), with the semantics of DGL 2.1's PyTorch backend: devices are ``torch.device``s, dtypes are
torch's, and every function takes and returns torch tensors. Only the helpers those tests use are here. Like DGL's, the
module's names ``sum``, ``max``, ``min`` and ``bool`` shadow Python's built-ins.
"""

from __future__ import annotations

import contextlib
import numbers

import torch

backend_name = "pytorch"

bfloat16, float16, float32, float64 = torch.bfloat16, torch.float16, torch.float32, torch.float64
uint8, int8, int16, int32, int64 = torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64
bool = torch.bool

no_grad = torch.no_grad


def cpu() -> torch.device:
    return torch.device("cpu")


def tensor(data, dtype=None) -> torch.Tensor:
    """A tensor of ``data``: a number becomes a 1-element tensor, a list of 0-d tensors is stacked, and a
    tensor stays on its device."""
    if isinstance(data, numbers.Number):
        data = [data]
    if isinstance(data, list) and data and isinstance(data[0], torch.Tensor) and data[0].dim() == 0:
        data = torch.stack(data)
    return torch.as_tensor(data, dtype=dtype)


def as_scalar(x: torch.Tensor):
    return x.item()


def shape(x: torch.Tensor) -> torch.Size:
    return x.shape


def dtype(x: torch.Tensor) -> torch.dtype:
    return x.dtype


def ndim(x: torch.Tensor) -> int:
    return x.dim()


def context(x: torch.Tensor) -> torch.device:
    return x.device


def astype(x: torch.Tensor, ty: torch.dtype) -> torch.Tensor:
    return x.to(ty)


def asnumpy(x: torch.Tensor):
    """A numpy copy, detached, on the host; a sparse tensor comes back dense."""
    if x.is_sparse:
        x = x.to_dense()
    return x.detach().cpu().numpy()


zerocopy_to_numpy = asnumpy  # a copy in DGL's PyTorch backend too


def zerocopy_from_numpy(array) -> torch.Tensor:
    return torch.as_tensor(array)


def copy_to(x: torch.Tensor, ctx, **kwargs) -> torch.Tensor:
    """``x`` on device ``ctx`` (``kwargs`` such as ``non_blocking`` go to ``Tensor.to``)."""
    return x.to(torch.device(ctx), **kwargs)


def sum(x: torch.Tensor, dim, keepdims: bool = False) -> torch.Tensor:
    return torch.sum(x, dim=dim, keepdim=keepdims)


def reduce_sum(x: torch.Tensor) -> torch.Tensor:
    return x.sum()


def mean(x: torch.Tensor, dim) -> torch.Tensor:
    return torch.mean(x, dim=dim)


def max(x: torch.Tensor, dim) -> torch.Tensor:
    """The maxima along ``dim`` (values only)."""
    return torch.amax(x, dim=dim)


def min(x: torch.Tensor, dim) -> torch.Tensor:
    """The minima along ``dim`` (values only)."""
    return torch.amin(x, dim=dim)


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return torch.softmax(x, dim=dim)


def cat(seq, dim: int) -> torch.Tensor:
    return torch.cat(seq, dim=dim)


def stack(seq, dim: int) -> torch.Tensor:
    return torch.stack(seq, dim=dim)


def repeat(x: torch.Tensor, repeats, dim: int) -> torch.Tensor:
    """Each slice along ``dim`` repeated ``repeats`` times in place (``repeat_interleave``)."""
    return torch.repeat_interleave(x, repeats, dim)


def gather_row(data: torch.Tensor, row_index: torch.Tensor) -> torch.Tensor:
    return torch.index_select(data, 0, row_index.long())


def narrow_row(x: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    return x[start:stop]


def scatter_row(data: torch.Tensor, row_index: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """A copy of ``data`` with rows ``row_index`` replaced by ``value`` (``data`` is left as it is)."""
    return data.index_copy(0, row_index.long(), value)


def squeeze(x: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.squeeze(x, dim)


def unsqueeze(x: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.unsqueeze(x, dim)


def reshape(x: torch.Tensor, new_shape) -> torch.Tensor:
    return torch.reshape(x, new_shape)


def swapaxes(x: torch.Tensor, axis1: int, axis2: int) -> torch.Tensor:
    return torch.transpose(x, axis1, axis2)


def zeros(shape, dtype, ctx) -> torch.Tensor:
    return torch.zeros(shape, dtype=dtype, device=ctx)


def zeros_like(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(x)


def ones(shape, dtype, ctx) -> torch.Tensor:
    return torch.ones(shape, dtype=dtype, device=ctx)


def full_1d(length: int, fill_value, dtype, ctx) -> torch.Tensor:
    return torch.full((length,), fill_value, dtype=dtype, device=ctx)


def arange(start: int, stop: int, dtype=torch.int64, ctx=None) -> torch.Tensor:
    return torch.arange(start, stop, dtype=dtype, device=ctx)


def nonzero_1d(x: torch.Tensor) -> torch.Tensor:
    """The positions of the nonzero entries of a 1-D tensor, as a 1-D tensor."""
    return torch.nonzero(x).view(-1)


def replace_inf_with_zero(x: torch.Tensor) -> torch.Tensor:
    return torch.masked_fill(x, torch.isinf(x), 0)


def attach_grad(x: torch.Tensor) -> torch.Tensor:
    """``x``, made to require a gradient; a gradient it already holds is zeroed."""
    if x.grad is not None:
        x.grad.zero_()
        return x
    return x.requires_grad_()


def backward(x: torch.Tensor, head_gradient=None) -> None:
    """Back-propagate from ``x``; a head gradient with as many elements as ``x`` is taken in ``x``'s shape
    (DGL passes a 1-element one for a 0-d ``x``)."""
    if head_gradient is not None and head_gradient.numel() == x.numel():
        head_gradient = head_gradient.reshape(x.shape)
    x.backward(head_gradient)


def grad(x: torch.Tensor):
    """The gradient ``x`` holds (kept for non-leaf tensors too)."""
    x.retain_grad()
    return x.grad


def record_grad():
    """DGL's recording scope: PyTorch records every operation anyway, so this does nothing."""
    return contextlib.nullcontext()

"""Graph operators called outside message passing, named and behaving as DGL's ``dgl.ops``.

``gspmm`` / ``gsddmm`` and their named forms (``u_mul_e_sum``, ``copy_u_max``, ``u_dot_v``, ``copy_u``, ...)
on a graph's one relation, ``edge_softmax``, the segment operators (``segment_reduce``, ``segment_softmax``,
``segment_mm``) and ``gather_mm``. All run the active backend's kernels (the torch backend outside a compiled
plan) and are differentiable in their float inputs.
"""

from . import sddmm, spmm
from .gather import gather_mm
from .sddmm import copy_e, copy_u, copy_v, gsddmm
from .segment import segment_mm, segment_reduce, segment_softmax
from .softmax import edge_softmax
from .spmm import gspmm

globals().update({**sddmm.NAMED, **spmm.NAMED})  # u_dot_v, e_add_u, ..., u_mul_e_sum, copy_u_max, ...

__all__ = [
    "copy_e",
    "copy_u",
    "copy_v",
    "edge_softmax",
    "gather_mm",
    "gsddmm",
    "gspmm",
    "segment_mm",
    "segment_reduce",
    "segment_softmax",
]
__all__ += list(sddmm.NAMED) + list(spmm.NAMED)

"""gnnc primitives as numba kernels on CPU: fused, vertex-balanced, no per-edge tensors.

Implements the ``gnnc.backend.pytorch`` contract (see its docstring for
shapes, broadcasting and gradients). Numba kernels, float32/float64,
compiled on first use and cached on disk:
- ``edge_softmax_aggregate`` and ``sddmm_softmax_aggregate``: one loop over
  destinations forward (logits of the SDDMM form computed inside it, the
  exponentials too, nothing of edge size written); backward one loop over
  destinations and one over sources, alpha recomputed. Generated as source
  for their head / feature widths (``codegen``), one scalar per accumulator;
- ``rebuilt_pair_softmax_aggregate``: the same over a typed pair table
  (RGAT's ``x[node] @ W_r`` per (relation, source) pair) that backward
  rebuilds a part at a time instead of keeping it (outside the torch
  backend's contract: ``ir.ops`` asks for it where a backend has it);
- ``edge_expr_aggregate``: an elementwise program over gathered node rows,
  edge data and shared tensors summed into destinations, generated as one
  loop over destinations forward, recomputed per edge in backward
  (``edge_expr_codegen``; outside the torch backend's contract: ``ir.ops``
  asks for it where a backend has it);
- ``head_dot``: one pass over the rows, each weight's scores a contiguous block;
- the binary-operator ``sddmm`` (one loop over edges) and the max / min
  ``spmm`` (one loop over destinations, with its arg edges): parallel loop
  kernels compiled per row width (common widths as constants);
- the sum / mean ``spmm`` and ``scaled_spmm`` with a weight per edge and head, or none (GCN,
  GraphSAGE, R-GCN's pair sums, MoNet's kernels, the gradients of HGT's
  attention scores), forward and the gradient of x: one loop over
  destinations writing each row once.
The other primitives are taken from the torch backend, whose CPU paths (MKL
CSR matmuls, grouped matmuls, ``typed_index_matmul``'s per-type matmuls) are
already fused. Threads follow
``torch.get_num_threads()``.
"""

from ..pytorch import (
    clear_structure_cache,
    edge_softmax,
    gather_segment_matmul,
    segment_matmul,
    segment_reduce,
    typed_index_matmul,
)
from .edge_expr import edge_expr_aggregate
from .head_dot import head_dot
from .pair_softmax_aggregate import rebuilt_pair_softmax_aggregate
from .sddmm import sddmm
from .softmax_aggregate import edge_softmax_aggregate, sddmm_softmax_aggregate
from .spmm import scaled_spmm, spmm

__all__ = [
    "segment_reduce",
    "edge_softmax",
    "spmm",
    "scaled_spmm",
    "sddmm",
    "edge_softmax_aggregate",
    "sddmm_softmax_aggregate",
    "segment_matmul",
    "gather_segment_matmul",
    "typed_index_matmul",
    "head_dot",
    "rebuilt_pair_softmax_aggregate",
    "edge_expr_aggregate",
    "clear_structure_cache",
]

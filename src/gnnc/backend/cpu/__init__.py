"""gnnc primitives as numba kernels on CPU: fused, vertex-balanced, no per-edge tensors.

Implements the ``gnnc.backend.torch`` contract (see its docstring for
shapes, broadcasting and gradients). ``edge_softmax_aggregate`` (forward and
both backward loops, parallel over destination or source nodes; also on
logits that ``sddmm_softmax_aggregate`` computes inside them), the
binary-operator ``sddmm`` (one loop over edges) and the max / min ``spmm``
(one loop over destinations, with its arg edges) run as numba kernels:
float32/float64, compiled on first use per row width (common widths as
constants, so rows become whole vector instructions) and cached on disk;
the aggregation loops over rows of up to 128 accumulators are generated as
source with one scalar per accumulator (``codegen``).
The other primitives are taken from the torch backend, whose CPU paths (MKL
CSR matmuls, grouped matmuls) are already fused. Threads follow
``torch.get_num_threads()``.
"""
from ..torch import clear_structure_cache, edge_softmax, gather_segment_matmul, segment_matmul, segment_reduce
from .sddmm import sddmm
from .spmm import spmm
from .softmax_aggregate import edge_softmax_aggregate, sddmm_softmax_aggregate

__all__ = ["segment_reduce", "edge_softmax", "spmm", "sddmm", "edge_softmax_aggregate", "sddmm_softmax_aggregate",
           "segment_matmul", "gather_segment_matmul", "clear_structure_cache"]

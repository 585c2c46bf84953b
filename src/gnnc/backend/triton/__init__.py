"""gnnc primitives as Triton kernels, forward and backward.

Implements the ``gnnc.backend.pytorch`` contract (see its docstring for
shapes, broadcasting and gradients) on CUDA tensors, or on CPU tensors
under Triton's interpreter (``TRITON_INTERPRET=1`` set before triton is
first imported; see ``launch``). float32 / float64.

Triton kernels (forward and backward):
- ``spmm`` (copy / add / sub / mul / div messages; sum, mean, max, min with
  arg edges) and ``segment_reduce``: vertex-balanced, one program per block
  of destination rows and features over a CSR by destination, or for sum and
  mean on skewed degrees edge-balanced, one program per block of CSR entries
  adding into rows with atomics (``aggregate``; the rule in ``balance``);
- ``sddmm`` (add / sub / mul / div with right-aligned broadcasting and the
  leaky_relu epilogue; dot);
- ``edge_softmax``, ``edge_softmax_aggregate`` and
  ``sddmm_softmax_aggregate``: one pass per block of destinations with
  online softmax (SDDMM logits computed inside, fused when a and b share a
  feature shape), only the max and denominator per destination saved,
  attention weights recomputed in backward (``softmax``).

- ``head_dot``: per block of rows, per weight row (``head_dot``).

Delegated to the torch backend, by choice: ``scaled_spmm`` (its CSR
matmul with the node scales applied around it), ``segment_matmul``,
``gather_segment_matmul`` and ``typed_index_matmul``. They are grouped
dense GEMMs (rows grouped by type, one matmul per type), which torch runs
on cuBLAS / tensor cores; a Triton grouped GEMM would need per-shape
autotuning to match it, saves no memory (no [E, K, M] weights exist on
either path), and under the interpreter ``tl.dot`` would dominate the test
time. The CSR structures are the torch backend's (``csr_structure``,
cached per index tensor), and so is ``clear_structure_cache``.

Atomics: the edge-balanced sums (a row's entries may span programs; float
sums then depend on arrival order) and the max / min backward (several
destinations can share a source); every other kernel owns the rows it writes.
"""

from ..pytorch import clear_structure_cache, gather_segment_matmul, scaled_spmm, segment_matmul, typed_index_matmul
from .head_dot import head_dot
from .launch import INTERPRETED, check_device
from .sddmm import sddmm
from .softmax import edge_softmax, edge_softmax_aggregate, sddmm_softmax_aggregate
from .spmm import segment_reduce, spmm

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
    "clear_structure_cache",
    "INTERPRETED",
    "check_device",
]

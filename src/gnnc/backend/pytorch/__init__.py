"""gnnc graph primitives on PyTorch operations: the contract every backend implements.

Conventions. Graph structure arrives only as 1-D int64 index tensors (never a
Graph): ``src``/``dst``/``index`` have one entry per edge, in any order,
duplicates and self loops allowed. Leading dims are rows (N nodes, E edges);
trailing feature dims are arbitrary and broadcast right-aligned between
operands, DGL-style ([E, H, 1] weights with [N, H, F] features). Values are
float32 or float64, all on one device. Nodes without in-edges get zeros.
Every primitive is differentiable in its float inputs (first order) through
a ``torch.autograd.Function`` whose backward recomputes per-edge [E, F]
quantities instead of saving them; what it saves is O(E) indices, O(E x H)
logits and O(N x F) node tensors. Edge loops run in chunks of about
``common.CPU_CHUNK_ELEMENTS`` (CPU) / ``common.DEVICE_CHUNK_ELEMENTS``
elements, or ``chunk`` edges when that keyword is given.

Primitives (``g`` denotes the upstream gradient):

``segment_reduce(values [E, ...], dst, num_segments, op)``
    out[v] = op_{e: dst[e]=v} values[e], op in sum, mean (sum / max(deg, 1)),
    max, min. Max/min backward: g[v, f] goes to values[e*, f], e* the
    smallest edge index attaining the extremum (an O(N x F) saved argument).

``edge_softmax(logits [E, ...], dst, num_nodes)``
    alpha[e] = exp(l[e] - m[dst[e]]) / sum_{e': dst[e']=dst[e]} exp(l[e'] - m[dst[e]]),
    m[v] = max_{e: dst[e]=v} l[e]. Backward: alpha * (g - segment_sum(alpha * g)[dst]).

``spmm(x [N_src, ...], src, dst, num_dst, edge_weight [E, ...] | None, op, reduce)``
    out[v] = reduce_{e: dst[e]=v} (x[src[e]] op w[e]), op in mul, add, sub,
    div (copy: message x[src[e]] when edge_weight is None), reduce in sum,
    mean, max, min. Backward: grad_x[u] = sum_{e: src[e]=u} d(msg)/dx * g[dst[e]]
    (the transposed aggregation), grad_w[e] = d(msg)/dw * g[dst[e]] (an SDDMM).

``scaled_spmm(x [N_src, ...], src, dst, num_dst, src_scale [N_src] | None, dst_scale [num_dst] | None, w, reduce)``
    out[v] = dst_scale[v] * reduce_{e: dst[e]=v} src_scale[src[e]] * x[src[e]] (* w[e]),
    reduce in sum, mean: ``spmm(x * src_scale) * dst_scale`` (GCN's normalisation)
    without the scaled copies. Backward: the transposed sum with the scales
    swapped; scales that need a gradient run as that composition.

``sddmm(a [Na, ...], a_index, b [Nb, ...], b_index, op)``
    out[e] = a[a_index[e]] op b[b_index[e]], op in add, sub, mul, div, dot;
    dot: out[e, ..., 0] = sum_f a[a_index[e], ..., f] * b[b_index[e], ..., f].

``edge_softmax_aggregate(logits [E, H], x [N_src, H, F], src, dst, num_dst)``
    out[v, h] = sum_{e: dst[e]=v} edge_softmax(logits)[e, h] * x[src[e], h]
    (also logits [E] with x [N_src, F], or any right-aligned broadcast).
    Saves m and the denominator per destination; backward recomputes alpha:
    grad_x[u] = sum_{e: src[e]=u} alpha[e] g[dst[e]],
    grad_l = alpha * (d - segment_sum(alpha * d)[dst]), d[e] = g[dst[e]] . x[src[e]].

``sddmm_softmax_aggregate(a [N_src, ...], b [num_dst, ...], x [N_src, ...], src, dst, num_dst, op, negative_slope)``
    logits[e] = act(a[src[e]] op b[dst[e]]), op in add, sub, mul, div; act =
    leaky_relu(negative_slope) when that keyword is given (0: relu), else the
    identity; out = edge_softmax_aggregate(logits, x, src, dst, num_dst)
    (same shapes and broadcasting). dst is local: b has one row per
    destination. Fused (GAT attention: a [N, H], b [num_dst, H], x [N, H, F]),
    it saves a, b, x, the indices and m and the denominator per destination,
    no [E, ...] float tensor; the torch backend composes sddmm and
    edge_softmax_aggregate and so also saves the logits.

``head_dot(x [rows, H, F], weights [K, H, F])``
    out[r, h, j] = sum_f x[r, h, f] * weights[j, h, f] (dense, rows untouched): the
    attention scores of GAT-style layers, with K shared weight rows per head.

``segment_matmul(x [N, K], ptr [T+1], weight [T, K, M], bias [T, M] | None)``
    out[i] = x[i] @ weight[t] + bias[t] for ptr[t] <= i < ptr[t+1].

``gather_segment_matmul(x [N, K], index [E], ptr [R+1], weight [R, K, M])``
    out[e] = x[index[e]] @ weight[r] for ptr[r] <= e < ptr[r+1].

``typed_index_matmul(x [N, K], index [E] | None, weight [T, K, M], types [E], name=...)``
    out[e] = x[index[e]] @ weight[types[e]] (x[e] when index is None): the
    type is an integer feature (``weight[edges.data['rel_type']]``), values in
    [-T, T) as indexing allows, else IndexError naming ``name``. Rows are
    grouped by a stable sort of ``types``, cached by equal contents (a version
    counter misses writes through ``.data`` or numpy); one matmul per type,
    no [E, K, M] weight copy; grad weight by type.

Sums over edges (spmm copy/mul, sddmm dot, segment sum/mean, the fused
softmax aggregation) run as per-head CSR sparse matmuls on CPU and CUDA
(``csr.SPARSE_DEVICE_TYPES``) when large enough (``csr.SPARSE_MIN_ELEMENTS``)
and as chunked gather + index_add otherwise; both give the same results up
to summation order. The CSR sort and the range check of index arguments are
cached per index tensor (see ``csr`` and ``common.index_range``), and so is
the grouping of ``typed_index_matmul`` (``index_matmul.grouping``);
``clear_structure_cache`` drops all three.
"""

from .csr import clear_structure_cache as _clear_csr
from .head_dot import head_dot
from .index_matmul import clear_groupings as _clear_groupings
from .index_matmul import typed_index_matmul
from .sddmm import sddmm
from .segment import segment_reduce
from .softmax import edge_softmax, edge_softmax_aggregate, sddmm_softmax_aggregate
from .spmm import scaled_spmm, spmm
from .typed_matmul import gather_segment_matmul, segment_matmul


def clear_structure_cache() -> None:
    """Drop every cached CSR structure, index range and type grouping (and the tensors they pin)."""
    _clear_csr()
    _clear_groupings()


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
]

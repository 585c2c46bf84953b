"""Residency and movement inference (Graphiler Table 1) with a user-extensible registry.

Residencies: ``V`` nodes, ``E`` edges, ``A`` node types, ``R`` relations,
``Ps`` / ``Pd`` unique (relation, source) / (relation, destination) pairs of
the edges (compact materialization), ``S`` shared (parameters, python values). Movements: ``BroadcastSrc``,
``BroadcastDst``, ``Broadcast`` (to edges or nodes from type data),
``Reduce`` (E -> V), ``Norm`` (E -> E through a per-destination reduction),
``Fetch`` and ``Dense``. A Dense operator works row by row: its output has
the residency of its non-shared inputs, which must agree, and each output
row comes from the same row (dim 0) of those inputs alone, still at dim 0.
Passes move Dense operators between edges and nodes, so one that combines,
moves, drops or adds rows (a reduction, normalization or contraction over
dim 0, a transpose or reshape of it, a slice of rows, a broadcast that puts
dims in front of them), or whose dims cannot be known when compiling, is
rejected (``_check_rows_untouched``). A tensor the UDF makes with its batch's
row count first (``torch.zeros(h.shape[0], d)``, ``h.new_ones(h.size(0), 1)``;
zeros, ones, empty and full) is a Dense operator of those rows: each row holds
the same values wherever it goes. Made otherwise, or with values that depend on
a row's position (``torch.arange(h.shape[0])``), it is rejected. Unknown
operators make inference fail too; the caller falls back to eager and names
the operator. ``register_rule`` adds operators.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TypeGuard

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from ..function import right_align
from . import operators as ops
from .calls import called_module
from .mpdfg import DEFERRED_INPUT


class InferenceFailure(Exception):
    """Residency inference rejected an operator; carries the operator and source line."""

    def __init__(self, what: str, where: str):
        super().__init__(f"{what} at {where}")
        self.what, self.where = what, where


def _pair_side(n: fx.Node) -> str:
    side = n.kwargs.get("side", n.args[3] if len(n.args) > 3 else "src")
    return "Ps" if side == "src" else "Pd"


# graph operators: (movement, output residency), or a function of the node giving them
GRAPH_OPS = {
    ops.etype_pair_matmul: lambda n: ("Broadcast+Dense(typed)", _pair_side(n)),
    ops.etype_pair_head_matmul: lambda n: ("Broadcast+Dense(typed)", _pair_side(n)),
    ops.gather_src_pair: ("BroadcastSrc", "E"),
    ops.etype_bilinear_dot: ("BroadcastSrc+BroadcastDst+Dense(typed)", "E"),
    ops.gather_dst_pair: ("BroadcastDst", "E"),
    ops.pair_etype_rows: lambda n: ("Broadcast", "Ps" if n.args[2] == "src" else "Pd"),
    ops.gather_src: ("BroadcastSrc", "E"),
    ops.gather_dst: ("BroadcastDst", "E"),
    ops.gather_srctype: ("BroadcastSrc", "E"),
    ops.gather_dsttype: ("BroadcastDst", "E"),
    ops.gather_etype: ("Broadcast", "E"),
    ops.gather_ntype: ("Broadcast", "V"),
    ops.dst_nodes: ("Fetch", "V"),
    ops.node_type_rows: ("Broadcast", "V"),
    ops.gather_dst_local: ("BroadcastDst", "E"),
    ops.segment_reduce: ("Reduce", "V"),
    ops.edge_softmax: ("Norm", "E"),
    ops.zero_unreached: ("Dense", "V"),
    ops.bucketed_reduce: ("Reduce", "V"),
    ops.in_bucket_order: lambda n: ("Dense", "E" if n.args[3] == "edges" else "V"),
    ops.result_field: ("Fetch", "V"),
    ops.spmm: ("BroadcastSrc+Reduce", "V"),
    ops.scaled_spmm: ("BroadcastSrc+Reduce", "V"),
    ops.etype_spmm: ("BroadcastSrc+Dense(typed)+Reduce", "V"),
    ops.index_spmm: ("BroadcastSrc+Dense(typed)+Reduce", "V"),
    ops.edge_softmax_aggregate: ("Norm+BroadcastSrc+Reduce", "V"),
    ops.sddmm_softmax_aggregate: ("BroadcastSrc+BroadcastDst+Dense+Norm+Reduce", "V"),
    ops.etype_sddmm_softmax_aggregate: ("BroadcastSrc+BroadcastDst+Dense(typed)+Norm+Reduce", "V"),
    ops.edge_expr_aggregate: ("BroadcastSrc+BroadcastDst+Dense+Reduce", "V"),
    ops.ntype_matmul: ("Dense(typed)", "V"),
    ops.dst_ntype_matmul: ("Dense(typed)", "V"),
    ops.etype_gather_matmul: ("Broadcast+Dense(typed)", "E"),
    ops.etype_gather_head_matmul: ("Broadcast+Dense(typed)", "E"),
    ops.index_gather_matmul: ("Broadcast+Dense(typed)", "E"),
    ops.retype: ("Fetch", "S"),
    ops.type_rows: ("Fetch", "R"),
    ops.edges_to: ("Dense", "E"),
    ops.edges_from: ("Dense", "E"),
    ops.edge_rows: ("Fetch", "E"),
    ops.u_op_v: ("BroadcastSrc+BroadcastDst+Dense", "E"),
    ops.recomputable: lambda n: ("Dense(recomputed)", n.args[0].meta["res"]),
}

_ROW_WISE_FUNCTIONS = {
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.neg,
    operator.pow,
    operator.matmul,
    operator.floordiv,
    operator.mod,
    operator.lt,
    operator.le,
    operator.gt,
    operator.ge,
    operator.eq,
    operator.ne,
    operator.and_,
    operator.or_,
    operator.invert,
    torch.add,
    torch.sub,
    torch.mul,
    torch.div,
    torch.neg,
    torch.exp,
    torch.log,
    torch.sqrt,
    torch.rsqrt,
    torch.abs,
    torch.pow,
    torch.sigmoid,
    torch.tanh,
    torch.relu,
    torch.sin,
    torch.cos,
    torch.matmul,
    torch.bmm,
    torch.where,
    torch.clamp,
    torch.maximum,
    torch.minimum,
    torch.erf,
    torch.square,
    torch.reciprocal,
    torch.sign,
    torch.log1p,
    torch.expm1,
    torch.einsum,
    torch.mm,
    torch.cat,
    torch.stack,
    torch.sum,
    torch.mean,
    torch.max,
    torch.min,
    torch.amax,
    torch.amin,
    torch.softmax,
    torch.log_softmax,
    torch.prod,
    torch.norm,
    torch.squeeze,
    torch.unsqueeze,
    torch.flatten,
    torch.transpose,
    torch.reshape,
    F.softmax,
    F.log_softmax,
    ops.shared_dot,
    ops.index_matmul,
    ops.fold_attention,
    ops.scale_heads,
    ops.in_place,
    F.relu,
    F.leaky_relu,
    F.elu,
    F.gelu,
    F.silu,
    F.selu,
    F.softplus,
    F.dropout,
    F.linear,
    F.layer_norm,
    F.normalize,
    F.tanh,
    F.sigmoid,
    F.celu,
    F.prelu,
    F.hardtanh,
    F.mish,
    right_align,
    torch.zeros_like,
    torch.ones_like,
    torch.full_like,
    torch.nan_to_num,
    torch.addcmul,
    torch.lerp,
    F.glu,
    torch.unbind,
    torch.std,
    torch.var,
    torch.rsub,
    torch.chunk,
    torch.split,
    torch.floor,
    torch.ceil,
    torch.round,
    torch.trunc,
    torch.tan,
    torch.atan,
    torch.sinh,
    torch.cosh,
    torch.exp2,
    torch.log2,
    torch.log10,
    torch.clamp_min,
    torch.clamp_max,
    torch.logical_not,
    torch.logical_and,
    torch.logical_or,
    F.relu6,
    F.hardswish,
    F.hardsigmoid,
    F.logsigmoid,
    F.softsign,
    F.tanhshrink,
    torch.flip,
    torch.roll,
    torch.narrow,
    torch.tensor_split,
    F.softmin,
    torch.zeros,
    torch.ones,
    torch.empty,
    torch.full,
    torch.fft.fft,
    torch.fft.ifft,
    torch.fft.rfft,
    torch.fft.irfft,
    torch.conj,
    torch.real,
    torch.imag,
}
_ROW_WISE_METHODS = {
    "add",
    "sub",
    "mul",
    "div",
    "neg",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "abs",
    "pow",
    "sigmoid",
    "tanh",
    "relu",
    "matmul",
    "bmm",
    "clamp",
    "square",
    "reciprocal",
    "float",
    "double",
    "to",
    "type_as",
    "contiguous",
    "clone",
    "detach",
    "expand_as",
    "masked_fill",
    "__getitem__",
    "size",
    "dim",
    "unsqueeze",
    "squeeze",
    "flatten",
    "view",
    "reshape",
    "transpose",
    "permute",
    "sum",
    "mean",
    "max",
    "min",
    "amax",
    "amin",
    "softmax",
    "log_softmax",
    "norm",
    "prod",
    "expand",
    "repeat",
    "chunk",
    "split",
    "nan_to_num",
    "addcmul",
    "lerp",
    "unbind",
    "view_as",
    "std",
    "var",
    "sin",
    "cos",
    "tan",
    "atan",
    "log1p",
    "expm1",
    "erf",
    "sign",
    "floor",
    "ceil",
    "round",
    "trunc",
    "maximum",
    "minimum",
    "clamp_min",
    "clamp_max",
    "logical_not",
    "logical_and",
    "logical_or",
    "log2",
    "exp2",
    "flip",
    "roll",
    "narrow",
    "tensor_split",
    "conj",
    "new_zeros",
    "new_ones",
    "new_empty",
    "new_full",
    # a number on the left of a parameter or other shared tensor: ``1 - self.alpha``, ``1.0 / self.p``
    "__radd__",
    "__rsub__",
    "__rmul__",
    "__rdiv__",
    "__rtruediv__",
    "__rpow__",
}
_ROW_WISE_MODULES = (
    nn.Linear,
    nn.Dropout,
    nn.LeakyReLU,
    nn.ReLU,
    nn.ELU,
    nn.GELU,
    nn.Sigmoid,
    nn.Tanh,
    nn.SiLU,
    nn.LayerNorm,
    nn.Identity,
    nn.Softplus,
    nn.PReLU,
    nn.Softmax,
    nn.LogSoftmax,
    nn.Softmin,
    nn.modules.rnn.RNNCellBase,
    nn.Bilinear,
    nn.ReLU6,
    nn.Hardtanh,
    nn.Hardswish,
    nn.Hardsigmoid,
    nn.CELU,
    nn.SELU,
    nn.Mish,
    nn.Softsign,
    nn.GLU,
    nn.Tanhshrink,
)

_USER_RULES: dict = {}


def _row_wise_module(module: nn.Module) -> bool:
    """A module that works row by row: the listed ones, and batch norm normalizing by its running statistics
    (in eval mode; in training, or without running statistics, it normalizes by the batch's: all rows)."""
    if isinstance(module, nn.modules.batchnorm._BatchNorm):
        return not module.training and module.track_running_stats and module.running_mean is not None
    return isinstance(module, _ROW_WISE_MODULES)


def register_rule(target: Callable | str | type[nn.Module], rule: Callable[..., tuple[str, str]]) -> None:
    """Teach inference an operator: ``rule(node, input_residencies) -> (movement, residency)``.

    ``target`` is a function, a method name (str) or a module class.
    """
    _USER_RULES[target] = rule


def infer(graph: fx.Graph, root: nn.Module) -> None:
    """Set ``meta['res']`` and ``meta['move']`` on every node, or raise InferenceFailure."""
    for n in graph.nodes:
        if n.op == "placeholder":
            n.meta["res"] = n.meta.get("input_res") or _INPUT_RES.get(n.meta["input"][0], "S")
            n.meta["move"] = "Input"
        elif n.op == "get_attr":
            n.meta["res"], n.meta["move"] = "S", "Fetch"
        elif n.op == "output":
            continue
        else:
            n.meta["move"], n.meta["res"] = _rule(n, root)


_INPUT_RES = {
    "ndata": "V",
    "edata": "E",
    "ntype_data": "A",
    "etype_data": "R",
    "external": "S",
    "ctx": "S",
    DEFERRED_INPUT: "V",
}


def _rule(n: fx.Node, root):
    target = n.target
    residencies = [a.meta.get("res", "S") for a in n.all_input_nodes if a.meta.get("input", (None,))[0] != "ctx"]
    if n.op == "call_function" and target in GRAPH_OPS:
        dtype = n.meta.get("dtype")
        if target in ops.FLOATING_ONLY and isinstance(dtype, torch.dtype) and not dtype.is_floating_point:
            raise InferenceFailure(
                f"{target.__name__} of {str(dtype).removeprefix('torch.')} values (gnnc's graph "
                "primitives compute in floating point: .float() the feature to compile it)",
                n.meta.get("source", "?"),
            )
        rule = GRAPH_OPS[target]
        return rule(n) if callable(rule) else rule
    key = target if n.op != "call_module" else type(root.get_submodule(target))
    if key in _USER_RULES:
        return _USER_RULES[key](n, residencies)
    indexed = _row_indexing(n)
    if indexed is not None:
        return indexed
    known = (
        (n.op == "call_function" and (target in _ROW_WISE_FUNCTIONS or target is getattr or target is operator.getitem))
        or (n.op == "call_method" and target in _ROW_WISE_METHODS)
        or (n.op == "call_module" and _row_wise_module(root.get_submodule(target)))
    )
    if not known:
        what = _name(n)
        if n.op == "call_module":
            module = root.get_submodule(target)
            what = f"module {type(module).__name__} ({target})"
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                raise InferenceFailure(
                    f"{what} in training mode (or without running statistics) normalizes by the statistics of all rows",
                    n.meta.get("source", "?"),
                )
        raise InferenceFailure(f"unsupported operator {what}", n.meta.get("source", "?"))
    non_shared = sorted(set(residencies) - {"S"})
    if len(non_shared) > 1:
        raise InferenceFailure(f"{_name(n)} mixes {'/'.join(non_shared)} data", n.meta.get("source", "?"))
    res = non_shared[0] if non_shared else "S"
    if res != "S":
        _check_rows_untouched(n, root)
    return "Dense", res


def _row_indexing(n: fx.Node):
    """(movement, residency) of an indexing operator that reads rows by a tensor: ``table[t]`` or
    ``table.index_select(0, t)`` of a shared table by graph-resident indices is a lookup (the indices'
    residency); indexing the rows (dim 0) of graph data by a tensor or a number mixes or drops graph rows:
    InferenceFailure. None for any other operator, or indexing other dims."""
    if _is_getitem(n) and len(n.args) == 2:
        x, index = n.args
        first = index[0] if isinstance(index, tuple) and index else index
        dim0: fx.node.Argument = first if isinstance(first, (fx.Node, int)) and not isinstance(first, bool) else None
    elif is_index_select(n):
        x = n.args[0]
        dim = n.kwargs.get("dim", n.args[1] if len(n.args) > 1 else None)
        rank = len(x.meta.get("shape") or ()) if isinstance(x, fx.Node) else 0
        rows = isinstance(dim, int) and (dim == 0 or dim == -rank)
        dim0 = n.kwargs.get("index", n.args[2] if len(n.args) > 2 else None) if rows else None
    else:
        return None
    if dim0 is None or not isinstance(x, fx.Node) or x.meta.get("shape") is None:
        return None
    table_res = x.meta.get("res", "S")
    index_res = dim0.meta.get("res", "S") if isinstance(dim0, fx.Node) else "S"
    if table_res == "S" and index_res != "S":
        return "Dense", index_res  # a lookup: one row of the table per graph row
    if table_res != "S":
        raise InferenceFailure(
            f"{_name(n)} indexes the rows of graph data ({table_res}) by "
            f"{'a number' if isinstance(dim0, int) else 'a tensor'}: rows would move",
            n.meta.get("source", "?"),
        )
    return None


def is_index_select(n: fx.Node) -> bool:
    """Whether ``n`` is ``x.index_select(...)`` or ``torch.index_select(x, ...)`` (also as traced while a library
    such as PyG has replaced ``torch.index_select`` by a wrapper of its own)."""
    return (n.op == "call_method" and n.target == "index_select") or (
        n.op == "call_function" and n.target in (torch._C._VariableFunctions.index_select, torch.index_select)
    )


def _is_getitem(n: fx.Node) -> bool:
    return (n.op == "call_function" and n.target is operator.getitem) or (
        n.op == "call_method" and n.target == "__getitem__"
    )


def _check_rows_untouched(n: fx.Node, root: nn.Module) -> None:
    """A Dense operator on graph data must keep every row in place (passes move it between edges and
    nodes): row i of its output is computed from row i of its graph-resident inputs alone and stays at
    dim 0. InferenceFailure (run eagerly) when it reduces, normalizes, contracts, indexes, reshapes,
    transposes or broadcasts across dim 0, or when that cannot be decided at compile time (an unknown
    rank, a dim or an equation given by a variable)."""
    if n.op == "call_module":
        why = _module_mixes_rows(called_module(n, root), n.args[0] if n.args else None)
    else:
        check = _ROW_CHECKS.get(_op_name(n))
        why = (check(n, _rank(n.args[0]) if n.args else None) if check else None) or _broadcast_moves_rows(n)
    if why is not None:
        raise InferenceFailure(f"{_name(n)} {why}", n.meta.get("source", "?"))


_ALL_ROWS = "over all rows of graph data"
_DIM0 = "along dim 0 mixes graph rows"
_UNKNOWN = "on graph data with a rank or dims not known at compile time"
_MOVES = "moves graph rows off dim 0"
_NO_DIM = "without a dim (torch's implicit choice can be dim 0)"


def _op_name(n: fx.Node) -> str:
    """A method's name, or a function's (``torch.sum`` and ``Tensor.sum`` share their checks)."""
    return str(n.target) if n.op == "call_method" else getattr(n.target, "__name__", "")


def _shape(a):
    """The propagated shape of a tensor-valued node, else None."""
    return a.meta.get("shape") if isinstance(a, fx.Node) else None


def _rank(a):
    shape = _shape(a)
    return None if shape is None else len(shape)


def _is_graph(a) -> bool:
    return isinstance(a, fx.Node) and a.meta.get("res", "S") != "S"


def _arg(n: fx.Node, pos: int, name: str, default=None):
    return n.kwargs[name] if name in n.kwargs else n.args[pos] if len(n.args) > pos else default


def _is_int(d: object) -> TypeGuard[int]:
    return isinstance(d, int) and not isinstance(d, bool)


def _dims_mix_rows(dims, rank):
    """Why ``dims`` (a dim, or a tuple or list of them; ``()`` is every dim) of a rank-``rank`` value name
    its rows, dim 0 (``d == 0`` or ``d == -rank``), or cannot be checked; None when they name other dims."""
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if not dims:
        return _ALL_ROWS
    for d in dims:
        if not _is_int(d) or (d < 0 and rank is None):
            return _UNKNOWN
        if d == 0 or (rank is not None and d == -rank):
            return _DIM0
    return None


def _reduction(pos: int, no_dim: str = _ALL_ROWS):
    """sum, mean, softmax, ... with their dim at argument ``pos`` (not given: ``no_dim`` says why not)."""

    def check(n, rank):
        dim = _arg(n, pos, "dim")
        return no_dim if dim is None else _dims_mix_rows(dim, rank)

    return check


def _max_min(n, rank):
    """max / min: elementwise with a tensor (a broadcast), else a reduction."""
    if "other" in n.kwargs or _rank(_arg(n, 1, "dim")) is not None:
        return None
    return _reduction(1)(n, rank)


def _concat(n, rank):
    """cat / stack of a list of values: along dim 0 they join rows (stack: dim 0 of the rank + 1 result)."""
    values = _arg(n, 0, "tensors")
    ranks = {_rank(v) for v in values} if isinstance(values, (list, tuple)) else {None}
    rank = ranks.pop() if len(ranks) == 1 else None
    if rank is not None and _op_name(n) == "stack":
        rank += 1
    return _dims_mix_rows(_arg(n, 1, "dim", 0), rank)


def _reshape(n, rank):
    """view / reshape / flatten / squeeze / unsqueeze keep rows in place (row-major) exactly when every
    row keeps its number of entries: the product of the dims after dim 0 is unchanged (shapes propagate
    on stand-in row counts, so the check cannot hold by chance)."""
    before, after = _shape(n.args[0]), _shape(n)
    if not before or not after:
        return _UNKNOWN
    if _op_name(n) == "squeeze" and _arg(n, 1, "dim") is not None:  # squeeze(0) drops the rows of a 1-row block
        return _dims_mix_rows(_arg(n, 1, "dim"), len(before))
    return None if _prod(before[1:]) == _prod(after[1:]) else "reshapes across graph rows (dim 0)"


def _prod(dims) -> int:
    out = 1
    for d in dims:
        out *= d
    return out


def _expand(n, rank):
    """expand / expand_as: dims added in front of the rows move them."""
    return None if rank is not None and _rank(n) == rank else _MOVES


def _repeat(n, rank):
    """repeat(1, ...) with a size per dim: a first size > 1 repeats rows, extra sizes add dims in front."""
    sizes = n.args[1] if len(n.args) == 2 and isinstance(n.args[1], (list, tuple)) else n.args[1:]
    ok = rank is not None and len(sizes) == rank and _is_int(sizes[0]) and sizes[0] == 1
    return None if ok else "repeats graph rows"


def _dims_given(n):
    """The dims of ``permute`` / ``flip``: one list, or one argument each (the method's varargs)."""
    return n.kwargs.get("dims", n.args[1] if len(n.args) == 2 and isinstance(n.args[1], (list, tuple)) else n.args[1:])


def _permute(n, rank):
    """permute keeps rows when its first dim is dim 0."""
    dims = _dims_given(n)
    why = _dims_mix_rows(dims[0] if dims else None, rank)
    return None if why == _DIM0 else why or _MOVES


def _row_count(s) -> bool:
    """Whether ``s`` is the number of rows of a graph value: ``x.size(0)``, ``x.shape[0]``, ``x.size()[0]``."""
    if not isinstance(s, fx.Node):
        return False
    if s.op == "call_method" and s.target == "size" and _is_graph(s.args[0]):
        dim = _arg(s, 1, "dim")
        rank = _rank(s.args[0])
        return _is_int(dim) and (dim == 0 or rank is not None and dim == -rank)
    return (
        s.op == "call_function"
        and s.target is operator.getitem
        and _is_int(s.args[1])
        and s.args[1] == 0
        and _whole_shape(s.args[0])
    )


def _whole_shape(s) -> bool:
    """Whether ``s`` is the shape of a graph value: ``x.shape`` or ``x.size()``."""
    if not isinstance(s, fx.Node):
        return False
    if s.op == "call_method" and s.target == "size":
        return _is_graph(s.args[0]) and _arg(s, 1, "dim") is None
    return s.op == "call_function" and s.target is getattr and s.args[1] == "shape" and _is_graph(s.args[0])


def _factory(n, rank):
    """zeros / ones / empty / full and their ``new_`` methods, recorded when a size is traced: a tensor of
    graph rows when its first size is a graph value's row count (or its sizes are that value's shape) and no
    other size is traced."""
    method = n.op == "call_method"
    sizes = n.args[1:] if method else n.args
    if n.target in ("new_full", torch.full):
        sizes = sizes[:1]
    sizes = n.kwargs.get(
        "size", sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (list, tuple, fx.Node)) else sizes
    )
    if isinstance(sizes, fx.Node):
        return None if _whole_shape(sizes) else "sizes a tensor by graph data other than its rows"
    sizes = list(sizes)
    if not sizes or not _row_count(sizes[0]) or any(isinstance(x, fx.Node) for x in sizes[1:]):
        return "sizes a tensor by graph data other than its rows"
    return None


def _roll(n, rank):
    """roll(shifts, dims): without dims it rolls the flattened tensor, rows with the rest."""
    dims = _arg(n, 2, "dims")
    return _ALL_ROWS if dims is None else _dims_mix_rows(dims, rank)


def _flip(n, rank):
    """flip reverses the rows when dim 0 is among its dims."""
    return _dims_mix_rows(_dims_given(n) or None, rank)


def _transpose(n, rank):
    """transpose(dim0, dim1), method or function."""
    return _dims_mix_rows((_arg(n, 1, "dim0"), _arg(n, 2, "dim1")), rank)


def _getattr(n, rank):
    """x.T / x.H reverse every dim (rank 1: none); x.mT / x.mH swap the last two (rank 2: the rows)."""
    attr = n.args[1] if len(n.args) > 1 else None
    if attr in ("T", "H") and rank != 1 or attr in ("mT", "mH") and (rank is None or rank < 3):
        return f"(Tensor.{attr}) {_MOVES}"
    return None


def _chunk(n, rank):
    """chunk(chunks, dim=0) / split(size, dim=0) / tensor_split(sections, dim=0)."""
    return _dims_mix_rows(_arg(n, 2, "dim", 0), rank)


def _getitem(n, rank):
    """Indexing keeps rows when dim 0 is indexed by ``:`` or covered by a leading ``...``, and the
    tensor indices (which put their dims first when apart) are next to each other. (Numbers and tensors
    at dim 0 are ``_row_indexing``'s.) Indexing a tuple is not checked."""
    if rank is None:
        return None if not isinstance(n.args[0], fx.Node) or n.args[0].meta.get("dtype") is None else _UNKNOWN
    index = n.args[1] if isinstance(n.args[1], tuple) else (n.args[1],)
    first = index[0] if index else slice(None)
    if first is Ellipsis:
        widths = [_index_width(i) for i in index[1:]]
        if None in widths or sum(widths) >= rank:
            return "indexes graph rows (dim 0)"
    elif not (isinstance(first, slice) and first == slice(None)):
        return "moves, drops or adds graph rows (dim 0)"
    if any(_is_graph(i) for i in index):  # x[:, t] of graph t: a dim of rows after dim 0
        return "indexes by graph data off dim 0"
    tensors = [k for k, i in enumerate(index) if _rank(i) is not None or isinstance(i, (list, tuple))]
    return _MOVES if tensors and tensors != list(range(tensors[0], tensors[-1] + 1)) else None


def _index_width(i):
    """How many dims index entry ``i`` indexes (None: not known)."""
    if i is None or isinstance(i, bool):
        return 0
    if isinstance(i, fx.Node) and _rank(i) is not None and i.meta.get("dtype") is torch.bool:
        return _rank(i)
    return 1 if isinstance(i, (int, slice, fx.Node, list, tuple)) else None


def _matmul(n, rank):
    """a @ b keeps rows when each graph operand's dim 0 becomes the result's dim 0: a graph ``a`` of rank
    >= 2 with a shared ``b`` of no higher rank (``a``'s rows are its matrix rows or batch), a graph ``b``
    of rank >= 3 with a shared ``a`` of no higher rank (``b``'s rows are its batch), or both graph of one
    rank >= 3 (batched row by row). Otherwise rows are contracted or broadcast against each other."""
    a, b = n.args[0], _arg(n, 1, "other")
    ra, rb, ga, gb = _rank(a), _rank(b), _is_graph(a), _is_graph(b)
    if ra is None or rb is None:
        return _UNKNOWN
    if ga and gb:
        ok = ra == rb >= 3
    elif ga:
        ok = ra >= 2 and rb <= ra
    else:
        ok = rb >= 3 and ra <= rb
    return None if ok else "contracts or moves graph rows (dim 0)"


def _mm(n, rank):
    """mm(a, b) of matrices: a graph ``b`` is contracted over its rows."""
    return "contracts graph rows (dim 0)" if _is_graph(_arg(n, 1, "mat2")) else None


def _linear(n, rank):
    """linear(x, weight, bias) contracts the last dim of x: rank 1 is the rows; weights must be shared."""
    if _is_graph(_arg(n, 1, "weight")) or _is_graph(_arg(n, 2, "bias")):
        return "takes graph data as weights"
    return None if rank is not None and rank >= 2 else "contracts graph rows (dim 0)"


def _einsum(n, rank):
    """Each graph operand's first subscript must be the output's first, and appear once in the operand:
    a letter, or an ellipsis covering at least one dim and as many as any operand's ellipsis (ellipsis
    dims are aligned from the right)."""
    equation, operands = n.args[0], list(n.args[1:])
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = list(operands[0])
    if not isinstance(equation, str):
        return _UNKNOWN
    lhs, arrow, out = equation.replace(" ", "").replace("...", ".").partition("->")  # "." is an ellipsis
    terms = lhs.split(",")
    if len(terms) != len(operands):
        return _UNKNOWN
    spans = {}  # operand number -> how many dims its ellipsis covers
    for k, (x, term) in enumerate(zip(operands, terms)):
        if ("." in term or _is_graph(x)) and _rank(x) is None:
            return _UNKNOWN
        if "." in term:
            spans[k] = _rank(x) - len(term) + 1
    widest = max(spans.values(), default=0)
    if not arrow:  # the implicit output: the ellipsis, then the letters used once, in order
        letters = lhs.replace(",", "").replace(".", "")
        out = ("." if "." in lhs else "") + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    if not widest:
        out = out.replace(".", "")
    for k, (x, term) in enumerate(zip(operands, terms)):
        if not _is_graph(x):
            continue
        if spans.get(k) == 0:
            term = term.replace(".", "")
        first = term[:1]
        if not first or first != out[:1] or term.count(first) > 1 or (first == "." and spans[k] != widest):
            return "contracts or moves graph rows (dim 0)"
    return None


def _normalize(n, rank):
    """F.normalize(x, p=2.0, dim=1)."""
    return _dims_mix_rows(_arg(n, 2, "dim", 1), rank)


def _layer_norm(n, rank):
    """F.layer_norm(x, normalized_shape, ...)."""
    return _normalized_shape_mixes_rows(_arg(n, 1, "normalized_shape"), rank)


def _normalized_shape_mixes_rows(shape, rank):
    """layer_norm over the last len(shape) dims: they must leave dim 0 out."""
    size = 1 if _is_int(shape) else len(shape) if isinstance(shape, (list, tuple)) else None
    if size is None or rank is None:
        return _UNKNOWN
    return _DIM0 if size >= rank else None


def _where(n, rank):
    """torch.where(condition) alone gives the indices of true entries (their rows among them)."""
    return "of graph data gives row numbers" if len(n.args) + len(n.kwargs) == 1 else None


_ROW_CHECKS = {
    **dict.fromkeys(("sum", "mean", "amax", "amin", "prod", "std", "var"), _reduction(1)),
    "glu": lambda n, rank: _dims_mix_rows(_arg(n, 1, "dim", -1), rank),
    "unbind": lambda n, rank: _dims_mix_rows(_arg(n, 1, "dim", 0), rank),
    "view_as": _reshape,
    "softmax": _reduction(1, _NO_DIM),
    "log_softmax": _reduction(1, _NO_DIM),
    "max": _max_min,
    "min": _max_min,
    "norm": _reduction(2),
    "normalize": _normalize,
    "cat": _concat,
    "stack": _concat,
    **dict.fromkeys(("view", "reshape", "flatten", "squeeze", "unsqueeze"), _reshape),
    "expand": _expand,
    "expand_as": _expand,
    "repeat": _repeat,
    "permute": _permute,
    "transpose": _transpose,
    "getattr": _getattr,
    "chunk": _chunk,
    "split": _chunk,
    "tensor_split": _chunk,
    "flip": _flip,
    "roll": _roll,
    "narrow": lambda n, rank: _dims_mix_rows(_arg(n, 1, "dim"), rank),
    "softmin": _reduction(1, _NO_DIM),
    **dict.fromkeys(("zeros", "ones", "empty", "full", "new_zeros", "new_ones", "new_empty", "new_full"), _factory),
    "getitem": _getitem,
    "__getitem__": _getitem,
    "matmul": _matmul,
    "mm": _mm,
    "linear": _linear,
    "einsum": _einsum,
    "layer_norm": _layer_norm,
    "where": _where,
    **dict.fromkeys(
        ("fft_fft", "fft_ifft", "fft_rfft", "fft_irfft"), lambda n, rank: _dims_mix_rows(_arg(n, 2, "dim", -1), rank)
    ),
}

# Elementwise operators that broadcast their operands: a graph operand of lower rank than the result
# gets dims in front of its rows (a [F, 1] weight times [E] values is [F, E]).
_BROADCASTING = {
    "add",
    "sub",
    "mul",
    "truediv",
    "div",
    "floordiv",
    "mod",
    "pow",
    "lt",
    "le",
    "gt",
    "ge",
    "eq",
    "ne",
    "and_",
    "or_",
    "where",
    "clamp",
    "maximum",
    "minimum",
    "max",
    "min",
    "masked_fill",
    "addcmul",
    "lerp",
    "clamp_min",
    "clamp_max",
    "logical_and",
    "logical_or",
}


def _broadcast_moves_rows(n: fx.Node):
    """A graph operand of an elementwise operator must have the result's rank: its rows stay at dim 0."""
    if _op_name(n) not in _BROADCASTING or _rank(n) is None:
        return None
    ranks = {_rank(a) for a in n.all_input_nodes if _is_graph(a)} - {None}
    return None if ranks <= {_rank(n)} else "broadcasts dims in front of graph rows (dim 0)"


def _module_mixes_rows(module: nn.Module, x):
    """Softmax modules over dim 0 (or no dim), GLU halving dim 0, LayerNorm over dim 0, Linear and Bilinear on
    a rank-1 input (its rows), recurrent cells on anything but a batch of rows [N, F] (an unbatched cell
    takes a rank-1 input as one sample)."""
    rank = _rank(x)
    if isinstance(module, (nn.Softmax, nn.LogSoftmax, nn.Softmin, nn.GLU)):
        return _NO_DIM if module.dim is None else _dims_mix_rows(module.dim, rank)
    if isinstance(module, nn.modules.rnn.RNNCellBase):
        return None if rank == 2 else "takes graph rows as one sample unless its input is [rows, features]"
    if isinstance(module, nn.LayerNorm):
        return _normalized_shape_mixes_rows(tuple(module.normalized_shape), rank)
    if isinstance(module, (nn.Linear, nn.Bilinear)):
        return None if rank is not None and rank >= 2 else "contracts graph rows (dim 0)"
    return None


def _name(n: fx.Node) -> str:
    if n.op == "call_method":
        return f"Tensor.{n.target}"
    if n.op == "call_module":
        return f"module {n.target}"
    return getattr(n.target, "__qualname__", None) or getattr(n.target, "__name__", None) or str(n.target)

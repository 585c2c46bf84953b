"""Residency and movement inference (Graphiler Table 1) with a user-extensible registry.

Residencies: ``V`` nodes, ``E`` edges, ``A`` node types, ``R`` relations,
``Ps`` / ``Pd`` unique (relation, source) / (relation, destination) pairs of
the edges (compact materialization), ``S`` shared (parameters, python values). Movements: ``BroadcastSrc``,
``BroadcastDst``, ``Broadcast`` (to edges or nodes from type data),
``Reduce`` (E -> V), ``Norm`` (E -> E through a per-destination reduction),
``Fetch`` and ``Dense``. A Dense operator works row by row: its output has
the residency of its non-shared inputs, which must agree, and it must never
combine rows (a reduction over dim 0 or a reshape of the leading dim is
rejected). Unknown operators make inference fail; the caller falls back to
eager and names the operator. ``register_rule`` adds operators.
"""
from __future__ import annotations

import operator

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from ..function import right_align
from . import ops
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
    ops.result_field: ("Fetch", "V"),
    ops.spmm: ("BroadcastSrc+Reduce", "V"),
    ops.scaled_spmm: ("BroadcastSrc+Reduce", "V"),
    ops.etype_spmm: ("BroadcastSrc+Dense(typed)+Reduce", "V"),
    ops.index_spmm: ("BroadcastSrc+Dense(typed)+Reduce", "V"),
    ops.edge_softmax_aggregate: ("Norm+BroadcastSrc+Reduce", "V"),
    ops.sddmm_softmax_aggregate: ("BroadcastSrc+BroadcastDst+Dense+Norm+Reduce", "V"),
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
    operator.add, operator.sub, operator.mul, operator.truediv, operator.neg, operator.pow,
    operator.matmul, operator.floordiv, operator.mod, operator.lt, operator.le, operator.gt,
    operator.ge, operator.eq, operator.ne, operator.and_, operator.or_, operator.invert,
    torch.add, torch.sub, torch.mul, torch.div, torch.neg, torch.exp, torch.log, torch.sqrt,
    torch.rsqrt, torch.abs, torch.pow, torch.sigmoid, torch.tanh, torch.relu, torch.sin, torch.cos,
    torch.matmul, torch.bmm, torch.where, torch.clamp, torch.maximum, torch.minimum, torch.erf,
    torch.square, torch.reciprocal, torch.sign, torch.log1p, torch.expm1, torch.einsum, torch.mm,
    torch.cat, torch.stack, torch.sum, torch.mean, torch.max, torch.min, torch.amax, torch.amin,
    torch.softmax, torch.log_softmax, torch.prod, torch.norm, torch.squeeze, torch.unsqueeze,
    torch.flatten, torch.transpose, torch.reshape, F.softmax, F.log_softmax, ops.shared_dot,
    ops.index_matmul, ops.fold_attention, ops.scale_heads, ops.in_place,
    F.relu, F.leaky_relu, F.elu, F.gelu, F.silu, F.selu, F.softplus, F.dropout, F.linear,
    F.layer_norm, F.normalize, F.tanh, F.sigmoid, F.celu, F.prelu, F.hardtanh, F.mish, right_align,
}
_ROW_WISE_METHODS = {
    "add", "sub", "mul", "div", "neg", "exp", "log", "sqrt", "rsqrt", "abs", "pow", "sigmoid",
    "tanh", "relu", "matmul", "bmm", "clamp", "square", "reciprocal", "float", "double", "to",
    "type_as", "contiguous", "clone", "detach", "expand_as", "masked_fill", "__getitem__", "size",
    "dim", "unsqueeze", "squeeze", "flatten", "view", "reshape", "transpose", "permute",
    "sum", "mean", "max", "min", "amax", "amin", "softmax", "log_softmax", "norm", "prod",
    "expand", "repeat", "chunk", "split",
}
_ROW_WISE_MODULES = (nn.Linear, nn.Dropout, nn.LeakyReLU, nn.ReLU, nn.ELU, nn.GELU, nn.Sigmoid,
                     nn.Tanh, nn.SiLU, nn.LayerNorm, nn.Identity, nn.Softplus, nn.PReLU, nn.Softmax)
_DIM_REDUCTIONS = {torch.sum, torch.mean, torch.max, torch.min, torch.amax, torch.amin, torch.softmax,
                   torch.log_softmax, torch.prod, torch.norm, F.softmax, F.log_softmax, torch.cat,
                   torch.stack}

_USER_RULES: dict = {}


def register_rule(target, rule) -> None:
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


_INPUT_RES = {"ndata": "V", "edata": "E", "ntype_data": "A", "etype_data": "R", "external": "S", "ctx": "S",
              DEFERRED_INPUT: "V"}


def _rule(n: fx.Node, root):
    target = n.target
    residencies = [a.meta.get("res", "S") for a in n.all_input_nodes if a.meta.get("input", (None,))[0] != "ctx"]
    if n.op == "call_function" and target in GRAPH_OPS:
        rule = GRAPH_OPS[target]
        return rule(n) if callable(rule) else rule
    key = target if n.op != "call_module" else type(root.get_submodule(target))
    if key in _USER_RULES:
        return _USER_RULES[key](n, residencies)
    indexed = _row_indexing(n)
    if indexed is not None:
        return indexed
    known = ((n.op == "call_function" and (target in _ROW_WISE_FUNCTIONS or target is getattr
                                           or target is operator.getitem))
             or (n.op == "call_method" and target in _ROW_WISE_METHODS)
             or (n.op == "call_module" and isinstance(root.get_submodule(target), _ROW_WISE_MODULES)))
    if not known:
        raise InferenceFailure(f"unsupported operator {_name(n)}", n.meta.get("source", "?"))
    non_shared = sorted(set(residencies) - {"S"})
    if len(non_shared) > 1:
        raise InferenceFailure(f"{_name(n)} mixes {'/'.join(non_shared)} data", n.meta.get("source", "?"))
    res = non_shared[0] if non_shared else "S"
    if res != "S":
        _check_rows_untouched(n)
    return "Dense", res


def _row_indexing(n: fx.Node):
    """(movement, residency) of an indexing operator that reads rows by a tensor: ``table[t]`` or
    ``table.index_select(0, t)`` of a shared table by graph-resident indices is a lookup (the indices'
    residency); indexing the rows (dim 0) of graph data by a tensor or a number mixes or drops graph rows:
    InferenceFailure. None for any other operator, or indexing other dims."""
    if _is_getitem(n) and len(n.args) == 2:
        x, index = n.args
        first = index[0] if isinstance(index, tuple) and index else index
        dim0 = first if isinstance(first, (fx.Node, int)) and not isinstance(first, bool) else None
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
        raise InferenceFailure(f"{_name(n)} indexes the rows of graph data ({table_res}) by "
                               f"{'a number' if isinstance(dim0, int) else 'a tensor'}: rows would move",
                               n.meta.get("source", "?"))
    return None


def is_index_select(n: fx.Node) -> bool:
    """Whether ``n`` is ``x.index_select(...)`` or ``torch.index_select(x, ...)`` (also as traced while a library
    such as PyG has replaced ``torch.index_select`` by a wrapper of its own)."""
    return (n.op == "call_method" and n.target == "index_select") or \
        (n.op == "call_function" and n.target in (torch._C._VariableFunctions.index_select, torch.index_select))


def _is_getitem(n: fx.Node) -> bool:
    return (n.op == "call_function" and n.target is operator.getitem) or \
        (n.op == "call_method" and n.target == "__getitem__")


def _check_rows_untouched(n: fx.Node) -> None:
    """A Dense operator on graph data must not mix rows (dim 0)."""
    shape = n.args[0].meta.get("shape") if n.args and isinstance(n.args[0], fx.Node) else None
    ndim = len(shape) if shape else None
    name = n.target if n.op == "call_method" else getattr(n.target, "__name__", "")
    reduces = (n.op == "call_method" and name in ("sum", "mean", "max", "min", "amax", "amin", "softmax",
                                                    "log_softmax", "norm", "prod", "transpose", "squeeze",
                                                    "unsqueeze", "flatten", "chunk", "split")) \
        or (n.op == "call_function" and n.target in _DIM_REDUCTIONS)
    if reduces:
        dims = _dims(n)
        if dims is None and name not in ("unsqueeze", "squeeze", "flatten", "chunk", "split"):
            raise InferenceFailure(f"{_name(n)} over all rows of graph data", n.meta.get("source", "?"))
        rank = None if ndim is None else ndim + (1 if name == "unsqueeze" else 0)
        for d in dims or ():
            if isinstance(d, int) and (d == 0 or (rank is not None and d == -rank)):
                raise InferenceFailure(f"{_name(n)} along dim 0 mixes graph rows", n.meta.get("source", "?"))
    if n.op == "call_method" and name in ("view", "reshape", "expand", "repeat"):
        first = n.args[1] if len(n.args) > 1 else None
        if isinstance(first, (tuple, list)):
            first = first[0] if first else None
        if isinstance(first, int) and first != -1 and name in ("view", "reshape"):
            raise InferenceFailure(f"{_name(n)} fixes the leading dimension to {first}", n.meta.get("source", "?"))
        if name == "repeat" and first != 1:
            raise InferenceFailure(f"{_name(n)} repeats graph rows", n.meta.get("source", "?"))


def _dims(n: fx.Node):
    name = n.target if n.op == "call_method" else getattr(n.target, "__name__", "")
    if name in ("flatten",):
        start = n.kwargs.get("start_dim", n.args[1] if len(n.args) > 1 else 0)
        return (start,)
    if name in ("cat", "stack"):
        return (n.kwargs.get("dim", n.args[1] if len(n.args) > 1 else 0),)
    if name == "transpose":
        return tuple(a for a in n.args[1:3])
    dim = n.kwargs.get("dim", n.args[1] if len(n.args) > 1 else None)
    if dim is None:
        return None
    return tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)


def _name(n: fx.Node) -> str:
    if n.op == "call_method":
        return f"Tensor.{n.target}"
    if n.op == "call_module":
        return f"module {n.target}"
    return getattr(n.target, "__qualname__", None) or getattr(n.target, "__name__", str(n.target))

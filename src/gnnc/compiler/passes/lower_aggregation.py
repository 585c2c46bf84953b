"""Aggregation lowering: a degree-bucketed reduce UDF becomes edge-level operators.

Pattern: ``bucketed_reduce(reduce_udf)`` whose mailbox operations are
element-wise, reductions over the degree dimension (dim 1) or shape
operations on feature dimensions.
Replacement, operator by operator, in edge form (mailbox ``[n, d, f...]``
becomes ``[E, f...]``): element-wise ops run on edges; node data broadcast
against a mailbox (``x.unsqueeze(1) * box``) becomes ``gather_dst_local``;
``softmax(dim=1)``, and every softmax written out (``softmax_forms``), becomes
``edge_softmax``; ``log_softmax(dim=1)`` becomes segment operators; ``sum /
mean / max / min`` over dim 1 become ``segment_reduce`` (node-level with a unit
degree dim under ``keepdim=True``); feature dims shift down by one.
Results are zeroed for destinations without in-edges (eager's fill) unless
they come from a segment reduction through operators that keep a zero row
zero (``flatten(1)``, ``relu``, scaling by a finite number, a ``view(-1,
...)`` keeping the row count on a small probe of the UDF, ...). A UDF with any other mailbox
operation keeps its bucketed form (still correct, just slower).
"""

from __future__ import annotations

import operator

import torch
import torch.nn.functional as F
from torch import fx, nn

from ...ir import operators as ops
from ...ir.mpdfg import MPDFG
from ...ir.shapes import StatelessInterpreter
from .contract import PassResult, rewrote
from .patterns import call_arg as _arg
from .patterns import inactive_dropout
from .softmax_forms import softmax_forms

_REDUCERS = {"sum": "sum", "mean": "mean", "max": "max", "min": "min", "amax": "max", "amin": "min"}
_REDUCER_FUNCTIONS = {
    torch.sum: "sum",
    torch.mean: "mean",
    torch.max: "max",
    torch.min: "min",
    torch.amax: "max",
    torch.amin: "min",
}
_SOFTMAX = {torch.softmax, F.softmax}
_LOG_SOFTMAX = {torch.log_softmax, F.log_softmax}
_ELEMENTWISE_MODULES = (
    nn.Dropout,
    nn.LeakyReLU,
    nn.ReLU,
    nn.ELU,
    nn.GELU,
    nn.Sigmoid,
    nn.Tanh,
    nn.SiLU,
    nn.Identity,
    nn.Softplus,
    nn.Linear,
    nn.LayerNorm,
)
_SHAPE_METHODS = {
    "unsqueeze",
    "squeeze",
    "flatten",
    "sum",
    "mean",
    "max",
    "min",
    "amax",
    "amin",
    "softmax",
    "log_softmax",
}


class _CannotLower(Exception):
    pass


class _Value:
    """A translated reduce-UDF value: its outer node and form.

    Forms: ``M`` mailbox (outer node is edge-level), ``N`` node-level,
    ``N1`` node-level with a unit degree dim still to insert, ``S`` shared.
    ``ndim`` is the mailbox-form rank for M and N1 values.
    """

    def __init__(self, node, form, ndim=None, zero_safe=False, pair=False):
        self.node, self.form, self.ndim, self.zero_safe = node, form, ndim, zero_safe
        self.pair = pair  # a max/min result: (values, indices) in the UDF; only values survive


def lower_aggregation(dfg: MPDFG) -> PassResult:
    out = dfg.copy()
    for call in [n for n in out.graph.nodes if n.target is ops.bucketed_reduce]:
        try:
            results = _lower_one(out, call)
        except _CannotLower as why:
            out.log.append(f"lower_aggregation: kept degree buckets for {call.meta['source']} ({why})")
            continue
        for item in list(call.users):
            item.replace_all_uses_with(results[item.args[1]])
            out.graph.erase_node(item)
        out.graph.erase_node(call)
        out.log.append(f"lower_aggregation: {call.meta['source']} now runs as edge-level segment operators")
    return rewrote(dfg, out)


def _lower_one(dfg: MPDFG, call: fx.Node) -> dict:
    graph, traced = dfg.graph, call.meta["reduce_graph"]
    ctx, _, kinds, *inputs = call.args
    if _random_operators(traced.graph, dfg.root.get_submodule("red")) > 1:
        raise _CannotLower("several dropouts: eager interleaves their masks bucket by bucket")
    shapes, dtypes = _probe_shapes(dfg.root.get_submodule("red"), kinds, inputs)
    softmax_of, internal = softmax_forms(traced.graph, shapes, dtypes)
    env = _OnDemand(lambda n: _translate(graph, call, ctx, n, env, dfg.root, shapes))
    placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
    with graph.inserting_before(call):
        for ph, kind, x in zip(placeholders, kinds, inputs):
            if kind == "mailbox":
                env[ph] = _Value(x, "M", len(x.meta["shape"]) + 1)
            elif kind == "data":
                env[ph] = _Value(x, "N")
            elif kind == "type":
                env[ph] = _Value(_emit(graph, call, ops.gather_ntype, (ctx, x)), "N")
            else:
                env[ph] = _Value(x, "S")
        for n in traced.graph.nodes:
            if n.op in ("placeholder", "output") or n in internal:
                continue  # translated only if something else than its softmax reads it (env.__missing__)
            logits = env[softmax_of[n]] if n in softmax_of else None
            if logits is not None and logits.form == "M":
                env[n] = _Value(_emit(graph, call, ops.edge_softmax, (ctx, logits.node)), "M", logits.ndim)
            else:
                env[n] = _translate(graph, call, ctx, n, env, dfg.root, shapes)
        results = {}
        for key, node in traced.outputs.items():
            v = env[node]
            if v.form == "M":
                raise _CannotLower(f"output {key!r} still has the degree dimension")
            value = _materialize(graph, call, v)
            if not v.zero_safe:
                value = _emit(graph, call, ops.zero_unreached, (ctx, value))
            results[key] = value
    return results


class _OnDemand(dict):
    """Translated values by reduce-UDF node; a node not translated yet is translated when first read."""

    def __init__(self, translate):
        super().__init__()
        self._translate = translate

    def __missing__(self, n):
        self[n] = value = self._translate(n)
        return value


def _emit(graph, call, target, args, kwargs=None, op="call_function"):
    node = graph.create_node(op, target, tuple(args), kwargs or {})
    node.meta.update(stage="reduce", source=call.meta["source"])
    return node


def _materialize(graph, call, v: _Value):
    if v.form == "N1":
        return _emit(graph, call, "unsqueeze", (v.node, 1), op="call_method")
    return v.node


def _translate(graph, call, ctx, n: fx.Node, env, root, shapes) -> _Value:
    args = [_in_env(a, env) for a in n.args]
    kwargs = {k: _in_env(v, env) for k, v in n.kwargs.items()}
    values = [a for a in list(args) + list(kwargs.values()) if isinstance(a, _Value)]
    listed = [x for a in args if isinstance(a, (list, tuple)) for x in a if isinstance(x, _Value)]
    if any(x.form == "M" for x in listed):
        raise _CannotLower(f"{_label(n)} takes a list of mailbox values")
    values += listed
    if n.op == "get_attr":
        return _Value(_emit(graph, call, f"red.{n.target}", (), op="get_attr"), "S")
    forms = {v.form for v in values}
    if (
        values
        and values[0].pair
        and n.args[0] is not None
        and ((n.target is getattr and n.args[1] == "values") or (n.target is operator.getitem and n.args[1] == 0))
    ):
        first = values[0]
        return _Value(first.node, first.form, first.ndim, first.zero_safe)
    if any(v.pair for v in values):
        raise _CannotLower(f"{_label(n)} uses the indices of a mailbox max/min")
    if "M" not in forms:
        if (
            n.op == "call_method"
            and n.target == "unsqueeze"
            and values
            and values[0].form == "N"
            and _arg(n, 1, "dim") == 1
        ):
            return _Value(values[0].node, "N1", _node_ndim(values[0].node) + 1, zero_safe=values[0].zero_safe)
        plain = [_plain(graph, call, a) for a in args]
        plain_kw = {k: _plain(graph, call, v) for k, v in kwargs.items()}
        form = "S" if forms <= {"S"} else "N"
        if form == "N" and n.op == "call_module" and _fires(root.get_submodule(f"red.{n.target}")):
            node = _in_bucket_order(graph, call, ctx, n, plain[0], "nodes")
        else:
            target = f"red.{n.target}" if n.op == "call_module" else n.target
            node = _emit(graph, call, target, plain, plain_kw, op=n.op)
        return _Value(node, form, zero_safe=_keeps_zero_rows(n, args, kwargs, root, shapes))
    return _translate_mailbox(graph, call, ctx, n, args, kwargs, root)


def _in_bucket_order(graph, call, ctx, n, x, rows: str):
    """The dropout module ``n`` on ``x``, drawn per degree bucket as eager's when determinism is on."""
    module = _emit(graph, call, f"red.{n.target}", (), op="get_attr")
    return _emit(graph, call, ops.in_bucket_order, (ctx, module, x, rows))


def _fires(module) -> bool:
    """Whether ``module`` is a dropout that draws a mask: in training with p > 0. One that cannot fire (eval
    mode, p = 0; plans are cached per training flag) is the identity: it stays the plain module call, which
    dce removes, so it neither keeps degree buckets nor blocks the fused softmax aggregation."""
    return isinstance(module, nn.Dropout) and module.training and module.p > 0


def _random_operators(traced: fx.Graph, red) -> int:
    return sum(
        (n.op == "call_module" and _fires(red.get_submodule(n.target)))
        or (n.op == "call_function" and n.target in (F.dropout, torch.dropout) and not inactive_dropout(n, red))
        or (n.op == "call_method" and n.target == "dropout")
        for n in traced.nodes
    )


def _in_env(a, env):
    """An argument of a reduce-UDF node with its nodes (also inside lists) replaced by their values."""
    if isinstance(a, fx.Node):
        return env[a]
    if isinstance(a, (list, tuple)):
        return type(a)(_in_env(x, env) for x in a)
    return a


def _plain(graph, call, a):
    """An argument with its node-level values (also inside lists) as outer-graph nodes."""
    if isinstance(a, _Value):
        return _materialize(graph, call, a)
    if isinstance(a, (list, tuple)):
        return type(a)(_plain(graph, call, x) for x in a)
    return a


def _translate_mailbox(graph, call, ctx, n, args, kwargs, root) -> _Value:
    box = next(a for a in args if isinstance(a, _Value) and a.form == "M")
    if n.op == "call_module":
        module = root.get_submodule(f"red.{n.target}")
        if not isinstance(module, _ELEMENTWISE_MODULES) or len(args) != 1:
            raise _CannotLower(f"module {n.target} on a mailbox")
        if _fires(module):
            return _Value(_in_bucket_order(graph, call, ctx, n, box.node, "edges"), "M", box.ndim)
        return _Value(_emit(graph, call, f"red.{n.target}", (box.node,), op="call_module"), "M", box.ndim)
    if (
        args
        and args[0] is box
        and (_reduction(n) is not None or (n.op == "call_method" and n.target in _SHAPE_METHODS))
    ):
        return _translate_dim_op(graph, call, ctx, n, box)
    if _elementwise(n):
        return _translate_elementwise(graph, call, ctx, n, args, kwargs)
    raise _CannotLower(f"{_label(n)} on a mailbox")


def _translate_dim_op(graph, call, ctx, n, box: _Value) -> _Value:
    """Reductions, softmax and shape ops whose first argument is a mailbox."""
    reducer = _reduction(n)
    is_flatten = n.op == "call_method" and n.target == "flatten"
    dim = _arg(n, 1, "start_dim" if is_flatten else "dim", 0 if is_flatten else None)
    keepdim = bool(_arg(n, 2, "keepdim", False)) if reducer not in (None, "softmax", "log_softmax") else False
    if reducer is not None and dim in (1, 1 - box.ndim):
        if not _plain_reduction(n, reducer):
            raise _CannotLower(f"{_label(n)} over dim 1 of a mailbox with a dtype or other arguments")
        if reducer == "softmax":
            return _Value(_emit(graph, call, ops.edge_softmax, (ctx, box.node)), "M", box.ndim)
        if reducer == "log_softmax":
            return _edge_log_softmax(graph, call, ctx, box)
        reduced = _emit(graph, call, ops.segment_reduce, (ctx, box.node, reducer))
        returns_pair = n.target in ("max", "min", torch.max, torch.min)
        if keepdim:  # [n, 1, f...] in the UDF: node-level with the unit degree dim kept
            return _Value(reduced, "N1", box.ndim, zero_safe=True, pair=returns_pair)
        return _Value(reduced, "N", zero_safe=True, pair=returns_pair)
    rank = box.ndim + (1 if n.target == "unsqueeze" else 0)
    if not isinstance(dim, int) or dim in (0, 1) or (dim < 0 and dim + rank <= 1):
        raise _CannotLower(f"{_label(n)} with dim {dim} on a mailbox")
    edge_dim = dim - 1 if dim > 0 else dim
    kw = {k: v for k, v in n.kwargs.items() if k not in ("dim", "start_dim")}
    extra = list(n.args[2:])
    if is_flatten:
        end = kw.pop("end_dim", extra.pop(0) if extra else -1)
        end_abs = end % box.ndim
        kw["end_dim"] = end - 1 if end > 0 else end
        ndim = box.ndim - (end_abs - dim % box.ndim)
    elif n.target == "unsqueeze":
        ndim = box.ndim + 1
    elif n.target == "squeeze" or (reducer not in (None, "softmax", "log_softmax") and not keepdim):
        ndim = box.ndim - 1
    else:
        ndim = box.ndim
    node = _emit(graph, call, n.target, (box.node, edge_dim, *extra), kw, op=n.op)
    if reducer in ("max", "min") and n.target in ("max", "min", torch.max, torch.min):
        raise _CannotLower(f"{_label(n)} over a feature dim of a mailbox returns indices")
    return _Value(node, "M", ndim)


def _edge_log_softmax(graph, call, ctx, box: _Value) -> _Value:
    """``log_softmax(box, 1)`` on edges as torch computes it: ``(l - m) - log(sum exp(l - m))`` with m each
    destination's max logit (detached: the result does not depend on it)."""
    top = _emit(
        graph, call, "detach", (_emit(graph, call, ops.segment_reduce, (ctx, box.node, "max")),), op="call_method"
    )
    shifted = _emit(graph, call, operator.sub, (box.node, _emit(graph, call, ops.gather_dst_local, (ctx, top))))
    total = _emit(graph, call, ops.segment_reduce, (ctx, _emit(graph, call, torch.exp, (shifted,)), "sum"))
    log_total = _emit(graph, call, ops.gather_dst_local, (ctx, _emit(graph, call, torch.log, (total,))))
    return _Value(_emit(graph, call, operator.sub, (shifted, log_total)), "M", box.ndim)


def _plain_reduction(n, reducer: str) -> bool:
    """Whether reduction ``n`` has no argument but its input, dim and keepdim (softmax: ``_stacklevel``),
    and no dtype: the segment operators neither convert nor take other options."""
    if n.kwargs.get("dtype") is not None:
        return False
    if reducer in ("softmax", "log_softmax"):
        return len(n.args) <= 2 and set(n.kwargs) <= {"dim", "dtype", "_stacklevel"}
    return len(n.args) <= 3 and set(n.kwargs) <= {"dim", "keepdim", "dtype"}


def _translate_elementwise(graph, call, ctx, n, args, kwargs) -> _Value:
    operands, ndim = [], 0
    for a in args:
        if not isinstance(a, _Value):
            operands.append(a)
        elif a.form == "M":
            operands.append(a.node)
            ndim = max(ndim, a.ndim)
        elif a.form == "N1":
            operands.append(_emit(graph, call, ops.gather_dst_local, (ctx, a.node)))
            ndim = max(ndim, a.ndim)
        elif a.form == "S":
            operands.append(a.node)
        else:
            raise _CannotLower(f"{_label(n)} combines a mailbox with node data that has no degree dim")
    plain_kw = {k: (v.node if isinstance(v, _Value) else v) for k, v in kwargs.items()}
    return _Value(_emit(graph, call, n.target, operands, plain_kw, op=n.op), "M", ndim)


def _reduction(n):
    if n.op == "call_method" and n.target in _REDUCERS:
        return _REDUCERS[n.target]
    if n.op == "call_method" and n.target in ("softmax", "log_softmax"):
        return n.target
    if n.op == "call_function" and n.target in _REDUCER_FUNCTIONS:
        return _REDUCER_FUNCTIONS[n.target]
    if n.op == "call_function" and n.target in _SOFTMAX:
        return "softmax"
    if n.op == "call_function" and n.target in _LOG_SOFTMAX:
        return "log_softmax"
    return None


_ELEMENTWISE_FUNCTIONS = {
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.neg,
    operator.pow,
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
    torch.where,
    torch.clamp,
    torch.maximum,
    torch.minimum,
    torch.square,
    torch.reciprocal,
    torch.log1p,
    torch.expm1,
    F.relu,
    F.leaky_relu,
    F.elu,
    F.gelu,
    F.silu,
    F.selu,
    F.softplus,
    F.dropout,
    F.tanh,
    F.sigmoid,
    F.celu,
}
_ELEMENTWISE_METHODS = {
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
    "clamp",
    "square",
    "reciprocal",
    "float",
    "double",
    "type_as",
    "contiguous",
    "clone",
}


# Operators f with f(0) = 0 exactly, entry by entry, whatever their other (non-tensor) arguments.
_ZERO_KEEPING_FUNCTIONS = {
    torch.relu,
    F.relu,
    torch.tanh,
    F.tanh,
    torch.neg,
    operator.neg,
    F.leaky_relu,
    F.elu,
    F.gelu,
    F.silu,
    F.selu,
    F.celu,
    F.dropout,
}
_ZERO_KEEPING_METHODS = {"relu", "tanh", "neg", "contiguous", "clone", "float", "double"}
_ZERO_KEEPING_MODULES = (nn.ReLU, nn.LeakyReLU, nn.ELU, nn.GELU, nn.Tanh, nn.SiLU, nn.Identity, nn.Dropout)
_ROW_KEEPING_METHODS = {"flatten": ("start_dim", 0), "unsqueeze": ("dim", None), "squeeze": ("dim", None)}


def _keeps_zero_rows(n, args, kwargs, root, shapes) -> bool:
    """Whether node-level ``n`` maps a zero row of its one zero-safe input to a zero row (so the
    rows of destinations without in-edges stay eager's zeros without a ``zero_unreached``)."""
    values = [a for a in list(args) + list(kwargs.values()) if isinstance(a, _Value)]
    if len(values) != 1 or not args or args[0] is not values[0] or not values[0].zero_safe:
        return False
    rest = list(args[1:]) + list(kwargs.values())
    if _is_reshape(n):
        return _keeps_row_count(n, rest, shapes)
    if any(isinstance(a, (list, tuple, dict, torch.Tensor)) for a in rest):
        return False
    if n.op == "call_module":
        return isinstance(root.get_submodule(f"red.{n.target}"), _ZERO_KEEPING_MODULES)
    if n.op == "call_method" and n.target in _ROW_KEEPING_METHODS:
        name, default = _ROW_KEEPING_METHODS[n.target]
        dim = _arg(n, 1, name, default)
        return isinstance(dim, int) and dim >= 1  # negative dims could name the rows of a 1-d value
    if (
        n.op == "call_method"
        and n.target in _ZERO_KEEPING_METHODS
        or n.op == "call_function"
        and n.target in _ZERO_KEEPING_FUNCTIONS
    ):
        return True
    if n.target in (operator.mul, torch.mul, "mul", operator.truediv, torch.div, "div") and len(rest) == 1:
        c = rest[0]
        finite = isinstance(c, (int, float)) and not isinstance(c, bool) and abs(c) < float("inf")
        return finite and (c != 0 if n.target in (operator.truediv, torch.div, "div") else True)
    return False


def _is_reshape(n) -> bool:
    return (n.op == "call_method" and n.target in ("view", "reshape")) or (
        n.op == "call_function" and n.target is torch.reshape
    )


def _keeps_row_count(n, sizes, shapes) -> bool:
    """A reshape to (-1, fixed sizes) whose probe kept the row count: its fixed sizes then hold exactly
    one input row, for any number of rows, so row i of the result is row i of the input (row-major)."""
    if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)):
        sizes = list(sizes[0])
    if not sizes or sizes[0] != -1 or not all(type(s) is int and s > 0 for s in sizes[1:]):
        return False
    before, after = shapes.get(n.args[0].name), shapes.get(n.name)
    return before is not None and after is not None and len(before) > 0 and before[:1] == after[:1]


class _ShapeRecorder(StatelessInterpreter):
    def __init__(self, module):
        super().__init__(module)
        self.shapes: dict[str, tuple] = {}
        self.dtypes: dict[str, torch.dtype] = {}

    def run_node(self, n):
        out = super().run_node(n)
        if isinstance(out, torch.Tensor):
            self.shapes[n.name], self.dtypes[n.name] = tuple(out.shape), out.dtype
        return out


def _probe_shapes(red: fx.GraphModule, kinds, inputs) -> tuple[dict, dict]:
    """The reduce UDF's value shapes and dtypes (by node name) run on zeros for two destinations of degree three
    (as shape propagation runs it: its modules on copies of their buffers, the random stream restored
    after); empty where an input's shape is unknown or the UDF cannot run on the probe."""
    args = []
    for kind, x in zip(kinds, inputs):
        shape = x.meta.get("shape") if isinstance(x, fx.Node) else None
        if shape is None:
            return {}, {}
        rows = {"mailbox": (2, 3), "data": (2,), "type": (2,)}.get(kind)
        args.append(
            torch.zeros(
                tuple(shape) if rows is None else rows + tuple(shape[1:]),
                dtype=x.meta.get("dtype", torch.get_default_dtype()),
            )
        )
    recorder = _ShapeRecorder(red)
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            recorder.run(*args)
    except Exception:  # noqa: BLE001 - a probe the UDF cannot take proves nothing; the zeroing stays
        return {}, {}
    return recorder.shapes, recorder.dtypes


def _elementwise(n) -> bool:
    """Operators that act entry by entry, so they mean the same on a mailbox and on its edges."""
    if n.op == "call_function":
        return n.target in _ELEMENTWISE_FUNCTIONS
    return n.op == "call_method" and n.target in _ELEMENTWISE_METHODS


def _node_ndim(node) -> int:
    shape = node.meta.get("shape")
    return len(shape) if shape is not None else 2


def _label(n) -> str:
    return f"Tensor.{n.target}" if n.op == "call_method" else getattr(n.target, "__name__", str(n.target))

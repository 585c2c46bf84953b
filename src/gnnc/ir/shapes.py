"""Shape propagation over an MP-DFG on stand-in rows (no graph-sized data or compute).

Node and edge data become zero CPU tensors of their real feature shapes but
a few stand-in rows (``STAND_IN_ROWS``, one count per row space: nodes,
destination nodes, edges, (relation, source) and (relation, destination)
pairs); graph operators get shape rules; every other operator runs natively
on them. A result whose leading dim is a stand-in
count gets the real count back. Sets ``meta['shape']`` and ``meta['dtype']``
on every tensor-valued node. (Meta tensors would avoid even that work, but
torch's Python meta kernels import torch._dynamo on first use: ~1 s and
~80 MiB per process.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx
from torch import nn

from ..backend.pytorch.common import broadcast_shape
from ..backend.pytorch.edge_expr import shapes as edge_expr_shapes
from . import operators as ops
from .mpdfg import DEFERRED_INPUT

if TYPE_CHECKING:  # a block's context, built by the executors: named for types only
    from .context import GraphContext

# Stand-in row counts of all nodes, destination nodes, edges, source pairs and destination pairs:
# primes unlikely to be a feature dim.
STAND_IN_ROWS = (1031, 1033, 1039, 1049, 1051)


class _ShapeOnly:
    def __init__(self, num_nodes, num_dst, num_edges, num_src_pairs, num_dst_pairs):
        self.num_nodes, self.num_dst, self.num_edges = num_nodes, num_dst, num_edges
        self.pair_rows = {"src": num_src_pairs, "dst": num_dst_pairs}


def _zeros(shape, dtype):
    return torch.zeros(tuple(shape), dtype=dtype)


def _message_shape(program, sides, operands) -> tuple[int, ...]:
    kinds = tuple("dst" if side == "dst_local" else side for side in sides)
    return tuple(edge_expr_shapes(program, kinds, [tuple(t.shape) for t in operands])[-1][1:])


def _rows(n, x):
    return _zeros((n,) + tuple(x.shape[1:]), x.dtype)


_RULES: dict[Callable, Callable[..., Any]] = {
    ops.gather_src: lambda c, x: _rows(c.num_edges, x),
    ops.gather_dst: lambda c, x: _rows(c.num_edges, x),
    ops.gather_srctype: lambda c, a: _rows(c.num_edges, a),
    ops.gather_dsttype: lambda c, a: _rows(c.num_edges, a),
    ops.gather_etype: lambda c, r: _rows(c.num_edges, r),
    ops.gather_ntype: lambda c, a: _rows(c.num_dst, a),
    ops.dst_nodes: lambda c, x: _rows(c.num_dst, x),
    ops.node_type_rows: lambda c, a: _rows(c.num_nodes, a),
    ops.gather_dst_local: lambda c, v: _rows(c.num_edges, v),
    ops.segment_reduce: lambda c, e, op: _rows(c.num_dst, e),
    ops.edge_softmax: lambda c, e: e,
    ops.zero_unreached: lambda c, v: v,
    ops.in_bucket_order: lambda c, fn, x, rows: x,
    ops.edge_softmax_aggregate: lambda c, lg, x, x_side="src": _rows(c.num_dst, x),
    ops.sddmm_softmax_aggregate: lambda c, a, b, op, side, slope, x, x_side="src": _rows(c.num_dst, x),
    ops.etype_sddmm_softmax_aggregate: lambda c, a, b, op, side, slope, x, w, feat, rebuild=False: _zeros(
        (c.num_dst,) + tuple(feat), x.dtype
    ),
    ops.edge_expr_aggregate: lambda c, program, sides, operands, reduce: _zeros(
        (c.num_dst,) + _message_shape(program, sides, operands), operands[0].dtype
    ),
    ops.ntype_matmul: lambda c, x, w: _zeros((x.shape[0], w.shape[-1]), x.dtype),
    ops.dst_ntype_matmul: lambda c, v, w: _zeros((v.shape[0], w.shape[-1]), v.dtype),
    ops.etype_gather_matmul: lambda c, x, w, side="src": _zeros((c.num_edges, w.shape[-1]), x.dtype),
    ops.etype_gather_head_matmul: lambda c, y, w, side="src": _zeros(
        (c.num_edges,) + tuple(y.shape[1:-1]) + (w.shape[-1],), y.dtype
    ),
    ops.index_gather_matmul: lambda c, x, w, t, side="src", feature=None: _zeros(
        (c.num_edges,) + tuple(w.shape[1:-2]) + (w.shape[-1],), x.dtype
    ),
    ops.index_matmul: lambda x, w, t, feature=None: _zeros(
        (x.shape[0],) + tuple(w.shape[1:-2]) + (w.shape[-1],), x.dtype
    ),
    ops.retype: lambda c, t, num_types, feature=None: c,
    ops.type_rows: lambda c, table: table,
    ops.edges_to: lambda c, x: x,
    ops.edges_from: lambda c, y: y,
    ops.edge_rows: lambda c, y: y,
    ops.etype_pair_matmul: lambda c, x, w, side="src": _zeros((c.pair_rows[side], w.shape[-1]), x.dtype),
    ops.etype_pair_head_matmul: lambda c, y, w, side="src": _zeros(
        (c.pair_rows[side],) + tuple(y.shape[1:-1]) + (w.shape[-1],), y.dtype
    ),
    ops.gather_src_pair: lambda c, y: _rows(c.num_edges, y),
    ops.etype_bilinear_dot: lambda c, k, w, q, side: _zeros((c.num_edges, k.shape[1]), k.dtype),
    ops.gather_dst_pair: lambda c, y: _rows(c.num_edges, y),
    ops.pair_etype_rows: lambda c, r, side: _rows(c.pair_rows[side], r),
    ops.u_op_v: lambda c, a, b, op, side, negative_slope=None, a_side="src": _zeros(
        (c.num_edges,) + broadcast_shape(tuple(a.shape[1:]), tuple(b.shape[1:]))
        if op != "dot"
        else (c.num_edges,) + tuple(a.shape[1:-1]) + (1,),
        a.dtype,
    ),
}


def _spmm_shape(c, x, w, op, reduce, x_side="src"):
    feat = broadcast_shape(tuple(x.shape[1:]), tuple(w.shape[1:])) if w is not None else tuple(x.shape[1:])
    return _zeros((c.num_dst,) + tuple(feat), x.dtype)


def _bucketed_shape(c, fn, kinds, *inputs):
    args = []
    for kind, x in zip(kinds, inputs):
        if kind == "mailbox":
            args.append(x.new_zeros((c.num_dst, 1) + tuple(x.shape[1:])))
        elif kind in ("data", "type"):
            args.append(_rows(c.num_dst, x))
        else:
            args.append(x)
    return StatelessInterpreter(fn).run(*args) if isinstance(fn, fx.GraphModule) else fn(*args)


_RULES[ops.spmm] = _spmm_shape
_RULES[ops.scaled_spmm] = lambda c, x, w, op, reduce, src_scale, dst_scale: _spmm_shape(c, x, w, op, reduce)
_RULES[ops.etype_spmm] = lambda c, x, weight, w, op, reduce: _spmm_shape(
    c, _zeros((1, weight.shape[-1]), x.dtype), w, op, reduce
)
_RULES[ops.index_spmm] = lambda c, x, weight, types, w, op, reduce, feature=None: _RULES[ops.etype_spmm](
    c, x, weight, w, op, reduce
)
_RULES[ops.bucketed_reduce] = _bucketed_shape


class StatelessInterpreter(fx.Interpreter):
    """Runs a graph's modules on copies of their buffers: a module in training mode may update them
    (batch-norm statistics), and a probe on stand-in values must leave the user's state alone."""

    def call_module(self, target: fx.node.Target, args: tuple, kwargs: dict[str, Any]) -> Any:
        assert isinstance(target, str), "fx names a called module by its path"
        module = self.fetch_module(target)
        state = {
            **{k: v.detach().to("cpu") for k, v in module.named_parameters()},
            **{k: v.detach().to("cpu", copy=True) for k, v in module.named_buffers()},
        }
        return torch.func.functional_call(module, state, tuple(args), dict(kwargs))

    def fetch_module(self, target: str) -> nn.Module:
        return self.module.get_submodule(target)


class _Prop(StatelessInterpreter):
    def __init__(self, module, real_rows: dict):
        super().__init__(module)
        self.real_rows = real_rows  # stand-in count -> real count (or a function giving it)

    def fetch_attr(self, target):
        return _stand_in(super().fetch_attr(target))

    def call_function(self, target, args, kwargs):
        if target in _RULES:
            return _RULES[target](*args, **kwargs)
        return super().call_function(target, args, kwargs)

    def run_node(self, n):
        out = super().run_node(n)
        if isinstance(out, torch.Tensor):
            shape = tuple(out.shape)
            if shape and shape[0] in self.real_rows:
                real = self.real_rows[shape[0]]
                shape = (real() if callable(real) else real,) + shape[1:]
            n.meta["shape"], n.meta["dtype"] = shape, out.dtype
        return out


def _stand_in(value, rows: int | None = None):
    """Zeros on CPU shaped like ``value`` (a tensor), with ``rows`` rows when given; other values as they are."""
    if not isinstance(value, torch.Tensor):
        return value
    shape = tuple(value.shape) if rows is None else (rows,) + tuple(value.shape[1:])
    return _zeros(shape, value.dtype)


def propagate_shapes(module: fx.GraphModule, ctx: GraphContext, inputs: list) -> None:
    """Annotate ``module.graph`` with shapes for these inputs (``inputs[0]`` is the context)."""
    nodes, dst, edges, src_pairs, dst_pairs = STAND_IN_ROWS
    if ctx.num_dst == ctx.num_nodes:
        dst = nodes  # a whole-graph block: its destination rows are all rows
    placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
    values = [_ShapeOnly(nodes, dst, edges, src_pairs, dst_pairs)]
    spaces = {
        "nodes": nodes,
        "dst": dst,
        "src_pairs": src_pairs,
        "dst_pairs": dst_pairs,
        "relations": None,
        "edges": edges,
    }
    for n, x in zip(placeholders[1:], inputs[1:]):
        kind = n.meta.get("input", (None,))[0]
        if kind == DEFERRED_INPUT and not isinstance(x, torch.Tensor):  # an earlier call's retyped context
            values.append(values[0])
            continue
        if kind == DEFERRED_INPUT:
            rows = spaces.get(n.meta.get("rows"))
        else:
            # a per-node tensor is the node UDF's: one row per destination node (all nodes in a whole-graph call)
            rows = (
                edges
                if n.meta.get("per_edge")
                else dst
                if n.meta.get("per_node")
                else {"ndata": nodes, "edata": edges}.get(kind)
            )
        values.append(_stand_in(x, rows))
    paired = _retyped(module, ctx, placeholders, inputs) or ctx
    real_rows = {
        nodes: ctx.num_nodes,
        dst: ctx.num_dst,
        edges: ctx.num_edges,
        src_pairs: lambda: paired.pair_count("src"),
        dst_pairs: lambda: paired.pair_count("dst"),
    }
    # Random operators (dropout) run on the stand-ins too: the global generator is restored after, so
    # compiling (each pass re-annotates) draws nothing from the user's random stream.
    with torch.no_grad(), torch.random.fork_rng(devices=[]), _one_thread():
        _Prop(module, real_rows).run(*values)


@contextlib.contextmanager
def _one_thread():
    """torch on one thread inside the block: stand-in rows are too few to gain from more, and on busy cores
    every parallel region can cost milliseconds (most of the shape propagation's time on a loaded 2-core
    machine). The thread count is torch's global setting: it is back as it was after the block."""
    threads = torch.get_num_threads()
    if threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _retyped(module: fx.GraphModule, ctx, placeholders: list, inputs: list):
    """The block a ``retype`` operator of the plan, or an inlined earlier call's retyped context, moves it to
    (its pairs are the plan's), or None."""
    for n in module.graph.nodes:
        if n.op == "call_function" and n.target is ops.retype and n.args[1] in placeholders:
            return ops.retype(ctx, inputs[placeholders.index(n.args[1])], *n.args[2:])
    for n, x in zip(placeholders, inputs):
        if n.meta.get("input", (None,))[0] == DEFERRED_INPUT and not isinstance(x, torch.Tensor):
            return x
    return None

"""Shape propagation over an MP-DFG with meta tensors (no data, no compute).

Inputs become meta tensors of the real shapes; graph operators get shape
rules; every other operator runs natively on meta tensors. Sets
``meta['shape']`` and ``meta['dtype']`` on every tensor-valued node.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from . import ops


class _ShapeOnly:
    def __init__(self, num_nodes, num_dst, num_edges):
        self.num_nodes, self.num_dst, self.num_edges = num_nodes, num_dst, num_edges


def _rows(n, x):
    return torch.empty((n,) + tuple(x.shape[1:]), dtype=x.dtype, device="meta")


_RULES = {
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
    ops.edge_softmax_aggregate: lambda c, lg, x: _rows(c.num_dst, x),
    ops.sddmm_softmax_aggregate: lambda c, a, b, op, side, slope, x: _rows(c.num_dst, x),
    ops.ntype_matmul: lambda c, x, w: torch.empty((x.shape[0], w.shape[-1]), dtype=x.dtype, device="meta"),
    ops.dst_ntype_matmul: lambda c, v, w: torch.empty((v.shape[0], w.shape[-1]), dtype=v.dtype, device="meta"),
    ops.etype_gather_matmul: lambda c, x, w, side="src": torch.empty((c.num_edges, w.shape[-1]), dtype=x.dtype,
                                                                     device="meta"),
    ops.etype_gather_head_matmul: lambda c, y, w, side="src": torch.empty(
        (c.num_edges,) + tuple(y.shape[1:-1]) + (w.shape[-1],), dtype=y.dtype, device="meta"),
    ops.u_op_v: lambda c, a, b, op, side, negative_slope=None: torch.empty(
        (c.num_edges,) + tuple(torch.broadcast_shapes(tuple(a.shape[1:]), tuple(b.shape[1:])))
        if op != "dot" else (c.num_edges,) + tuple(a.shape[1:-1]) + (1,), dtype=a.dtype, device="meta"),
}


def _spmm_shape(c, x, w, op, reduce):
    feat = torch.broadcast_shapes(tuple(x.shape[1:]), tuple(w.shape[1:])) if w is not None else tuple(x.shape[1:])
    return torch.empty((c.num_dst,) + tuple(feat), dtype=x.dtype, device="meta")


def _bucketed_shape(c, fn, kinds, *inputs):
    args = []
    for kind, x in zip(kinds, inputs):
        if kind == "mailbox":
            args.append(x[: c.num_dst].new_empty((c.num_dst, 1) + tuple(x.shape[1:])))
        elif kind in ("data", "type"):
            args.append(_rows(c.num_dst, x))
        else:
            args.append(x)
    return fn(*args)


_RULES[ops.spmm] = _spmm_shape
_RULES[ops.bucketed_reduce] = _bucketed_shape


class _Prop(fx.Interpreter):
    def fetch_attr(self, target):
        value = super().fetch_attr(target)
        return value.to("meta") if isinstance(value, torch.Tensor) else value

    def call_module(self, target, args, kwargs):
        module = self.fetch_module(target)
        state = {k: v.to("meta") for k, v in {**dict(module.named_parameters()),
                                              **dict(module.named_buffers())}.items()}
        return torch.func.functional_call(module, state, tuple(args), dict(kwargs))

    def fetch_module(self, target):
        return self.module.get_submodule(target)

    def call_function(self, target, args, kwargs):
        if target in _RULES:
            return _RULES[target](*args, **kwargs)
        return super().call_function(target, args, kwargs)

    def run_node(self, n):
        out = super().run_node(n)
        if isinstance(out, torch.Tensor):
            n.meta["shape"], n.meta["dtype"] = tuple(out.shape), out.dtype
        return out


def propagate_shapes(module: fx.GraphModule, ctx, inputs: list) -> None:
    """Annotate ``module.graph`` with shapes for these inputs (``inputs[0]`` is the context)."""
    meta_ctx = _ShapeOnly(ctx.num_nodes, ctx.num_dst, ctx.num_edges)
    metas = [meta_ctx] + [x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs[1:]]
    with torch.no_grad():
        _Prop(module).run(*metas)

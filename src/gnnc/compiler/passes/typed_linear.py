"""Typed linear layers without weight replication (Hector).

Pattern: ``bmm(x_e.unsqueeze(1), W_e).squeeze(1)`` (or ``matmul``) where
``x_e = gather_src(x)`` and ``W_e = gather_srctype(W)`` (weights of each
edge's source node type) — or ``gather_dsttype`` with ``gather_dst`` — or
``W_e = gather_etype(W)`` (weights of each edge's relation); also
``bmm(v.unsqueeze(1), nodes.type W)`` on node data.
Replacement: node-type weights: ``gather_src(ntype_matmul(x, W))`` — one
matmul per node type over contiguous rows, then one gather; relation
weights: ``etype_gather_matmul(x, W)`` — one matmul per relation block over
gathered rows. No ``[E, K, M]`` weight copies are made.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from ...ir import operators as ops
from ...ir.mpdfg import MPDFG
from .contract import PassResult, rewrote
from .nodes import new_node

_MATMULS = {torch.bmm, torch.matmul, operator.matmul}


def _unsqueezed_row(node):
    """x when node is x.unsqueeze(1) (x 2-D), else None."""
    if node.op == "call_method" and node.target == "unsqueeze" and len(node.args) == 2 and node.args[1] == 1:
        x = node.args[0]
        if isinstance(x, fx.Node) and len(x.meta.get("shape", ())) == 2:
            return x
    return None


def _match(sq: fx.Node):
    """(matmul node, x, weight gather) for squeeze(matmul(x.unsqueeze(1), W_gathered), 1)."""
    if not (sq.op == "call_method" and sq.target == "squeeze" and len(sq.args) == 2 and sq.args[1] == 1):
        return None
    mm = sq.args[0]
    if not (isinstance(mm, fx.Node) and mm.op == "call_function" and mm.target in _MATMULS and len(mm.users) == 1):
        return None
    x, w = mm.args[0], mm.args[1]
    row = _unsqueezed_row(x) if isinstance(x, fx.Node) else None
    if row is None or not isinstance(w, fx.Node) or w.op != "call_function":
        return None
    w_shape = w.meta.get("shape")
    if w_shape is None or len(w_shape) != 3:
        return None
    return mm, row, w


def typed_linear(dfg: MPDFG) -> PassResult:
    out = dfg.copy()
    g = out.graph
    for sq in list(g.nodes):
        found = _match(sq)
        if found is None:
            continue
        mm, row, w = found
        ctx = w.args[0]
        with g.inserting_before(sq):
            if (
                w.target in (ops.gather_srctype, ops.gather_dsttype)
                and row.op == "call_function"
                and row.target is (ops.gather_src if w.target is ops.gather_srctype else ops.gather_dst)
            ):
                typed = new_node(g, sq, ops.ntype_matmul, (ctx, row.args[1], w.args[1]))
                replacement = new_node(g, sq, row.target, (ctx, typed))
                how = "node-type matmul, then gather"
            elif (
                w.target is ops.gather_etype
                and row.op == "call_function"
                and row.target in (ops.gather_src, ops.gather_dst)
            ):
                side = "src" if row.target is ops.gather_src else "dst"
                replacement = new_node(g, sq, ops.etype_gather_matmul, (ctx, row.args[1], w.args[1], side))
                how = "per-relation matmul over gathered rows"
            elif w.target is ops.gather_ntype:
                replacement = new_node(g, sq, ops.dst_ntype_matmul, (ctx, row, w.args[1]))
                how = "node-type matmul"
            else:
                continue
        sq.replace_all_uses_with(replacement)
        g.erase_node(sq)
        g.erase_node(mm)
        out.log.append(f"typed_linear: {sq.meta.get('source')}: {how} (no per-row weight copies)")
    for mm in list(g.nodes):
        found = _match_heads(mm)
        if found is None:
            continue
        gathered, w = found
        with g.inserting_before(mm):
            side = "src" if gathered.target is ops.gather_src else "dst"
            replacement = new_node(g, mm, ops.etype_gather_head_matmul, (w.args[0], gathered.args[1], w.args[1], side))
        mm.replace_all_uses_with(replacement)
        g.erase_node(mm)
        out.log.append(
            f"typed_linear: {mm.meta.get('source')}: per-relation, per-head matmul (no [E, H, K, M] weight copies)"
        )
    return rewrote(dfg, out)


def _match_heads(mm: fx.Node):
    """(gathered rows, weight gather) for matmul(gather(y) [E,H,..,K], gather_etype(W) [E,H,K,M])."""
    if not (mm.op == "call_function" and mm.target in _MATMULS and len(mm.args) == 2):
        return None
    a, w = mm.args
    if not (
        isinstance(a, fx.Node)
        and isinstance(w, fx.Node)
        and a.op == "call_function"
        and a.target in (ops.gather_src, ops.gather_dst)
        and w.op == "call_function"
        and w.target is ops.gather_etype
    ):
        return None
    a_shape, w_shape = a.meta.get("shape"), w.meta.get("shape")
    if not a_shape or not w_shape or len(w_shape) != 4 or len(a_shape) < 3 or a_shape[1] != w_shape[1]:
        return None
    if a_shape[-1] != w_shape[2] or any(d != 1 for d in a_shape[2:-1]):
        return None
    return a, w

"""Linear operator reordering (Hector 3.2.3): a product of weights formed before the rows meet them.

Pattern: ``sum(view(etype_pair_matmul(x, W, side), -1, H, D) * pair_etype_rows(a, side), -1)``
— per (relation, node) pair, ``(x W_r) . a_r`` head by head, RGAT's
attention term. Replacement: ``etype_pair_matmul(x, W'_r, side)`` with
``W'_r[k, h] = sum_d W_r[k, h D + d] a_r[h, d]`` ([R, K, H], formed once
per call from the weights, differentiably): the [pairs, H D] product is
never formed, and the matmul's output width drops from H D to H. Where
the [pairs, H D] matmul has other users (RGAT's source side, whose rows are
also the messages), it stays for them and the scores still take the folded
matmul: 2 K H FLOPs more per pair, but neither the relation rows broadcast
to [pairs, H, D] nor their product with the rows is formed (or saved for
backward: 2 x 835 MB for RGAT on full ogbn-mag).

Pattern: ``sum(gather_src_pair(squeeze(etype_pair_head_matmul(k, W, src), 2)) * gather_dst(q), -1)``
(or ``gather_dst_local``; or without the squeeze, k [N, H, D], as ``index_typed`` leaves DGL's
``matmul(k.unsqueeze(2), relation_att[etype]).squeeze(2)``) — HGT's ``(k_u W_r) . q_v`` per head.
Replacement: ``etype_bilinear_dot(k, W, q)``: the same scores, with the
relation matrix applied on whichever side has fewer (relation, node) pairs
on the graph — ``k W_r`` per source pair, or ``q W_r^T`` per destination
pair — by the cost model, and the dot taken as a per-head SDDMM (no
[E, H, D] product). Exact by associativity (up to rounding).

Pattern: ``etype_bilinear_dot(k, W, q)`` (with no other user) times
``gather_etype(p)`` ([R, H] or [R, 1]: a factor per relation and head), or
times / divided by a number — HGT's ``* relation_pri / sqrt(d_k)``.
Replacement: ``etype_bilinear_dot(k, W * p, q)`` (``ops.scale_heads``,
resp. ``W * c``, ``W / c``): the scores are linear in W, so the factors move
onto the [R, H, D, D] matrices and no [E, H] product or gathered [E, H]
factor is formed, forward or backward.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from ...ir import operators as ops
from ...ir.mpdfg import MPDFG
from .contract import PassResult, rewrote
from .dce import dce
from .nodes import new_node, same_value
from .patterns import is_call, is_last_dim_sum


def _match(total: fx.Node):
    """(pair matmul, relation rows, side) for sum(view(pair matmul) * pair_etype_rows, -1)."""
    if not (is_last_dim_sum(total) and len(total.args) <= 2 and not total.kwargs.get("keepdim", False)):
        return None
    product = total.args[0]
    if not (
        isinstance(product, fx.Node)
        and product.op == "call_function"
        and product.target in (operator.mul, torch.mul)
        and len(product.users) == 1
        and len(product.args) == 2
    ):
        return None
    for viewed, rows in (product.args, reversed(product.args)):
        if not (
            isinstance(viewed, fx.Node)
            and viewed.op == "call_method"
            and viewed.target in ("view", "reshape")
            and isinstance(rows, fx.Node)
            and rows.target is ops.pair_etype_rows
        ):
            continue
        mm = viewed.args[0]
        if not (isinstance(mm, fx.Node) and mm.target is ops.etype_pair_matmul):
            continue
        side = mm.kwargs.get("side", mm.args[3] if len(mm.args) > 3 else "src")
        v_shape, r_shape, a_shape = viewed.meta.get("shape"), rows.meta.get("shape"), rows.args[1].meta.get("shape")
        if (
            rows.args[2] != side
            or not (v_shape and r_shape and a_shape)
            or len(v_shape) != 3
            or tuple(r_shape[1:]) != tuple(v_shape[1:])
            or len(a_shape) != 3
        ):
            continue
        return mm, rows, side
    return None


def _match_bilinear(total: fx.Node):
    """(ctx, k, W, q, q side, squeezed) for
    sum(gather_src_pair(squeeze(pair head matmul(k, W, src), 2)) * gather_dst(q), -1) with k [N, H, 1, D],
    or the same without the squeeze with k [N, H, D] (``squeezed`` False)."""
    if not (is_last_dim_sum(total) and len(total.args) <= 2 and not total.kwargs.get("keepdim", False)):
        return None
    product = total.args[0]
    if (
        not (is_call(product, operator.mul) or is_call(product, torch.mul))
        or len(product.users) != 1
        or len(product.args) != 2
    ):
        return None
    for left, right in (product.args, reversed(product.args)):
        if not (
            is_call(left, ops.gather_src_pair)
            and len(left.users) == 1
            and (is_call(right, ops.gather_dst) or is_call(right, ops.gather_dst_local))
        ):
            continue
        sq = left.args[1]
        squeezed = (
            isinstance(sq, fx.Node)
            and sq.op == "call_method"
            and sq.target == "squeeze"
            and tuple(sq.args[1:]) in ((2,), (-2,))
            and len(sq.users) == 1
        )
        mm = sq.args[0] if squeezed else sq  # unsqueezed k rows ([N, H, 1, D]), or [N, H, D] rows as they are
        if not (
            is_call(mm, ops.etype_pair_head_matmul) and len(mm.users) == 1 and len(mm.args) > 3 and mm.args[3] == "src"
        ):
            continue
        k_shape, q_shape = mm.args[1].meta.get("shape"), right.meta.get("shape")
        rank = 4 if squeezed else 3
        if not (
            k_shape
            and q_shape
            and len(k_shape) == rank
            and (not squeezed or k_shape[2] == 1)
            and len(q_shape) == 3
            and tuple(q_shape[1:]) == (k_shape[1], k_shape[-1])
            and mm.meta.get("shape", (0,))[-1] == k_shape[-1]
        ):
            continue
        return (
            mm.args[0],
            mm.args[1],
            mm.args[2],
            right.args[1],
            "dst" if is_call(right, ops.gather_dst) else "dst_local",
            squeezed,
        )
    return None


def _match_scaled_scores(n: fx.Node):
    """(scores, the weight's scaled value as (target, args)) for scores * gather_etype(p), scores * c or
    scores / c, where scores is an ``etype_bilinear_dot`` with no other user."""
    if (
        not (is_call(n, operator.mul) or is_call(n, torch.mul) or is_call(n, operator.truediv))
        or n.kwargs
        or len(n.args) != 2
    ):
        return None
    orders = (n.args,) if n.target is operator.truediv else (n.args, tuple(reversed(n.args)))
    for scores, factor in orders:
        if not (is_call(scores, ops.etype_bilinear_dot) and len(scores.users) == 1):
            continue
        weight = scores.args[2]
        if isinstance(factor, (int, float)) and not isinstance(factor, bool):
            return scores, (operator.truediv if n.target is operator.truediv else operator.mul, (weight, factor))
        if n.target is operator.truediv or not is_call(factor, ops.gather_etype):
            continue
        p, heads = factor.args[1], (scores.meta.get("shape") or (0, 0))[1:]
        p_shape = p.meta.get("shape")
        # a factor of another dtype would promote eager's scores; folded, it would meet the weight instead
        if (
            p_shape
            and len(p_shape) == 2
            and len(heads) == 1
            and p_shape[1] in (1, heads[0])
            and p.meta.get("dtype") is not None
            and p.meta.get("dtype") == weight.meta.get("dtype")
        ):
            return scores, (ops.scale_heads, (weight, p))
    return None


def linear_reorder(dfg: MPDFG) -> PassResult:
    out = dce(dfg).dfg  # the gathers earlier passes moved past are still users of the matmuls
    g = out.graph
    for total in list(g.nodes):
        found = _match(total)
        if found is None:
            continue
        mm, rows, side = found
        ctx, x, weight = mm.args[:3]
        with g.inserting_before(total):
            folded = new_node(g, total, ops.fold_attention, (weight, rows.args[1]))
            new = same_value(new_node(g, total, ops.etype_pair_matmul, (ctx, x, folded, side)), total)
        total.replace_all_uses_with(new)
        out.log.append(
            f"linear_reorder: {total.meta.get('source')}: (x W_r) . a_r -> x (W_r a_r) per "
            f"(relation, {side}) pair (weights multiplied first)"
        )
    for total in list(g.nodes):
        found = _match_bilinear(total)
        if found is None:
            continue
        ctx, k, weight, q, q_side, squeezed = found
        with g.inserting_before(total):
            if not squeezed:
                k = new_node(g, total, "unsqueeze", (k, 2), op="call_method")
            new = same_value(new_node(g, total, ops.etype_bilinear_dot, (ctx, k, weight, q, q_side)), total)
        total.replace_all_uses_with(new)
        out.log.append(
            f"linear_reorder: {total.meta.get('source')}: (k W_r) . q -> relation matrix on the side "
            "with fewer (relation, node) pairs, then a per-head dot (cost model)"
        )
    for n in list(g.nodes):  # in order: a scale folded here leaves a bilinear dot the next one can match
        found = _match_scaled_scores(n)
        if found is None:
            continue
        scores, (target, args) = found
        with g.inserting_before(n):
            weight = new_node(g, n, target, args)
            weight.meta.update({k: args[0].meta[k] for k in ("shape", "dtype") if k in args[0].meta})
            new = same_value(new_node(g, n, ops.etype_bilinear_dot, scores.args[:2] + (weight,) + scores.args[3:]), n)
        n.replace_all_uses_with(new)
        g.erase_node(n)
        g.erase_node(scores)
        out.log.append(
            f"linear_reorder: {n.meta.get('source')}: scores times a factor per relation or a constant "
            "-> the factor folded into the relation matrices (no [E, H] product)"
        )
    return rewrote(dfg, out)

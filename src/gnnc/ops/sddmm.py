"""DGL's generalized SDDMM (``dgl.ops.gsddmm``) and its named forms (``u_dot_v``, ``e_add_u``, ``copy_u``, ...)."""

from __future__ import annotations

import itertools

from .. import backend
from ..message_passing import graph_call
from .relation import TARGETS, check_operand, relation_of

BINARY_OPS = ("add", "sub", "mul", "div", "dot")
OPS = BINARY_OPS + ("copy_lhs", "copy_rhs")
_WHERE = {"u": "source node", "v": "destination node", "e": "edge"}


@graph_call
def gsddmm(g, op: str, lhs_data, rhs_data, lhs_target: str = "u", rhs_target: str = "v"):
    """``out[e] = lhs_data[lhs_target of e] op rhs_data[rhs_target of e]`` for every edge of ``g``'s one relation.

    Targets: ``u`` (the edge's source node: one row per source node), ``v`` (its destination node) or ``e``
    (the edge: one row per edge, in the user's edge order). ``op`` in add, sub, mul, div, dot (sums the
    last broadcast feature dim, kept as size 1), copy_lhs (``lhs_data`` gathered; ``rhs_data`` unused),
    copy_rhs. Feature dims broadcast right-aligned (numpy rules). The result is in the user's edge order and
    differentiable in both operands.
    """
    if op not in OPS:
        raise ValueError(f"gsddmm: op must be one of {OPS}, got {op!r}")
    for name, target in (("lhs_target", lhs_target), ("rhs_target", rhs_target)):
        if target not in TARGETS:
            raise ValueError(f"gsddmm: {name} must be one of {TARGETS}, got {target!r}")
    r = relation_of(g, "gsddmm")
    if op in ("copy_lhs", "copy_rhs"):
        x, target = (lhs_data, lhs_target) if op == "copy_lhs" else (rhs_data, rhs_target)
        x = check_operand("gsddmm", "lhs_data" if op == "copy_lhs" else "rhs_data", x, r.rows(target), _WHERE[target])
        return x if target == "e" else x.index_select(0, r.to_user(r.ends(target)))
    a = _operand(r, "lhs_data", lhs_data, lhs_target)
    b = _operand(r, "rhs_data", rhs_data, rhs_target)
    return r.to_user(backend.kernels().sddmm(a, r.ends(lhs_target), b, r.ends(rhs_target), op))


def _operand(r, name: str, x, target: str):
    x = check_operand("gsddmm", name, x, r.rows(target), _WHERE[target])
    return r.from_user(x) if target == "e" else x


def _named(lhs: str, op: str, rhs: str):
    """DGL's ``<lhs>_<op>_<rhs>``, e.g. ``u_dot_v(g, x, y)``."""

    def run(g, x, y):
        return gsddmm(g, op, x, y, lhs_target=lhs, rhs_target=rhs)

    run.__name__ = run.__qualname__ = f"{lhs}_{op}_{rhs}"
    run.__doc__ = (
        f"``gsddmm(g, '{op}', x, y, '{lhs}', '{rhs}')``: {_WHERE[lhs]} features x {op} "
        f"{_WHERE[rhs]} features y on every edge (see ``gsddmm``)."
    )
    return run


NAMED = {
    f.__name__: f
    for f in (_named(lhs, op, rhs) for lhs, rhs in itertools.permutations(TARGETS, 2) for op in BINARY_OPS)
}
globals().update(NAMED)


def copy_u(g, x):
    """Source node features ``x`` on every edge, in the user's edge order (``gsddmm(g, 'copy_lhs', x, None)``)."""
    return gsddmm(g, "copy_lhs", x, None)


def copy_v(g, x):
    """Destination node features ``x`` on every edge (``gsddmm(g, 'copy_rhs', None, x)``)."""
    return gsddmm(g, "copy_rhs", None, x)


def copy_e(g, x):
    """Edge features ``x`` as they are (DGL's ``copy_e``: the edges' own features)."""
    return x


__all__ = ["copy_e", "copy_u", "copy_v", "gsddmm"]
__all__ += list(NAMED)

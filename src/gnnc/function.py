"""Built-in message and reduce functions, named as in DGL's ``dgl.function``.

``copy_u('h', 'm')``, ``copy_e``, every ``{u,v,e}_{add,sub,mul,div,dot}_{u,v,e}``
binary message (e.g. ``u_mul_e('h', 'w', 'm')``) and the reducers ``sum``,
``mean``, ``max``, ``min``. Each is an ordinary callable UDF (so any
executor can run it) that also records what it computes, so executors and
the compiler can recognise it and use a dedicated kernel.
"""

from dataclasses import dataclass as _dataclass

import torch as _torch
import torch.fx as _fx

SIDE_SPACES = {"u": "src", "v": "dst", "e": "data"}  # the batch space each side letter reads
_BINARY = {
    "add": _torch.add,
    "sub": _torch.sub,
    "mul": _torch.mul,
    "div": _torch.div,
    "dot": lambda a, b: (a * b).sum(-1, keepdim=True),
}


def right_align(x: _torch.Tensor, other: _torch.Tensor) -> _torch.Tensor:
    """``x`` with unit dims inserted after the edge dimension up to ``other``'s rank (DGL's broadcast rule:
    feature shapes right-aligned, the edge dimension first). A leaf when traced: the compiler resolves it
    once shapes are known (``gnnc.compiler.passes.align``)."""
    gap = other.dim() - x.dim()
    return x.reshape(x.shape[:1] + (1,) * gap + x.shape[1:]) if gap > 0 else x


_fx.wrap("right_align")


@_dataclass(frozen=True)
class BuiltinMessage:
    """Message ``out = op(lhs.lhs_field, rhs.rhs_field)``; ``op='copy'`` has no rhs."""

    op: str
    lhs: str
    lhs_field: str
    out: str
    rhs: str | None = None
    rhs_field: str | None = None

    def __call__(self, edges):
        a = getattr(edges, SIDE_SPACES[self.lhs])[self.lhs_field]
        if self.op == "copy":
            return {self.out: a}
        b = getattr(edges, SIDE_SPACES[self.rhs])[self.rhs_field]
        return {self.out: _BINARY[self.op](right_align(a, b), right_align(b, a))}

    @property
    def name(self) -> str:
        if self.op == "copy":
            return f"copy_{self.lhs}"
        return f"{self.lhs}_{self.op}_{self.rhs}"


@_dataclass(frozen=True)
class BuiltinReduce:
    """Reduce ``out = op over in-edges of msg``; op in sum, mean, max, min."""

    op: str
    msg: str
    out: str

    def __call__(self, nodes):
        box = nodes.mailbox[self.msg]
        if self.op == "sum":
            return {self.out: box.sum(1)}
        if self.op == "mean":
            return {self.out: box.mean(1)}
        if self.op == "max":
            return {self.out: box.max(1).values}
        return {self.out: box.min(1).values}

    @property
    def name(self) -> str:
        return self.op


def copy_u(u: str, out: str) -> BuiltinMessage:
    """Message: the source node's feature ``u``."""
    return BuiltinMessage("copy", "u", u, out)


def copy_e(e: str, out: str) -> BuiltinMessage:
    """Message: the edge's feature ``e``."""
    return BuiltinMessage("copy", "e", e, out)


# DGL 0.x's names (and argument names), removed in DGL 1.0 and still common in published code
# (benchmarking-gnns writes ``fn.copy_src(src='h', out='m')``)
def copy_src(src: str, out: str) -> BuiltinMessage:
    """DGL 0.x's ``copy_u``."""
    return copy_u(src, out)


def copy_edge(edge: str, out: str) -> BuiltinMessage:
    """DGL 0.x's ``copy_e``."""
    return copy_e(edge, out)


def src_mul_edge(src: str, edge: str, out: str) -> BuiltinMessage:
    """DGL 0.x's ``u_mul_e``."""
    return BuiltinMessage("mul", "u", src, out, "e", edge)


def _binary(lhs: str, op: str, rhs: str):
    def make(lhs_field: str, rhs_field: str, out: str) -> BuiltinMessage:
        return BuiltinMessage(op, lhs, lhs_field, out, rhs, rhs_field)

    make.__name__ = f"{lhs}_{op}_{rhs}"
    make.__doc__ = f"Message: {op} of the {SIDE_SPACES[lhs]} feature and the {SIDE_SPACES[rhs]} feature."
    return make


_BINARY_NAMES = []
for _l in "uve":
    for _r in "uve":
        if _l != _r:
            for _op in _BINARY:
                _f = _binary(_l, _op, _r)
                globals()[_f.__name__] = _f
                _BINARY_NAMES.append(_f.__name__)


def sum(msg: str, out: str) -> BuiltinReduce:
    return BuiltinReduce("sum", msg, out)


def mean(msg: str, out: str) -> BuiltinReduce:
    return BuiltinReduce("mean", msg, out)


def max(msg: str, out: str) -> BuiltinReduce:
    return BuiltinReduce("max", msg, out)


def min(msg: str, out: str) -> BuiltinReduce:
    return BuiltinReduce("min", msg, out)


__all__ = [
    "BuiltinMessage",
    "BuiltinReduce",
    "copy_u",
    "copy_e",
    "copy_src",
    "copy_edge",
    "src_mul_edge",
    "sum",
    "mean",
    "max",
    "min",
    *_BINARY_NAMES,
]


def __dir__():
    """Only the built-ins (``__all__``) are listed; ``right_align``, the compiler's helper, stays importable."""
    return sorted(set(__all__) | {name for name in globals() if name.startswith("__")})

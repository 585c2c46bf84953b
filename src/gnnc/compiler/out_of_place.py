"""In-place operators of a traced UDF, made out of place (or refused) with eager's meaning kept.

Eager runs a UDF on fresh tensors: ``edges.src[k]`` / ``edges.dst[k]`` /
``*.type[k]`` are gathered copies, and an operator's result is its own. An
in-place operator on such a tensor (``F.relu(x, inplace=True)``, an
``nn.ReLU(inplace=True)``, ``x.clamp_(0)``, ``x += y``) changes only that
tensor, and every later read of it sees the change. The compiler moves
operators between edges and nodes, so it must not write into anything: the
operator becomes its out-of-place twin and the later reads of its operand
read the twin's result. Where eager's in-place write would reach further
(into the user's edge data or a mailbox the UDF reads again, a reached
tensor or parameter, a view of another tensor, an operand of which a view
was taken before the write) or the operator has no out-of-place twin, the
UDF is refused (:class:`TraceFailure`): it runs eagerly, as written.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from ..ir.calls import calls_one_of

# Augmented assignments, traced by the tracer's proxies as these (``x += y`` mutates a tensor x).
AUGMENTED = {
    operator.iadd: operator.add,
    operator.isub: operator.sub,
    operator.imul: operator.mul,
    operator.itruediv: operator.truediv,
    operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod,
    operator.ipow: operator.pow,
    operator.iand: operator.and_,
    operator.ior: operator.or_,
    operator.ixor: operator.xor,
}

# Accesses eager answers with a fresh gathered tensor on every read (edges.data and mailboxes are not:
# edges.data is the user's own tensor, a mailbox is one tensor for all reads of its bucket).
_FRESH_SPACES = {"src", "dst", "srctype", "dsttype", "type"}

# Operators whose result is a new tensor, never a view of (or the same object as) an input.
_FRESH_FUNCTIONS = {
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.floordiv,
    operator.mod,
    operator.pow,
    operator.neg,
    operator.matmul,
    operator.lt,
    operator.le,
    operator.gt,
    operator.ge,
    operator.eq,
    operator.ne,
    operator.and_,
    operator.or_,
    operator.xor,
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
    torch.mm,
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
    torch.cat,
    torch.stack,
    torch.sum,
    torch.mean,
    torch.amax,
    torch.amin,
    torch.softmax,
    torch.log_softmax,
    torch.prod,
    torch.clone,
    F.relu,
    F.leaky_relu,
    F.elu,
    F.gelu,
    F.silu,
    F.selu,
    F.softplus,
    F.linear,
    F.layer_norm,
    F.normalize,
    F.tanh,
    F.sigmoid,
    F.celu,
    F.prelu,
    F.hardtanh,
    F.mish,
    F.softmax,
    F.log_softmax,
    F.relu6,
    F.hardswish,
    F.hardsigmoid,
    torch.zeros,
    torch.ones,
    torch.empty,
    torch.full,
}
_FRESH_METHODS = {
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
    "mm",
    "clamp",
    "square",
    "reciprocal",
    "clone",
    "masked_fill",
    "sum",
    "mean",
    "amax",
    "amin",
    "softmax",
    "log_softmax",
    "prod",
    "where",
    "new_zeros",
    "new_ones",
    "new_empty",
    "new_full",
}
_FRESH_MODULES = (
    nn.Linear,
    nn.Bilinear,
    nn.LayerNorm,
    nn.ReLU,
    nn.LeakyReLU,
    nn.ELU,
    nn.GELU,
    nn.SiLU,
    nn.Sigmoid,
    nn.Tanh,
    nn.Softplus,
    nn.PReLU,
    nn.Softmax,
    nn.LogSoftmax,
    nn.Mish,
    nn.SELU,
    nn.CELU,
    nn.Hardtanh,
    nn.Hardswish,
    nn.Hardsigmoid,
)

# In-place methods whose out-of-place twin (name without the ``_``) takes other arguments or draws randomness.
_NO_TWIN = {
    "copy_",
    "zero_",
    "fill_",
    "set_",
    "resize_",
    "resize_as_",
    "requires_grad_",
    "share_memory_",
    "normal_",
    "uniform_",
    "bernoulli_",
    "exponential_",
    "geometric_",
    "cauchy_",
    "log_normal_",
    "random_",
    "fill_diagonal_",
    "put_",
    "map_",
    "apply_",
    "detach_",
    "as_strided_",
    "squeeze_",
    "unsqueeze_",
    "t_",
    "transpose_",
    "swapdims_",
    "swapaxes_",
}


class InPlaceRefused(Exception):
    """An in-place operator whose eager effect the compiled plan would not reproduce; names it."""

    def __init__(self, node: fx.Node, why: str):
        super().__init__(f"in-place {describe(node)} {why}")
        self.node = node


def describe(n: fx.Node) -> str:
    if n.op == "call_method":
        return f"Tensor.{n.target}"
    return getattr(n.target, "__name__", str(n.target))


def is_in_place(n: fx.Node) -> bool:
    if n.op == "call_function":
        return n.kwargs.get("inplace") is True or n.target in AUGMENTED or _torch_in_place(n.target) is not None
    if n.op == "call_method":
        return n.target == "__setitem__" or (n.target.endswith("_") and not n.target.startswith("_"))
    return False


def _number(x: fx.Node) -> bool:
    """Whether ``x`` is a size read (a Python number: ``+=`` on it rebinds a name, writes nothing)."""
    if x.op == "call_method" and x.target in ("size", "dim", "numel"):
        return True
    if x.op == "call_function" and x.target is getattr and x.args[1] in ("shape", "ndim"):
        return True
    return (
        x.op == "call_function"
        and x.target is operator.getitem
        and isinstance(x.args[0], fx.Node)
        and _number(x.args[0])
    )


def _torch_in_place(target):
    """The out-of-place torch function of ``torch.<name>_``, or None."""
    name = getattr(target, "__name__", "")
    if not name.endswith("_") or name.startswith("_") or getattr(torch, name, None) is not target:
        return None
    return getattr(torch, name[:-1], None)


def _twin(n: fx.Node):
    """(op, target, kwargs) of ``n``'s out-of-place form, or None."""
    if n.op == "call_function" and n.kwargs.get("inplace") is True:
        return "call_function", n.target, {**n.kwargs, "inplace": False}
    if n.op == "call_function" and n.target in AUGMENTED:
        return "call_function", AUGMENTED[n.target], dict(n.kwargs)
    if n.op == "call_function":
        return "call_function", _torch_in_place(n.target), dict(n.kwargs)
    name = n.target
    if name in _NO_TWIN or name == "__setitem__" or not hasattr(torch.Tensor, name[:-1]):
        return None
    return "call_method", name[:-1], dict(n.kwargs)


def _fresh(x: fx.Node, root: nn.Module) -> bool:
    """Whether eager's ``x`` is a tensor of its own: a fresh access, or a new result of an operator."""
    if x.op == "placeholder":
        return x.meta.get("access", (None,))[0] in _FRESH_SPACES
    return calls_one_of(x, root, _FRESH_FUNCTIONS, _FRESH_METHODS, _FRESH_MODULES)


def make_out_of_place(graph: fx.Graph, root: nn.Module) -> None:
    """Replace every in-place operator of ``graph`` by its out-of-place twin, later reads of its operand
    reading the twin; raise :class:`InPlaceRefused` where that would not be eager's result. Runs before
    repeated accesses of one feature are merged (each read of ``edges.src[k]`` is its own tensor in eager)."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    for n in list(graph.nodes):
        if not is_in_place(n):
            continue
        x = n.args[0] if n.args else None
        if not isinstance(x, fx.Node):
            raise InPlaceRefused(n, "on a value the UDF does not compute")
        if n.target in AUGMENTED and _number(x):
            n.target = AUGMENTED[n.target]
            continue
        if not _fresh(x, root):
            raise InPlaceRefused(n, f"writes into {_what(x)}, which eager's write would change too")
        earlier = [u for u in x.users if u is not n and order[u] < order[n]]
        if any(not _fresh(u, root) for u in earlier):
            raise InPlaceRefused(n, "writes into a tensor of which a view was taken before")
        twin = _twin(n)
        if twin is None or twin[1] is None:
            raise InPlaceRefused(n, "has no out-of-place form gnnc knows")
        op, target, kwargs = twin
        with graph.inserting_before(n):
            new = graph.create_node(op, target, n.args, kwargs)
        new.meta.update(n.meta)
        order[new] = order[n]
        for u in [u for u in x.users if u is not n and order[u] > order[n]]:
            u.replace_input_with(x, new)
        n.replace_all_uses_with(new)
        graph.erase_node(n)


def _what(x: fx.Node) -> str:
    if x.op == "placeholder" and "access" in x.meta:
        space, key = x.meta["access"]
        return f"{space}[{key!r}]"
    if x.op in ("placeholder", "get_attr"):
        return "a tensor the UDF reaches from outside"
    return f"the result of {describe(x)}, which may share memory with its input"

"""One UDF over K heads from K copies of a per-head UDF (DGL's GAT tutorial: a ``GATLayer`` per head).

``batch_udf(udfs, shapes)`` traces each head's UDF (``trace.trace_udf``), checks the K traces are
one program (the same operators and constants; only the tensors and modules they reach may differ per head)
and returns a :class:`HeadBatchedUDF`: called on a batch whose head-stacked features hold head k at index k
of dim 1 (``[rows, K, ...]``; a mailbox ``[nodes, messages, K, ...]``), it runs that program once on all heads.
Per-head parameters are stacked at every call (read live), per-head ``nn.Linear``s become one product with
the stacked weights, and every dim argument is moved past the head axis. The batched program is written
in the forms the compiler fuses (head axis kept after the rows, products with shared tensors summed), so
K heads compile to the multi-head kernels of gnnc's own layers.

Each value carries its physical tensor (or tracing proxy), the position of its head axis (None: the same
for every head) and a small stand-in tensor of one head's shape, which every operator also runs on, so shapes and
errors are one head's. Operators outside the rules below, randomness (one draw for all heads would differ
from K draws in sequence), reads of row counts and head axes that would have to move raise
:class:`Unbatchable`; the caller then runs the heads one by one.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from ..compiler.trace import SOURCE_LINE, TraceFailure, trace_udf, udf_location
from ..runtime import reach
from ..scoped import scoped

_ROWS = {"mailbox": 2}  # leading row dims of a space's features (1 elsewhere)
# Row counts of the stand-ins that carry one head's shapes (never read: reads of row dims are refused).
# Stand-ins are small zero tensors on the CPU: torch's meta device would import 900 modules (150 MiB) on first use.
_STAND_IN_ROWS = (3, 2)


class Unbatchable(Exception):
    """The heads cannot run as one program; they run one by one."""


@dataclass
class _Value:
    """``value``: physical tensor or proxy; ``bdim``: its head axis (None: shared by all heads); ``meta``: one
    head's stand-in (its shape, with rows at stand-in counts, and dtype)."""

    value: object
    bdim: int | None
    meta: torch.Tensor
    rows: int | None = None  # leading row dims of a shared value, where known (None: up to 2, as a mailbox's)

    @property
    def rank(self) -> int:
        return self.meta.dim()

    @property
    def row_dims(self) -> int:
        """Leading dims that count graph rows (their stand-in sizes are not the graph's)."""
        if self.bdim is not None:
            return self.bdim  # a head-stacked value keeps its head axis right after its rows
        return len(_STAND_IN_ROWS) if self.rows is None else self.rows


_ELEMENTWISE = {
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
    torch.clamp,
    torch.maximum,
    torch.minimum,
    torch.square,
    torch.reciprocal,
    torch.log1p,
    torch.expm1,
    torch.where,
    F.relu,
    F.leaky_relu,
    F.elu,
    F.gelu,
    F.silu,
    F.selu,
    F.softplus,
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
    "to",
    "contiguous",
    "clone",
    "__radd__",
    "__rsub__",
    "__rmul__",
    "__rtruediv__",
    "__rpow__",
}
_REDUCTIONS = {torch.sum, torch.mean, torch.amax, torch.amin}
_REDUCTION_METHODS = {"sum", "mean", "amax", "amin"}
_SOFTMAX = {F.softmax, F.log_softmax, torch.softmax, torch.log_softmax}
_ELEMENTWISE_MODULES = (
    nn.LeakyReLU,
    nn.ReLU,
    nn.ELU,
    nn.GELU,
    nn.Sigmoid,
    nn.Tanh,
    nn.SiLU,
    nn.Identity,
    nn.Softplus,
    nn.CELU,
    nn.SELU,
)


def _stand_in(t) -> torch.Tensor:
    return torch.zeros(tuple(t.shape), dtype=t.dtype)


def _dim(d: int, rank: int) -> int:
    if not -rank <= d < max(rank, 1):
        raise Unbatchable(f"dim {d} out of range for rank {rank}")
    return d % rank if rank else 0


def _physical_dim(v: _Value, d: int) -> int:
    """Where logical dim ``d`` of ``v`` is physically (past the head axis when at or after it)."""
    d = _dim(d, v.rank)
    return d if v.bdim is None or d < v.bdim else d + 1


def _after_head(v: _Value) -> int:
    """How many of ``v``'s logical dims follow its head axis."""
    return v.rank - v.bdim


class _Program:
    """Interprets head 0's trace on head-stacked values; the other traces give each head's tensors and modules."""

    def __init__(self, traces, udfs, k: int):
        self.traces, self.udfs, self.k = traces, udfs, k
        self.probing = False  # checking the program on a batch of stand-ins (run first)
        self._known: dict = {}  # slot -> (one head's stand-in, whether it differs per head)

    # ------------------------------------------------------------------ what differs per head
    def tensor(self, objects: list, slot) -> _Value:
        """Head-stacked (or shared) tensors ``objects`` (one per head) at ``slot``; their shapes and which are
        shared are read from the real tensors on the probe run (a tracer may hand proxies of them later)."""
        if self.probing:
            first, per_head = objects[0], any(o is not objects[0] for o in objects)
            if not all(isinstance(o, torch.Tensor) for o in objects):
                raise Unbatchable(f"reaches a {type(first).__name__} where a tensor was traced")
            if per_head and any(tuple(o.shape) != tuple(first.shape) or o.dtype != first.dtype for o in objects):
                raise Unbatchable("a per-head tensor differs in shape or dtype between heads")
            self._known[slot] = (_stand_in(first), per_head)
        meta, per_head = self._known[slot]
        if self.probing:
            value = torch.zeros((self.k, *meta.shape) if per_head else meta.shape, dtype=meta.dtype)
        else:
            value = torch.stack(objects) if per_head else objects[0]
        return _Value(value, 0 if per_head else None, meta, rows=0)

    # ------------------------------------------------------------------ running
    def run(self, batch, shapes: dict) -> dict:
        env: dict = {}
        nodes = [list(t.graph.nodes) for t in self.traces]
        for i, n in enumerate(nodes[0]):
            heads = [ns[i] for ns in nodes]
            if n.op == "placeholder" and "access" in n.meta:
                space, key = n.meta["access"]
                env[n] = self._access(batch, space, key, shapes)
            elif n.op == "placeholder":
                env[n] = self.tensor(
                    [reach.resolve(u, t.externals[h.target]) for u, t, h in zip(self.udfs, self.traces, heads)], i
                )
            elif n.op == "get_attr":
                env[n] = self.tensor([_attribute(t.root, n.target) for t in self.traces], i)
            elif n.op == "call_module":
                with scoped(SOURCE_LINE, n.meta.get("udf_line")):
                    env[n] = self._module([t.root.get_submodule(n.target) for t in self.traces], n, env, i)
            elif n.op in ("call_function", "call_method"):
                with scoped(SOURCE_LINE, n.meta.get("udf_line")):
                    env[n] = self._call(n, env)
            else:  # output
                return {k: self._output(k, v, env) for k, v in n.args[0].items()}
        raise Unbatchable("the UDF returns nothing")

    def _access(self, batch, space: str, key: str, shapes: dict) -> _Value:
        if (space, key) not in shapes:
            raise Unbatchable(f"{space}[{key!r}]: no shape known")
        trailing, dtype, batched = shapes[space, key]
        rows = _ROWS.get(space, 1)
        value = getattr(batch, space)[key]
        meta = torch.zeros(_STAND_IN_ROWS[:rows] + tuple(trailing), dtype=dtype)
        return _Value(value, rows if batched else None, meta, rows=rows)

    def _output(self, key, node, env) -> _Value:
        v = env.get(node) if isinstance(node, fx.Node) else None
        if v is None or not isinstance(v, _Value):
            raise Unbatchable(f"output {key!r} is not a tensor")
        if v.bdim not in (None, 1):
            raise Unbatchable(f"output {key!r} would keep its heads at dim {v.bdim}")
        return v

    # ------------------------------------------------------------------ operators
    def _call(self, n: fx.Node, env: dict):
        args = fx.node.map_arg(n.args, lambda a: env[a])
        kwargs = fx.node.map_arg(n.kwargs, lambda a: env[a])
        values = [a for a in _flat((args, kwargs)) if isinstance(a, _Value)]
        name = n.target if n.op == "call_method" else getattr(n.target, "__name__", str(n.target))
        if not values:  # arithmetic on numbers and shapes
            result = _evaluate(n, args, kwargs)
            if isinstance(result, torch.Tensor):  # made from nothing traced: it would be frozen in the plan
                raise Unbatchable(f"{name} makes a tensor from no batch value")
            return result
        if n.target is getattr and isinstance(args[0], _MaxMin) and args[1] in ("values", "indices"):
            return getattr(args[0], args[1])
        if n.op == "call_method" and name in ("size", "dim") or n.target is getattr:
            return self._metadata(n, name, args, kwargs)
        if n.target is operator.getitem:
            return _index(args[0], args[1])
        if n.target in _ELEMENTWISE or n.op == "call_method" and name in _ELEMENTWISE_METHODS:
            return _elementwise(n, args, kwargs)
        if n.target in _SOFTMAX or n.op == "call_method" and name in ("softmax", "log_softmax"):
            return _softmax(n, args, kwargs)
        if n.target in _REDUCTIONS or n.op == "call_method" and name in _REDUCTION_METHODS:
            return _reduction(n, args, kwargs)
        if n.target in (torch.cat, torch.concat):
            return _concat(args, kwargs)
        if n.target is torch.unsqueeze or n.op == "call_method" and name == "unsqueeze":
            return _unsqueeze(args[0], kwargs.get("dim", args[1] if len(args) > 1 else None))
        if n.target is torch.squeeze or n.op == "call_method" and name == "squeeze":
            return _squeeze(args[0], kwargs.get("dim", args[1] if len(args) > 1 else None))
        if n.op == "call_method" and name in ("view", "reshape") or n.target is torch.reshape:
            return _reshape(n, args, self.k)
        if n.target is F.linear:
            return _linear(self.k, args[0], *args[1:], **kwargs)
        if n.target in (torch.max, torch.min) or n.op == "call_method" and name in ("max", "min"):
            return _max_min(n, args, kwargs)
        raise Unbatchable(f"operator {name} has no head-batching rule")

    def _metadata(self, n: fx.Node, name: str, args, kwargs):
        v = args[0]
        if name == "dim" or n.target is getattr and args[1] in ("ndim",):
            return v.rank
        if n.target is getattr and args[1] in ("dtype", "device"):
            return getattr(v.meta, args[1]) if args[1] == "dtype" else v.value.device
        if n.target is getattr and args[1] == "shape" or name == "size" and len(args) == 1 and not kwargs:
            return _Shape(v)
        if name == "size":
            return _Shape(v)[kwargs.get("dim", args[1] if len(args) > 1 else None)]
        raise Unbatchable(f"reads {args[1] if n.target is getattr else name} of a batched value")

    def _module(self, modules: list, n: fx.Node, env: dict, slot: int) -> _Value:
        args = fx.node.map_arg(n.args, lambda a: env[a])
        if n.kwargs or len(args) != 1 or not isinstance(args[0], _Value):
            raise Unbatchable(f"module {n.target} called with other than one tensor")
        x, first = args[0], modules[0]
        if (
            all(type(m) is nn.Linear for m in modules)
            and len({(m.in_features, m.out_features, m.bias is None) for m in modules}) == 1
        ):
            bias = self.tensor([m.bias for m in modules], (slot, "bias")) if first.bias is not None else None
            return _linear(self.k, x, self.tensor([m.weight for m in modules], (slot, "weight")), bias)
        if all(
            type(m) is type(first) and isinstance(m, _ELEMENTWISE_MODULES) and m.extra_repr() == first.extra_repr()
            for m in modules
        ):  # one activation per head, alike: any of them serves all heads
            return _Value(first(x.value), x.bdim, first(x.meta))
        raise Unbatchable(f"module {n.target} ({type(first).__name__}) has no head-batching rule")


def _attribute(root, target: str):
    obj = root
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _flat(tree):
    if isinstance(tree, (list, tuple)):
        for t in tree:
            yield from _flat(t)
    elif isinstance(tree, dict):
        for t in tree.values():
            yield from _flat(t)
    else:
        yield tree


def _evaluate(n: fx.Node, args, kwargs):
    if n.op == "call_method":
        return getattr(args[0], n.target)(*args[1:], **kwargs)
    return n.target(*args, **kwargs)


class _Shape:
    """A value's ``.shape``: dims after its rows are numbers, row dims are refused."""

    def __init__(self, v: _Value):
        self.v = v

    def __getitem__(self, d):
        if not isinstance(d, int):
            raise Unbatchable("a slice of a batched value's shape")
        d = _dim(d, self.v.rank)
        if d < self.v.row_dims:
            raise Unbatchable("reads a row count")
        return self.v.meta.shape[d]


# ------------------------------------------------------------------------ rules
def _elementwise(n: fx.Node, args, kwargs) -> _Value:
    """Broadcasting: batched operands keep as many dims after the head axis; shared ones get a unit dim there."""
    values = [a for a in _flat((args, kwargs)) if isinstance(a, _Value)]
    meta = _evaluate(n, *_metas(args, kwargs))
    batched = [v for v in values if v.bdim is not None]
    if not batched:
        return _Value(_evaluate(n, *_physicals(args, kwargs, lambda v: v.value)), None, meta)
    feature = [v for v in batched if v.bdim > 0]  # rows before the head axis (features, not parameters)
    after = {_after_head(v) for v in (feature or batched)}
    if len(after) != 1:
        raise Unbatchable("operands keep their heads at different places")
    after = after.pop()

    def place(v: _Value):
        if v.bdim is None:
            return v.value if v.rank <= after else v.value.unsqueeze(v.rank - after)
        if _after_head(v) == after:
            return v.value
        if v.bdim == 0 and _after_head(v) < after:  # a per-head parameter with fewer dims: unit dims after K
            return v.value.reshape((-1,) + (1,) * (after - v.rank) + tuple(v.meta.shape))
        if v.bdim == 0:  # more dims than follow the head: leading ones broadcast over the rows
            lead = v.rank - after
            return v.value.permute(*range(1, lead + 1), 0, *range(lead + 1, v.rank + 1))
        raise Unbatchable("operands keep their heads at different places")

    value = _evaluate(n, *_physicals(args, kwargs, place))
    return _Value(value, meta.dim() - after, meta)


def _metas(args, kwargs):
    return _physicals(args, kwargs, lambda v: v.meta)


def _physicals(args, kwargs, fn):
    def sub(a):
        if isinstance(a, _Value):
            return fn(a)
        if isinstance(a, (list, tuple)):
            return type(a)(sub(x) for x in a)
        if isinstance(a, dict):
            return {k: sub(x) for k, x in a.items()}
        return a

    return sub(args), sub(kwargs)


def _only_batched_first(args, kwargs, what: str) -> _Value:
    x = args[0]
    if not isinstance(x, _Value) or any(isinstance(a, _Value) for a in _flat((args[1:], kwargs))):
        raise Unbatchable(f"{what} of other than one tensor")
    return x


def _softmax(n, args, kwargs) -> _Value:
    x = _only_batched_first(args, kwargs, "softmax")
    dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
    if not isinstance(dim, int):
        raise Unbatchable("softmax without a dim")
    rest = {k: v for k, v in kwargs.items() if k != "dim"}
    meta = _evaluate(n, (x.meta, dim, *args[2:]), rest)
    if x.bdim is None:
        return _Value(_evaluate(n, (x.value, dim, *args[2:]), rest), None, meta)
    return _Value(_evaluate(n, (x.value, _physical_dim(x, dim), *args[2:]), rest), x.bdim, meta)


def _reduction(n, args, kwargs) -> _Value:
    x = _only_batched_first(args, kwargs, "a reduction")
    dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
    keepdim = kwargs.get("keepdim", args[2] if len(args) > 2 else False)
    if dim is None or set(kwargs) - {"dim", "keepdim"} or len(args) > 3:
        raise Unbatchable("a reduction over all dims, or with a dtype")
    dims = [dim] if isinstance(dim, int) else list(dim)
    meta = _evaluate(n, (x.meta, dim, keepdim), {})
    if x.bdim is None:
        return _Value(_evaluate(n, (x.value, dim, keepdim), {}), None, meta)
    physical = [_physical_dim(x, d) for d in dims]
    bdim = x.bdim if keepdim else x.bdim - sum(p < x.bdim for p in physical)
    value = _evaluate(n, (x.value, physical[0] if isinstance(dim, int) else tuple(physical), keepdim), {})
    return _Value(value, bdim, meta)


def _concat(args, kwargs) -> _Value:
    tensors = args[0]
    dim = kwargs.get("dim", args[1] if len(args) > 1 else 0)
    if not all(isinstance(t, _Value) for t in tensors) or set(kwargs) - {"dim"}:
        raise Unbatchable("cat of other than tensors")
    meta = torch.cat([t.meta for t in tensors], dim)
    bdims = {t.bdim for t in tensors}
    if bdims == {None}:
        return _Value(torch.cat([t.value for t in tensors], dim), None, meta)
    if len(bdims) != 1:
        raise Unbatchable("cat of per-head and shared tensors")
    first = tensors[0]
    d = _physical_dim(first, dim)
    if d == first.bdim:
        raise Unbatchable("cat along the head axis")
    return _Value(torch.cat([t.value for t in tensors], d), first.bdim, meta)


def _unsqueeze(x: _Value, dim) -> _Value:
    if not isinstance(dim, int):
        raise Unbatchable("unsqueeze without a dim")
    meta = x.meta.unsqueeze(dim)
    if x.bdim is None:
        return _Value(x.value.unsqueeze(dim), None, meta)
    d = dim % (x.rank + 1)
    if 0 < x.bdim and d < x.bdim:
        raise Unbatchable("unsqueeze before the rows")
    physical = d if d <= x.bdim else d + 1
    return _Value(x.value.unsqueeze(physical), x.bdim + 1 if d <= x.bdim else x.bdim, meta)


def _squeeze(x: _Value, dim) -> _Value:
    if not isinstance(dim, int):
        raise Unbatchable("squeeze without a dim")
    meta = x.meta.squeeze(dim)
    if x.bdim is None:
        return _Value(x.value.squeeze(dim), None, meta)
    d = _dim(dim, x.rank)
    if d < x.bdim:
        raise Unbatchable("squeeze of a row dim (eager squeezes it on a graph of one row)")
    if x.meta.shape[d] != 1:
        return _Value(x.value, x.bdim, meta)
    return _Value(x.value.squeeze(_physical_dim(x, d)), x.bdim, meta)


def _reshape(n: fx.Node, args, k: int) -> _Value:
    x = args[0]
    shape = args[1] if len(args) == 2 and isinstance(args[1], (tuple, list, torch.Size)) else args[1:]
    if not all(isinstance(s, int) for s in shape):
        raise Unbatchable("a reshape to sizes read from a batched value")
    meta = x.meta.reshape(*shape)
    if x.bdim is None:
        return _Value(_evaluate(n, (x.value, *shape), {}), None, meta)
    # only the dims after the rows may change; rows stay one leading dim, written -1 (a number there would
    # be a row count, which eager checks against the graph's)
    if x.bdim != 1 or not shape or shape[0] != -1 or meta.shape[0] != x.meta.shape[0]:
        raise Unbatchable("a reshape that moves rows or heads")
    return _Value(_evaluate(n, (x.value, -1, k, *meta.shape[1:]), {}), 1, meta)


def _index(x, index):
    """``x[index]`` with ints, slices and ``...`` over the dims after the rows (the head axis kept)."""
    if isinstance(x, tuple):  # a max / min result: (values, indices)
        return x[index]
    items = index if isinstance(index, tuple) else (index,)
    if any(not isinstance(i, (int, slice)) and i is not Ellipsis for i in items) or items.count(Ellipsis) > 1:
        raise Unbatchable("indexing with other than ints, slices and ...")
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items = items[:at] + (slice(None),) * (x.rank - len(items) + 1) + items[at + 1 :]
    meta = x.meta[items]
    if x.bdim is None:
        return _Value(x.value[items], None, meta)
    if any(i != slice(None) for i in items[: x.bdim]):
        raise Unbatchable("indexes rows")
    return _Value(x.value[items[: x.bdim] + (slice(None),) + items[x.bdim :]], x.bdim, meta)


def _max_min(n: fx.Node, args, kwargs):
    """``x.max(dim)`` / ``torch.min(x, dim)``: (values, indices), both with the head axis."""
    x = _only_batched_first(args, kwargs, "max / min")
    dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
    keepdim = kwargs.get("keepdim", args[2] if len(args) > 2 else False)
    if not isinstance(dim, int) or set(kwargs) - {"dim", "keepdim"}:
        raise Unbatchable("max / min without one dim")
    meta = _evaluate(n, (x.meta, dim, keepdim), {})
    if x.bdim is None:
        values, indices = _evaluate(n, (x.value, dim, keepdim), {})
        return _MaxMin(_Value(values, None, meta[0]), _Value(indices, None, meta[1]))
    d = _physical_dim(x, dim)
    values, indices = _evaluate(n, (x.value, d, keepdim), {})
    bdim = x.bdim if keepdim or d > x.bdim else x.bdim - 1
    return _MaxMin(_Value(values, bdim, meta[0]), _Value(indices, bdim, meta[1]))


class _MaxMin(tuple):
    def __new__(cls, values, indices):
        return super().__new__(cls, (values, indices))

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


def _linear(k: int, x: _Value, weight, bias=None) -> _Value:
    """``x @ W_k.T + b_k`` for every head k (weights stacked at dim 0, or shared)."""
    w = weight if isinstance(weight, _Value) else _Value(weight, None, _stand_in(weight))
    b = bias if isinstance(bias, _Value) or bias is None else _Value(bias, None, _stand_in(bias))
    meta = F.linear(x.meta, w.meta, None if b is None else b.meta)
    if w.bdim is None and (b is None or b.bdim is None):
        if x.bdim is not None and _after_head(x) < 1:
            raise Unbatchable("a linear map over the head axis")
        value = F.linear(x.value, w.value, None if b is None else b.value)
        return _Value(value, x.bdim, meta)
    if x.bdim is None:  # shared input, per-head weights: one product with all heads' rows, heads split after
        if x.rank != 2:
            raise Unbatchable("a per-head linear map of a shared tensor of other than rows x features")
        out = w.meta.shape[0]
        flat_weight = w.value.reshape(k * out, -1) if w.bdim is not None else w.value.repeat(k, 1)
        flat_bias = None if b is None else b.value.reshape(-1) if b.bdim is not None else b.value.repeat(k)
        value = F.linear(x.value, flat_weight, flat_bias)
        return _Value(value.view(-1, k, out), 1, meta)
    if _after_head(x) != 1:
        raise Unbatchable("a per-head linear map of a tensor with more than one dim after its heads")
    if w.meta.shape[0] == 1:  # one output: a product with the weight row and a sum, as attention vectors are
        value = (x.value * w.value.reshape(-1, w.meta.shape[-1])).sum(-1, keepdim=True)
    else:
        value = (x.value.unsqueeze(-2) * w.value).sum(-1)
    if b is not None:
        value = value + b.value
    return _Value(value, x.bdim, meta)


class ProbeBatch:
    """A batch of stand-ins in the head-stacked layout (for checking a program and its output shapes)."""

    def __init__(self, shapes: dict, k: int):
        self._shapes, self._k = shapes, k

    def __getattr__(self, space):
        if space.startswith("_"):
            raise AttributeError(space)
        return _ProbeSpace(self, space)


class _ProbeSpace:
    def __init__(self, batch: ProbeBatch, space: str):
        self._batch, self._space = batch, space

    def __getitem__(self, key):
        trailing, dtype, batched = self._batch._shapes[self._space, key]
        rows = _STAND_IN_ROWS[: _ROWS.get(self._space, 1)]
        heads = (self._batch._k,) if batched else ()
        return torch.zeros(rows + heads + tuple(trailing), dtype=dtype)


class HeadBatchedUDF(nn.Module):
    """K per-head UDFs as one (``run``); ``outputs``: each output's (one head's trailing shape, dtype, batched)."""

    def __init__(self, udfs: list, traces: list, shapes: dict):
        super().__init__()
        owners = [getattr(u, "__self__", None) for u in udfs]
        if all(isinstance(o, nn.Module) for o in owners):
            self.heads = nn.ModuleList(owners)  # their parameters are the batched UDF's own (read live)
        self._udfs, self._traces, self._shapes = udfs, traces, shapes
        self.accesses = traces[0].accesses
        self.gnnc_udf_location = f"{udf_location(udfs[0])}, {len(udfs)} heads as one"
        self._program = _Program(traces, udfs, len(udfs))
        self._program.probing = True
        try:
            found = self._program.run(ProbeBatch(shapes, len(udfs)), shapes)
        except Unbatchable:
            raise
        except Exception as err:  # one head's own error, raised again when run one by one
            raise Unbatchable(f"{type(err).__name__}: {err}") from err
        finally:
            self._program.probing = False
        self.outputs = {key: (tuple(v.meta.shape[1:]), v.meta.dtype, v.bdim is not None) for key, v in found.items()}

    def run(self, batch) -> dict:
        return {key: v.value for key, v in self._program.run(batch, self._shapes).items()}


def batch_udf(udfs: list, shapes: dict) -> HeadBatchedUDF:
    """One UDF over the heads of ``udfs`` (one per head, the same code); ``shapes``: (space, key) -> (one head's
    trailing shape, dtype, whether head-stacked) of every feature they may read. Unbatchable where it cannot."""
    try:
        traces = [trace_udf(u) for u in udfs]
    except TraceFailure as err:
        raise Unbatchable(f"a head's UDF does not trace ({err})") from err
    if any(t.writes for t in traces):
        raise Unbatchable("a head's message UDF writes edges.data, which batched heads would not store")
    _check_same_program(traces)
    return HeadBatchedUDF(udfs, traces, shapes)


def _check_same_program(traces: list) -> None:
    """Every trace runs head 0's operators with head 0's constants (tensors and modules may differ)."""
    first = list(traces[0].graph.nodes)
    for t in traces[1:]:
        nodes = list(t.graph.nodes)
        if len(nodes) != len(first):
            raise Unbatchable("the heads' UDFs trace to different programs")
        index = {n: i for i, n in enumerate(nodes)}
        index0 = {n: i for i, n in enumerate(first)}
        for a, b in zip(first, nodes):
            same = (
                a.op == b.op
                and a.target == b.target
                and a.meta.get("access") == b.meta.get("access")
                and _shape_of_args(a.args, index0) == _shape_of_args(b.args, index)
                and _shape_of_args(a.kwargs, index0) == _shape_of_args(b.kwargs, index)
            )
            if a.op == "placeholder" and "access" not in a.meta:
                same = same and traces[0].externals[a.target] == t.externals[b.target]
            if not same:
                raise Unbatchable(f"the heads' UDFs differ at {a.format_node()}")


def _shape_of_args(args, index: dict):
    return fx.node.map_aggregate(
        args,
        lambda a: (
            ("node", index[a])
            if isinstance(a, fx.Node)
            else (type(a), a if isinstance(a, (int, float, str, bool, type(None))) else repr(a))
        ),
    )

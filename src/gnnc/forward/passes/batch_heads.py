"""batch_heads (a forward pass): K blocks of graph operations that differ only by head -> one block over heads.

DGL's GAT tutorial keeps one ``GATLayer`` per attention head; each head writes its features, runs
``apply_edges`` and ``update_all`` with its own bound UDFs and pops its result::

    head_outs = [attn_head(g, h) for attn_head in self.heads]   # K x (ndata['z'] = fc(h); apply_edges;
                                                                 #      update_all; ndata.pop('h'))

K single-head calls read the graph K times and pay K calls' overhead; gnnc's own layer runs one
multi-head kernel. Pattern, in a captured forward's fx graph: two or more consecutive blocks of operations
on one graph argument, each the same steps (writes, reads and pops of the same features, calls of the same
methods, local scopes entered and left) with UDFs that are the same function, bound to each head's module
(or one shared object).
Between and inside the blocks only deterministic tensor code may run (no randomness: it would draw before
the heads' UDFs once they move), and nothing there may use a block's reads. Replacement: one
``run_head_blocks`` (``gnnc.forward.replay.head_blocks``) at the last block's end, given every head's written values
and UDFs; each read becomes the matching head's item of its result. At run time the heads run as one block
on head-stacked features where their UDFs batch (``gnnc.forward.heads``), and one by one, as written,
otherwise; the graph is left as the blocks in sequence leave it. Nothing is rewritten when the forward writes
into a tensor anywhere.
"""

from __future__ import annotations

import operator
import types

import torch
import torch.fx as fx
import torch.nn.functional as F

from ...function import BuiltinMessage, BuiltinReduce
from ..capture import enter_scope, exit_scope, graph_frame, writes_in_place
from ..replay.head_blocks import HeadBlocks, Step, cat_heads, run_head_blocks
from .contract import ForwardPassResult, unchanged

_CALLS = {
    "apply_edges": (("message", "func"),),
    "apply_nodes": (("func",),),
    "update_all": (("message", "message_func"), ("reduce", "reduce_func"), ("update", "apply_node_func")),
}


def _root(graph: fx.Node) -> fx.Node:
    """The graph argument a local scope was entered on (``with g.local_scope() as s``: ``s`` -> ``g``)."""
    while graph.op == "call_function" and graph.target is enter_scope and _scope_of(graph.args[0]) is not None:
        graph = _scope_of(graph.args[0])
    return graph


def _scope_of(cm) -> fx.Node | None:
    """``g`` when ``cm`` is ``g.local_scope()``."""
    if (
        isinstance(cm, fx.Node)
        and cm.op == "call_method"
        and cm.target == "local_scope"
        and len(cm.args) == 1
        and not cm.kwargs
        and cm.args[0].meta.get("graph_argument")
    ):
        return cm.args[0]
    return None


def _graph_of(n: fx.Node):
    """The graph argument node ``n`` operates on (through local scopes), or None."""
    if n.op == "call_function" and n.target in (enter_scope, exit_scope) and _scope_of(n.args[0]) is not None:
        return _root(_scope_of(n.args[0]))
    if (
        n.op == "call_method"
        and n.target in _CALLS
        and isinstance(n.args[0], fx.Node)
        and n.args[0].meta.get("graph_argument")
    ):
        return _root(n.args[0])
    frame = n.args[0] if n.args and isinstance(n.args[0], fx.Node) and graph_frame(n.args[0]) else None
    if frame is not None and frame.args[0].meta.get("graph_argument"):
        return _root(frame.args[0])
    return None


def _step(n: fx.Node):
    """(Step, values written, UDF nodes) of a graph operation ``n``, or None for anything else."""
    if n.op == "call_function" and n.target in (enter_scope, exit_scope):
        return Step("enter" if n.target is enter_scope else "exit"), [], []
    if n.op == "call_method" and n.target in _CALLS:
        udfs = _udf_arguments(n)
        if udfs is None:
            return None
        return Step("call", method=n.target, udfs=len(udfs)), [], udfs
    if not (n.args and isinstance(n.args[0], fx.Node) and graph_frame(n.args[0]) and isinstance(n.args[1], str)):
        return None
    frame, key = n.args[0].args[1], n.args[1]
    if n.op == "call_function" and n.target is operator.setitem and isinstance(n.args[2], fx.Node):
        return Step("write", frame, key), [n.args[2]], []
    if n.op == "call_function" and n.target is operator.getitem:
        return Step("read", frame, key), [], []
    if n.op == "call_method" and n.target == "pop" and len(n.args) == 2 and not n.kwargs:
        return Step("pop", frame, key), [], []
    return None


def _udf_arguments(n: fx.Node):
    """The UDF constant nodes of a call, in the method's order; None when it has other arguments (but
    ``compile=None`` / ``True``: inside ``gnnc.compile`` both compile, as the replay's calls do)."""
    slots = _CALLS[n.target]
    if n.kwargs.get("compile", None) not in (None, True):
        return None
    found = list(n.args[1:])
    if len(found) > len(slots):
        return None
    for names in slots[len(found) :]:
        given = [k for k in names if k in n.kwargs]
        if len(given) > 1:
            return None
        found.append(n.kwargs[given[0]] if given else None)
    if set(n.kwargs) - {k for names in slots for k in names} - {"compile"}:
        return None
    while found and found[-1] is None:
        found.pop()
    if not all(isinstance(u, fx.Node) and "constant" in u.meta for u in found):
        return None
    return found


def _same_udf(a, b) -> bool:
    """The same function, bound to modules of one type (or the same object, or equal built-ins)."""
    if a is b or isinstance(a, (BuiltinMessage, BuiltinReduce)) and a == b:
        return True
    if isinstance(a, types.MethodType) and isinstance(b, types.MethodType):
        return a.__func__ is b.__func__ and type(a.__self__) is type(b.__self__)
    return False


def _matches(template: list, block: list) -> bool:
    for (_, (step_a, _, udfs_a)), (_, (step_b, _, udfs_b)) in zip(template, block):
        if step_a != step_b or not all(
            _same_udf(a.meta["constant"], b.meta["constant"]) for a, b in zip(udfs_a, udfs_b)
        ):
            return False
    return True


def _balanced(template: list) -> bool:
    """Every scope the block enters it also leaves, and it leaves none it did not enter."""
    depth = 0
    for _, (step, _, _) in template:
        depth += {"enter": 1, "exit": -1}.get(step.kind, 0)
        if depth < 0:
            return False
    return depth == 0


def _runs(ops: list):
    """Maximal runs of two or more equal blocks in ``ops`` (graph operations of one graph, in order)."""
    start = 0
    while start < len(ops):
        best = None
        for length in range(1, (len(ops) - start) // 2 + 1):
            template = ops[start : start + length]
            if not any(op[1][0].kind == "call" for op in template) or not _balanced(template):
                continue
            k = 1
            while start + (k + 1) * length <= len(ops) and _matches(
                template, ops[start + k * length : start + (k + 1) * length]
            ):
                k += 1
            if k > 1 and (best is None or k * length > best[0] * best[1]):
                best = (k, length)
        if best is None:
            start += 1
            continue
        k, length = best
        yield [ops[start + i * length : start + (i + 1) * length] for i in range(k)]
        start += k * length


# What may run between the blocks (and so before them once they move): deterministic tensor code.
_PURE_FUNCTIONS = {
    operator.getitem,
    getattr,
    torch.cat,
    torch.stack,
    torch.split,
    torch.chunk,
    F.linear,
    torch.matmul,
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.neg,
    operator.matmul,
    torch.add,
    torch.mul,
    torch.relu,
    torch.tanh,
    torch.sigmoid,
    F.relu,
    F.elu,
    F.leaky_relu,
    F.gelu,
}
_PURE_METHODS = {
    "view",
    "reshape",
    "split",
    "chunk",
    "flatten",
    "t",
    "transpose",
    "permute",
    "contiguous",
    "unsqueeze",
    "squeeze",
    "float",
    "double",
    "size",
    "dim",
}


def _movable(blocks: list, order: dict) -> bool:
    """Whether no block's operation takes what a block read, and the nodes between the blocks' first and last
    operation are constants, the blocks' own frames and scopes, and deterministic tensor code (``_PURE_*``,
    ``nn.Linear``) that uses neither a graph nor what a block reads: then every block can run at the last
    one's place."""
    first, last = order[blocks[0][0][0]], order[blocks[-1][-1][0]]
    members = {n for block in blocks for n, _ in block}
    tainted = {n for block in blocks for n, (step, _, _) in block if step.kind in ("read", "pop")}
    if any(a in tainted for n in members for a in n.all_input_nodes):
        return False  # a block writes what a block read (layers in sequence, not heads side by side)
    for n, i in order.items():
        if not first < i < last or n in members:
            continue
        if any(a in tainted for a in n.all_input_nodes):
            return False
        if graph_frame(n) or _scope_of(n) is not None:  # a frame or scope of the blocks' own operations only
            if not all(u in members for u in n.users):
                return False
            continue
        if any(a.meta.get("graph_argument") or graph_frame(a) for a in n.all_input_nodes):
            return False  # another use of a graph (maybe the same one, passed twice) would move past the heads
        pure = (
            n.op == "get_attr"
            or n.op == "call_function"
            and n.target in _PURE_FUNCTIONS
            or n.op == "call_method"
            and n.target in _PURE_METHODS
            or n.op == "call_module"
            and "linear" in n.meta
        )
        if not pure:
            return False
    return True


def batch_heads(graph: fx.Graph) -> ForwardPassResult:
    """The rewritten copy of ``graph`` and one log line per run of blocks (none: ``graph`` unchanged)."""
    if any(writes_in_place(n) for n in graph.nodes):
        return unchanged(graph)
    order = {n: i for i, n in enumerate(graph.nodes)}
    per_graph: dict = {}
    for n in graph.nodes:
        g = _graph_of(n)
        if g is not None:
            per_graph.setdefault(g, []).append((n, _step(n)))
    runs = []
    for ops in per_graph.values():
        for segment in _split_unknown(ops):
            runs += [blocks for blocks in _runs(segment) if _movable(blocks, order)]
    if not runs:
        return unchanged(graph)
    new = fx.Graph()
    env: dict = {}
    new.output(new.graph_copy(graph, env))
    log = []
    for blocks in runs:
        log.append(_replace(new, env, blocks))
    new.lint()
    return ForwardPassResult(new, True, log)


def _split_unknown(ops: list):
    """Stretches of recognized steps (a graph operation the pass does not know ends one)."""
    segment = []
    for n, step in ops:
        if step is None:
            if segment:
                yield segment
            segment = []
        else:
            segment.append((n, step))
    if segment:
        yield segment


def _replace(new: fx.Graph, env: dict, blocks: list) -> str:
    steps = tuple(step for _, (step, _, _) in blocks[0])
    spec = HeadBlocks(steps)
    graph_node = env[_graph_of(blocks[0][0][0])]
    values = [[env[v] for _, (_, written, _) in block for v in written] for block in blocks]
    udfs = [[env[u] for _, (_, _, found) in block for u in found] for block in blocks]
    last = env[blocks[-1][-1][0]]
    name = f"_gnnc_heads{sum(1 for n in new.nodes if n.op == 'get_attr' and n.target.startswith('_gnnc_heads'))}"
    with new.inserting_after(last):
        holder = new.get_attr(name)
        holder.meta["constant"] = spec
    sources = [_split_source([head[i] for head in values]) for i in range(len(values[0]))]
    with new.inserting_after(holder):
        result = new.call_function(run_head_blocks, (graph_node, holder, values, udfs, sources))
    with new.inserting_after(result):
        per_head = new.call_function(operator.getitem, (result, 0))
    with new.inserting_after(per_head):
        stacked = new.call_function(operator.getitem, (result, 1))
    point = stacked
    items = []
    for h, block in enumerate(blocks):
        reads = [env[n] for n, (step, _, _) in block if step.kind in ("read", "pop")]
        items.append([])
        for r, read in enumerate(reads):
            with new.inserting_after(point):
                head = new.call_function(operator.getitem, (per_head, h))
            with new.inserting_after(head):
                item = new.call_function(operator.getitem, (head, r))
            point = item
            read.replace_all_uses_with(item)
            items[-1].append(item)
    for r in range(len(items[0])):
        _join_heads([head[r] for head in items], stacked, r)
    _erase(new, {env[n] for block in blocks for n, _ in block})
    udf_names = ", ".join(
        getattr(getattr(u.meta["constant"], "__func__", u.meta["constant"]), "__qualname__", "?")
        for _, (_, _, found) in blocks[0]
        for u in found
    )
    description = ", ".join(_describe(s) for s in steps)
    return _Line(
        f"batch_heads: {len(blocks)} blocks of ({description}) on {graph_node.name}, UDFs {udf_names} "
        f"-> one block over head-stacked features",
        spec,
    )


def _erase(graph: fx.Graph, doomed: set) -> None:
    """Erase ``doomed`` nodes and the frames and scopes left unused by them (users before their inputs)."""
    for n in reversed(list(graph.nodes)):
        if n in doomed or (graph_frame(n) or _scope_of(n) is not None) and not n.users:
            graph.erase_node(n)


def _split_source(parts: list):
    """``B`` when ``parts`` are the items 0..K-1, in order, of ``torch.split(B, F, -1)`` (equal widths), or None."""
    split = parts[0].args[0] if parts[0].op == "call_function" and parts[0].target is operator.getitem else None
    if not (
        isinstance(split, fx.Node)
        and split.op == "call_function"
        and split.target is torch.split
        and len(split.args) == 3
        and not split.kwargs
        and split.args[2] in (-1, 1)
    ):
        return None
    widths = split.args[1]
    if not (isinstance(widths, (list, tuple)) and len(widths) == len(parts) and len(set(widths)) == 1):
        return None
    if any(
        p.op != "call_function" or p.target is not operator.getitem or p.args != (split, k) for k, p in enumerate(parts)
    ):
        return None
    return split.args[0]


def _join_heads(parts: list, stacked: fx.Node, r: int) -> None:
    """``torch.cat`` of read ``r`` of every head, in head order -> ``cat_heads`` (one reshape where it can)."""
    for use in list(parts[0].users):
        if (
            use.op == "call_function"
            and use.target is torch.cat
            and isinstance(use.args[0], (list, tuple))
            and list(use.args[0]) == parts
            and set(use.kwargs) <= {"dim"}
        ):
            dim = use.kwargs.get("dim", use.args[1] if len(use.args) > 1 else 0)
            with use.graph.inserting_before(use):
                read = use.graph.call_function(operator.getitem, (stacked, r))
            use.target, use.args, use.kwargs = cat_heads, (use.args[0], dim, read), {}


def _describe(step: Step) -> str:
    if step.kind == "call":
        return step.method
    if step.kind in ("enter", "exit"):
        return f"{step.kind} local_scope"
    return {
        "write": f"{step.frame}[{step.key!r}] =",
        "read": f"{step.frame}[{step.key!r}]",
        "pop": f"{step.frame}.pop({step.key!r})",
    }[step.kind]


class _Line(str):
    """A log line that also tells, when printed, what the last run did (heads as one, or one by one)."""

    def __new__(cls, text: str, spec: HeadBlocks):
        line = super().__new__(cls, text)
        line.spec = spec
        return line

    def __str__(self) -> str:
        return f"{str.__str__(self)} ({self.spec.outcome})"

"""type_masks (a forward pass): per-type code written with boolean masks -> rows by index, grouped once.

Users apply per-node-type layers on a homogeneous graph by masks, as DGL's HGT example does::

    k = h.new_empty(h.shape[0], d)
    for t in range(T):
        mask = ntype == t
        k[mask] = self.k_linears[t](h[mask])

Each ``h[mask]`` finds the mask's rows and gathers them, each ``k[mask] = ...`` scatters into ``k``, and in
training every write's backward copies all of ``k``'s gradient: T full copies per buffer.

Pattern, in a captured forward's fx graph (``gnnc.forward.capture``), for one tensor ``S``:
  masks ``S == c`` for two or more distinct integer constants ``c``, used only to index;
  gathers ``X[S == c]`` (any ``X``);
  writes ``O[S == c] = Y`` into a buffer ``O`` the forward allocated (``new_empty``, ``torch.zeros_like``,
  ...), one per constant, with every other use of ``O`` after the last write or reading only its metadata.
Replacement (``gnnc.forward.replay.type_rows``): ``layout = type_layout(S, cs)`` (rows of each type, stable:
cached by ``S``'s contents); ``parts = split_rows(X, layout)`` once per ``X`` (part c is ``X[S == c]``, same
rows in the same order); each write becomes ``write_rows`` (by index; a differentiated value is kept for
later) and ``finish_rows`` after the last write copies the kept ones into their rows at once, read
afterwards instead of ``O``. Gathers of one type from one ``X`` share one node, but not across a
message-passing call: without gradients a part is gathered when read, and one shared across the call (DGL's
HGT reads ``h[mask]`` before ``apply_edges`` and again after ``update_all``) would hold a copy of ``X`` through
it. Exact: the masks are disjoint, so the writes commute, and nothing reads ``O`` between them. Nothing is
rewritten when the forward writes in place anywhere else (a write could alias ``S``, an ``X`` or an ``O``).
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from ..capture import graph_frame, message_passing_call, writes_in_place
from ..replay.type_rows import finish_rows, split_rows, type_layout, write_rows
from .contract import ForwardPassResult, unchanged

_FRESH_METHODS = {"new_empty", "new_zeros", "new_ones", "new_full"}
_FRESH_FUNCTIONS = {
    torch.empty,
    torch.zeros,
    torch.ones,
    torch.full,
    torch.empty_like,
    torch.zeros_like,
    torch.ones_like,
    torch.full_like,
}
_METADATA_METHODS = {"size", "dim", "new_empty", "new_zeros", "new_ones", "new_full", "numel"}
_METADATA_FUNCTIONS = {torch.empty_like, torch.zeros_like, torch.ones_like, torch.full_like}
_METADATA_ATTRIBUTES = {"shape", "dtype", "device", "ndim", "layout", "requires_grad"}
_EQ = {operator.eq, torch.eq}


def _mask(n: fx.Node):
    """(S, c) when ``n`` is ``S == c`` with an integer constant ``c``."""
    if n.op == "call_function" and n.target in _EQ or n.op == "call_method" and n.target in ("eq", "__eq__"):
        if (
            len(n.args) == 2
            and not n.kwargs
            and isinstance(n.args[0], fx.Node)
            and isinstance(n.args[1], int)
            and not isinstance(n.args[1], bool)
        ):
            return n.args[0], n.args[1]
    return None


def _is_setitem(n: fx.Node) -> bool:
    return n.op == "call_function" and n.target is operator.setitem


def _metadata_use(use: fx.Node, of: fx.Node) -> bool:
    if use.op == "call_method" and use.target in _METADATA_METHODS and use.args[0] is of:
        return of not in use.args[1:] and of not in use.kwargs.values()
    if use.op == "call_function" and use.target in _METADATA_FUNCTIONS and use.args[0] is of:
        return of not in use.args[1:] and of not in use.kwargs.values()
    return use.op == "call_function" and use.target is getattr and use.args[1] in _METADATA_ATTRIBUTES


def _fresh(n: fx.Node) -> bool:
    return (n.op == "call_method" and n.target in _FRESH_METHODS) or (
        n.op == "call_function" and n.target in _FRESH_FUNCTIONS
    )


def type_masks(graph: fx.Graph) -> ForwardPassResult:
    """The rewritten copy of ``graph`` and one log line per rewritten group (none: ``graph`` unchanged)."""
    masks = {n: m for n in graph.nodes if (m := _mask(n)) is not None}
    by_type: dict[fx.Node, dict[fx.Node, int]] = {}
    for n, (types_, c) in masks.items():
        by_type.setdefault(types_, {})[n] = c
    order = {n: i for i, n in enumerate(graph.nodes)}
    plans = []
    for types_, group in by_type.items():
        plan = _plan(types_, group, order)
        if plan is not None:
            plans.append(plan)
    rewritten_writes = {w for plan in plans for ws in plan["writes"].values() for w in ws}
    if not plans or any(writes_in_place(n) and n not in rewritten_writes for n in graph.nodes):
        return unchanged(graph)
    new = fx.Graph()
    env: dict = {}
    out = new.graph_copy(graph, env)
    new.output(out)
    log = []
    for plan in plans:
        log.append(_rewrite(new, plan, env))
    new.lint()
    return ForwardPassResult(new, True, log)


def _plan(types_: fx.Node, group: dict, order: dict):
    """What to rewrite for the masks of ``types_``, or None where the pattern does not hold."""
    consts = tuple(sorted(set(group.values())))
    if len(consts) < 2:
        return None
    gathers, writes = [], {}
    for m in group:
        for use in m.users:
            if (
                use.op == "call_function"
                and use.target is operator.getitem
                and use.args[1] is m
                and use.args[0] is not m
            ):
                gathers.append(use)
            elif _is_setitem(use) and use.args[1] is m and use.args[0] is not m and use.args[2] is not m:
                writes.setdefault(use.args[0], []).append(use)
            else:
                return None
    for buffer, ws in writes.items():
        if not _fresh(buffer) or graph_frame(buffer):
            return None
        written = [group[w.args[1]] for w in ws]
        if len(set(written)) != len(written):
            return None
        last = max(order[w] for w in ws)
        for use in buffer.users:
            if use not in ws and order[use] < last and not _metadata_use(use, buffer):
                return None
    return {"types": types_, "group": group, "consts": consts, "gathers": gathers, "writes": writes}


def _describe(n: fx.Node) -> str:
    """``g0.ndata['ntype']`` for a feature read, else the node's name."""
    if (
        n.op == "call_function"
        and n.target is operator.getitem
        and isinstance(n.args[0], fx.Node)
        and graph_frame(n.args[0])
        and isinstance(n.args[0].args[0], fx.Node)
    ):
        return f"{n.args[0].args[0].name}.{n.args[0].args[1]}[{n.args[1]!r}]"
    return n.name


def _rewrite(graph: fx.Graph, plan: dict, env: dict) -> str:
    group = {env[m]: c for m, c in plan["group"].items()}
    consts = plan["consts"]
    index = {c: k for k, c in enumerate(consts)}
    nodes = list(graph.nodes)
    position = {n: i for i, n in enumerate(nodes)}
    first_mask = min(group, key=position.__getitem__)
    with graph.inserting_before(first_mask):
        layout = graph.call_function(type_layout, (env[plan["types"]], consts))
    for buffer, ws in plan["writes"].items():
        ws = sorted((env[w] for w in ws), key=position.__getitem__)
        last = ws[-1]
        pending = ()
        for w in ws:
            with graph.inserting_before(w):
                pending = graph.call_function(
                    write_rows, (env[buffer], layout, index[group[w.args[1]]], w.args[2], pending)
                )
        with graph.inserting_after(last):
            filled = graph.call_function(finish_rows, (env[buffer], layout, pending))
        after = {n for n in nodes[position[last] + 1 :]}
        env[buffer].replace_all_uses_with(filled, delete_user_cb=lambda use: use in after)
        for w in ws:
            graph.erase_node(w)
    parts: dict = {}
    gathers = sorted((env[g] for g in plan["gathers"]), key=position.__getitem__)
    calls = 0
    segment = {}  # node -> how many message-passing calls come before it
    for n in nodes:
        segment[n] = calls
        calls += message_passing_call(n)
    taken: dict = {}  # (source, type, segment) -> its part: one node however often the code gathers it
    for g in gathers:
        source = g.args[0]
        if source not in parts:
            with graph.inserting_before(g):
                parts[source] = graph.call_function(split_rows, (source, layout))
        key = (source, index[group[g.args[1]]], segment[g])
        if key not in taken:
            with graph.inserting_before(g):
                taken[key] = graph.call_function(operator.getitem, (parts[source], key[1]))
            taken[key].meta.update(g.meta)
        part = taken[key]
        g.replace_all_uses_with(part)
        graph.erase_node(g)
    for m in group:
        if not m.users:
            graph.erase_node(m)
    buffers = ", ".join(b.name for b in plan["writes"]) or "none"
    return (
        f"type_masks: {len(plan['group'])} masks {_describe(plan['types'])} == c for c in {list(consts)}: "
        f"{len(gathers)} gathers from {len(parts)} tensors by rows of one layout; writes into {buffers} by "
        "index (differentiated ones at once per buffer)"
    )

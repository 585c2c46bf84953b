"""Recompute cheap node values in backward instead of keeping them (the computational-graph study's
recomputation, on node rows).

Pattern: a value with node residency (V) that is not returned by the call,
computed from the call's inputs by a chain of at most ``MAX_CHAIN`` row-wise,
deterministic operators (typed and dense linears, elementwise arithmetic and
activations, node-type broadcasts, views): HGT's ``k = x W_t + b_t`` or
``GELU(t)`` in its update, which the operators reading them would keep for
backward. The chain may start at graph inputs, and at values the call returns
that are no larger than the value (the caller holds them anyway).

Also: every ``etype_sddmm_softmax_aggregate`` (RGAT's typed message under its
attention) is let rebuild its (relation, source) pair table in backward a part
at a time (``rebuild``), where that table is a sizeable share of memory.

Replacement: ``recomputable(value, recipe, *leaves)``, ``recipe`` the chain as
its own graph module (a ``recompute_<i>`` child of the plan's root), read by
the value's users. At run time (``gnnc.backend.rebuild_in_backward``) autograd keeps a
note in place of the value and rebuilds it from the leaves when backward
needs it; only values of at least ``MIN_SHARE`` of their device's memory are
treated so, and nothing changes when no gradient is recorded.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from ...ir import operators as ops
from ...ir.calls import calls_one_of
from ...ir.mpdfg import MPDFG, live_module
from .contract import PassResult, rewrote
from .nodes import new_node

# Longest chain rebuilt for one value: each remembered value rebuilds its whole chain.
MAX_CHAIN = 8

_COMPUTE_FUNCTIONS = {
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.neg,
    operator.matmul,
    torch.add,
    torch.sub,
    torch.mul,
    torch.div,
    torch.neg,
    torch.exp,
    torch.sigmoid,
    torch.tanh,
    torch.relu,
    torch.erf,
    torch.matmul,
    F.relu,
    F.gelu,
    F.silu,
    F.elu,
    F.leaky_relu,
    F.sigmoid,
    F.tanh,
    F.linear,
    ops.ntype_matmul,
    ops.dst_ntype_matmul,
}
_BROADCASTS = {ops.gather_ntype, ops.node_type_rows, ops.dst_nodes}
_COMPUTE_METHODS = {"add", "sub", "mul", "div", "neg", "exp", "sigmoid", "tanh", "relu", "matmul"}
_VIEW_METHODS = {"view", "reshape", "squeeze", "unsqueeze", "flatten", "transpose", "permute", "expand", "expand_as"}
_COMPUTE_MODULES = (nn.Linear, nn.ReLU, nn.GELU, nn.Sigmoid, nn.Tanh, nn.SiLU, nn.ELU, nn.LeakyReLU)


def _computes(n: fx.Node, root) -> bool:
    """Whether ``n`` is a deterministic row-wise operator writing a new tensor."""
    return calls_one_of(n, root, _COMPUTE_FUNCTIONS, _COMPUTE_METHODS, _COMPUTE_MODULES)


def _in_chain(n: fx.Node, root) -> bool:
    return (
        _computes(n, root)
        or (n.op == "call_function" and n.target in _BROADCASTS)
        or (n.op == "call_method" and n.target in _VIEW_METHODS)
    )


_NEVER_SAVE = {operator.add, operator.sub, torch.add, torch.sub, "add", "sub"}  # their backward reads no operand


def _may_be_saved(n: fx.Node) -> bool:
    """Whether some operator reading ``n`` (through views) may keep it for backward."""
    for user in n.users:
        if user.op == "call_method" and user.target in _VIEW_METHODS:
            if _may_be_saved(user):
                return True
        elif user.op == "output" or user.target not in _NEVER_SAVE or user.kwargs:
            return True
    return False


def _numel(n: fx.Node) -> int | None:
    shape = n.meta.get("shape")
    return None if shape is None else math.prod(shape)


def _chain(value: fx.Node, root, returned: set) -> tuple[list, list] | None:
    """(the chain's nodes in graph order, its leaves), or None where ``value`` has no rebuildable chain."""
    size = _numel(value)
    members, leaves, stack = set(), [], [value]
    while stack:
        n = stack.pop()
        if n in members:
            continue
        members.add(n)
        if len(members) > MAX_CHAIN:
            return None
        for a in n.all_input_nodes:
            held = a in returned and size is not None and (_numel(a) or math.inf) <= size
            if a.op in ("placeholder", "get_attr") or held:
                if a not in leaves:
                    leaves.append(a)
            elif _in_chain(a, root):
                stack.append(a)
            else:
                return None
    return [n for n in value.graph.nodes if n in members], leaves


def _describe(leaf: fx.Node) -> str:
    kind, name = leaf.meta.get("input") or (None, None)
    return f"{kind}[{name!r}]" if kind else leaf.name


def _recipe(root, chain: list, leaves: list) -> fx.GraphModule:
    graph, env = fx.Graph(), {}
    for leaf in leaves:
        env[leaf] = graph.placeholder(leaf.name)
    for n in chain:
        env[n] = graph.node_copy(n, lambda a: env[a])
    graph.output(env[chain[-1]])
    return live_module(root, graph)


def recompute(dfg: MPDFG) -> PassResult:
    out = dfg.copy()
    _rebuild_pair_tables(out)
    g = out.graph
    returned = set(out.output_node.all_input_nodes)
    marked = []
    for n in list(g.nodes):
        if n.meta.get("res") != "V" or n in returned or not _computes(n, out.root) or not _may_be_saved(n):
            continue
        found = _chain(n, out.root, returned)
        if found is not None:
            marked.append((n, *found))
    if not marked:
        return rewrote(dfg, out)
    root = nn.Module()
    for name, child in out.root.named_children():
        root.add_module(name, child)
    for i, (n, chain, leaves) in enumerate(marked):  # every recipe from the chains as found, then the notes
        root.add_module(f"recompute_{i}", _recipe(out.root, chain, leaves))
    for i, (n, chain, leaves) in enumerate(marked):
        name = f"recompute_{i}"
        with g.inserting_after(n):
            recipe = g.get_attr(name)
        with g.inserting_after(recipe):
            note = new_node(g, n, ops.recomputable, (n, recipe, *leaves))
        n.replace_all_uses_with(note, delete_user_cb=lambda user: user is not note)
        inputs = ", ".join(_describe(leaf) for leaf in leaves if leaf.meta.get("input") != ("ctx", None))
        out.log.append(
            f"recompute: {n.meta.get('source')}: {n.name} ({len(chain)} "
            f"operator{'s' if len(chain) > 1 else ''} from {inputs}) rebuilt in backward when it is a "
            "sizeable share of memory"
        )
    out.root = root
    return rewrote(dfg, out)


def _rebuild_pair_tables(out: MPDFG) -> None:
    """Let each ``etype_sddmm_softmax_aggregate`` rebuild its pair table in backward (``rebuild``, its last
    argument): the operator decides at run time by the table's size."""
    for n in out.graph.nodes:
        if n.op == "call_function" and n.target is ops.etype_sddmm_softmax_aggregate and len(n.args) == 9:
            n.args = n.args + (True,)
            out.log.append(
                f"recompute: {n.meta.get('source')}: {n.name}'s pair table rebuilt in backward a part "
                "at a time when it is a sizeable share of memory"
            )

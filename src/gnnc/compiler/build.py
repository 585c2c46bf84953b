"""Building a call's MP-DFG from its traced UDFs: accessors become graph inputs and movement operators.

``build_update_all(message, reduce, update)`` and ``build_apply_edges(message)`` join the traced UDFs'
graphs into one ``MPDFG`` that means exactly what the eager executor does (a reduce UDF runs on degree
buckets); the passes then rewrite it.
"""

from __future__ import annotations

import copy

import torch.fx as fx
from torch import nn

from ..function import BuiltinReduce
from ..ir import operators as ops
from ..ir.mpdfg import EDGE_WRITE, MPDFG, live_module
from .trace import TracedUDF

# how each UDF accessor reaches the data: (graph input kind, movement op or None)
_MESSAGE_ACCESS = {
    "src": ("ndata", ops.gather_src),
    "dst": ("ndata", ops.gather_dst),
    "data": ("edata", None),
    "srctype": ("ntype_data", ops.gather_srctype),
    "dsttype": ("ntype_data", ops.gather_dsttype),
    "type": ("etype_data", ops.gather_etype),
}
_NODE_ACCESS = {
    "data": ("ndata", ops.dst_nodes),
    "type": ("ntype_data", ops.gather_ntype),
}


class _Builder:
    def __init__(self):
        self.graph = fx.Graph()
        self.root = nn.Module()
        self.ctx = self._placeholder(("ctx", None), None)
        self.inputs: dict = {}
        self.writes: dict = {}  # (EDGE_WRITE, key) -> the value the message UDF wrote

    def _placeholder(self, key, stage):
        node = self.graph.placeholder(f"in{len([n for n in self.graph.nodes if n.op == 'placeholder'])}")
        node.meta.update(input=key, stage=stage, source="graph input")
        return node

    def input(self, kind: str, name: str, stage: str) -> fx.Node:
        key = (kind, name)
        if key not in self.inputs:
            last = [n for n in self.graph.nodes if n.op == "placeholder"][-1]
            with self.graph.inserting_after(last):
                self.inputs[key] = self._placeholder(key, stage)
        return self.inputs[key]

    def external(self, traced: TracedUDF, prefix: str, name: str, stage: str) -> fx.Node:
        """Placeholder of a reached tensor; ``meta['reach']`` is (call stage prefix, path from the UDF)."""
        node = self.input("external", f"{prefix}.{name}", stage)
        node.meta["reach"] = (prefix, traced.externals[name])
        return node

    def op(self, fn, args, stage, source):
        node = self.graph.call_function(fn, (self.ctx, *args))
        node.meta.update(stage=stage, source=source)
        return node

    def inline(self, traced: TracedUDF, prefix: str, stage: str, resolve) -> dict:
        """Copy a traced UDF into the graph; ``resolve(space, key)`` supplies accessors."""
        self.root.add_module(prefix, traced.root)
        env = {}
        for n in traced.graph.nodes:
            if n.op == "placeholder":
                if "access" in n.meta:
                    env[n] = resolve(*n.meta["access"])
                else:  # a tensor the UDF reaches from outside, read from it at every call
                    env[n] = self.external(traced, prefix, n.target, stage)
            elif n.op == "output":
                continue
            else:
                new = self.graph.node_copy(n, lambda a: env[a])
                if n.op in ("get_attr", "call_module"):
                    new.target = f"{prefix}.{n.target}"
                new.meta = {"stage": stage, "source": n.meta.get("source", traced.name)}
                env[n] = new
        self.writes.update({(EDGE_WRITE, k): env[v] for k, v in traced.writes.items()})
        return {k: env[v] for k, v in traced.outputs.items()}

    def message(self, traced: TracedUDF) -> dict:
        def resolve(space, key):
            kind, mover = _MESSAGE_ACCESS[space]
            x = self.input(kind, key, "message")
            return x if mover is None else self.op(mover, (x,), "message", traced.name)

        return self.inline(traced, "msg", "message", resolve)

    def node_stage(self, traced: TracedUDF, prefix: str, stage: str, local: dict) -> dict:
        def resolve(space, key):
            if space == "data" and key in local:
                return local[key]
            if space not in _NODE_ACCESS:
                raise KeyError(
                    f"{stage} function {traced.name} reads nodes.{space}[{key!r}], which an {stage} function cannot use"
                )
            kind, mover = _NODE_ACCESS[space]
            return self.op(mover, (self.input(kind, key, stage),), stage, traced.name)

        return self.inline(traced, prefix, stage, resolve)

    def bucketed(self, traced: TracedUDF, messages: dict) -> dict:
        """The reduce UDF as one degree-bucketed call (eager semantics)."""
        fn = live_module(traced.root, _as_positional(traced.graph))
        self.root.add_module("red", fn)
        kinds, args = [], []
        for n in traced.graph.nodes:
            if n.op != "placeholder":
                continue
            if "access" not in n.meta:
                kinds.append("shared")
                args.append(self.external(traced, "red", n.target, "reduce"))
                continue
            space, key = n.meta["access"]
            if space == "mailbox":
                if key not in messages:
                    raise KeyError(
                        f"reduce function {traced.name} reads mailbox[{key!r}] but the "
                        f"message function produced {sorted(messages)}"
                    )
                kinds.append("mailbox")
                args.append(messages[key])
            elif space == "data":
                kinds.append("data")
                args.append(self.op(ops.dst_nodes, (self.input("ndata", key, "reduce"),), "reduce", traced.name))
            elif space == "type":
                kinds.append("type")
                args.append(self.input("ntype_data", key, "reduce"))
            else:
                raise KeyError(f"reduce function {traced.name} reads nodes.{space}[{key!r}]")
        get_fn = self.graph.get_attr("red")
        get_fn.meta.update(stage="reduce", source=traced.name)
        call = self.op(ops.bucketed_reduce, (get_fn, tuple(kinds), *args), "reduce", traced.name)
        call.meta["reduce_graph"] = traced
        outs = {}
        for key in traced.outputs:
            item = self.graph.call_function(ops.result_field, (call, key))
            item.meta.update(stage="reduce", source=traced.name)
            outs[key] = item
        return outs

    def finish(self, results: dict, kind: str) -> MPDFG:
        self.graph.output({**self.writes, **results})  # eager stores the writes first
        return MPDFG(self.graph, self.root, kind)


def _as_positional(graph: fx.Graph) -> fx.Graph:
    """A copy of a traced UDF graph whose placeholders have plain argument names."""
    g = copy.deepcopy(graph)
    for i, n in enumerate(n for n in g.nodes if n.op == "placeholder"):
        n.target = f"arg{i}"
    return g


def build_update_all(message: TracedUDF, reduce: TracedUDF | BuiltinReduce, update: TracedUDF | None) -> MPDFG:
    """MP-DFG of ``update_all(message, reduce, update)``; ``reduce`` is traced or built-in."""
    b = _Builder()
    msgs = b.message(message)
    if isinstance(reduce, BuiltinReduce):
        if reduce.msg not in msgs:
            raise KeyError(
                f"reduce {reduce.op}({reduce.msg!r}) found no message {reduce.msg!r}; messages: {sorted(msgs)}"
            )
        reduced = {reduce.out: b.op(ops.segment_reduce, (msgs[reduce.msg], reduce.op), "reduce", reduce.op)}
    else:
        reduced = b.bucketed(reduce, msgs)
    # as DGL: with an update, its results are the call's (the reduced features are the update's input only)
    results = dict(reduced) if update is None else b.node_stage(update, "upd", "update", reduced)
    return b.finish(results, "update_all")


def build_apply_edges(message: TracedUDF) -> MPDFG:
    """MP-DFG of ``apply_edges(message)``."""
    b = _Builder()
    return b.finish(b.message(message), "apply_edges")

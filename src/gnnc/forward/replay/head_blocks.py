"""Replay of K per-head blocks of graph operations as one block on head-stacked features (``passes.batch_heads``).

A block is what one head does with the graph, in order: feature writes (``g.ndata[k] = v``), message-passing
calls with that head's UDFs, reads (``g.ndata[k]``, ``g.ndata.pop(k)``), and local scopes entered and left.
``run_head_blocks`` runs the K blocks as one: each written feature stacked over heads at dim 1 (a tensor
every head writes, once, as it is), each call with one UDF per position batched over the heads
(``forward.heads``), each read split back into K views. The graph is then left as the K blocks in sequence
leave it: features the blocks wrote and kept hold the last head's values.

The blocks run one by one, exactly as written, where they cannot run as one: values of different shapes or
dtypes, a graph with several types, a UDF with no batching rule, or a block reading what only a later
block (or a later step of its own) writes, as a head reading the previous head's result would.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ...failures import stage
from ...function import SIDE_SPACES, BuiltinMessage, BuiltinReduce
from ...graph.frame import Deferred
from ...runtime import reach
from ..heads import ProbeBatch, Unbatchable, batch_udf

_NODE_FRAMES = ("ndata", "ndata_all", "srcdata", "dstdata")
_MOST = 8  # batched programs kept per block template
_RUN_TIME = stage("forward pass batch_heads at run time")  # what a failure in a replay of the pass's code is named


@dataclass(frozen=True)
class Step:
    """One graph operation of a block: ``write`` / ``read`` / ``pop`` of ``frame[key]``, or ``call`` of
    ``method`` with ``udfs`` UDF arguments (one per position, given per head at run time)."""

    kind: str
    frame: str = ""
    key: str = ""
    method: str = ""
    udfs: int = 0


@dataclass(eq=False)
class HeadBlocks:
    """The steps of one block and the batched programs built for it (by UDF state and feature shapes)."""

    steps: tuple
    outcome: str = "not run yet"
    _programs: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return self.outcome


class _HeadSlice(Deferred):
    """Head ``k`` (dim 1) of a head-stacked feature stored deferred; computed when read."""

    def __init__(self, stacked: Deferred, k: int):
        self.stacked, self.k = stacked, k
        self.shape = torch.Size(stacked.shape[:1] + stacked.shape[2:])
        self.dtype, self.device = stacked.dtype, stacked.device

    def materialize(self) -> torch.Tensor:
        return self.stacked.materialize().select(1, self.k)


def _space(frame: str) -> str:
    return "node" if frame in _NODE_FRAMES else "edge"


@_RUN_TIME
def run_head_blocks(g, blocks: HeadBlocks, values: list, udfs: list, sources: list) -> tuple:
    """Run the K blocks (``values[k]``: head k's written tensors in step order, ``udfs[k]``: its UDFs;
    ``sources[i]``: a tensor whose equal column blocks are the heads' i-th values, or None). Returns (each
    head's reads in step order, each read head-stacked or None)."""
    shared = tuple(all(head[i] is values[0][i] for head in values) for i in range(len(values[0])))
    program = _program(g, blocks, values, udfs, shared)
    if program is None:
        reads = [_run_one(g, blocks.steps, v, u) for v, u in zip(values, udfs)]
        return reads, [None] * len(reads[0])
    return _run_batched(g, blocks.steps, values, sources, shared, program)


class _Scopes:
    """The graph a step runs on: ``g``, or the local scopes entered on it (left on failure too)."""

    def __init__(self, g):
        self.graphs, self._managers = [g], []

    @property
    def graph(self):
        return self.graphs[-1]

    def step(self, kind: str) -> bool:
        """Enter or leave a scope for an ``enter`` / ``exit`` step (True), else nothing (False)."""
        if kind == "enter":
            self._managers.append(self.graph.local_scope())
            self.graphs.append(self._managers[-1].__enter__())
        elif kind == "exit":
            self._managers.pop().__exit__(None, None, None)
            self.graphs.pop()
        return kind in ("enter", "exit")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        while self._managers:
            self.step("exit")
        return False


def _run_one(g, steps, values, udfs) -> list:
    values, udfs, reads = iter(values), iter(udfs), []
    with _Scopes(g) as scopes:
        for step in steps:
            if scopes.step(step.kind):
                continue
            frame = getattr(scopes.graph, step.frame) if step.frame else None
            if step.kind == "write":
                frame[step.key] = next(values)
            elif step.kind == "call":
                getattr(scopes.graph, step.method)(*[next(udfs) for _ in range(step.udfs)])
            elif step.kind == "read":
                reads.append(frame[step.key])
            else:
                reads.append(frame.pop(step.key))
    return reads


def _run_batched(g, steps, values, sources, shared, program) -> tuple:
    k = len(values)
    written: dict = {}  # (space, key) -> whether head-stacked, for the keys the block wrote (in this scope)
    outer: list = []  # ``written`` of the scopes entered
    batched_udfs, reads, i = iter(program), [], 0
    with _Scopes(g) as scopes:
        for step in steps:
            if scopes.step(step.kind):
                if step.kind == "enter":
                    outer.append(dict(written))
                else:  # the scope restores the features: what it wrote is gone
                    written = outer.pop()
                continue
            frame = getattr(scopes.graph, step.frame) if step.frame else None
            if step.kind == "write":  # one tensor every head writes is written once, as it is
                frame[step.key] = values[0][i] if shared[i] else _stacked([v[i] for v in values], sources[i])
                written[_space(step.frame), step.key] = not shared[i]
                i += 1
            elif step.kind == "call":
                udfs, outputs = next(batched_udfs)
                getattr(scopes.graph, step.method)(*udfs)
                written.update(outputs)
            else:
                value = frame[step.key] if step.kind == "read" else frame.pop(step.key)
                stacked = written.get((_space(step.frame), step.key), False)
                reads.append((value, stacked))
                if step.kind == "pop":
                    written.pop((_space(step.frame), step.key), None)
    _keep_last_head(g, written, k)
    heads = [[value.select(1, h) if stacked else value for value, stacked in reads] for h in range(k)]
    return heads, [value if stacked else None for value, stacked in reads]


def _stacked(parts: list, source) -> torch.Tensor:
    """``torch.stack(parts, 1)``; a view of ``source`` where the parts are its equal column blocks in order
    (``torch.split(source, F, -1)``, as ``merge_linears`` leaves the heads' products; the pass checked that)."""
    if (
        source is not None
        and source.dim() == 2
        and parts[0].dim() == 2
        and source.shape[1] == len(parts) * parts[0].shape[1]
    ):
        return source.view(source.shape[0], len(parts), parts[0].shape[1])
    return torch.stack(parts, 1)


@_RUN_TIME
def cat_heads(parts: list, dim: int, stacked) -> torch.Tensor:
    """``torch.cat(parts, dim)`` of heads 0..K-1 of one read; where the read was head-stacked (``stacked``,
    whose ``select(1, k)`` is part k), one reshape of it instead, as ``torch.cat(head_outs, dim=1)`` reads."""
    if stacked is not None and stacked.dim() >= 3 and isinstance(dim, int) and dim % (stacked.dim() - 1) == 1:
        return stacked.flatten(1, 2)
    return torch.cat(parts, dim)


def _keep_last_head(g, written: dict, k: int) -> None:
    """Leave the features the blocks wrote as the last head's block leaves them."""
    for (space, key), stacked in written.items():
        store = g._nstore if space == "node" else g._estore
        value = store.peek_whole(key)
        if not stacked or value is None:
            continue
        store.set_whole(key, _HeadSlice(value, k - 1) if isinstance(value, Deferred) else value.select(1, k - 1))


def _program(g, blocks: HeadBlocks, values: list, udfs: list, shared: tuple):
    """[(batched UDFs, {(space, key): stacked} they write)] per call step, or None (outcome says why)."""
    if not g.is_homogeneous or g.is_block:
        blocks.outcome = "heads run one by one: the graph has several node or edge types, or is a block"
        return None
    if not all(isinstance(v, torch.Tensor) for head in values for v in head):
        blocks.outcome = "heads run one by one: they write other than tensors"
        return None
    shapes = [[(tuple(v.shape[1:]), v.dtype, v.device) for v in head] for head in values]
    if any(s != shapes[0] for s in shapes):
        blocks.outcome = "heads run one by one: their written values differ in shape or dtype"
        return None
    features = _features(g)
    key = (reach.walk(udfs).fingerprint, tuple(shapes[0]), shared, tuple(sorted(features.items())))
    if key not in blocks._programs:
        if len(blocks._programs) >= _MOST:
            blocks._programs.clear()
        try:
            blocks._programs[key] = (
                _build(features, blocks.steps, shapes[0], udfs, shared),
                f"{len(values)} heads run as one",
            )
        except Unbatchable as err:
            blocks._programs[key] = (None, f"heads run one by one: {err}")
    program, blocks.outcome = blocks._programs[key]
    return program


def _features(g) -> dict:
    """(space, key) -> (trailing shape, dtype, head-stacked: False) of every whole feature of ``g``."""
    return {
        (space, key): (tuple(v.shape[1:]), v.dtype, False)
        for space, store in (("node", g._nstore), ("edge", g._estore))
        for key, v in store.whole.items()
    }


@dataclass
class _BatchedBuiltin:
    """A built-in message or reduce run on head-stacked features as it is (``HeadBatchedUDF``'s interface)."""

    run: object
    outputs: dict
    accesses: list


def _builtin(udf, known: dict, k: int) -> _BatchedBuiltin:
    """A built-in is its own batched form where, run on head-stacked stand-ins, it gives each head's result
    stacked: a shared operand with more feature dims than a head's, or a ``dot`` over a head's only dim, would
    meet the head axis instead (its stand-in result then has another shape)."""
    operands = (
        [("mailbox", udf.msg)]
        if isinstance(udf, BuiltinReduce)
        else [(SIDE_SPACES[udf.lhs], udf.lhs_field)]
        + ([] if udf.op == "copy" else [(SIDE_SPACES[udf.rhs], udf.rhs_field)])
    )
    if any(o not in known for o in operands):
        raise Unbatchable(f"{udf.name} reads a feature of unknown shape")
    stacked = any(known[o][2] for o in operands)
    one_head = udf(ProbeBatch({o: (t, d, False) for o, (t, d, _) in known.items()}, k))[udf.out]
    try:
        heads = udf(ProbeBatch(known, k))[udf.out]
    except RuntimeError as err:  # shapes that broadcast for one head but not with the head axis
        raise Unbatchable(f"{udf.name} would broadcast a head's feature against the head axis") from err
    if stacked and tuple(heads.shape) != (one_head.shape[0], k, *one_head.shape[1:]):
        raise Unbatchable(f"{udf.name} would broadcast a head's feature against the head axis")
    return _BatchedBuiltin(udf, {udf.out: (tuple(one_head.shape[1:]), one_head.dtype, stacked)}, operands)


# the batch spaces a UDF reads, per stage of a call: (space in the batch, where the feature lives)
_EDGE_UDF = {"src": "node", "dst": "node", "data": "edge"}
_NODE_UDF = {"data": "node"}


def _build(features, steps, shapes, udfs, shared) -> list:
    """The batched UDFs of every call step, given the graph's ``features`` before the blocks; Unbatchable
    where a block reads what a later step writes."""
    state = dict(features)
    written, read_before, program, outer = set(), set(), [], []
    shapes, shared, position = iter(shapes), iter(shared), 0

    def batched(heads: list, spaces: dict, extra: dict | None = None):
        known = {
            (batch_space, key): found
            for (where, key), found in state.items()
            for batch_space, space in spaces.items()
            if space == where
        }
        if isinstance(heads[0], (BuiltinMessage, BuiltinReduce)):  # equal for every head (the pass checked)
            udf = _builtin(heads[0], {**known, **(extra or {})}, len(heads))
        else:
            udf = batch_udf(heads, {**known, **(extra or {})})
        read_before.update((spaces[s], k) for s, k in udf.accesses if s in spaces and (spaces[s], k) not in written)
        return udf

    def wrote(space: str, outputs: dict) -> dict:
        for key, found in outputs.items():
            state[space, key] = found
            written.add((space, key))
        return {(space, key): found[2] for key, found in outputs.items()}

    for step in steps:
        if step.kind in ("enter", "exit"):  # what a scope writes is gone when it is left
            if step.kind == "enter":
                outer.append((dict(state), set(written)))
            else:
                state, written = outer.pop()
            continue
        if step.kind == "write":
            trailing, dtype, _ = next(shapes)
            wrote(_space(step.frame), {step.key: (trailing, dtype, not next(shared))})
            continue
        if step.kind != "call":
            if (_space(step.frame), step.key) not in written:
                read_before.add((_space(step.frame), step.key))
            if step.kind == "pop":
                state.pop((_space(step.frame), step.key), None)
            continue
        heads = [list(u[position : position + step.udfs]) for u in udfs]
        position += step.udfs
        if step.method == "apply_edges":
            udf = batched([h[0] for h in heads], _EDGE_UDF)
            program.append(((udf.run,), wrote("edge", udf.outputs)))
        elif step.method == "apply_nodes":
            udf = batched([h[0] for h in heads], _NODE_UDF)
            program.append(((udf.run,), wrote("node", udf.outputs)))
        else:  # update_all(message, reduce[, apply])
            message = batched([h[0] for h in heads], _EDGE_UDF)
            mailbox = {("mailbox", key): found for key, found in message.outputs.items()}
            reduce = batched([h[1] for h in heads], _NODE_UDF, mailbox)
            outputs = wrote("node", reduce.outputs)
            runs = [message.run, reduce.run]
            if step.udfs > 2:
                apply = batched([h[2] for h in heads], _NODE_UDF)
                outputs.update(wrote("node", apply.outputs))
                runs.append(apply.run)
            program.append((tuple(runs), outputs))
    if read_before & written:
        raise Unbatchable(
            f"a head reads {sorted(read_before & written)[0][1]!r} before its block writes it "
            "(a later step or the previous head does)"
        )
    return program

"""The forward passes (graph_reads, type_masks, merge_linears) as pure functions on captured fx graphs, and
the run-time rows they call (``gnnc.forward.replay.type_rows``) against the masks they replace."""

from __future__ import annotations

import operator

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import gnnc
from gnnc.forward.capture import trace
from gnnc.forward.passes import graph_reads, merge_linears, type_masks
from gnnc.forward.replay.type_rows import finish_rows, split_rows, type_layout, write_rows


def _g(n=12, types=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    g = gnnc.graph((torch.randint(0, n, (30,), generator=gen), torch.randint(0, n, (30,), generator=gen)), num_nodes=n)
    g.ndata["ntype"] = torch.randint(0, types, (n,), generator=gen)
    return g


def _run_passes(model, g, x):
    graph, _ = trace(model, (g, x), {})
    before = str(graph)
    out_graph, log = graph, []
    for fn in (graph_reads, type_masks, merge_linears):
        out_graph, _, lines = fn(out_graph)
        log += lines
    assert str(graph) == before  # pure: the input graph is not changed
    return out_graph, log


class PerType(nn.Module):
    """Configurable per-type mask code; each flag breaks one condition of ``type_masks``."""

    def __init__(self, read_between=False, mask_used=False, twice=False, not_fresh=False):
        super().__init__()
        self.lins = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.flags = (read_between, mask_used, twice, not_fresh)

    def forward(self, g, h):
        read_between, mask_used, twice, not_fresh = self.flags
        ntype = g.ndata["ntype"]
        out = h.clone() if not_fresh else torch.zeros_like(h)
        extra = h.sum()
        for t in range(3):
            mask = ntype == (0 if twice and t == 2 else t)
            out[mask] = self.lins[t](h[mask])
            if read_between:
                extra = extra + out.sum()
            if mask_used:
                extra = extra + mask.sum()
        return out, extra


def test_type_masks_rewrites_the_plain_pattern():
    graph, log = _run_passes(PerType(), _g(), torch.randn(12, 4))
    assert len(log) == 1 and log[0].startswith("type_masks: 3 masks g0.ndata['ntype'] == c for c in [0, 1, 2]")
    targets = [getattr(n.target, "__name__", n.target) for n in graph.nodes]
    assert targets.count("split_rows") == 1 and targets.count("write_rows") == 3 and "setitem" not in targets
    assert targets.count("finish_rows") == 1


class ReadsAcrossACall(nn.Module):
    """DGL's HGT shape: ``h[mask]`` per type before a message-passing call and again after it."""

    def __init__(self):
        super().__init__()
        self.lins = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, g, h):
        ntype = g.ndata["ntype"]
        out = torch.zeros_like(h)
        for t in range(3):
            out[ntype == t] = self.lins[t](h[ntype == t])
        g.ndata["o"] = out
        g.update_all(gnnc.function.copy_u("o", "m"), gnnc.function.sum("m", "s"))
        s = g.ndata["s"]
        res = torch.zeros_like(h)
        for t in range(3):
            res[ntype == t] = s[ntype == t] * 2 + h[ntype == t]
        return res


def test_type_masks_gathers_a_part_again_after_a_message_passing_call():
    graph, _ = _run_passes(ReadsAcrossACall(), _g(), torch.randn(12, 4))
    splits = [n for n in graph.nodes if n.target is split_rows]
    parts = {split.args[0].op: sum(1 for use in split.users if use.target is operator.getitem) for split in splits}
    assert parts == {"placeholder": 6, "call_function": 3}, parts  # h: 3 types before the call and 3 after
    for grad in (False, True):
        g, x = _g(seed=3), torch.randn(12, 4)
        model = ReadsAcrossACall()
        with torch.set_grad_enabled(grad):
            torch.testing.assert_close(gnnc.compile(model)(g, x), model(g, x), rtol=0, atol=0)


@pytest.mark.parametrize("flag", ["read_between", "mask_used", "twice", "not_fresh"])
def test_type_masks_refuses_what_would_change_values(flag):
    model = PerType(**{flag: True})
    g, x = _g(), torch.randn(12, 4)
    graph, log = _run_passes(model, g, x)
    assert not any(line.startswith("type_masks") for line in log)
    compiled = gnnc.compile(model)
    for a, b in zip(compiled(g, x), model(g, x)):
        torch.testing.assert_close(a, b)


class Heads(nn.Module):
    def __init__(self, bias=(False, False, False), in_place=False):
        super().__init__()
        self.fcs = nn.ModuleList([nn.Linear(4, 2 + i, bias=b) for i, b in enumerate(bias)])
        self.in_place = in_place

    def forward(self, g, h):
        outs = []
        for fc in self.fcs:
            outs.append(fc(h))
            if self.in_place:
                h = h.clone()
                h.add_(1.0)
        return torch.cat(outs, 1)


@pytest.mark.parametrize(
    "bias,groups", [((False, False, False), [3]), ((True, False, True), [2]), ((True, False, False), [2])]
)
def test_merge_linears_groups_by_input_and_bias(bias, groups):
    model = Heads(bias)
    g, x = _g(), torch.randn(12, 4)
    _, log = _run_passes(model, g, x)
    assert [int(line.split()[1]) for line in log] == groups
    compiled = gnnc.compile(model)
    torch.testing.assert_close(compiled(g, x), model(g, x))


def test_merge_linears_refuses_forwards_that_write_in_place():
    _, log = _run_passes(Heads(in_place=True), _g(), torch.randn(12, 4))
    assert log == []


class ReadsAround(nn.Module):
    def forward(self, g, h):
        a = g.ndata["w"] * h
        b = g.ndata["w"] * 2
        g.ndata["w"] = h
        c = g.ndata["w"]
        return a + b + c


def test_graph_reads_merges_reads_with_no_graph_operation_between():
    g = _g()
    g.ndata["w"] = torch.randn(12, 4)
    graph, _ = trace(ReadsAround(), (g, torch.randn(12, 4)), {})
    new, changed, log = graph_reads(graph)
    assert changed and log == []
    reads = [n for n in new.nodes if n.target is operator.getitem]
    assert len(reads) == 2  # the two reads before the write are one; the read after it stays


# ----------------------------------------------------------------------------- run-time rows
def _fill(out, layout, which, values):
    pending = ()
    for k, v in zip(which, values):
        pending = write_rows(out, layout, k, v, pending)
    return finish_rows(out, layout, pending)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 40),
    k=st.integers(1, 5),
    spread=st.integers(-2, 7),
    seed=st.integers(0, 1000),
    width=st.integers(1, 3),
    grad=st.booleans(),
    buffer_grad=st.booleans(),
)
def test_split_and_fill_equal_the_masks(n, k, spread, seed, width, grad, buffer_grad):
    gen = torch.Generator().manual_seed(seed)
    types = torch.randint(-1, max(spread, 0) + 1, (n,), generator=gen)
    consts = tuple(sorted(set(torch.randint(-1, 6, (k,), generator=gen).tolist())))
    x = torch.randn(n, width, generator=gen, dtype=torch.float64).requires_grad_(grad)
    layout = type_layout(types, consts)
    parts = split_rows(x, layout)
    for i, c in enumerate(consts):
        assert torch.equal(parts[i], x[types == c])
    values = [
        torch.randn(int((types == c).sum()), width, generator=gen, dtype=torch.float64).requires_grad_(grad)
        for c in consts
    ]
    base = torch.randn(n, width, generator=gen, dtype=torch.float64).requires_grad_(grad and buffer_grad)
    expected = base * 2  # a buffer with a gradient of its own: the rows no type writes keep it
    for c, v in zip(consts, values):
        expected[types == c] = v
    which = tuple(range(len(consts)))[::-1]  # any order of writes
    out = _fill(base * 2, layout, which, tuple(values[i] for i in which))
    assert torch.equal(out, expected)
    if grad and n:
        weight = torch.randn(n, width, generator=gen, dtype=torch.float64)
        ours = torch.autograd.grad(
            (out * weight).sum() + sum((parts[i] * i).sum() for i in range(len(consts))),
            [x, *values, base][: len(values) + 1 + buffer_grad],
            allow_unused=True,
        )
        ref = torch.autograd.grad(
            (expected * weight).sum() + sum((x[types == c] * i).sum() for i, c in enumerate(consts)),
            [x, *values, base][: len(values) + 1 + buffer_grad],
            allow_unused=True,
        )
        for a, b in zip(ours, ref):
            assert (a is None and b is None) or torch.equal(a, b)


@pytest.mark.parametrize("grad", [False, True])
def test_fill_broadcasts_and_refuses_as_item_assignment_does(grad):
    types = torch.tensor([0, 1, 0, 2, 1])
    layout = type_layout(types, (0, 1, 2))
    values = (
        torch.tensor([[1.5, 2.5]], requires_grad=grad),
        7,
        torch.tensor([[[3.0, 4.0]]], requires_grad=grad),
    )  # a row, a number, leading 1s
    expected = torch.zeros(5, 2)
    for c, v in enumerate(values):
        expected[types == c] = v
    assert torch.equal(_fill(torch.zeros(5, 2), layout, (0, 1, 2), values), expected)
    wide = (torch.ones(2, 2, dtype=torch.float64, requires_grad=grad),)  # another dtype: refused as by eager
    with pytest.raises(RuntimeError) as eager:
        torch.zeros(5, 2)[types == 1] = wide[0]
    with pytest.raises(RuntimeError) as ours:
        _fill(torch.zeros(5, 2), layout, (1,), wide)
    assert str(ours.value) == str(eager.value)


@pytest.mark.parametrize(
    "types",
    [torch.tensor([[0, 1], [1, 0]]), torch.tensor([0.0, 1.0, 1.0, 0.0]), torch.tensor([True, False, True, False])],
)
def test_other_type_tensors_compute_the_masks_as_written(types):
    x = torch.randn(*types.shape, 3)
    layout = type_layout(types, (0, 1))
    parts = split_rows(x, layout)
    for i, c in enumerate((0, 1)):
        assert torch.equal(parts[i], x[types == c])


def test_a_part_is_gathered_when_read_and_kept_only_with_gradients_on():
    types = torch.tensor([0, 1, 0, 2, 1])
    layout = type_layout(types, (0, 1, 2))
    x = torch.randn(5, 3)  # no gradient of its own: parts are gathered when read
    parts = split_rows(x, layout)
    assert parts[1] is parts[1]  # a backward that saved the first read holds it: a second would be saved too
    with torch.no_grad():
        parts = split_rows(x, layout)
        first = parts[1]
        assert first is not parts[1] and torch.equal(first, parts[1])  # no copy outlives its reader


def test_mismatched_rows_raise_eagers_error():
    types = torch.tensor([0, 1, 1])
    x = torch.randn(4, 2)
    with pytest.raises(IndexError) as eager:
        x[types == 0]
    with pytest.raises(IndexError) as ours:
        split_rows(x, type_layout(types, (0, 1)))
    assert str(ours.value) == str(eager.value)


def test_layouts_follow_in_place_changes_of_the_types():
    types = torch.tensor([0, 1, 1, 0])
    first = type_layout(types, (0, 1))
    assert type_layout(types, (0, 1)) is first
    types[0] = 1
    assert type_layout(types, (0, 1)).sizes == [1, 3]

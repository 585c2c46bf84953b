"""numpy-style keyword aliases torch accepts (``keepdims``, ``axis``) keep their meaning in compiled plans.

DGL's test backend sums with ``x.sum(dim, keepdims=keepdims)``; the passes matched only ``keepdim``, so a
compiled plan dropped the kept dim of ``sum(-1, keepdims=True)`` (an [E] result where eager gives [E, 1]).
"""

import warnings

import pytest
import torch

import gnnc
from gnnc.compiler.driver import recording
from gnnc.message_passing import compiling

CALLS = {
    "edge dot, keepdims": ("apply_edges", lambda e: {"m": (e.src["x"] * e.dst["x"]).sum(-1, keepdims=True)}, None),
    "mailbox sum, keepdims": (
        "update_all",
        lambda e: {"m": e.src["x"]},
        lambda n: {"m": n.mailbox["m"].sum(1, keepdims=True)},
    ),
    "mailbox amax, axis and keepdims": (
        "update_all",
        lambda e: {"m": e.src["x"] * e.data["w"]},
        lambda n: {"m": torch.amax(n.mailbox["m"], axis=1, keepdims=True)},
    ),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_aliases_compile_to_eagers_shape_and_values(name):
    kind, message, reduce = CALLS[name]
    g = gnnc.graph((torch.tensor([0, 1, 2, 2, 3, 0]), torch.tensor([1, 1, 0, 3, 3, 2])))
    g.ndata["x"], g.edata["w"] = torch.rand(4, 3), torch.rand(6, 1)
    store = g.edata if kind == "apply_edges" else g.ndata

    def run():
        getattr(g, kind)(message) if reduce is None else getattr(g, kind)(message, reduce)
        return store.pop("m")

    want = run()
    with compiling({}), recording() as plans, warnings.catch_warnings():
        warnings.simplefilter("error", gnnc.FallbackWarning)
        got = run()
    assert plans and all(plan.module is not None for plan in plans)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want)

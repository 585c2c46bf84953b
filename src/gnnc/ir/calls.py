"""What an fx node calls: one classification shared by the tracer and the passes."""

from __future__ import annotations

from collections.abc import Callable, Collection

import torch.fx as fx
from torch import nn


def calls_one_of(
    n: fx.Node,
    root: nn.Module,
    functions: Collection[Callable],
    methods: Collection[str],
    modules: tuple[type[nn.Module], ...],
) -> bool:
    """Whether ``n`` calls, out of place, a function in ``functions``, a method named in ``methods`` or a
    module of a class in ``modules`` (a submodule of ``root``)."""
    if n.kwargs.get("inplace"):
        return False
    if n.op == "call_function":
        return n.target in functions
    if n.op == "call_method":
        return n.target in methods
    if n.op == "call_module":
        module = called_module(n, root)
        return isinstance(module, modules) and not getattr(module, "inplace", False)
    return False


def called_module(n: fx.Node, root: nn.Module) -> nn.Module:
    """The submodule of ``root`` that a ``call_module`` node calls (fx names it by its path)."""
    assert isinstance(n.target, str), "fx names a called module by its path"
    return root.get_submodule(n.target)

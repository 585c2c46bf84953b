"""What an fx node calls: one classification shared by the tracer and the passes."""

from __future__ import annotations

import torch.fx as fx
from torch import nn


def calls_one_of(n: fx.Node, root: nn.Module, functions, methods, modules: tuple) -> bool:
    """Whether ``n`` calls, out of place, a function in ``functions``, a method named in ``methods`` or a
    module of a class in ``modules`` (a submodule of ``root``)."""
    if n.kwargs.get("inplace"):
        return False
    if n.op == "call_function":
        return n.target in functions
    if n.op == "call_method":
        return n.target in methods
    if n.op == "call_module":
        module = root.get_submodule(n.target)
        return isinstance(module, modules) and not getattr(module, "inplace", False)
    return False

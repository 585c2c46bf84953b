"""fast_dropout (a forward pass): dropout in the forward -> gnnc's one-pass dropout (``gnnc.runtime.dropout``).

On a wide input (Cora's 2708 x 1433 features) torch's CPU dropout is most of a GCN training step, longer
than the message passing the compiler speeds up. Pattern, in a captured forward's fx graph: a call of an
``nn.Dropout`` module (``meta['dropout']``, set by the capture), ``F.dropout`` or ``torch.dropout``, not in
place, and able to draw a mask (in training with 0 < p < 1; one that cannot is left as it is, so a forward
whose dropouts are all the identity is not captured for this pass). Replacement: ``gnnc.runtime.dropout``'s
call with the same ``p`` and training flag (a module's read live at every call). The same distribution;
other masks than eager's on large CPU tensors, eager's under ``torch.use_deterministic_algorithms(True)``.
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F
from torch import fx

from ...runtime.dropout import dropout, module_dropout
from .contract import ForwardPassResult, unchanged

_SIGNATURES = {
    F.dropout: inspect.signature(F.dropout),
    torch.dropout: inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in ("input", "p", "train")]
    ),
}


def _functional_args(n: fx.Node):
    """(input, p, training) of an out-of-place ``F.dropout`` / ``torch.dropout`` call, else None."""
    try:
        bound = _SIGNATURES[n.target].bind(*n.args, **n.kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    values = list(bound.arguments.values())
    if len(values) > 3 and values[3] is not False:  # F.dropout's inplace
        return None
    return tuple(values[:3])


def _module_call(n: fx.Node) -> bool:
    """Whether ``n`` calls an ``nn.Dropout`` module that can draw a mask (in training, 0 < p < 1: the capture's
    ``meta['dropout_fires']``), not in place, on one argument."""
    return (
        n.op == "call_module"
        and n.meta.get("dropout")
        and n.meta.get("dropout_fires", True)
        and not n.meta.get("in_place")
        and len(n.args) == 1
        and not n.kwargs
    )


def _can_fire(args) -> bool:
    """Whether a functional dropout of (input, p, training) may draw a mask: not where ``training`` is False or
    ``p`` a constant outside (0, 1), which gnnc's kernel never runs (the identity, or torch's zeros)."""
    _, p, training = args
    return training is not False and (not isinstance(p, (int, float)) or 0 < p < 1)


def fast_dropout(graph: fx.Graph) -> ForwardPassResult:
    """The rewritten copy of ``graph`` and one log line (none: ``graph`` unchanged)."""
    targets = [
        n
        for n in graph.nodes
        if _module_call(n)
        or n.op == "call_function"
        and n.target in _SIGNATURES
        and _functional_args(n) is not None
        and _can_fire(_functional_args(n))
    ]
    if not targets:  # also where every dropout is the identity (eval mode, p = 0): capture is not forced for it
        return unchanged(graph)
    new = fx.Graph()
    env: dict = {}
    new.output(new.graph_copy(graph, env))
    names = []
    for old in targets:
        n = env[old]
        with new.inserting_before(n):
            if n.op == "call_module":
                call = new.call_function(module_dropout, (new.get_attr(n.target), n.args[0]))
            else:
                call = new.call_function(dropout, _functional_args(n))
        call.meta.update(n.meta)
        n.replace_all_uses_with(call)
        new.erase_node(n)
        names.append(old.target if old.op == "call_module" else old.name)
    new.lint()
    line = (
        f"fast_dropout: {len(names)} dropout calls ({', '.join(names)}) run gnnc's one-pass dropout on large "
        f"CPU tensors in training (other masks than eager's; torch.use_deterministic_algorithms(True) keeps "
        f"eager's)"
    )
    return ForwardPassResult(new, True, [line])

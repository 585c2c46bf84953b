"""One fx trace at a time in the process, acting in its own thread only.

While it traces, torch.fx patches state every thread shares (``nn.Module.__call__`` and ``__getattr__``,
functions in module globals) and gnnc's tracers patch more (``torch.zeros`` and the other factories, numpy's
ufuncs, ``autograd.Function.apply``). Two traces at once would each save the other's patches as the
originals and leave them installed for good; a real run in another thread would go through the tracer (a
proxy where a tensor belongs). So every trace holds ``TRACING`` (re-entrant: a trace may trace again
inside), and every patched entry point acts as traced only in the thread whose tracer installed it
(:meth:`Tracer.here`), running the original elsewhere. What stays shared is torch's module-level
``is_fx_tracing()`` flag, which other threads see as true while a trace runs (torch reads it only in
nested tensors, export and dynamo).
"""

from __future__ import annotations

import threading

from torch import fx

TRACING = threading.RLock()


class Tracer(fx.Tracer):
    """An fx tracer whose module calls and attribute reads from other threads run as written."""

    def __init__(self):
        super().__init__()
        self._thread = threading.get_ident()

    def here(self) -> bool:
        """Whether the running thread is the one that traces with this tracer."""
        return threading.get_ident() == self._thread

    def call_module(self, m, forward, args, kwargs):
        if not self.here():
            return forward(*args, **kwargs)
        return super().call_module(m, forward, args, kwargs)

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        if not self.here():
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)


__all__ = ["TRACING", "Tracer"]

"""DGL's sparse-format query ``g.formats()``, as far as it applies to gnnc.

DGL keeps each relation in up to three formats (COO, CSR, CSC), makes the others on demand, and lets code
restrict a graph to some of them (``g.formats('csr')``). gnnc keeps a graph's edges as COO and builds the
compressed structures its kernels need itself: there is no format to choose.
"""

from __future__ import annotations

_HELD = {"created": ["coo"], "not created": ["csr", "csc"]}


def query(formats=None) -> dict:
    """``g.formats()``: DGL's ``{'created': [...], 'not created': [...]}`` for gnnc's graphs (COO held, the
    compressed forms built when a kernel needs them). Naming formats (DGL's switch) raises
    NotImplementedError saying so."""
    if formats is not None:
        raise NotImplementedError(
            f"g.formats({formats!r}): gnnc has no sparse-format switch (it builds the "
            "structures its kernels need itself); drop the call and use the graph as it is"
        )
    return {kind: list(names) for kind, names in _HELD.items()}

"""``dgl.base`` under gnnc's DGL alias: DGL's reserved names and its error and warning types."""

import warnings

__all__ = ["DGLError", "DGLWarning", "ALL", "NID", "EID", "NTYPE", "ETYPE", "is_internal_column", "dgl_warning"]

# The DGL release whose API and semantics the alias follows: ``dgl.__version__`` under the alias (code gates on it,
# as benchmarking-gnns' ``if dgl.__version__ < "0.5"``).
DGL_VERSION = "2.1.0"

# gnnc has no exception class of its own for misuse of its DGL-style API: it raises ValueError (bad ids,
# lengths, types: ``gnnc.graph.validate``), so ``pytest.raises(DGLError)`` accepts what gnnc raises there.
DGLError = ValueError

ALL = "__ALL__"  # "every node / edge" where DGL takes ids
NID = "_ID"  # the parent node ids a subgraph or a flattened graph records
EID = "_ID"
NTYPE = "_TYPE"  # the parent node / edge type ids of a flattened heterograph
ETYPE = "_TYPE"
_INTERNAL = frozenset({NID, EID, NTYPE, ETYPE})


class DGLWarning(UserWarning):
    """The warning category DGL's own warnings use."""


def is_internal_column(name) -> bool:
    """True for the feature names DGL reserves (``_ID``, ``_TYPE``)."""
    return name in _INTERNAL


def dgl_warning(message, category=DGLWarning, stacklevel: int = 2) -> None:
    """``warnings.warn`` with ``DGLWarning`` as the default category; the default ``stacklevel`` names the
    line that called ``dgl_warning``."""
    warnings.warn(message, category=category, stacklevel=stacklevel)

"""Graph storage: ``Graph``, constructors, converters.

``gnnc.graph`` is both this package and the constructor ``gnnc.graph((src, dst))``:
the module is made callable so ``gnnc.graph.Graph`` and ``gnnc.graph(...)`` both work;
``from gnnc.graph import graph`` gives the constructor function.
"""

import sys
import types

from .bipartite import bipartite_from_networkx, bipartite_from_scipy
from .convert import from_edge_list, from_networkx, from_pyg, from_scipy
from .core import DEFAULT_ETYPE, DEFAULT_NTYPE, Graph, MetaGraph, graph, heterograph
from .index import DegreeBucket, GraphIndex


class _CallableModule(types.ModuleType):
    def __call__(self, data, num_nodes=None, ntype=DEFAULT_NTYPE, etype=DEFAULT_ETYPE, device=None, **dgl_kwargs):
        return graph(data, num_nodes, ntype, etype, device, **dgl_kwargs)

    __call__.__doc__ = graph.__doc__


sys.modules[__name__].__class__ = _CallableModule

__all__ = [
    "Graph",
    "GraphIndex",
    "DegreeBucket",
    "MetaGraph",
    "graph",
    "heterograph",
    "DEFAULT_NTYPE",
    "DEFAULT_ETYPE",
    "from_edge_list",
    "from_networkx",
    "from_pyg",
    "from_scipy",
    "bipartite_from_scipy",
    "bipartite_from_networkx",
]

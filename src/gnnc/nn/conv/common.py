"""What DGL's convolution layers share: splitting an input into source and destination features, and the
refusal of graphs with zero in-degree nodes."""

from __future__ import annotations

import torch

from ... import function as fn
from ...dgl_base import DGLError

_ZERO_IN_DEGREE = (
    "There are 0-in-degree nodes in the graph, output for those nodes will be invalid. This is harmful for "
    "some applications, causing silent performance regression. Adding self-loop on the input graph by calling "
    "`g = dgl.add_self_loop(g)` will resolve the issue. Setting ``allow_zero_in_degree`` to be `True` when "
    "constructing this module will suppress the check and let the code run."
)


def expand_as_pair(feat, graph=None):
    """``(source features, destination features)`` as DGL's layers read them: a pair as given; one tensor
    as both, cut to the destination rows on a block (whose destination nodes come first)."""
    if isinstance(feat, tuple):
        return feat
    if graph is not None and is_block(graph):
        if isinstance(feat, dict):
            return feat, {k: v[: graph.number_of_dst_nodes(k)] for k, v in feat.items()}
        return feat, feat[: graph.number_of_dst_nodes()]
    return feat, feat


class ZeroInDegreeOption:
    """DGL's ``set_allow_zero_in_degree`` for the layers that refuse zero in-degree nodes (``check_in_degrees``)
    unless ``_allow_zero_in_degree``."""

    def set_allow_zero_in_degree(self, set_value):
        self._allow_zero_in_degree = set_value


def register_scalar(module, name: str, value: float, learn: bool) -> None:
    """``module.<name>``: ``[value]`` (float32), a parameter when ``learn``, else a buffer, as DGL's."""
    tensor = torch.tensor([float(value)], dtype=torch.float32)
    if learn:
        setattr(module, name, torch.nn.Parameter(tensor))
    else:
        module.register_buffer(name, tensor)


def dst_name(graph, name: str) -> str:
    """Where a layer writes the destination side of a feature DGL writes as ``name`` on both sides: on a block
    (whose sides are two stores, in DGL as in gnnc) a name of its own, so a compiled plan reads two features
    rather than one whose sides differ; elsewhere ``name`` (one store on a homogeneous graph, where DGL's
    destination write replaces the source values)."""
    return f"{name}_dst" if is_block(graph) else name


def is_block(graph) -> bool:
    return getattr(graph, "is_block", False)  # a relation slice (``g[etype]``) is never one


def _relation(graph):
    """The graph's one relation, or None for several: with one, DGL's degrees are the relation's (its
    destination type's in-degrees), where gnnc's ``in_degrees()`` spans every node of the graph."""
    etypes = graph.canonical_etypes
    return etypes[0] if len(etypes) == 1 else None


def in_degrees(graph) -> torch.Tensor:
    """In-degrees of the destination nodes, as DGL's ``graph.in_degrees()`` (a gnnc block counts its
    source nodes there, the destination nodes first)."""
    degrees = graph.in_degrees(etype=_relation(graph))
    return degrees[: graph.number_of_dst_nodes()] if is_block(graph) else degrees


def out_degrees(graph) -> torch.Tensor:
    """Out-degrees of the source nodes, as DGL's ``graph.out_degrees()``."""
    return graph.out_degrees(etype=_relation(graph))


def copy_or_weighted(graph, edge_weight):
    """The message of DGL's layers: ``h_u`` (``copy_u('h', 'm')``), or ``h_u w_e`` with ``edge_weight`` written
    to ``graph.edata['_edge_weight']`` (``u_mul_e``)."""
    if edge_weight is None:
        return fn.copy_u("h", "m")
    assert edge_weight.shape[0] == graph.num_edges()
    graph.edata["_edge_weight"] = edge_weight
    return fn.u_mul_e("h", "_edge_weight", "m")


def check_in_degrees(graph, allowed: bool) -> None:
    """DGL's ``DGLError`` (a ``ValueError`` in gnnc) when some node has no in-edge and ``allowed`` is False."""
    if not allowed and bool((in_degrees(graph) == 0).any()):
        raise DGLError(_ZERO_IN_DEGREE)


def degree_norm(degrees: torch.Tensor, like: torch.Tensor, power: float) -> torch.Tensor:
    """``max(d, 1) ** power`` in ``like``'s dtype and device, shaped to broadcast over ``like``'s rows."""
    norm = degrees.to(like).clamp(min=1).pow(power)
    return norm.reshape(norm.shape + (1,) * (like.dim() - 1))

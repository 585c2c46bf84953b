"""Graph operators called outside message passing, named as in DGL's ``dgl.ops``.

``edge_softmax(g, logits)``: softmax of edge values over the in-edges of
each destination node (DGL's ``dgl.ops.edge_softmax``). It runs the active
backend's edge-softmax kernel, the one compiled plans use for a
``softmax(nodes.mailbox[...], dim=1)`` reduce, so it works eagerly and in
the forward of a ``gnnc.compile``-d model alike (between compiled
``apply_edges`` and ``update_all`` calls, as DGL's GATv2Conv uses it).
"""

from __future__ import annotations

import torch

from .. import backend
from ..graph.core import ALL
from ..graph.relation_view import RelationGraph
from ..graph.validate import as_ids, check_range
from ..ir.context import user_order_ends
from ..message_passing import graph_call

__all__ = ["edge_softmax"]

_ENDS = {"dst": "dst", "src": "src"}


@graph_call
def edge_softmax(g, logits, eids=ALL, norm_by: str = "dst"):
    """``a[e] = exp(logits[e]) / sum over e' with dst(e') == dst(e) of exp(logits[e'])``.

    ``logits`` is ``[E, *]`` in the user's edge order (the order of ``g.edata_all``
    and ``g.edges()``); the result has the same shape, order and dtype. The
    softmax is taken separately for every trailing index (e.g. per head) and is
    numerically stable for any finite logits (the per-node maximum is
    subtracted). ``norm_by='src'`` normalizes over each source node's
    out-edges instead (DGL's option). ``eids`` (edge ids, user order) restricts the softmax to those
    edges, as DGL's: ``logits`` is then ``[len(eids), *]``, one row per id in the order given, and edges
    not listed take no part.

    On a relation slice (``g[etype]``) it spans that relation's edges only (DGL's HGT example).
    On a heterogeneous graph the softmax spans every in-edge of a node, of all
    relations: pass either one ``[E, *]`` tensor over all edges in ``g.edata_all``
    order, or ``{relation: [E_r, *]}`` with every relation (name or canonical
    triple) and get ``{canonical relation: ...}`` back, as DGL (DGL takes a tuple in
    ``canonical_etypes`` order for this; a tuple or list is accepted as such).
    """
    if norm_by not in _ENDS:
        raise ValueError(f"edge_softmax: norm_by must be 'dst' or 'src', got {norm_by!r}")
    if isinstance(logits, (dict, tuple, list)) and not (isinstance(eids, str) and eids == ALL):
        raise ValueError("edge_softmax: eids is taken with one logits tensor; per-relation logits span all edges")
    if isinstance(logits, dict):
        return _per_relation(g, logits, norm_by)
    if isinstance(logits, (tuple, list)):
        return tuple(_per_relation(g, dict(zip(g.canonical_etypes, _check_count(g, logits))), norm_by).values())
    if not isinstance(logits, torch.Tensor):
        raise TypeError(
            f"edge_softmax: logits must be a tensor (or, on a heterogeneous graph, a dict of "
            f"tensors by relation), got {type(logits).__name__}"
        )
    g, (lo, hi) = _edge_block(g)
    ids = None if isinstance(eids, str) and eids == ALL else as_ids(eids, "edge_softmax(eids)", "edge")
    rows = hi - lo if ids is None else ids.numel()
    if logits.dim() == 0 or logits.shape[0] != rows:
        raise ValueError(
            f"edge_softmax: logits must be [num_edges, *] with num_edges = {rows} "
            f"({'the edges' if ids is None else 'len(eids)'}), got shape {tuple(logits.shape)}"
        )
    if not logits.is_floating_point():
        raise TypeError(f"edge_softmax: logits must be floating point, got {logits.dtype}")
    if logits.device != g.device:
        raise ValueError(f"edge_softmax: logits are on {logits.device} but the graph is on {g.device}")
    # The kernel takes edges in any order: the user's runs as given, with no permutation in or out (a
    # destination's edges keep their relative order in either, so its sums are the internal order's).
    ends = user_order_ends(g, _ENDS[norm_by], lo, hi)
    if ids is not None:  # the listed edges' ends, in the order listed
        check_range(ids, hi - lo, "edge_softmax(eids)", "edge")
        ends = ends.index_select(0, ids.to(ends.device))
    return backend.kernels().edge_softmax(logits, ends, g.index.num_nodes)


def _edge_block(g):
    """(graph, its internal edge range) the softmax covers: a relation slice's parent and that relation's
    edges, or ``g`` and all of its edges."""
    if isinstance(g, RelationGraph):
        return g.parent, g.parent.index.rel_range(g.rel)
    return g, (0, g.num_edges())


def _check_count(g, logits):
    if len(logits) != len(g.canonical_etypes):
        raise ValueError(
            f"edge_softmax: got {len(logits)} logit tensors for {len(g.canonical_etypes)} relations "
            f"{g.canonical_etypes}"
        )
    return logits


def _per_relation(g, logits: dict, norm_by: str) -> dict:
    """Concatenate ``{relation: logits}`` in relation order, softmax over the whole graph, split back."""
    ids = {}
    for key in logits:
        r = g.etype_id(key)
        if r in ids.values():
            raise ValueError(f"edge_softmax: relation {g.canonical_etypes[r]} given twice")
        ids[key] = r
    missing = [k for r, k in enumerate(g.canonical_etypes) if r not in ids.values()]
    if missing:
        raise ValueError(
            f"edge_softmax: logits missing for relations {missing}; every relation's in-edges take part in the softmax"
        )
    by_rel = {r: key for key, r in ids.items()}
    order = [by_rel[r] for r in range(len(g.canonical_etypes))]
    for key in order:
        t = logits[key]
        if not isinstance(t, torch.Tensor) or t.dim() == 0 or t.shape[0] != g.num_edges(key):
            raise ValueError(
                f"edge_softmax: logits of relation {key!r} must be [{g.num_edges(key)}, *], got "
                f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}"
            )
    out = edge_softmax(g, torch.cat([logits[k] for k in order]), norm_by=norm_by)
    return dict(zip(g.canonical_etypes, out.split([g.num_edges(k) for k in order])))  # keyed as DGL's

"""DGL's transform classes (``dgl.AddSelfLoop()(g)``, ``dgl.Compose([...])``, ...): callables over the
functional transforms, with DGL 2.1's semantics.

A transform that changes structure returns a new graph and leaves its
argument as it was; one that only writes features (``RowFeatNormalizer``,
``FeatMask``, the positional encodings, ``GCNNorm``, ``SIGNDiffusion``)
writes them into its argument and returns it, as DGL's do. The randomised
ones (``NodeShuffle``, ``DropNode``, ``DropEdge``, ``AddEdge``, ``FeatMask``)
draw from torch's generator.
"""

from __future__ import annotations

import warnings

import torch

from . import diffusion, positional
from .core import Graph, heterograph
from .derived import khop_graph, line_graph, metapath_reachable_graph, to_simple
from .transforms import add_self_loop, remove_self_loop

__all__ = [
    "GDC",
    "PPR",
    "SVDPE",
    "AddEdge",
    "AddMetaPaths",
    "AddReverse",
    "AddSelfLoop",
    "BaseTransform",
    "Compose",
    "DropEdge",
    "DropNode",
    "FeatMask",
    "GCNNorm",
    "HeatKernel",
    "KHopGraph",
    "LapPE",
    "LaplacianPE",
    "LineGraph",
    "NodeShuffle",
    "RandomWalkPE",
    "RemoveSelfLoop",
    "RowFeatNormalizer",
    "SIGNDiffusion",
    "ToLevi",
    "ToSimple",
]


def _rebuild(g: Graph, relations: dict, copy_edata: bool = True) -> Graph:
    """A graph of ``relations`` ``{canonical key: (src, dst)}`` over ``g``'s node types and counts, in its
    idtype and device, with ``g``'s node features and (``copy_edata``) those of its relations still present."""
    out = heterograph(relations, num_nodes_dict={t: g.num_nodes(t) for t in g.ntypes}, idtype=g.idtype, device=g.device)
    for ntype in g.ntypes:
        out.nodes[ntype].data.update(g.nodes[ntype].data)
    if copy_edata:
        for key in g.canonical_etypes:
            out.edges[key].data.update(g.edges[key].data)
    return out


def _type_features(space, types, names):
    """``(type, name, data)`` for each feature of ``names`` that type of ``types`` in ``space``
    (``g.nodes`` / ``g.edges``) holds."""
    for name in names:
        for t in types:
            data = space[t].data
            if name in data:
                yield t, name, data


class BaseTransform:
    """DGL's base of graph transforms: a callable ``transform(g) -> graph``."""

    def __call__(self, g):
        raise NotImplementedError

    def __repr__(self):
        return self.__class__.__name__ + "()"


class RowFeatNormalizer(BaseTransform):
    """Each row of the node features ``node_feat_names`` and edge features ``edge_feat_names`` divided by its
    sum (at least 1), per type; ``subtract_min`` first subtracts the type's smallest entry. In place."""

    def __init__(self, subtract_min=False, node_feat_names=None, edge_feat_names=None):
        self.subtract_min = subtract_min
        self.node_feat_names = list(node_feat_names or [])
        self.edge_feat_names = list(edge_feat_names or [])

    def _normalize(self, feat: torch.Tensor) -> torch.Tensor:
        if self.subtract_min:
            feat = feat - feat.min()
        return feat.div_(feat.sum(dim=-1, keepdim=True).clamp_(min=1.0))

    def __call__(self, g):
        for space, types, names in (
            (g.nodes, g.ntypes, self.node_feat_names),
            (g.edges, g.canonical_etypes, self.edge_feat_names),
        ):
            for _, name, data in _type_features(space, types, names):
                data[name] = self._normalize(data[name])
        return g


class FeatMask(BaseTransform):
    """Zeroes the same feature columns of every row, each column with probability ``p``, drawn afresh per type
    and feature (``node_feat_names``, ``edge_feat_names``). In place."""

    def __init__(self, p=0.5, node_feat_names=None, edge_feat_names=None):
        self.p = p
        self.node_feat_names = list(node_feat_names or [])
        self.edge_feat_names = list(edge_feat_names or [])
        self.dist = torch.distributions.Bernoulli(p)

    def __call__(self, g):
        if self.p == 0:
            return g
        for space, types, names in (
            (g.nodes, g.ntypes, self.node_feat_names),
            (g.edges, g.canonical_etypes, self.edge_feat_names),
        ):
            for _, name, data in _type_features(space, types, names):
                feat = data[name]
                feat[:, self.dist.sample(torch.Size([feat.shape[-1]])).bool().to(feat.device)] = 0
        return g


class RandomWalkPE(BaseTransform):
    """Writes :func:`gnnc.graph.positional.random_walk_pe` as node feature ``feat_name``."""

    def __init__(self, k, feat_name="PE", eweight_name=None):
        self.k, self.feat_name, self.eweight_name = k, feat_name, eweight_name

    def __call__(self, g):
        g.ndata[self.feat_name] = positional.random_walk_pe(g, self.k, self.eweight_name).to(g.device)
        return g


class LapPE(BaseTransform):
    """Writes :func:`gnnc.graph.positional.lap_pe` as node feature ``feat_name`` and, with ``eigval_name``, the
    eigenvalues (the same row for every node) under that name."""

    def __init__(self, k, feat_name="PE", eigval_name=None, padding=False):
        self.k, self.feat_name, self.eigval_name, self.padding = k, feat_name, eigval_name, padding

    def __call__(self, g):
        pe, eigval = positional.lap_pe(g, self.k, padding=self.padding, return_eigval=True)
        if self.eigval_name:
            g.ndata[self.eigval_name] = eigval.reshape(1, -1).repeat(g.num_nodes(), 1).to(g.device)
        g.ndata[self.feat_name] = pe.to(g.device)
        return g


class LaplacianPE(LapPE):
    """DGL's deprecated name of :class:`LapPE` (it warns, as DGL's does)."""

    def __init__(self, k, feat_name="PE", eigval_name=None, padding=False):
        super().__init__(k, feat_name, eigval_name, padding)
        warnings.warn("LaplacianPE will be deprecated. Use LapPE please.", stacklevel=2)


class SVDPE(BaseTransform):
    """Writes :func:`gnnc.graph.positional.svd_pe` as node feature ``feat_name``."""

    def __init__(self, k, feat_name="svd_pe", padding=False, random_flip=True):
        self.k, self.feat_name, self.padding, self.random_flip = k, feat_name, padding, random_flip

    def __call__(self, g):
        g.ndata[self.feat_name] = positional.svd_pe(g, self.k, self.padding, self.random_flip).to(g.device)
        return g


class AddSelfLoop(BaseTransform):
    """A self loop per node on every relation joining one node type (after removing the ones there, unless
    ``allow_duplicate``), their features as :func:`gnnc.graph.transforms.add_self_loop` fills them; with
    ``new_etypes`` also a relation ``(t, 'self', t)`` of loops per node type."""

    def __init__(self, allow_duplicate=False, new_etypes=False, edge_feat_names=None, fill_data=1.0):
        self.allow_duplicate, self.new_etypes = allow_duplicate, new_etypes
        self.edge_feat_names, self.fill_data = edge_feat_names, fill_data

    def __call__(self, g):
        for key in g.canonical_etypes:
            if key[0] != key[2]:
                continue
            if not self.allow_duplicate:
                g = remove_self_loop(g, etype=key)
            g = add_self_loop(g, edge_feat_names=self.edge_feat_names, fill_data=self.fill_data, etype=key)
        if not self.new_etypes:
            return g
        relations = {key: g.edges(etype=key) for key in g.canonical_etypes}
        for ntype in g.ntypes:
            nodes = g.nodes(ntype)
            relations[(ntype, "self", ntype)] = (nodes, nodes)
        return _rebuild(g, relations)


class RemoveSelfLoop(BaseTransform):
    """Every relation joining one node type without its self loops."""

    def __call__(self, g):
        for key in g.canonical_etypes:
            if key[0] == key[2]:
                g = remove_self_loop(g, etype=key)
        return g


class AddReverse(BaseTransform):
    """Reverse edges: a relation ``(s, r, d)`` between two node types (or any, with ``sym_new_etype``) gets a
    relation ``(d, 'rev_r', s)``; one joining a single type gets its reversed edges appended. Reversed edges
    carry their edges' features with ``copy_edata``, zeros (appended) or nothing (new relation) otherwise."""

    def __init__(self, copy_edata=False, sym_new_etype=False):
        self.copy_edata, self.sym_new_etype = copy_edata, sym_new_etype

    def _new_relation(self, key) -> bool:
        return key[0] != key[2] or self.sym_new_etype

    def __call__(self, g):
        relations = {}
        for key in g.canonical_etypes:
            src, dst = g.edges(etype=key)
            if self._new_relation(key):
                relations[key] = (src, dst)
                relations[(key[2], f"rev_{key[1]}", key[0])] = (dst, src)
            else:
                relations[key] = (torch.cat([src, dst]), torch.cat([dst, src]))
        out = _rebuild(g, relations, copy_edata=False)
        for key in g.canonical_etypes:
            for name, feat in g.edges[key].data.items():
                if self._new_relation(key):
                    out.edges[key].data[name] = feat
                    if self.copy_edata:
                        out.edges[(key[2], f"rev_{key[1]}", key[0])].data[name] = feat
                else:
                    out.edges[key].data[name] = torch.cat([feat, feat if self.copy_edata else torch.zeros_like(feat)])
        return out


class ToSimple(BaseTransform):
    """:func:`gnnc.graph.derived.to_simple` with edge features merged by ``aggregator`` and the counts as
    ``return_counts``."""

    def __init__(self, return_counts="count", aggregator="arbitrary"):
        self.return_counts, self.aggregator = return_counts, aggregator

    def __call__(self, g):
        return to_simple(g, return_counts=self.return_counts, copy_edata=True, aggregator=self.aggregator)


class LineGraph(BaseTransform):
    """:func:`gnnc.graph.derived.line_graph` with the edge features as node features."""

    def __init__(self, backtracking=True):
        self.backtracking = backtracking

    def __call__(self, g):
        return line_graph(g, backtracking=self.backtracking, shared=True)


class KHopGraph(BaseTransform):
    """:func:`gnnc.graph.derived.khop_graph` (node features copied)."""

    def __init__(self, k):
        self.k = k

    def __call__(self, g):
        return khop_graph(g, self.k)


class AddMetaPaths(BaseTransform):
    """A relation ``(first source type, name, last destination type)`` per ``{name: metapath}`` joining the
    nodes :func:`gnnc.graph.derived.metapath_reachable_graph` joins; the original relations (with their
    features) stay when ``keep_orig_edges``."""

    def __init__(self, metapaths, keep_orig_edges=True):
        self.metapaths, self.keep_orig_edges = metapaths, keep_orig_edges

    def __call__(self, g):
        relations = {}
        for name, metapath in self.metapaths.items():
            reached = metapath_reachable_graph(g, metapath)
            relations[(metapath[0][0], name, metapath[-1][-1])] = reached.edges()
        if self.keep_orig_edges:
            relations.update({key: g.edges(etype=key) for key in g.canonical_etypes})
        return _rebuild(g, relations, copy_edata=self.keep_orig_edges)


class Compose(BaseTransform):
    """The transforms ``transforms`` applied in order."""

    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, g):
        for transform in self.transforms:
            g = transform(g)
        return g

    def __repr__(self):
        inner = ",\n".join("  " + str(transform) for transform in self.transforms)
        return f"{self.__class__.__name__}([\n{inner}\n])"


class GCNNorm(BaseTransform):
    """Writes :func:`gnnc.graph.diffusion.gcn_norm` as edge feature ``eweight_name`` of every relation joining
    one node type (from that feature's values when present). In place."""

    def __init__(self, eweight_name="w"):
        self.eweight_name = eweight_name

    def __call__(self, g):
        weights = {key: diffusion.gcn_norm(g, key, self.eweight_name) for key in g.canonical_etypes if key[0] == key[2]}
        for key, weight in weights.items():
            g.edges[key].data[self.eweight_name] = weight
        return g


class _Diffusion(BaseTransform):
    """A homogeneous graph's diffusion matrix as a new graph: :func:`gnnc.graph.diffusion.sparsified_graph`."""

    def __init__(self, eweight_name="w", eps=None, avg_degree=5):
        self.eweight_name, self.eps, self.avg_degree = eweight_name, eps, avg_degree

    def matrix(self, g) -> torch.Tensor:
        raise NotImplementedError

    def __call__(self, g):
        return diffusion.sparsified_graph(g, self.matrix(g), self.eweight_name, self.eps, self.avg_degree)


class PPR(_Diffusion):
    """Personalised PageRank diffusion (teleport probability ``alpha``), sparsified."""

    def __init__(self, alpha=0.15, eweight_name="w", eps=None, avg_degree=5):
        super().__init__(eweight_name, eps, avg_degree)
        self.alpha = alpha

    def matrix(self, g):
        return diffusion.ppr_matrix(g, self.alpha, self.eweight_name)


class HeatKernel(_Diffusion):
    """Heat kernel diffusion (time ``t``), sparsified."""

    def __init__(self, t=2.0, eweight_name="w", eps=None, avg_degree=5):
        super().__init__(eweight_name, eps, avg_degree)
        self.t = t

    def matrix(self, g):
        return diffusion.heat_kernel_matrix(g, self.t, self.eweight_name)


class GDC(_Diffusion):
    """Graph diffusion with the power series coefficients ``coefs``, sparsified."""

    def __init__(self, coefs, eweight_name="w", eps=None, avg_degree=5):
        super().__init__(eweight_name, eps, avg_degree)
        self.coefs = coefs

    def matrix(self, g):
        return diffusion.gdc_matrix(g, self.coefs, self.eweight_name)


class NodeShuffle(BaseTransform):
    """A clone of the graph whose node features are permuted at random, per node type."""

    def __call__(self, g):
        g = g.clone()
        for ntype in g.ntypes:
            perm = torch.randperm(g.num_nodes(ntype), device=g.device)
            data = g.nodes[ntype].data
            for name in list(data):
                data[name] = data[name][perm]
        return g


class _Drop(BaseTransform):
    """A clone of the graph without each of its nodes or edges (``_drop``) with probability ``p``."""

    def __init__(self, p=0.5):
        self.p = p
        self.dist = torch.distributions.Bernoulli(p)

    def _mask(self, count: int, device) -> torch.Tensor:
        return self.dist.sample(torch.Size([count])).bool().to(device)

    def _drop(self, g) -> None:
        raise NotImplementedError

    def __call__(self, g):
        g = g.clone()
        if self.p != 0:
            self._drop(g)
        return g


class DropNode(_Drop):
    """A clone of the graph without each node (and its edges) with probability ``p``."""

    def _drop(self, g):
        for ntype in g.ntypes:
            g.remove_nodes(g.nodes(ntype)[self._mask(g.num_nodes(ntype), g.device)], ntype=ntype)


class DropEdge(_Drop):
    """A clone of the graph without each edge with probability ``p``."""

    def _drop(self, g):
        for key in g.canonical_etypes:
            g.remove_edges(g.edges(form="eid", etype=key)[self._mask(g.num_edges(key), g.device)], etype=key)


class AddEdge(BaseTransform):
    """A clone of the graph with ``int(ratio * E_r)`` random edges appended to each relation ``r`` (ends drawn
    uniformly; their features from the initializers)."""

    def __init__(self, ratio=0.2):
        self.ratio = ratio

    def __call__(self, g):
        if self.ratio == 0.0:
            return g
        g = g.clone()
        for key in g.canonical_etypes:
            count = int(g.num_edges(key) * self.ratio)
            src, dst = (
                torch.randint(0, g.num_nodes(t), (count,), dtype=g.idtype, device=g.device) for t in (key[0], key[2])
            )
            g.add_edges(src, dst, etype=key)
        return g


class SIGNDiffusion(BaseTransform):
    """Writes :func:`gnnc.graph.diffusion.sign_diffusion`'s ``k`` features of ``in_feat_name`` as node features
    ``out_feat_name_1`` ... ``out_feat_name_k``. In place."""

    def __init__(
        self, k, in_feat_name="feat", out_feat_name="out_feat", eweight_name=None, diffuse_op="raw", alpha=0.2
    ):
        if diffuse_op not in diffusion.SIGN_OPS:
            raise ValueError(
                f"SIGNDiffusion: expect diffuse_op to be from {list(diffusion.SIGN_OPS)}, got {diffuse_op!r}"
            )
        self.k, self.in_feat_name, self.out_feat_name = k, in_feat_name, out_feat_name
        self.eweight_name, self.diffuse_op, self.alpha = eweight_name, diffuse_op, alpha

    def __call__(self, g):
        feats = diffusion.sign_diffusion(
            g, self.k, g.ndata[self.in_feat_name], self.eweight_name, self.diffuse_op, self.alpha
        )
        for i, feat in enumerate(feats, 1):
            g.ndata[f"{self.out_feat_name}_{i}"] = feat
        return g


class ToLevi(BaseTransform):
    """The Levi graph of a homogeneous graph: node types ``'node'`` (its nodes, their features) and ``'edge'``
    (its edges, their features), relations ``('node', 'n2e', 'edge')`` from each edge's source and
    ``('edge', 'e2n', 'node')`` to its destination, in edge-id order."""

    def __call__(self, g):
        src, dst = g.edges()
        eids = g.edges(form="eid")
        out = heterograph(
            {("node", "n2e", "edge"): (src, eids), ("edge", "e2n", "node"): (eids, dst)},
            num_nodes_dict={"node": g.num_nodes(), "edge": g.num_edges()},
            idtype=g.idtype,
            device=g.device,
        )
        out.nodes["node"].data.update(g.ndata)
        out.nodes["edge"].data.update(g.edata)
        return out

"""DGL's side of the benchmark: its built-in layers paired with gnnc's, and gnnc's own UDFs run by DGL.

Imported by both interpreters: the harness reads the pairings' notes from
here; the peer interpreter (``peer_worker``, DGL 2.1 on torch 2.2) builds
the layers. Nothing here imports gnnc or, until a layer is built, DGL.

Two systems:

- ``dgl``: DGL's built-in layer for each model (``DGL``), its parameters
  copied from the eager layer's, on a DGL graph made once outside the timed
  region (homogeneous, edges in the user's order; for RGCN and HGT with
  per-edge relation and per-node type ids, DGL's typed form; for RGAT a
  heterograph). A layer that computes another function has ``differs``: it
  is timed, but its row says DIFFERS and it is never gated as a match.
- ``dgl-udf``: the eager layer's own code (``gnnc.models``' message, reduce
  and update functions) run by DGL's ``update_all`` / ``apply_edges``, the
  baseline the Graphiler paper measures against. The relational layers read
  per-relation and per-node-type parameters through ``edges.type``,
  ``edges.srctype``, ``edges.dsttype`` and ``nodes.type``, which DGL's
  batches lack; ``UDFGraph`` supplies them by gathering the parameter per
  edge (or node) by its type id, ``W[etype]``, as a DGL user writes such a
  UDF (Graphiler's DGL-UDF baselines do the same).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .case import Prepared

GNNC_MODELS = Path(__file__).resolve().parents[2] / "src" / "gnnc" / "models"
ETYPE, NTYPE = "_gnnc_etype", "_gnnc_ntype"  # DGL edata / ndata keys of the type ids (dgl-udf)


@dataclass(frozen=True)
class Note:
    layer: str
    note: str
    differs: str | None = None


DGL = {
    "gcn": Note(
        "GraphConv",
        "dgl.nn.GraphConv(norm='both', allow_zero_in_degree=True): the same out-/in-degree "
        "normalisation as ours; weight and bias copied",
    ),
    "gat": Note(
        "GATConv",
        "dgl.nn.GATConv(heads=8, allow_zero_in_degree=True): fc copied, attn_l / attn_r the "
        "source / destination halves of our attn, bias flattened",
    ),
    "edgeconv": Note(
        "EdgeConv",
        "dgl.nn.EdgeConv(allow_zero_in_degree=True) computes max theta(x_v - x_u) + "
        "phi(x_v): ours W [x_v ; x_u - x_v] + b split as phi = (W_1, b), theta = (-W_2, 0)",
    ),
    "gmm": Note(
        "GMMConv",
        "dgl.nn.GMMConv(aggregator_type='mean', allow_zero_in_degree=True): fc, mu, "
        "inv_sigma and bias copied (ours follows DGL's semantics)",
    ),
    "rgcn": Note(
        "RelGraphConv",
        "dgl.nn.RelGraphConv(regularizer=None, self_loop=True) on the homogeneous "
        "graph with per-edge relation ids (edges sorted by relation, presorted=True); fed the per-edge "
        "norm 1/c_{v,r}, computed on every call as our layer does",
    ),
    "rgat": Note(
        "HeteroGraphConv(GATConv)",
        "dgl.nn.HeteroGraphConv({r: GATConv(heads=8, bias=False)}, "
        "aggregate='sum') on a heterograph, fc_r = W_r, attn_l / attn_r our a_r halves",
        differs="softmax within each relation, then a sum over relations; ours (and PyG's "
        "across-relation RGATConv) normalise over all in-edges of a node",
    ),
    "hgt": Note(
        "HGTConv",
        "dgl.nn.HGTConv(head_size=8, heads=8, dropout=0, use_norm=False) on the homogeneous "
        "graph with node and edge type ids; k/q/v/a, relation_att/msg/pri and skip copied",
        differs="no GELU before the output projection and no biases in its typed linears (k, q, v, "
        "a); ours (DGL's HGT example, PyG's HGTConv) has both",
    ),
}

DGL_UDF = {
    model: Note("update_all(UDFs)", note)
    for model, note in {
        "gcn": "our GCNConv.forward on a DGL graph: DGL runs its message and reduce UDFs (degree-bucketed mailbox)",
        "gat": "our GATConv.forward on a DGL graph: apply_edges(attention UDF), then update_all(message, reduce)",
        "edgeconv": "our EdgeConv.forward on a DGL graph: the MLP runs inside the message UDF, per edge",
        "gmm": "our GMMConv.forward on a DGL graph: Gaussian weights inside the message UDF",
        "rgcn": "our RGCNConv.forward on DGL's homogeneous graph: edges.type['W'] is W[etype], a per-edge "
        "[in, out] matrix gathered for bmm (how a DGL user writes it)",
        "rgat": "our RGATConv.forward on DGL's homogeneous graph: per-edge W[etype] and a[etype] gathered",
        "hgt": "our HGTConv.forward on DGL's homogeneous graph: per-edge typed k/q/v weights and relation maps "
        "gathered by type id, update UDF per node",
    }.items()
}


@dataclass
class Bundle:
    """One case as exported for the peer: graph arrays, features, extra inputs and the eager parameters."""

    model: str
    x: torch.Tensor
    src: torch.Tensor  # global node ids, user edge order (hetero: grouped by relation)
    dst: torch.Tensor
    num_nodes: int
    etype: torch.Tensor  # relation id per edge (zeros on a homogeneous graph)
    ntype: torch.Tensor  # node type id per node (global ids are grouped by type)
    rel_src_type: torch.Tensor  # per relation: its source and destination node types
    rel_dst_type: torch.Tensor
    view_rows: torch.Tensor  # the output rows the gate compares
    inputs: list = field(default_factory=list)
    params: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)  # the rest: check points, upstream gradients

    @property
    def num_rels(self) -> int:
        return len(self.rel_src_type)

    @property
    def num_ntypes(self) -> int:
        return int(self.ntype.max()) + 1 if self.num_nodes else 1

    @classmethod
    def load(cls, path: Path) -> Bundle:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: torch.from_numpy(z[k].copy()) for k in z.files}
        model = bytes(arrays.pop("model").numpy()).decode()
        params = {k[len("param.") :]: arrays.pop(k) for k in list(arrays) if k.startswith("param.")}
        inputs = [arrays.pop(f"input.{i}") for i in range(sum(k.startswith("input.") for k in arrays))]
        take = {
            k: arrays.pop(k) for k in ("x", "src", "dst", "etype", "ntype", "rel_src_type", "rel_dst_type", "view_rows")
        }
        return cls(model, num_nodes=int(arrays.pop("num_nodes")), inputs=inputs, params=params, arrays=arrays, **take)


def export(
    path: Path,
    model: str,
    x,
    src,
    dst,
    num_nodes: int,
    etype,
    ntype,
    rel_src_type,
    rel_dst_type,
    view_rows,
    inputs,
    params: dict,
    **arrays,
) -> None:
    """Write a ``Bundle`` as a plain ``.npz`` (numpy arrays only: both torch versions read it)."""
    out = {
        "model": np.frombuffer(model.encode(), dtype=np.uint8),
        "x": x,
        "src": src,
        "dst": dst,
        "num_nodes": np.int64(num_nodes),
        "etype": etype,
        "ntype": ntype,
        "rel_src_type": rel_src_type,
        "rel_dst_type": rel_dst_type,
        "view_rows": view_rows,
        **{f"input.{i}": t for i, t in enumerate(inputs)},
        **{f"param.{k}": t for k, t in params.items()},
        **arrays,
    }
    np.savez(path, **{k: v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else v for k, v in out.items()})


# ---------------------------------------------------------------------------------------------- gnnc's layers


def gnnc_models(folder: Path = GNNC_MODELS) -> types.ModuleType:
    """``gnnc.models`` where gnnc is importable (this interpreter's torch), else its layer files loaded
    on their own: they import only torch, each other and ``gnnc.function`` (its built-ins, which
    ``UDFGraph`` hands to DGL as DGL's own), never the rest of gnnc (whose compiler needs a newer torch than
    DGL's)."""
    try:
        import gnnc.models as gm

        return gm
    except ImportError:
        pass
    name = "_gnnc_peer.models"  # the layer files' ``from .. import function``: gnnc's function.py (torch only)
    for package_name, path in (("_gnnc_peer", folder.parent), (name, folder)):
        if package_name not in sys.modules:
            package = types.ModuleType(package_name)
            package.__path__ = [str(path)]
            sys.modules[package_name] = package
    package = sys.modules[name]
    for sub, cls in (
        ("gcn", "GCNConv"),
        ("gat", "GATConv"),
        ("edgeconv", "EdgeConv"),
        ("monet", "GMMConv"),
        ("rgcn", "RGCNConv"),
        ("rgat", "RGATConv"),
        ("hgt", "HGTConv"),
    ):
        setattr(package, cls, getattr(importlib.import_module(f"{name}.{sub}"), cls))
    return package


def udf_layer(model: str, params: dict, gm) -> torch.nn.Module:
    """The eager layer of ``model`` rebuilt from its parameters (their shapes give the widths) with the
    benchmark's settings (``harness.models``: GMM aggregates by mean, HGT without LayerNorm)."""
    p = params
    if model == "gcn":
        layer = gm.GCNConv(*p["weight"].shape)
    elif model == "gat":
        heads, two_c = p["attn"].shape
        layer = gm.GATConv(p["fc.weight"].shape[1], two_c // 2, num_heads=heads)
    elif model == "edgeconv":
        out, two_in = p["mlp.0.weight"].shape
        layer = gm.EdgeConv(two_in // 2, out)
    elif model == "gmm":
        kernels, pseudo = p["mu"].shape
        layer = gm.GMMConv(p["fc.weight"].shape[1], p["bias"].shape[0], pseudo, kernels, aggregator="mean")
    elif model == "rgcn":
        rels, fin, out = p["weight"].shape
        layer = gm.RGCNConv(fin, out, num_rels=rels)
    elif model == "rgat":
        rels, heads, two_c = p["attn"].shape
        layer = gm.RGATConv(p["weight"].shape[1], two_c // 2, num_rels=rels, num_heads=heads)
    elif model == "hgt":
        ntypes, fin, out = p["k_weight"].shape
        rels, heads = p["relation_pri"].shape
        layer = gm.HGTConv(fin, out, ntypes, rels, num_heads=heads, use_norm=False)
    else:
        raise KeyError(f"no DGL-UDF form of model {model!r}")
    layer.load_state_dict(p)
    return layer


class _TypeView:
    """``view[name]``: the per-type tensor ``name`` gathered by each row's type id."""

    def __init__(self, table: dict, ids: torch.Tensor):
        self.table, self.ids = table, ids

    def __getitem__(self, name):
        return self.table[name].index_select(0, self.ids)


class _Edges:
    """A DGL ``EdgeBatch`` plus ``type``, ``srctype``, ``dsttype`` (gnnc's UDF interface)."""

    def __init__(self, edges, graph: UDFGraph):
        self.src, self.dst, self.data = edges.src, edges.dst, edges.data
        self._edges, self._graph = edges, graph

    @property
    def type(self):
        return _TypeView(self._graph.etype_data, self._edges.data[ETYPE])

    @property
    def srctype(self):
        return _TypeView(self._graph.ntype_data, self._edges.src[NTYPE])

    @property
    def dsttype(self):
        return _TypeView(self._graph.ntype_data, self._edges.dst[NTYPE])


class _Nodes:
    """A DGL ``NodeBatch`` plus ``type`` (gnnc's UDF interface)."""

    def __init__(self, nodes, graph: UDFGraph):
        self.data, self._nodes, self._graph = nodes.data, nodes, graph

    @property
    def mailbox(self):
        return self._nodes.mailbox

    @property
    def type(self):
        return _TypeView(self._graph.ntype_data, self._nodes.data[NTYPE])


def _dgl_builtin(reducer):
    """DGL's built-in reducer for gnnc's ``reducer`` (``gnnc.function.sum('m', 'h')`` -> ``dgl.function.sum``)."""
    import dgl.function

    return getattr(dgl.function, reducer.op)(reducer.msg, reducer.out)


class UDFGraph:
    """A DGL graph (homogeneous, with type ids) seen through the part of gnnc's graph API its layers call:
    ``ndata`` / ``ndata_all``, ``edata`` / ``edata_all``, ``etype_data``, ``ntype_data``, ``local_scope``,
    degrees, ``find_edges`` and ``canonical_etypes`` per relation, ``edge_relation_in_degrees``, and
    ``update_all`` / ``apply_edges`` / ``apply_nodes`` running the layer's UDFs in DGL."""

    def __init__(self, g, etype: torch.Tensor, ntype: torch.Tensor, num_rels: int):
        self.g = g
        g.edata[ETYPE], g.ndata[NTYPE] = etype, ntype
        self.etype_data, self.ntype_data = {}, {}
        self.canonical_etypes = list(range(num_rels))
        src, dst = g.edges()
        self._rel = [(src[etype == r], dst[etype == r]) for r in self.canonical_etypes]

    ndata = ndata_all = property(lambda self: self.g.ndata)  # one node type: gnnc's whole view is DGL's
    edata = edata_all = property(lambda self: self.g.edata)

    @contextlib.contextmanager
    def local_scope(self):
        saved = dict(self.etype_data), dict(self.ntype_data)
        with self.g.local_scope():
            try:
                yield
            finally:
                self.etype_data, self.ntype_data = saved

    def num_nodes(self) -> int:
        return self.g.num_nodes()

    def in_degrees(self, rel=None):
        if rel is None:
            return self.g.in_degrees()
        return torch.bincount(self._rel[rel][1], minlength=self.g.num_nodes())

    def out_degrees(self, rel=None):
        if rel is None:
            return self.g.out_degrees()
        return torch.bincount(self._rel[rel][0], minlength=self.g.num_nodes())

    def find_edges(self, rel=None):
        return self.g.edges() if rel is None else self._rel[rel]

    def edge_relation_in_degrees(self):
        _, dst = self.g.edges()
        key = dst * len(self.canonical_etypes) + self.g.edata[ETYPE]
        return torch.bincount(key, minlength=self.g.num_nodes() * len(self.canonical_etypes))[key]

    def _edge_udf(self, fn):
        return lambda edges: fn(_Edges(edges, self))

    def _node_udf(self, fn):
        if fn is None or hasattr(fn, "op"):  # a gnnc built-in reducer: DGL's of the same name
            return None if fn is None else _dgl_builtin(fn)
        return lambda nodes: fn(_Nodes(nodes, self))

    def update_all(self, message, reduce, update=None):
        self.g.update_all(self._edge_udf(message), self._node_udf(reduce), self._node_udf(update))

    def apply_edges(self, fn):
        self.g.apply_edges(self._edge_udf(fn))

    def apply_nodes(self, fn):
        self.g.apply_nodes(self._node_udf(fn))


# ---------------------------------------------------------------------------------------------- builders


def _view(b: Bundle):
    rows = b.view_rows
    return lambda out: out.flatten(1).index_select(0, rows)


def _homograph(b: Bundle):
    import dgl

    return dgl.graph((b.src, b.dst), num_nodes=b.num_nodes)


def build_udf(b: Bundle) -> Prepared:
    """``dgl-udf``: the eager layer's forward on a ``UDFGraph``."""
    layer = udf_layer(b.model, b.params, gnnc_models())
    g = UDFGraph(_homograph(b), b.etype, b.ntype, b.num_rels)
    inputs = b.inputs
    return Prepared(layer, lambda x: layer(g, x, *inputs), _view(b))


def _sorted(t: torch.Tensor) -> bool:
    return bool((t[1:] >= t[:-1]).all()) if t.numel() > 1 else True


@torch.no_grad()
def build_dgl(b: Bundle) -> Prepared:
    """``dgl``: DGL's built-in layer for ``b.model`` with the eager parameters (see ``DGL`` for each note)."""
    import dgl.nn as dglnn

    p, m = b.params, b.model
    if m == "rgat":
        return _rgat(b)
    g = _homograph(b)
    if m == "gcn":
        conv = dglnn.GraphConv(*p["weight"].shape, norm="both", allow_zero_in_degree=True)
        conv.weight.copy_(p["weight"])
        conv.bias.copy_(p["bias"])
        call = functools.partial(conv, g)
    elif m == "gat":
        heads, two_c = p["attn"].shape
        c = two_c // 2
        conv = dglnn.GATConv(p["fc.weight"].shape[1], c, heads, allow_zero_in_degree=True)
        conv.fc.weight.copy_(p["fc.weight"])
        conv.attn_l.copy_(p["attn"][:, :c].unsqueeze(0))
        conv.attn_r.copy_(p["attn"][:, c:].unsqueeze(0))
        conv.bias.copy_(p["bias"].flatten())
        call = functools.partial(conv, g)
    elif m == "edgeconv":
        w, bias = p["mlp.0.weight"], p["mlp.0.bias"]
        fin = w.shape[1] // 2
        conv = dglnn.EdgeConv(fin, w.shape[0], allow_zero_in_degree=True)
        conv.phi.weight.copy_(w[:, :fin])
        conv.phi.bias.copy_(bias)
        conv.theta.weight.copy_(-w[:, fin:])
        conv.theta.bias.zero_()
        call = functools.partial(conv, g)
    elif m == "gmm":
        kernels, pseudo_dim = p["mu"].shape
        conv = dglnn.GMMConv(
            p["fc.weight"].shape[1], p["bias"].shape[0], pseudo_dim, kernels, "mean", allow_zero_in_degree=True
        )
        for name in ("fc.weight", "mu", "inv_sigma", "bias"):
            conv.get_parameter(name).copy_(p[name])
        (pseudo,) = b.inputs

        def call(x):
            return conv(g, x, pseudo)
    elif m == "rgcn":
        rels, fin, out = p["weight"].shape
        conv = dglnn.RelGraphConv(fin, out, rels, regularizer=None, self_loop=True, bias=True)
        conv.linear_r.W.copy_(p["weight"])
        conv.loop_weight.copy_(p["loop_weight"])
        conv.h_bias.copy_(p["bias"])
        etype, dst, presorted = b.etype, b.dst, _sorted(b.etype)

        def call(x):
            key = dst * rels + etype  # 1 / c_{v,r}: in-edges of v with relation r
            norm = torch.bincount(key, minlength=b.num_nodes * rels).to(x.dtype).reciprocal()[key].unsqueeze(1)
            return conv(g, x, etype, norm, presorted=presorted)
    elif m == "hgt":
        ntypes, fin, out = p["k_weight"].shape
        rels, heads = p["relation_pri"].shape
        conv = dglnn.HGTConv(fin, out // heads, heads, ntypes, rels, dropout=0.0, use_norm=False)
        for ours, theirs in (("k", conv.linear_k), ("q", conv.linear_q), ("v", conv.linear_v), ("a", conv.linear_a)):
            theirs.W.copy_(p[f"{ours}_weight"])
        for h in range(heads):
            conv.relation_att[h].W.copy_(p["relation_att"][:, h])
            conv.relation_msg[h].W.copy_(p["relation_msg"][:, h])
            conv.relation_pri[h].copy_(p["relation_pri"][:, h])
        conv.skip.copy_(p["skip"])
        etype, ntype = b.etype, b.ntype
        presorted = _sorted(etype) and _sorted(ntype)

        def call(x):
            return conv(g, x, ntype, etype, presorted=presorted)
    else:
        raise KeyError(f"no DGL layer for model {m!r}")
    return Prepared(conv, call, _view(b))


@torch.no_grad()
def _rgat(b: Bundle) -> Prepared:
    import dgl
    import dgl.nn as dglnn

    p = b.params
    rels, heads, two_c = p["attn"].shape
    c, fin = two_c // 2, p["weight"].shape[1]
    counts = torch.bincount(b.ntype, minlength=b.num_ntypes)
    starts = torch.cumsum(counts, 0) - counts
    keys, data = [], {}
    for r in range(rels):
        s, d = int(b.rel_src_type[r]), int(b.rel_dst_type[r])
        mask = b.etype == r
        keys.append((f"n{s}", f"r{r}", f"n{d}"))
        data[keys[-1]] = (b.src[mask] - starts[s], b.dst[mask] - starts[d])
    g = dgl.heterograph(data, num_nodes_dict={f"n{t}": int(n) for t, n in enumerate(counts)})
    convs = {}
    for r, key in enumerate(keys):
        conv = dglnn.GATConv(fin, c, heads, bias=False, allow_zero_in_degree=True)
        conv.fc.weight.copy_(p["weight"][r].T)
        conv.attn_l.copy_(p["attn"][r, :, :c].unsqueeze(0))
        conv.attn_r.copy_(p["attn"][r, :, c:].unsqueeze(0))
        convs[key[1]] = conv
    layer = dglnn.HeteroGraphConv(convs, aggregate="sum")
    bounds = [(int(starts[t]), int(starts[t] + counts[t])) for t in range(b.num_ntypes)]

    def call(x):
        out = layer(g, {f"n{t}": x[lo:hi] for t, (lo, hi) in enumerate(bounds)})
        return torch.cat(
            [
                out[f"n{t}"].flatten(1) if f"n{t}" in out else x.new_zeros(hi - lo, heads * c)
                for t, (lo, hi) in enumerate(bounds)
            ]
        )

    return Prepared(layer, call, _view(b))


BUILDERS = {"dgl": build_dgl, "dgl-udf": build_udf}

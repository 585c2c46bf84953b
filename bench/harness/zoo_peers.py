"""Library modules configured to compute a zoo program's function (``bench/zoo.py``): the peers a row is
compared with only after the gate (outputs, input and parameter gradients) says they compute the same thing.

Runs in both interpreters (imports only torch): ``dgl-builtin`` peers are built from DGL 2.1's ``dgl.nn`` in
the peer interpreter, ``pyg`` peers from ``torch_geometric.nn`` in the main one. A peer takes the program's
parameters under its own names: ``names`` maps each of the program's parameter-name prefixes to the peer's;
a parameter whose prefix is not there is one the program's configuration leaves unused (GIN's batch norm
when ``batch_norm=False``), and the gate's gradient comparison would show it if it were not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

SYSTEMS = {"dgl-builtin": "dgl.nn", "pyg": "torch_geometric.nn"}  # system -> the library its peers come from


@dataclass(frozen=True)
class Peer:
    program: str
    system: str  # a key of SYSTEMS
    label: str  # the peer as the table names it
    build: Callable  # (library, world-code module, width) -> the module; the module gives the user's own parts
    names: dict[str, str]  # program's parameter-name prefix -> the peer's
    call: Callable | None = None  # (model, graph, tensors) -> outputs; None: the program's own call

    def peer_name(self, name: str) -> str | None:
        """The peer's name for the program's parameter ``name``; None when the peer has no such parameter."""
        for ours, theirs in self.names.items():
            if name.startswith(ours):
                return theirs + name[len(ours) :]
        return None

    def program_name(self, name: str) -> str:
        """The program's name for the peer's parameter ``name``."""
        for ours, theirs in self.names.items():
            if name.startswith(theirs):
                return ours + name[len(theirs) :]
        raise KeyError(f"{self.label} has a parameter {name!r} the program's names do not map")


def edge_index_call(model, g, x):
    """A PyG layer's call on the graph's edges (``edge_index`` rows: source, destination)."""
    return model(x["h"], torch.stack(g.edges()))


def gin_mlp(module, d):
    """GIN's MLP as benchmarking-gnns builds it (two linear layers, batch norm between), the user's own part."""
    return module.ApplyNodeFunc(module.MLP(2, d, d, d))


GATEDGCN_NAMES = {**{f"{k}.": f"{k}." for k in "ABCDE"}, "bn_node_h.": "bn_node.", "bn_node_e.": "bn_edge."}
GIN_NAMES = {"apply_func.": "apply_func.", "eps": "eps"}

PEERS = [
    Peer(
        "gatedgcn",
        "dgl-builtin",
        "GatedGCNConv",
        lambda nn, m, d: nn.GatedGCNConv(d, d, d, dropout=0.0, batch_norm=True, residual=True),
        GATEDGCN_NAMES,
    ),
    Peer(
        "gin-plain",
        "dgl-builtin",
        "GINConv(sum, learn_eps, relu)",
        lambda nn, m, d: nn.GINConv(gin_mlp(m, d), "sum", learn_eps=True, activation=torch.relu),
        GIN_NAMES,
    ),
    Peer(
        "gin-plain",
        "pyg",
        "GINConv(train_eps, MLP + ReLU)",
        lambda nn, m, d: nn.GINConv(torch.nn.Sequential(gin_mlp(m, d), torch.nn.ReLU()), train_eps=True),
        {"apply_func.": "nn.0.", "eps": "eps"},
        edge_index_call,
    ),
]
BY_PROGRAM_SYSTEM = {(p.program, p.system): p for p in PEERS}

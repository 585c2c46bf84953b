"""Full-batch node-classification training through any gnnc model.

``train_node_classifier`` runs Adam with weight decay, evaluates every
epoch, keeps the parameters with the best validation accuracy (ties broken
by validation loss) and reports the test accuracy of those parameters.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .. import progress as shown
from ..compile import CompiledModule
from ..compile import compile as compile_model
from ..models import GAT, GCN
from ..path_choice import PathChoice

# How a model runs: as written on the eager executor, always compiled, or on the path measured faster.
COMPILE_MODES = ("never", "always", "auto")

EPOCH = "one training epoch"


@dataclass(frozen=True)
class TrainResult:
    """``seconds``: the whole run, a path measurement included; ``epoch_seconds``: each epoch's train step
    and evaluation; ``path``: the path the epochs ran; ``choice``: the measurement that chose it, if any."""

    best_epoch: int
    epochs_run: int
    val_acc: float
    test_acc: float
    seconds: float
    epoch_seconds: tuple[float, ...] = ()
    path: str = "eager"
    choice: PathChoice | None = None


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    return (logits.argmax(-1) == labels).double().mean().item() if labels.numel() else float("nan")


def train_node_classifier(
    model,
    g,
    feats,
    labels,
    masks,
    *,
    epochs=200,
    lr=0.01,
    weight_decay=5e-4,
    patience=None,
    progress=True,
    choose_path=False,
) -> TrainResult:
    """Train ``model(g, feats) -> logits`` on ``masks['train']``; select on ``masks['val']``.

    ``patience``: stop after that many epochs without a better validation
    accuracy (None runs every epoch). ``progress``: a bar on a terminal, else
    one line per epoch on stderr (``gnnc.progress``; none when quiet).
    ``choose_path`` (``model`` a ``CompiledModule``): before the first epoch,
    time one epoch (its train step without the optimizer's, and its
    evaluation) compiled and eagerly and train on the faster path
    (``CompiledModule.choose_path``; the numbers are then those of that path).
    """
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    train, val, test = masks["train"], masks["val"], masks["test"]

    def train_step() -> torch.Tensor:
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(g, feats)[train], labels[train])
        loss.backward()
        return loss

    def evaluate() -> torch.Tensor:
        model.eval()
        with torch.no_grad():
            return model(g, feats)

    best = (-1.0, float("inf"))
    best_state, best_epoch, since_best = None, 0, 0
    start = time.perf_counter()
    if choose_path:
        if not isinstance(model, CompiledModule):
            raise TypeError(f"choose_path needs a gnnc.compile'd model, not a {type(model).__name__}")
        model.choose_path(lambda: (train_step(), evaluate()), what=EPOCH)
    epoch_seconds = []
    bar = shown.bar(range(1, epochs + 1), desc="train", disable=not progress, leave=False, delay=2)
    for epoch in bar:
        epoch_start = time.perf_counter()
        loss = train_step()
        opt.step()
        logits = evaluate()
        epoch_seconds.append(time.perf_counter() - epoch_start)
        val_acc = accuracy(logits[val], labels[val])
        val_loss = F.cross_entropy(logits[val], labels[val]).item()
        bar.set_postfix(loss=f"{loss.item():.3f}", val=f"{val_acc:.3f}")
        if progress and not shown.bars():
            shown.line(f"epoch {epoch}/{epochs}: loss {loss.item():.3f}, val accuracy {val_acc:.3f}")
        if (val_acc, -val_loss) > (best[0], -best[1]):
            best, best_epoch, since_best = (val_acc, val_loss), epoch, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            since_best += 1
            if patience is not None and since_best >= patience:
                break
    seconds = time.perf_counter() - start
    model.load_state_dict(best_state)
    logits = evaluate()
    compiled = isinstance(model, CompiledModule)
    return TrainResult(
        best_epoch,
        epoch,
        best[0],
        accuracy(logits[test], labels[test]),
        seconds,
        tuple(epoch_seconds),
        model.path if compiled else "eager",
        model.choice if compiled else None,
    )


# Hyper-parameters of the GCN (Kipf & Welling 2017) and GAT (Velickovic et al.
# 2018) papers for the Planetoid public splits.
PLANETOID_RECIPES = {
    "gcn": dict(hidden=16, epochs=200, lr=0.01, weight_decay=5e-4, patience=None),
    "gat": dict(hidden=8, epochs=1000, lr=0.005, weight_decay=5e-4, patience=100),
}


def planetoid_experiment(
    model_name: str,
    dataset,
    seed: int = 0,
    epochs: int | None = None,
    progress: bool = True,
    compile_mode: str = "never",
) -> TrainResult:
    """Train GCN or GAT on a Planetoid dataset with the paper's recipe.

    Self loops are added and bag-of-words features (non-negative) row-normalised, as both papers do; a
    replica's Gaussian features (``cora-replica``) are kept, since their rows may sum to about zero.
    ``compile_mode`` (``COMPILE_MODES``): ``never`` runs the model as written,
    ``always`` through ``gnnc.compile``, ``auto`` compiled or eagerly by a
    measurement of one epoch on each (``train_node_classifier``'s ``choose_path``).
    """
    if compile_mode not in COMPILE_MODES:
        raise ValueError(f"compile_mode is one of {COMPILE_MODES}, not {compile_mode!r}")
    recipe = dict(PLANETOID_RECIPES[model_name])
    if epochs is not None:
        recipe["epochs"] = epochs
    torch.manual_seed(seed)
    g = dataset.graph.add_self_loop()
    feats = g.ndata["feat"].float()
    if bool((feats >= 0).all()):
        feats = feats / feats.sum(1, keepdim=True).clamp(min=1e-12)
    model_cls = GCN if model_name == "gcn" else GAT
    model = model_cls(feats.shape[1], recipe.pop("hidden"), dataset.num_classes)
    if compile_mode != "never":
        model = compile_model(model)
    masks = {k: g.ndata[f"{k}_mask"] for k in ("train", "val", "test")}
    return train_node_classifier(
        model, g, feats, g.ndata["label"], masks, progress=progress, choose_path=compile_mode == "auto", **recipe
    )

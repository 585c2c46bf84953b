"""Training loops over gnnc models, below ``distributed/`` (which builds on them) and the CLI.

- ``planetoid``: full-batch node classification (``train_node_classifier``, ``planetoid_experiment``);
- ``minibatch``: single-process mini-batch training on a heterogeneous graph (``MinibatchTrainer``,
  ``train_minibatch``, the per-stage clock ``STAGES``);
- ``model_builders``: the mini-batch models by name (``MODEL_BUILDERS``: rgcn, rgat, hgt);
- ``resume_state``: the configuration check and random streams a resumed run restores.

Checkpoint files themselves (sha256-checked generations) are ``gnnc.checkpoints``.
"""

from .planetoid import COMPILE_MODES, TrainResult, accuracy, planetoid_experiment, train_node_classifier

__all__ = ["COMPILE_MODES", "TrainResult", "accuracy", "planetoid_experiment", "train_node_classifier"]

"""Stand-in for GNN-FiLM's ``utils``: the metric is not part of the layer."""


def evaluate_f1_score(*args, **kwargs):
    raise RuntimeError("GNN-FiLM's metric is not provided by the world-code harness")

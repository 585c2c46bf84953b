"""Stand-in for GNN-FiLM's ``data_loader``: the PPI loader is not part of the layer."""


def load_PPI(*args, **kwargs):
    raise RuntimeError("GNN-FiLM's PPI loader is not provided by the world-code harness")

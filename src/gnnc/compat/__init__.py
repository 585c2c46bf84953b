"""Compatibility layers that let code written for another GNN library run on gnnc, each switched on
explicitly (``gnnc.compat.dgl.install()``); importing this package changes nothing."""

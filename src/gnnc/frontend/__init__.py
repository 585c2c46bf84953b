"""User-facing message-passing interface: UDF views and the update functions."""

from .batch import EdgeBatch, NodeBatch

__all__ = ["EdgeBatch", "NodeBatch"]

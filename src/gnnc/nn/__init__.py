"""Trainable building blocks outside the message-passing models: per-type input
embeddings (``TypedEmbedding``) and the lazy, per-row ``SparseAdam`` that updates them."""
from .embedding import TypedEmbedding
from .sparse_adam import SparseAdam

__all__ = ["TypedEmbedding", "SparseAdam"]

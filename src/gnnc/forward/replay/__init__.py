"""Run-time helpers that forward passes place in a captured forward graph."""

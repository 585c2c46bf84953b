"""Executors: compiled plans run (``plan``), the eager reference executor (the oracle), deferred edge results."""

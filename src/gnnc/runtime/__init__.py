"""Executors: the eager reference executor (and, later, compiled plans)."""

"""Executable backends: implementations of the gnnc graph-primitive contract."""

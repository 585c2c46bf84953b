"""Starts numba's JIT compiler (LLVM, about 55 MiB resident) on import; the forkserver imports it.

Every numba user pays this once per process, the way every torch user pays
for importing torch; starting it before any configuration forks keeps it out
of the configurations' peak memory, like the imports. The kernels a
configuration loads or compiles still count.
"""

try:
    import numba
except ImportError:  # no numba: nothing to start
    numba = None

if numba is not None:
    numba.njit(lambda value: value + 1)(1)

"""``dgl.global_config`` under gnnc's DGL alias: DGL's libxsmm switch.

DGL uses libxsmm for some CPU kernels when the switch is on; gnnc has no libxsmm kernels, so the switch is
kept (DGL code sets and reads it) and changes nothing: results are the same either way, as in DGL.
"""

_libxsmm = True  # DGL's default


def use_libxsmm(flag) -> None:
    """Record DGL's libxsmm switch (no effect on gnnc's kernels)."""
    global _libxsmm
    _libxsmm = bool(flag)


def is_libxsmm_enabled() -> bool:
    """The libxsmm switch as last set (True by default, as DGL's)."""
    return _libxsmm


__all__ = ["is_libxsmm_enabled", "use_libxsmm"]

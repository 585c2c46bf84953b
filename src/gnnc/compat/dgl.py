"""gnnc as ``dgl``: ``install()`` makes ``import dgl`` (and the DGL modules listed below) resolve to gnnc.

Nothing happens until ``install()`` is called, and it refuses to hide a real DGL: when one is already
imported or importable it raises ``RuntimeError`` naming where it lives (``force=True`` installs anyway,
with a warning, and ``uninstall()`` puts the real modules back in ``sys.modules``).

What the alias holds:

- ``dgl``: every name gnnc exports (``__all__``) from ``gnnc``, ``gnnc.graph`` and
  ``gnnc.graph.convert`` (``dgl.graph``, ``dgl.heterograph``, ``dgl.batch``, ``dgl.sum_nodes``, ...),
  DGL's names for gnnc's graph class (``DGLGraph``, ``DGLHeteroGraph``), DGL's reserved names from
  ``dgl.base``, and the modules below as attributes;
- ``dgl.transforms``: the names of gnnc's graph transforms (``gnnc.graph.transforms``, ...) and
  ``to_block``; ``dgl`` holds them too, and ``dgl.transforms.functional`` (DGL's module of them) all but
  ``to_block``;
- ``dgl.function``, ``dgl.ops``, ``dgl.data``, ``dgl.partition``: gnnc's modules of the same job, as they are;
  ``dgl.dataloading``: ``gnnc.data.dataloading`` (DGL's ``NeighborSampler(fanouts)`` and ``DataLoader``);
  ``dgl.nn`` and ``dgl.nn.pytorch``: ``gnnc.nn``'s names (DGL's layers), ``dgl.nn.pytorch.conv`` /
  ``.glob`` / ``.hetero`` / ``.linear`` / ``.utils`` / ``.gt`` / ``.link`` / ``.factory`` and
  ``dgl.nn.functional``: its modules;
- ``dgl.backend``, ``dgl.base``: DGL's tensor helpers and reserved names (``gnnc.compat.dgl_backend``,
  ``gnnc.dgl_base``).

A DGL name gnnc has no counterpart for is missing, not stubbed: ``dgl.X`` raises ``AttributeError`` and
``import dgl.X`` for a module not listed raises ``ModuleNotFoundError``, both saying so.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings

# DGL module -> the gnnc module it is, unchanged
_SAME = {
    "dgl.function": "gnnc.function",
    "dgl.ops": "gnnc.ops",
    "dgl.data": "gnnc.data",
    "dgl.dataloading": "gnnc.data.dataloading",
    "dgl.nn.pytorch": "gnnc.nn",
    "dgl.nn.pytorch.conv": "gnnc.nn.conv",
    "dgl.nn.pytorch.glob": "gnnc.nn.glob",
    "dgl.nn.pytorch.hetero": "gnnc.nn.hetero",
    "dgl.nn.pytorch.linear": "gnnc.nn.linear",
    "dgl.nn.pytorch.utils": "gnnc.nn.utils",
    "dgl.nn.pytorch.gt": "gnnc.nn.gt",
    "dgl.nn.pytorch.link": "gnnc.nn.link",
    "dgl.nn.pytorch.factory": "gnnc.nn.factory",
    "dgl.nn.functional": "gnnc.nn.functional",
    "dgl.backend": "gnnc.compat.dgl_backend",
    "dgl.base": "gnnc.dgl_base",
    "dgl.init": "gnnc.graph.initializers",
    "dgl.frame": "gnnc.graph.initializers",  # code reaches ``dgl.frame.zero_initializer`` (DGL's frame module)
    "dgl._ffi.base": "gnnc.dgl_base",
    "dgl.utils": "gnnc.compat.dgl_utils",  # ``from dgl._ffi.base import DGLError``, as DGL's examples write
    "dgl.partition": "gnnc.graph.partition",
    "dgl.convert": "gnnc.graph.convert",
    "dgl.generators": "gnnc.graph.generators",
    "dgl.global_config": "gnnc.compat.dgl_global_config",
}
# the gnnc modules of DGL's graph transforms: ``dgl.transforms`` holds their names, and so does ``dgl``
_TRANSFORMS = (
    "gnnc.graph.transforms",
    "gnnc.graph.derived",
    "gnnc.graph.relabel",
    "gnnc.graph.partition",
    "gnnc.graph.transform_classes",
    "gnnc.graph.positional",
    "gnnc.graph.shortest_paths",
    "gnnc.graph.casts",
)
# DGL namespace -> the gnnc modules whose exported names it holds (its submodules are attributes too)
_NAMESPACES = {
    "dgl": (
        "gnnc",
        "gnnc.graph",
        "gnnc.graph.convert",
        "gnnc.graph.generators",
        "gnnc.compat.dgl_global_config",
        "gnnc.graph.blocks",
        *_TRANSFORMS,
    ),
    "dgl.nn": ("gnnc.nn",),
    "dgl.transforms": _TRANSFORMS,
    "dgl.transforms.functional": _TRANSFORMS,  # DGL's module of the transforms dgl.transforms holds
    "dgl._ffi": (),
}
# DGL's top-level names for gnnc objects of another name or home: (module, attribute)
_TOP_LEVEL = {
    "__version__": ("gnnc.dgl_base", "DGL_VERSION"),
    "DGLGraph": ("gnnc.graph.core", "Graph"),
    "DGLHeteroGraph": ("gnnc.graph.core", "Graph"),
    **{name: ("gnnc.dgl_base", name) for name in ("DGLError", "ALL", "NID", "EID", "NTYPE", "ETYPE")},
}
# names a DGL namespace holds beyond its gnnc modules' exports: (module, attribute)
_EXTRA = {"dgl": _TOP_LEVEL, "dgl.transforms": {"to_block": ("gnnc.graph.subgraph", "to_block")}}
_ORIGIN = "gnnc.compat.dgl"

_displaced: dict | None = None  # while installed: the dgl modules sys.modules held before (empty if none)


def _ours(name: str) -> bool:
    return name == "dgl" or name.startswith("dgl.")


class _Refuser(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path`` while installed: a ``dgl.*`` module the alias does not list is missing
    (the import machinery would otherwise load a gnnc package's files a second time under a dgl name)."""

    def find_spec(self, fullname, path=None, target=None):
        if _ours(fullname):
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: gnnc's DGL alias ({_ORIGIN}) has no counterpart for it", name=fullname
            )


_REFUSER = _Refuser()


def _missing(module_name: str):
    def __getattr__(attr):
        raise AttributeError(
            f"module {module_name!r} has no attribute {attr!r}: gnnc's DGL alias ({_ORIGIN}) has no counterpart for it"
        )

    return __getattr__


def _namespace(name: str, sources, extra: dict) -> types.ModuleType:
    module = types.ModuleType(name, f"DGL's {name!r} namespace, resolved to gnnc by {_ORIGIN}")
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, origin=_ORIGIN, is_package=True)
    module.__path__ = []  # a package: ``import dgl.X`` asks the finders, and _Refuser names what is missing
    for source in map(importlib.import_module, sources):
        module.__dict__.update({attr: getattr(source, attr) for attr in source.__all__})
    module.__dict__.update(extra)
    module.__getattr__ = _missing(name)
    return module


def _alias_modules() -> dict:
    """Every module of the alias by its DGL name, submodules bound as attributes of their parents."""
    modules = {dgl: importlib.import_module(gnnc) for dgl, gnnc in _SAME.items()}
    extra = {
        space: {name: getattr(importlib.import_module(module), attr) for name, (module, attr) in names.items()}
        for space, names in _EXTRA.items()
    }
    modules.update({name: _namespace(name, sources, extra.get(name, {})) for name, sources in _NAMESPACES.items()})
    for name in sorted(modules, key=lambda n: n.count("."), reverse=True):
        parent, _, child = name.rpartition(".")
        if parent in _NAMESPACES:
            setattr(modules[parent], child, modules[name])
    return modules


def _real_dgl() -> str | None:
    """Where a DGL that is not this alias lives, when one is imported or importable."""
    loaded = sys.modules.get("dgl")
    if loaded is not None:
        return getattr(loaded, "__file__", None) or repr(loaded)
    spec = importlib.util.find_spec("dgl")
    if spec is None:
        return None
    return spec.origin or ", ".join(spec.submodule_search_locations or ()) or spec.name


def is_installed() -> bool:
    return _displaced is not None


def install(force: bool = False) -> None:
    """Make ``import dgl`` and the DGL modules the alias lists resolve to gnnc (a second call does nothing).

    Raises ``RuntimeError`` when a real DGL is imported or importable, naming where; with ``force=True``
    it warns instead and hides that DGL until ``uninstall()``."""
    global _displaced
    if _displaced is not None:
        return
    real = _real_dgl()
    if real is not None:
        message = f"a real DGL is present at {real}; gnnc's DGL alias would shadow it"
        if not force:
            raise RuntimeError(message + " (uninstall it, or pass force=True to shadow it)")
        warnings.warn(message + ": shadowing it until gnnc.compat.dgl.uninstall()", stacklevel=2)
    modules = _alias_modules()
    displaced = {name: sys.modules.pop(name) for name in [n for n in sys.modules if _ours(n)]}
    sys.modules.update(modules)
    sys.meta_path.insert(0, _REFUSER)
    _displaced = displaced


def uninstall() -> None:
    """Remove the alias and put back the DGL modules it displaced (does nothing when not installed)."""
    global _displaced
    if _displaced is None:
        return
    for name in [n for n in sys.modules if _ours(n)]:
        del sys.modules[name]
    sys.meta_path.remove(_REFUSER)
    sys.modules.update(_displaced)
    _displaced = None

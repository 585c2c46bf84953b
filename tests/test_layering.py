"""Imports point down gnnc's layers, and no module-level import closes a cycle.

The layers are data in ``docs/_ext/gnnc_layers.py`` (the docs' architecture page draws the same table). Every
import of a gnnc module by another, at module level or inside a function, is read with ``ast``; one from a layer
above the importer's fails, naming the module, the line and both layers. The one call up, the graph's methods
running ``gnnc.message_passing``, is a registration (``gnnc.graph.message_passing_hook``), not an import.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "gnnc_layers", Path(__file__).resolve().parents[1] / "docs" / "_ext" / "gnnc_layers.py"
)
layers = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = layers  # dataclasses look their class's module up
_SPEC.loader.exec_module(layers)


def _layer(module: str) -> str:
    return layers.LAYERS[layers.rank(module)].name


def _where(i) -> str:
    scope = "inside a function" if i.in_function else "at module level"
    return f"{i.importer} line {i.line} ({_layer(i.importer)}) imports {i.target} ({_layer(i.target)}) {scope}"


@pytest.fixture(scope="module")
def found():
    return layers.imports()


def test_every_module_is_in_one_layer():
    unplaced = [m for m in layers.modules() if layers.rank(m) is None]
    assert not unplaced, f"modules in no layer; add them to LAYERS in docs/_ext/gnnc_layers.py: {unplaced}"
    members = [m for layer in layers.LAYERS for m in layer.members]
    assert len(members) == len(set(members)), "a member is listed twice"
    missing = set(members) - set(layers.modules())
    assert not missing, f"LAYERS names modules that do not exist: {sorted(missing)}"


def test_no_import_climbs_a_layer(found):
    climbing = [_where(i) for i in layers.upward(found)]
    assert not climbing, "imports from a layer above the importer's:\n" + "\n".join(climbing)


def test_no_module_level_import_cycle(found):
    cycles = layers.cycles(found)
    assert not cycles, "module-level import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_checker_reads_what_python_imports(tmp_path):
    """Relative imports resolved; ``from pkg import sub`` is an import of ``pkg.sub``; imports inside functions
    count, imports for annotations only (``if TYPE_CHECKING:``) do not."""
    files = {
        "__init__.py": "from . import graph\n",
        "graph/__init__.py": "from .core import Graph\n",
        "graph/core.py": "Graph = object\n\ndef lazy():\n    from ..models import gat\n",
        "models/__init__.py": "",
        "models/gat.py": "from gnnc.graph import core\nfrom ..graph import Graph\nimport gnnc.models\n",
        "models/gcn.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gnnc import cli\n",
        "compiler/a.py": "from . import b\n",
        "compiler/b.py": "from .a import x\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = {(i.importer, i.target, i.line, i.in_function) for i in layers.imports(tmp_path)}
    assert found == {
        ("gnnc", "gnnc.graph", 1, False),
        ("gnnc.graph", "gnnc.graph.core", 1, False),
        ("gnnc.graph.core", "gnnc.models.gat", 4, True),
        ("gnnc.models.gat", "gnnc.graph.core", 1, False),
        ("gnnc.models.gat", "gnnc.graph", 2, False),
        ("gnnc.models.gat", "gnnc.models", 3, False),
        ("gnnc.compiler.a", "gnnc.compiler.b", 1, False),
        ("gnnc.compiler.b", "gnnc.compiler.a", 1, False),
    }
    imports = layers.imports(tmp_path)
    assert [(i.importer, i.target) for i in layers.upward(imports)] == [("gnnc.graph.core", "gnnc.models.gat")]
    assert layers.cycles(imports) == [["gnnc.compiler.a", "gnnc.compiler.b"]]

"""gnnc's layers, declared once, and the import graph of ``src/gnnc`` they are checked against.

``LAYERS`` is the one statement of the layering: ``tests/test_layering.py`` fails on an import that climbs it,
and ``docs/architecture.rst`` draws it (``gnnc_architecture``) with the imports read from the same source files.
It lives here, beside the docs' extensions and outside the ``gnnc`` package, because nothing at run time needs
it; it is Python rather than TOML so Python 3.10 (no ``tomllib``) reads it, and it uses the standard library only.

A layer may import any layer below it. Modules of one layer may import each other, without cycles. A member is a
module or a package (then all its submodules); ``gnnc`` itself stands for ``gnnc/__init__.py`` alone.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "gnnc"
SOURCE = Path(__file__).resolve().parents[2] / "src" / PACKAGE


@dataclass(frozen=True)
class Layer:
    name: str
    members: tuple[str, ...]


# Top to bottom.
LAYERS = (
    Layer("front ends", ("gnnc", "gnnc.cli", "gnnc.compat")),
    # Below the front ends that launch it: distributed training is a library the CLI drives.
    Layer("distributed", ("gnnc.distributed",)),
    Layer("training", ("gnnc.training", "gnnc.checkpoints")),
    Layer("models", ("gnnc.models",)),
    Layer("nn", ("gnnc.nn",)),
    Layer(
        "API",
        ("gnnc.compile", "gnnc.path_choice", "gnnc.message_passing", "gnnc.propagate", "gnnc.readout", "gnnc.ops"),
    ),
    Layer("forward", ("gnnc.forward",)),
    Layer("compiler", ("gnnc.compiler",)),
    Layer("runtime", ("gnnc.runtime",)),
    Layer("ir", ("gnnc.ir",)),
    Layer("backend", ("gnnc.backend",)),
    Layer("data", ("gnnc.data",)),
    Layer("graph", ("gnnc.graph",)),
    Layer(
        "base",
        (
            "gnnc.failures",
            "gnnc.stage_timings",
            "gnnc.scoped",
            "gnnc.bounded_cache",
            "gnnc.function",
            "gnnc.progress",
            "gnnc.spread",
            "gnnc.dgl_base",
        ),
    ),
)


@dataclass(frozen=True)
class Import:
    """``importer`` imports ``target`` (both module names) at ``line``; ``in_function`` if inside a def."""

    importer: str
    target: str
    line: int
    in_function: bool


def modules(source: Path = SOURCE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name, for its ``__init__.py``)."""
    found = {}
    for path in sorted(source.rglob("*.py")):
        parts = (PACKAGE,) + path.relative_to(source).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def member(module: str) -> str | None:
    """The layer member that owns ``module`` (the longest that names it or a package above it)."""
    owners = [
        m for layer in LAYERS for m in layer.members if m == module or (m != PACKAGE and module.startswith(m + "."))
    ]
    return max(owners, key=len, default=None)


def rank(module: str) -> int | None:
    """The index in ``LAYERS`` (0 at the top) of the layer that owns ``module``; None if none does."""
    owner = member(module)
    return next((i for i, layer in enumerate(LAYERS) if owner in layer.members), None)


def _inside_functions(tree: ast.AST) -> set[int]:
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(id(n) for n in ast.walk(node) if n is not node)
    return inside


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Nodes under ``if TYPE_CHECKING:``: imports for annotations that never run, so neither layer nor cycle."""
    only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            only.update(id(n) for branch in node.body for n in ast.walk(branch))
    return only


def _targets(node: ast.Import | ast.ImportFrom, importer: str, is_package: bool, known: dict) -> list[str]:
    """The package's modules an import statement imports; ``from pkg import sub`` imports ``pkg.sub``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        here = importer.split(".") if is_package else importer.split(".")[:-1]
        here = here[: len(here) - (node.level - 1)]
        base = ".".join(here + ([node.module] if node.module else []))
    subs = [f"{base}.{alias.name}" for alias in node.names]
    return [s for s in subs if s in known] + ([base] if any(s not in known for s in subs) else [])


def imports(source: Path = SOURCE) -> list[Import]:
    """Every import of one of the package's modules by another that runs, at module level or inside a function."""
    known = modules(source)
    found = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        inside, annotations_only = _inside_functions(tree), _type_checking_only(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in annotations_only:
                continue
            for target in _targets(node, name, path.name == "__init__.py", known):
                if target in known and target != name:
                    found.append(Import(name, target, node.lineno, id(node) in inside))
    return sorted(found, key=lambda i: (i.importer, i.line, i.target))


def upward(found: list[Import]) -> list[Import]:
    """Imports of a module in a layer above the importer's."""
    return [i for i in found if None not in (rank(i.importer), rank(i.target)) and rank(i.target) < rank(i.importer)]


def cycles(found: list[Import]) -> list[list[str]]:
    """Import cycles among module-level imports: Tarjan's strongly connected components of more than one module."""
    graph = defaultdict(set)
    for i in found:
        if not i.in_function:
            graph[i.importer].add(i.target)
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(v: str) -> None:  # recursion depth is bounded by the number of modules (a few hundred)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(components)


def member_edges(found: list[Import]) -> dict[tuple[str, str], int]:
    """The import graph aggregated per layer member: (importer's member, target's member) -> import statements."""
    edges: dict[tuple[str, str], int] = defaultdict(int)
    for i in found:
        a, b = member(i.importer), member(i.target)
        if a and b and a != b:
            edges[a, b] += 1
    return dict(edges)

"""Sphinx directives for docs/architecture.rst, drawn at build time from ``gnnc_layers`` and the real imports.

``.. layer-table::`` lists every layer's members with the first line of each one's docstring.
``.. layer-diagram:: caption`` draws the layers as rows of boxes and the import graph aggregated per member as
arrows (an upward one red). With content, one step per line, it also draws a path through the layers::

    gnnc.message_passing -> gnnc.compiler   what happens along this step
    gnnc.graph ~> gnnc.message_passing      a call that is not an import (a hook, the user's code)

A ``->`` step must be an import the code makes, or the build fails: the drawing cannot outlive the code.
The figure is an inline SVG (no ``dot`` binary needed) followed by the steps as a numbered list.
"""

from __future__ import annotations

import ast
import html
import math

import gnnc_layers as layers
from docutils import nodes
from sphinx.util.docutils import SphinxDirective

ROW, BOX_H, LEFT, GAP, CHAR, ZIGZAG = 46, 22, 96, 14, 7.0, 70


def _label(member: str) -> str:
    if member == layers.PACKAGE:
        return "__init__.py"
    path = layers.SOURCE.joinpath(*member.split(".")[1:])
    return f"{path.name}/" if path.is_dir() else f"{path.name}.py"


def _docstring_line(member: str) -> str:
    path = layers.SOURCE.joinpath(*member.split(".")[1:])
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    doc = ast.get_docstring(ast.parse(path.read_text())) if path.is_file() else None
    return doc.strip().splitlines()[0] if doc else "(no docstring)"


def _inline(text: str) -> list[nodes.Node]:
    """Plain text with ````literal```` spans, without parsing the rest as reST (docstrings are not ours)."""
    parts = text.split("``")
    return [nodes.literal(p, p) if i % 2 else nodes.Text(p) for i, p in enumerate(parts) if p]


class LayerTable(SphinxDirective):
    def run(self):
        table = nodes.definition_list()
        for layer in layers.LAYERS:
            items = nodes.bullet_list()
            for member in layer.members:
                para = nodes.paragraph()
                para += nodes.literal(_label(member), _label(member))
                para += nodes.Text(": ")
                para += _inline(_docstring_line(member))
                items += nodes.list_item("", para)
            table += nodes.definition_list_item("", nodes.term(layer.name, layer.name), nodes.definition("", items))
        return [table]


def _boxes() -> tuple[dict[str, tuple[float, float, float]], float]:
    """Each member's (x, y, width) and the figure's width: rows centred, one-member rows zigzagging so that the
    arrows between them do not run down one column."""
    rows = [[(m, len(_label(m)) * CHAR + 16) for m in layer.members] for layer in layers.LAYERS]
    width = max(sum(w for _, w in row) + GAP * (len(row) - 1) for row in rows) + 2 * ZIGZAG
    boxes, singles = {}, 0
    for r, row in enumerate(rows):
        shift = 0
        if len(row) == 1:
            shift, singles = ZIGZAG * (1 if singles % 2 else -1), singles + 1
        x = LEFT + shift + (width - sum(w for _, w in row) - GAP * (len(row) - 1)) / 2
        for m, w in row:
            boxes[m] = (x, 10 + r * ROW, w)
            x += w + GAP
    return boxes, LEFT + width + 10


def _curve(boxes, a: str, b: str) -> tuple[str, tuple[float, float]]:
    """An SVG path from member ``a`` to member ``b``, and its midpoint."""
    (xa, ya, wa), (xb, yb, wb) = boxes[a], boxes[b]
    x1, x2 = xa + wa / 2, xb + wb / 2
    if ya == yb:  # one layer: an arc above the row
        y = ya
        lift = 18 + abs(x2 - x1) / 8
        return f"M{x1:.0f},{y} C{x1:.0f},{y - lift:.0f} {x2:.0f},{y - lift:.0f} {x2:.0f},{y}", ((x1 + x2) / 2, y - lift)
    y1, y2 = (ya + BOX_H, yb) if ya < yb else (ya, yb + BOX_H)
    bend = (y2 - y1) / 2
    # Straight down a column would cross the boxes between: bow out to the right, more for longer spans.
    bow = abs(y2 - y1) * 0.6 if abs(x2 - x1) < 1 and abs(y2 - y1) > ROW else 0
    mid = ((x1 + x2) / 2 + bow * 0.75, (y1 + y2) / 2)
    return f"M{x1:.0f},{y1} C{x1 + bow:.0f},{y1 + bend:.0f} {x2 + bow:.0f},{y2 - bend:.0f} {x2:.0f},{y2}", mid


def _svg(edges: dict[tuple[str, str], int], steps: list[tuple[str, str, bool]], title: str) -> str:
    boxes, width = _boxes()
    height = 10 + len(layers.LAYERS) * ROW
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" '
        f'viewBox="0 0 {width:.0f} {height}" font-family="sans-serif" font-size="12" role="img">',
        f"<title>{html.escape(title)}</title>",
        '<defs><marker id="a" viewBox="0 0 6 6" refX="6" refY="3" markerWidth="6" markerHeight="6" '
        'orient="auto"><path d="M0,0 L6,3 L0,6 z" fill="#1565c0"/></marker></defs>',
    ]
    for r, layer in enumerate(layers.LAYERS):
        y = 10 + r * ROW
        out.append(f'<text x="4" y="{y + 15}" fill="#555">{html.escape(layer.name)}</text>')
    ranks = {m: r for r, layer in enumerate(layers.LAYERS) for m in layer.members}
    for (a, b), count in sorted(edges.items()):
        d, _ = _curve(boxes, a, b)
        colour, opacity = ("#c00", 0.9) if ranks[b] < ranks[a] else ("#888", 0.2 if steps else 0.35)
        out.append(
            f'<path d="{d}" fill="none" stroke="{colour}" stroke-opacity="{opacity}" '
            f'stroke-width="{0.7 + math.log2(count) / 2:.1f}"><title>{a} imports {b} ({count})</title></path>'
        )
    numbers = []
    for n, (a, b, imported) in enumerate(steps, 1):
        d, (mx, my) = _curve(boxes, a, b)
        dash = "" if imported else ' stroke-dasharray="5,3"'
        out.append(f'<path d="{d}" fill="none" stroke="#1565c0" stroke-width="2.2"{dash} marker-end="url(#a)"/>')
        numbers.append(
            f'<circle cx="{mx:.0f}" cy="{my:.0f}" r="8" fill="#1565c0"/>'
            f'<text x="{mx:.0f}" y="{my + 4:.0f}" fill="white" font-size="10" text-anchor="middle">{n}</text>'
        )
    for m, (x, y, w) in boxes.items():
        out.append(
            f'<rect x="{x:.0f}" y="{y}" width="{w:.0f}" height="{BOX_H}" rx="4" fill="#f4f4f8" stroke="#446"/>'
            f'<text x="{x + w / 2:.0f}" y="{y + 15}" text-anchor="middle">{html.escape(_label(m))}</text>'
        )
    out += numbers
    out.append("</svg>")
    return "\n".join(out)


class LayerDiagram(SphinxDirective):
    optional_arguments = 1
    final_argument_whitespace = True
    has_content = True

    def run(self):
        for path in layers.modules().values():
            self.env.note_dependency(str(path))
        edges = layers.member_edges(layers.imports())
        known = {m for layer in layers.LAYERS for m in layer.members}
        steps, notes = [], []
        for line in self.content:
            if not line.strip():
                continue
            words = line.split(None, 3)
            if len(words) < 3 or words[1] not in ("->", "~>") or not {words[0], words[2]} <= known:
                raise self.error(f"layer-diagram: a step is 'member -> member  note' or '~>': {line!r}")
            a, arrow, b = words[:3]
            if arrow == "->" and (a, b) not in edges:
                raise self.error(f"layer-diagram: {a} does not import {b}; the step is stale (write ~> for a call)")
            steps.append((a, b, arrow == "->"))
            notes.append(words[3] if len(words) > 3 else "")
        title = self.arguments[0] if self.arguments else "gnnc's layers and the imports between them"
        figure = nodes.container(classes=["layer-diagram"])
        figure += nodes.raw("", _svg(edges, steps, title), format="html")
        figure += nodes.paragraph("", "", nodes.emphasis(title, title))
        if steps:
            listing = nodes.enumerated_list()
            for (a, b, imported), note in zip(steps, notes):
                para = nodes.paragraph()
                para += nodes.literal(_label(a), _label(a))
                para += nodes.Text(" → " if imported else " ⇢ ")
                para += nodes.literal(_label(b), _label(b))
                para += _inline(f": {note}" if note else "")
                listing += nodes.list_item("", para)
            figure += listing
        return [figure]


def setup(app):
    app.add_directive("layer-table", LayerTable)
    app.add_directive("layer-diagram", LayerDiagram)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

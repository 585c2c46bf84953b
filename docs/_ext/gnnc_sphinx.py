"""Sphinx helpers for gnnc's docs: generated CLI reference, verbatim module docstrings, optional API modules.

Everything here renders text it did not write (help strings, docstrings other code owns) without parsing it
as reST, so an edit elsewhere cannot break the warnings-as-errors build.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import os
import re

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

# Modules other work adds later: listed in the API reference as soon as they import.
OPTIONAL_MODULES = ["gnnc.ops"]


def _literal(text: str) -> nodes.literal_block:
    block = nodes.literal_block(text, text)
    block["language"] = "text"
    return block


class ModuleDocstring(SphinxDirective):
    """``.. module-docstring:: gnnc.compiler.passes.fuse``: a module's docstring as preformatted text.

    Internal modules (passes, runtime) state their patterns and replacements in plain text with code-like
    indentation; shown verbatim they read as written.
    """

    required_arguments = 1

    def run(self):
        return [_literal(inspect.cleandoc(importlib.import_module(self.arguments[0]).__doc__ or "").strip())]


class CommandReference(SphinxDirective):
    """``.. command-reference:: gnnc.cli:build_parser``: one section per subcommand with its ``--help`` text.

    The help is what ``gnnc <command> --help`` prints (at 100 columns), generated from the parser at build
    time, so the page follows the command.
    """

    required_arguments = 1

    def run(self):
        module, func = self.arguments[0].split(":")
        previous = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = "100"
        try:
            parser = getattr(importlib.import_module(module), func)()
            out = [_literal(parser.format_help().rstrip())]
            for action in parser._actions:
                if not isinstance(action, argparse._SubParsersAction):
                    continue
                summaries = {choice.dest: choice.help for choice in action._choices_actions}
                for name, sub in action.choices.items():
                    section = nodes.section(ids=[nodes.make_id(f"command-{sub.prog}")])
                    section += nodes.title(sub.prog, sub.prog)
                    if summaries.get(name):
                        section += nodes.paragraph(summaries[name], summaries[name])
                    section += _literal(sub.format_help().rstrip())
                    out.append(section)
        finally:
            if previous is None:
                del os.environ["COLUMNS"]
            else:
                os.environ["COLUMNS"] = previous
        return out


def _plain_text_literals(app, what, name, obj, options, lines):
    """Docstrings are written to be read as text too: ``Block``s (a plural after a literal) is not valid reST."""
    for i, line in enumerate(lines):
        lines[i] = re.sub(r"(?<![`\w])(``[^`\s](?:[^`]*[^`\s])?``)(?=\w)", r"\1\\ ", line)


def _optional_api(app, docname, source):
    """Replace ``.. optional-modules-here`` in api/index with a section per optional module that exists."""
    if docname != "api/index":
        return
    found = []
    for module in OPTIONAL_MODULES:
        try:
            if importlib.util.find_spec(module) is not None:
                found.append(module)
        except ImportError:
            pass
    body = "".join(f"\n{m}\n{'-' * len(m)}\n\n.. automodule:: {m}\n" for m in found)
    source[0] = source[0].replace(".. optional-modules-here", body)


def setup(app):
    app.connect("source-read", _optional_api)
    app.connect("autodoc-process-docstring", _plain_text_literals)
    app.add_directive("module-docstring", ModuleDocstring)
    app.add_directive("command-reference", CommandReference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

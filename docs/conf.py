"""Sphinx configuration for gnnc's documentation.

Build (warnings are errors):   python -m sphinx -W --keep-going -b html docs docs/_build/html
Run every code example:        python -m sphinx -W --keep-going -b doctest docs docs/_build/doctest
tests/test_docs.py does both.
"""

import doctest
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "_ext"))
sys.path.insert(0, os.path.join(HERE, "..", "src"))  # a checkout builds its own sources, installed or not

project = "gnnc"
author = "gnnc contributors"
copyright = "gnnc contributors"  # noqa: A001 - Sphinx's setting
release = version = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",  # the API reference comes from the docstrings
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",  # every example on every page runs (tests/test_docs.py)
    "myst_parser",  # Markdown: bench/results/*/table.md are included as the harness wrote them
    "gnnc_sphinx",  # docs/_ext: CLI reference from gnnc.cli's parser, verbatim module docstrings
    "gnnc_architecture",  # docs/_ext: the layer table and import diagrams of architecture.rst
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
html_theme = "alabaster"

autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# Annotations name classes by their short names (``Graph``), which gnnc exports under several paths.
suppress_warnings = ["ref.python"]

# Every page's examples start from the same seed and fail on a compiler fallback unless they catch it.
doctest_global_setup = """
import warnings
import torch
import gnnc
torch.manual_seed(0)
warnings.simplefilter("error", gnnc.FallbackWarning)
"""
doctest_default_flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE | doctest.DONT_ACCEPT_TRUE_FOR_1

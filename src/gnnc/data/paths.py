"""Where real dataset files are: one rule for the loaders, the ``gnnc`` command, tests and bench.

The data folder (holding ``planetoid/``, ``kg/``, ``rdf/``, ``ogb/``) is the first of:

1. an explicit argument (``--data-dir DIR``, or a path handed to a loader);
2. ``$GNNC_DATA``, when set;
3. ``../shared/data`` beside a source checkout of gnnc, when that folder exists;
4. ``$XDG_CACHE_HOME/gnnc/data``, normally ``~/.cache/gnnc/data``: the per-user default.

``data_root()`` applies the rule, ``describe_root()`` says which step chose
the folder, and ``resolve()`` finds one dataset's file or folder under it,
raising ``DataNotFoundError`` (a ``FileNotFoundError``) whose one-line
message names the path, why it was chosen, and how to point gnnc elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "GNNC_DATA"
RULE = (
    "--data-dir, else $GNNC_DATA, else ../shared/data beside a source checkout (when present), else ~/.cache/gnnc/data"
)


def _checkout_data() -> Path | None:
    """``<repo>/../shared/data`` when this module runs from a source checkout (src/gnnc/data/paths.py)."""
    repo = Path(__file__).resolve().parents[3]
    return repo.parent / "shared" / "data" if (repo / "pyproject.toml").is_file() else None


CHECKOUT_DATA: Path | None = _checkout_data()  # step 3; tests set it to None


class DataNotFoundError(FileNotFoundError):
    """A dataset file or folder is not where the data-location rule points; the message says how to fix it."""


def user_data() -> Path:
    """The per-user default: ``$XDG_CACHE_HOME/gnnc/data``, normally ``~/.cache/gnnc/data``."""
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "gnnc" / "data"


def _choose(explicit=None) -> tuple[Path, str]:
    if explicit is not None and str(explicit) != "":
        return Path(explicit), "given explicitly"
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env), f"from ${ENV_VAR}"
    if CHECKOUT_DATA is not None and CHECKOUT_DATA.is_dir():
        return CHECKOUT_DATA, "the source checkout's ../shared/data"
    return user_data(), "the per-user default"


def data_root(explicit=None) -> Path:
    """The real-data folder by the rule of this module: ``explicit``, $GNNC_DATA, ../shared/data, user cache.

    The folder need not exist; ``resolve`` says clearly when a file is missing.
    """
    return _choose(explicit)[0]


def describe_root(explicit=None) -> str:
    """``'<folder> (<which step of the rule chose it>)'``, for messages."""
    root, origin = _choose(explicit)
    return f"{root} ({origin})"


def fix_hint() -> str:
    """The one-line fix for missing data files."""
    return (
        f"fetch them with `gnnc datasets download NAME` (`gnnc datasets` lists the names), put the files "
        f"there, or point --data-dir or ${ENV_VAR} at the folder holding planetoid/, kg/ and rdf/ (order: {RULE})"
    )


def resolve(path, subdir: str, what: str, root=None) -> Path:
    """``path`` itself, or ``<data_root(root)>/<subdir>`` when ``path`` is None.

    DataNotFoundError naming the path, where it came from and the fix when it does not exist.
    """
    if path is not None:
        path = Path(path)
        if not path.exists():
            default, origin = _choose(root)
            raise DataNotFoundError(
                f"{what} not found at {path}; give an existing path, or none to use {default / subdir} ({origin})"
            )
        return path
    path = data_root(root) / subdir
    if not path.exists():
        raise DataNotFoundError(f"{what} not found at {path}, under {describe_root(root)}; {fix_hint()}")
    return path

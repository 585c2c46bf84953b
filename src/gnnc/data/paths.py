"""Where real dataset files are: an explicit path, else under ``$GNNC_DATA``."""
from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "GNNC_DATA"


def resolve(path, subdir: str, what: str) -> Path:
    """``path`` itself, or ``$GNNC_DATA/<subdir>`` when ``path`` is None.

    FileNotFoundError naming the path and the variable when it does not exist.
    """
    if path is None:
        root = os.environ.get(ENV_VAR)
        if not root:
            raise FileNotFoundError(f"no path given for {what} and {ENV_VAR} is not set; pass the path "
                                    f"or set {ENV_VAR} to the folder holding {subdir}")
        path = Path(root) / subdir
        if not path.exists():
            raise FileNotFoundError(f"{what} not found at {path} (from {ENV_VAR}={root})")
        return path
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{what} not found at {path} (the default location is ${ENV_VAR}/{subdir})")
    return path

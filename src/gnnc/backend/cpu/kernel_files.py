"""Files of generated kernels, trusted no further than they hold what gnnc generated.

- ``private_folder(folder)``: ``folder`` and its ``__pycache__`` (where numba
  caches what it compiles from the folder's files: pickles it loads), each
  created owner-only (0700) where missing. ``KernelFolderRefused`` when either
  is not this user's, or others can write to it: they could plant a kernel or
  a cache file. Only the folder and ``__pycache__`` are checked, not the
  folders above them.
- ``load_source(path, module_name, text)``: the module that ``text`` defines,
  run from ``text`` itself. ``path`` is made to hold exactly ``text`` first,
  since numba's disk cache locates and stamps a function by its file: a file
  that differs (truncated, edited, planted) is replaced atomically. No
  ``.pyc`` is read or written.
"""

from __future__ import annotations

import os
import sys
import tempfile
import types
from pathlib import Path

from ...failures import SetupRefusal


class KernelFolderRefused(OSError, SetupRefusal):
    """The kernel folder could be written by someone other than this user."""


def private_folder(folder: Path) -> Path:
    """``folder``, private to this user and writable by it (see the module's docstring)."""
    for part, called in ((folder, "it"), (folder / "__pycache__", "its __pycache__")):
        os.makedirs(part, mode=0o700, exist_ok=True)
        _refuse_shared(part, called, folder)
    if not os.access(folder, os.W_OK):
        raise OSError(f"the kernel folder {folder} is not writable; set GNNC_KERNEL_DIR to one that is")
    return folder


def _refuse_shared(part: Path, called: str, folder: Path) -> None:
    if not hasattr(os, "geteuid"):  # no POSIX owners (Windows): access lists are not checked
        return
    st = os.stat(part)
    if st.st_uid != os.geteuid():
        reason = f"{called} belongs to user id {st.st_uid}, not to this user ({os.geteuid()})"
    elif st.st_mode & 0o022:
        reason = f"others can write to {called} (mode {st.st_mode & 0o777:o})"
    else:
        return
    raise KernelFolderRefused(
        f"gnnc refuses the kernel folder {folder}: {reason}; set GNNC_KERNEL_DIR to a folder only you can write"
    )


def load_source(path: Path, module_name: str, text: str) -> types.ModuleType:
    """The module ``module_name`` defined by ``text``, kept in ``path`` (see the module's docstring)."""
    _hold(path, text.encode())
    module = types.ModuleType(module_name)
    module.__file__ = str(path)
    sys.modules[module_name] = module  # numba's disk cache imports a kernel's module by name when it loads it
    exec(compile(text, str(path), "exec"), module.__dict__)  # noqa: S102 - the source gnnc generated
    return module


def _hold(path: Path, data: bytes) -> None:
    """Make ``path`` hold ``data``, replacing whatever differs at once (a concurrent process sees the whole
    file or none)."""
    try:
        if path.read_bytes() == data:
            return
    except FileNotFoundError:
        pass
    fd, scratch = tempfile.mkstemp(dir=path.parent, prefix=f"{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(scratch, path)
    except BaseException:
        os.unlink(scratch)
        raise

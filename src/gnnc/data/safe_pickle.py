"""A pickle reader that only rebuilds the classes Planetoid files contain.

Pickles run arbitrary callables while loading; ``RestrictedUnpickler``
resolves a global only if it is on the allow-list (numpy arrays and dtypes,
scipy CSR matrices, ``defaultdict`` and ``list``) and raises
``pickle.UnpicklingError`` naming any other. ``safe_load`` first walks the
opcodes (``pickletools``), so no length a damaged file declares is
allocated before it is known to fit the file, and checks the CSR matrices it
rebuilds (scipy's pickles restore them without a check). Pickles carry no
checksum: a flipped bit inside array data cannot be detected.
"""

from __future__ import annotations

import collections
import io
import pickle
import pickletools
import struct
from pathlib import Path

import numpy as np
import scipy.sparse


def _numpy_reconstruct():
    core = getattr(np, "_core", None) or np.core  # numpy >= 2 renamed np.core to np._core
    return core.multiarray._reconstruct


def _allowed() -> dict[tuple[str, str], object]:
    reconstruct = _numpy_reconstruct()
    return {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("numpy.core.multiarray", "_reconstruct"): reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): reconstruct,
        ("scipy.sparse.csr", "csr_matrix"): scipy.sparse.csr_matrix,
        ("scipy.sparse._csr", "csr_matrix"): scipy.sparse.csr_matrix,
        ("scipy.sparse", "csr_matrix"): scipy.sparse.csr_matrix,
        ("collections", "defaultdict"): collections.defaultdict,
        ("__builtin__", "list"): list,  # Python 2 pickles name builtins this way
        ("builtins", "list"): list,
    }


class PickleFileError(pickle.UnpicklingError, ValueError):
    """A pickle file that is damaged or holds a class outside the allow-list; the message names the file."""


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler whose ``find_class`` admits only the allow-listed globals."""

    def find_class(self, module: str, name: str):
        try:
            return _allowed()[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f"refusing to load {module}.{name}: only numpy arrays, scipy CSR matrices, "
                f"defaultdict and list may appear in this pickle"
            ) from None


def safe_load(path) -> object:
    """Load a (latin-1, possibly Python 2) pickle file with ``RestrictedUnpickler``.

    Errors name the file: PickleFileError (an UnpicklingError and a ValueError) for a refused class or a
    damaged file.
    """
    path = Path(path)
    data = path.read_bytes()
    try:
        for _ in pickletools.genops(data):
            pass
        obj = RestrictedUnpickler(io.BytesIO(data), encoding="latin1").load()
    except pickle.UnpicklingError as err:
        raise PickleFileError(f"{path}: {err}") from None
    except (
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
        KeyError,
        OverflowError,
        MemoryError,
        UnicodeDecodeError,
        struct.error,
    ) as err:
        raise PickleFileError(f"{path}: not a readable pickle ({type(err).__name__}: {err})") from None
    if scipy.sparse.issparse(obj):
        try:
            obj.check_format(full_check=True)
        except (ValueError, TypeError, AttributeError, IndexError) as err:
            raise PickleFileError(f"{path}: an inconsistent sparse matrix ({err})") from None
    return obj

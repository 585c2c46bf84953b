"""Arrays of a ``.npz`` archive, every declared size checked before anything is allocated.

A member's ``.npy`` header declares a shape and dtype, its zip entry a
size: the array is read only when the two agree and the entry's size is
within what its compressed bytes can hold (equal for stored entries, at
most ``_DEFLATE_RATIO`` times for deflated ones), so no field of a small
file can ask for a large allocation. Zip's CRC-32 of every member is
checked as it is read: an accidental flipped bit is caught, a deliberate
edit is not. Object arrays (pickles) are refused.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
from numpy.lib import format as npy

from .integrity import check_file

_DEFLATE_RATIO = 1100  # deflate expands at most about 1032 : 1
_HEADER_READERS = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}


def read_npz(path) -> dict[str, np.ndarray]:
    """{name: array} of the archive at ``path``; ValueError naming the file (and member) for anything
    malformed; FileNotFoundError for a missing file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    check_file(path)
    try:
        with zipfile.ZipFile(path) as archive:
            return {info.filename.removesuffix(".npy"): _member(path, archive, info) for info in archive.infolist()}
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, NotImplementedError) as err:
        raise ValueError(f"{path}: not a readable .npz archive ({err})") from None


def _member(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
    where = f"{path}, member {info.filename.removesuffix('.npy')!r}"
    ratio = 1 if info.compress_type == zipfile.ZIP_STORED else _DEFLATE_RATIO
    if info.file_size > info.compress_size * ratio or info.compress_size > path.stat().st_size:
        raise ValueError(f"{where}: declares {info.file_size:,} bytes from {info.compress_size:,} stored")
    with archive.open(info) as f:
        try:
            version = npy.read_magic(f)
            shape, fortran, dtype = _HEADER_READERS[version](f)
        except (ValueError, KeyError, SyntaxError, TypeError) as err:
            raise ValueError(f"{where}: not a .npy array ({err})") from None
        if dtype.hasobject:
            raise ValueError(f"{where}: holds Python objects (a pickle); only plain arrays are read")
        count = 1
        for n in shape:
            count *= n
        if count * dtype.itemsize != info.file_size - f.tell():
            raise ValueError(
                f"{where}: shape {shape} of {dtype} needs {count * dtype.itemsize:,} bytes, the "
                f"member holds {info.file_size - f.tell():,}"
            )
        out = np.empty(count, dtype=dtype)
        view, done = memoryview(out).cast("B"), 0
        while done < len(view):
            got = f.readinto(view[done:])
            if not got:
                raise ValueError(f"{where}: truncated at byte {done} of its data")
            done += got
        f.read()  # reaching the end checks the CRC
    return out.reshape(shape, order="F" if fortran else "C")

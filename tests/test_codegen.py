"""gnnc.backend.cpu.codegen: generated kernel sources land in the kernel folder and numba caches them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")

from gnnc.backend.cpu import codegen

SOURCE = textwrap.dedent("""
    def twice_sum(bounds, x, out):
        for c in prange(bounds.shape[0] - 1):
            for r in range(bounds[c], bounds[c + 1]):
                out[r] = 2 * x[r]
""")

# Runs in a fresh process: compiles (or loads) a generated kernel and reports numba's cache hits.
CHILD = textwrap.dedent("""
    import numba, numpy as np
    from gnnc.backend.cpu import codegen
    fn = codegen.load_function("twice_sum", SOURCE)
    kernel = numba.njit(parallel=True, cache=True)(fn)
    out = np.zeros(4)
    kernel(np.array([0, 4]), np.arange(4.0), out)
    print(out.tolist(), sum(kernel.stats.cache_hits.values()), fn.__module__)
""")


def test_kernel_folder_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNC_KERNEL_DIR", str(tmp_path / "k"))
    assert codegen.kernel_dir() == tmp_path / "k" and (tmp_path / "k").is_dir()
    monkeypatch.delenv("GNNC_KERNEL_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert codegen.kernel_dir() == tmp_path / "cache" / "gnnc" / "kernels"


def test_a_file_in_place_of_the_kernel_folder_is_named(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("GNNC_KERNEL_DIR", str(blocker))
    with pytest.raises(OSError, match="not-a-folder"):
        codegen.kernel_dir()


def test_the_second_process_loads_the_compiled_kernel_from_the_disk_cache(tmp_path):
    env = {**os.environ, "GNNC_KERNEL_DIR": str(tmp_path)}
    script = f"SOURCE = {SOURCE!r}\n" + CHILD
    runs = [
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env
        ).stdout.split()
        for _ in range(2)
    ]
    assert runs[0][:4] == runs[1][:4] == ["[0.0,", "2.0,", "4.0,", "6.0]"]
    assert runs[0][4] == "0" and int(runs[1][4]) > 0  # compiled once, then loaded
    assert runs[0][5].startswith("gnnc_generated_twice_sum_")
    assert len(list(tmp_path.glob("twice_sum_*.py"))) == 1


def test_a_change_to_the_inlined_helpers_gives_kernels_new_files(tmp_path, monkeypatch):
    """numba's disk cache watches a kernel's own file only; fastexp / prefetch are inlined into it."""
    monkeypatch.setenv("GNNC_KERNEL_DIR", str(tmp_path))
    first = codegen.load_function("twice_sum", SOURCE)
    monkeypatch.setattr(codegen, "_helpers_digest", lambda: b"an edited fastexp.py")
    codegen.load_function.cache_clear()
    second = codegen.load_function("twice_sum", SOURCE)
    codegen.load_function.cache_clear()
    assert first.__module__ != second.__module__ and len(list(tmp_path.glob("twice_sum_*.py"))) == 2

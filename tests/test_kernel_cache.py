"""Generated kernel files a user can trust (issue 41, item 1): a kernel runs the source gnnc generated,
whatever lies in the kernel folder, and a folder someone else can write is refused."""

from __future__ import annotations

import importlib.util
import os
import tempfile
import textwrap
import warnings
from importlib._bootstrap_external import _code_to_timestamp_pyc

import numpy as np
import pytest
import torch

pytest.importorskip("numba")

import numba

import gnnc
from gnnc import models
from gnnc.backend.cpu import codegen, softmax_aggregate
from gnnc.compiler import driver as compiled
from tests.graphs import random_homograph

LAST_LINE = "        out[r] *= 3\n"
SOURCE = (
    textwrap.dedent("""
    def thrice(bounds, x, out):
        for r in range(bounds[0], bounds[-1]):
            out[r] = x[r]
""")
    + LAST_LINE
)


@pytest.fixture
def kernels(tmp_path, monkeypatch):
    """A fresh kernel folder; ``load_function`` forgets what it loaded before and after the test."""
    monkeypatch.setenv("GNNC_KERNEL_DIR", str(tmp_path / "kernels"))
    codegen.load_function.cache_clear()
    yield tmp_path / "kernels"
    codegen.load_function.cache_clear()


def _reload():
    """``thrice`` loaded as a new process would (its file is on disk already), and its result on 0..3."""
    codegen.load_function.cache_clear()
    out = np.zeros(4)
    codegen.load_function("thrice", SOURCE)(np.array([0, 4]), np.arange(4.0), out)
    return out.tolist()


def _kernel_file(folder):
    codegen.load_function("thrice", SOURCE)
    [path] = folder.glob("thrice_*.py")
    return path


def test_a_truncated_kernel_file_is_rewritten(kernels):
    path = _kernel_file(kernels)
    whole = path.read_bytes()
    path.write_bytes(whole[: -len(LAST_LINE)])  # cut where the rest still parses: out = x, not 3 x
    assert _reload() == [0.0, 3.0, 6.0, 9.0]
    assert path.read_bytes() == whole


def test_a_payload_planted_under_a_kernels_name_never_runs(kernels, tmp_path):
    path = _kernel_file(kernels)
    marker = tmp_path / "payload-ran"
    path.write_text(f"open({str(marker)!r}, 'w').close()\n" + path.read_text())
    assert _reload() == [0.0, 3.0, 6.0, 9.0]
    assert not marker.exists()


def test_a_planted_pyc_is_not_used(kernels, tmp_path):
    path = _kernel_file(kernels)
    marker = tmp_path / "payload-ran"
    payload = compile(f"open({str(marker)!r}, 'w').close()\n" + SOURCE, str(path), "exec")
    st = path.stat()
    pyc = importlib.util.cache_from_source(str(path))
    os.makedirs(os.path.dirname(pyc), exist_ok=True)
    with open(pyc, "wb") as f:  # stamped with the source's mtime and size, as Python checks a .pyc
        f.write(_code_to_timestamp_pyc(payload, int(st.st_mtime), st.st_size))
    assert _reload() == [0.0, 3.0, 6.0, 9.0]
    assert not marker.exists()


@pytest.fixture
def shared_fallback(tmp_path, monkeypatch):
    """The fallback kernel folder (no $GNNC_KERNEL_DIR, no usable ~/.cache) in a temporary folder of the
    test's: the path gnnc would use, not created yet."""
    monkeypatch.delenv("GNNC_KERNEL_DIR", raising=False)
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-folder"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    _forget_loaded_kernels()
    yield tmp_path / "tmp" / f"gnnc-kernels-{os.getuid()}"
    _forget_loaded_kernels()


def _forget_loaded_kernels():
    """This process's kernels and plans, which earlier tests may have loaded from a folder that was fine then
    (a kernel already loaded is not read from the folder again, so the refusal would not show)."""
    codegen.load_function.cache_clear()
    for builder in (
        softmax_aggregate._forward_kernel,
        softmax_aggregate.logit_grad_kernel,
        softmax_aggregate.source_grad_kernel,
        softmax_aggregate.part_kernel,
    ):
        builder.cache_clear()
    compiled.clear_cache()


def _someone_elses(folder, monkeypatch, how):
    """``folder`` made a folder another user created first: world-writable, or owned by another user."""
    folder.mkdir(mode=0o700)
    if how == "world-writable":
        folder.chmod(0o777)
    elif os.geteuid() == 0:
        os.chown(folder, 65534, 65534)  # nobody
    else:
        uid = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: uid + 1)  # not this process's user then


def test_the_fallback_folder_is_created_private(shared_fallback):
    assert codegen.kernel_dir() == shared_fallback
    assert shared_fallback.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("how", ["world-writable", "owned by another user"])
def test_a_fallback_folder_someone_else_created_is_refused(shared_fallback, monkeypatch, how):
    _someone_elses(shared_fallback, monkeypatch, how)
    with pytest.raises(OSError, match="refuses the kernel folder"):
        codegen.kernel_dir()


def test_a_cache_folder_others_can_write_is_refused(kernels):
    """numba's cache files in __pycache__ are pickles it loads."""
    codegen.kernel_dir()
    (kernels / "__pycache__").chmod(0o777)
    with pytest.raises(OSError, match="others can write to its __pycache__"):
        codegen.kernel_dir()


def test_a_refused_folder_runs_eagerly_with_a_warning(shared_fallback, monkeypatch):
    _someone_elses(shared_fallback, monkeypatch, "world-writable")
    (shared_fallback / "planted.py").write_text("raise SystemExit('planted code ran')\n")
    g, x = random_homograph(12, 40, 0), torch.randn(12, 5)
    model = models.GATConv(5, 3, 2).eval()  # its softmax aggregation runs a generated kernel
    with pytest.warns(gnnc.FallbackWarning, match="refuses the kernel folder") as caught:
        out = gnnc.compile(model)(g, x)
    assert not any("gnnc bug" in str(w.message) for w in caught)  # the user's setup, not a gnnc bug
    torch.testing.assert_close(out, model(g, x))  # the call ran eagerly; the layers around it compiled
    assert sorted(p.name for p in shared_fallback.iterdir()) == ["planted.py"]


def test_numba_caches_generated_kernels_only_in_the_kernel_folder(kernels, tmp_path, monkeypatch):
    """numba's cache files are pickles it loads: they live in the private kernel folder or nowhere."""

    def run():
        codegen.load_function.cache_clear()
        out = np.zeros(4)
        codegen.generated_kernel("thrice", SOURCE)(np.array([0, 4]), np.arange(4.0), out)
        assert out.tolist() == [0.0, 3.0, 6.0, 9.0]

    run()
    assert list((kernels / "__pycache__").glob("thrice_*.nbi"))
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "numba-cache"))  # the user's NUMBA_CACHE_DIR
    for stale in (kernels / "__pycache__").iterdir():
        stale.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run()
    assert not (tmp_path / "numba-cache").exists() and not any((kernels / "__pycache__").iterdir())

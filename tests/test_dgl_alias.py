"""gnnc.compat.dgl: ``import dgl`` resolves to gnnc only after install(), never over a real DGL, and
uninstall() leaves sys.modules as it found it."""

import importlib
import importlib.util
import sys
import warnings

import pytest
import torch

import gnnc
from gnnc.compat import dgl as alias


def _dgl_modules() -> dict:
    return {name: mod for name, mod in sys.modules.items() if name == "dgl" or name.startswith("dgl.")}


@pytest.fixture
def clean():
    """No alias and no dgl module before and after the test, whatever it did."""
    assert not alias.is_installed() and not _dgl_modules()
    yield
    alias.uninstall()
    for name in _dgl_modules():
        del sys.modules[name]


@pytest.fixture
def fake_dgl(tmp_path, monkeypatch):
    """A real-looking DGL: a ``dgl`` package importable from a folder on sys.path."""
    (tmp_path / "dgl").mkdir()
    (tmp_path / "dgl" / "__init__.py").write_text("REAL = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    return tmp_path / "dgl" / "__init__.py"


def test_not_active_by_default():
    assert not alias.is_installed() and "dgl" not in sys.modules
    spec = importlib.util.find_spec("dgl")  # None here; a real DGL's where one is installed
    assert spec is None or spec.origin != "gnnc.compat.dgl"


def test_install_resolves_dgl_modules_to_gnnc(clean):
    alias.install()
    import dgl
    import dgl.backend as F
    import dgl.function as fn
    from dgl.base import NID, is_internal_column
    from dgl.data import AIFBDataset, AMDataset, BGSDataset, CoraGraphDataset, MUTAGDataset

    assert fn is gnnc.function and dgl.function is gnnc.function and dgl.ops is gnnc.ops
    assert dgl.DGLGraph is gnnc.Graph and dgl.batch is gnnc.batch and dgl.sum_nodes is gnnc.sum_nodes
    assert is_internal_column(NID) and not is_internal_column("h")
    assert (CoraGraphDataset, AIFBDataset, MUTAGDataset, BGSDataset, AMDataset) == (
        gnnc.data.CoraGraphDataset,
        gnnc.data.AIFBDataset,
        gnnc.data.MUTAGDataset,
        gnnc.data.BGSDataset,
        gnnc.data.AMDataset,
    )
    g = dgl.graph(([0, 1], [1, 2]))
    g.ndata["h"] = F.ones((3, 2), F.float32, F.cpu())
    g.update_all(fn.copy_u("h", "m"), fn.sum("m", "h"))
    assert F.asnumpy(g.ndata["h"]).tolist() == [[0, 0], [1, 1], [1, 1]]
    alias.install()  # a second call changes nothing
    assert sys.modules["dgl"] is dgl


def test_missing_dgl_api_is_missing_not_stubbed(clean):
    alias.install()
    import dgl

    with pytest.raises(AttributeError, match="no counterpart"):
        dgl.no_such_dgl_api
    with pytest.raises(ModuleNotFoundError, match="no counterpart"):
        import dgl.no_such_module


def test_uninstall_leaves_no_dgl_module(clean):
    meta_path = list(sys.meta_path)
    alias.install()
    importlib.import_module("dgl.nn.pytorch")

    alias.uninstall()
    assert not _dgl_modules() and sys.meta_path == meta_path and not alias.is_installed()
    assert not hasattr(gnnc.nn, "pytorch")
    with pytest.raises(ImportError):
        importlib.import_module("dgl")


def test_refuses_to_shadow_an_importable_dgl(clean, fake_dgl):
    with pytest.raises(RuntimeError, match=str(fake_dgl.parent)):
        alias.install()
    assert not alias.is_installed() and not _dgl_modules()


def test_refuses_to_shadow_an_imported_dgl(clean, fake_dgl):
    import dgl as real

    with pytest.raises(RuntimeError, match="real DGL is present"):
        alias.install()
    assert sys.modules["dgl"] is real


def test_force_shadows_with_a_warning_and_uninstall_restores(clean, fake_dgl):
    import dgl as real

    with pytest.warns(UserWarning, match="shadowing it"):
        alias.install(force=True)
    import dgl

    assert dgl is not real and dgl.graph is gnnc.graph.graph
    alias.uninstall()
    assert sys.modules["dgl"] is real


def test_backend_helpers_follow_dgl_semantics(clean):
    alias.install()
    import dgl.backend as F

    assert F.backend_name == "pytorch" and F.int32 is torch.int32
    assert F.tensor(3).tolist() == [3]  # a number becomes a 1-element tensor
    assert F.tensor([torch.tensor(1.0), torch.tensor(2.0)]).tolist() == [1.0, 2.0]
    x = torch.arange(6.0).reshape(3, 2)
    assert F.gather_row(x, torch.tensor([2, 0], dtype=torch.int32)).tolist() == [[4, 5], [0, 1]]
    y = F.scatter_row(x, torch.tensor([1]), torch.zeros(1, 2))
    assert y[1].tolist() == [0, 0] and x[1].tolist() == [2, 3]  # out of place
    assert F.max(x, 0).tolist() == [4, 5] and F.sum(x, 1, keepdims=True).shape == (3, 1)
    w = F.attach_grad(torch.ones(2))
    with F.record_grad():
        loss = F.reduce_sum(w * 3)
    F.backward(loss, torch.ones(1))  # a 1-element head gradient for a 0-d output, as DGL's tests pass
    assert F.grad(w).tolist() == [3, 3]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert F.nonzero_1d(torch.tensor([0, 3, 0, 1])).tolist() == [1, 3]


def test_the_names_published_layer_code_imports(clean):
    """What the world's layer files reach for at import (benchmarking-gnns gates on ``dgl.__version__`` and
    calls DGL 0.x's ``fn.copy_src(src=..., out=...)``; DGL's examples import ``dgl._ffi.base.DGLError``,
    ``dgl.utils.expand_as_pair`` and ``dgl.frame.zero_initializer``)."""
    alias.install()
    import dgl
    import dgl.function as fn
    from dgl._ffi.base import DGLError
    from dgl.utils import expand_as_pair

    assert dgl.__version__ == "2.1.0" and not dgl.__version__ < "0.5"
    assert DGLError is dgl.DGLError
    assert dgl.frame.zero_initializer((2, 3), torch.float32, "cpu", None).shape == (2, 3)
    assert fn.copy_src(src="h", out="m") == fn.copy_u("h", "m")
    assert fn.copy_edge(edge="w", out="m") == fn.copy_e("w", "m")
    assert fn.src_mul_edge(src="h", edge="w", out="m") == fn.u_mul_e("h", "w", "m")
    x = torch.ones(3, 2)
    assert expand_as_pair(x)[0] is x and expand_as_pair((x, x[:1]))[1].shape == (1, 2)

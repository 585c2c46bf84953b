"""Shared pytest configuration: float64 reference checks, data location, the MP-DFG check after each pass, a
local HTTP server for the download tests."""

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
pytest_plugins = ["tests.session_gc"]
os.environ.setdefault("GNNC_VERIFY_PASSES", "1")  # every compiled call checks the MP-DFG after each pass


def data_dir() -> Path:
    """Real datasets, by gnnc's data-location rule: $GNNC_DATA, else ../shared/data, else ~/.cache/gnnc/data."""
    from gnnc.data.paths import data_root

    return data_root()


@pytest.fixture
def eager_dropout_masks():
    """``torch.use_deterministic_algorithms(True)`` for the test: compiled dropout then draws eager's masks
    (docs/compiler.rst, where compiled numbers may differ from eager)."""
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(before)


@pytest.fixture
def shared_data() -> Path:
    root = data_dir()
    if not root.is_dir():
        pytest.skip(f"real datasets not found at {root} (set GNNC_DATA)")
    return root


@pytest.fixture
def no_default_data(monkeypatch, tmp_path):
    """Neither $GNNC_DATA nor a default data folder: the data-location rule ends at an empty user cache."""
    from gnnc.data import paths

    monkeypatch.delenv(paths.ENV_VAR, raising=False)
    monkeypatch.setattr(paths, "CHECKOUT_DATA", None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    return tmp_path / "empty-cache" / "gnnc" / "data"


@pytest.fixture(scope="module")
def dataset():
    """The mag replica at scale 0.001 with 8-wide features (a few hundred papers): the multi-process tests' data."""
    from gnnc.data import synthetic

    return synthetic("mag", scale=0.001, seed=0, feat_dim=8)


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Tiny test tensors run faster on one thread, and a busy 2-core CI box does not thrash."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        server = self.server
        body = server.files.get(self.path.lstrip("/"))
        server.requests.append((self.path.lstrip("/"), self.headers.get("Range")))
        if body is None:
            self.send_error(404)
            return
        start = int(self.headers["Range"].removeprefix("bytes=").split("-")[0]) if self.headers["Range"] else 0
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        payload = body[start:]
        if self.path.lstrip("/") in server.cut:  # send half, then drop the connection
            server.cut.discard(self.path.lstrip("/"))
            payload = payload[: len(payload) // 2]
            self.close_connection = True
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    """``(url, httpd)``: ``httpd.files`` maps a path in the data folder to bytes; ``httpd.cut`` holds paths
    whose next transfer breaks halfway; ``httpd.requests`` records (path, Range header)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.files, httpd.cut, httpd.requests = {}, set(), []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", httpd
    httpd.shutdown()
    httpd.server_close()

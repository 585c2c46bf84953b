"""``gnnc datasets download`` / ``gnnc.data.download`` against a local HTTP server (CI has no network).

The server (conftest's ``server``) serves files the test writes (synthetic Planetoid-format sets from
``hostile_files``, or the real ones from ../shared/data when present), honours HTTP Range, and can cut a
transfer midway.
"""

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gnnc.cli import main
from gnnc.data import downloads, integrity, load_planetoid, sources
from gnnc.data.citation import CiteseerGraphDataset, CoraGraphDataset, PubmedGraphDataset

from .hostile_files import write_planetoid

REPO = Path(__file__).resolve().parents[1]
TUTORIALS = REPO.parent / "shared" / "world-code" / "dgl" / "tutorials" / "blitz"


def _serve_planetoid(httpd, folder: Path, name: str) -> dict:
    """Serve the ``ind.<name>.*`` files of ``folder``; return their sha256 by path in the data folder."""
    digests = {}
    for part in sources.PLANETOID_PARTS:
        body = (folder / f"ind.{name}.{part}").read_bytes()
        httpd.files[f"planetoid/ind.{name}.{part}"] = body
        digests[f"planetoid/ind.{name}.{part}"] = hashlib.sha256(body).hexdigest()
    return digests


def _synthetic(tmp_path, httpd, name: str) -> dict:
    return _serve_planetoid(httpd, write_planetoid(tmp_path / "served", name), name)


def pinned(name: str, digests: dict) -> sources.Source:
    """``SOURCES[name]`` pinned to ``digests`` (synthetic files standing in for the real ones)."""
    source = sources.SOURCES[name]
    return dataclasses.replace(
        source, files=tuple(dataclasses.replace(f, sha256=digests[f.path]) for f in source.files)
    )


def _pin(monkeypatch, name: str, digests: dict) -> None:
    monkeypatch.setitem(sources.SOURCES, name, pinned(name, digests))


def test_first_download_records_its_digests_and_later_loads_check_them(tmp_path, server, capsys):
    url, httpd = server
    digests = _synthetic(tmp_path, httpd, "pubmed")  # pubmed has no pinned digests: trust on first use
    data = tmp_path / "data"
    assert downloads.download("pubmed", data, mirror=url, progress=False) == data
    assert "trusting this copy" in capsys.readouterr().err
    assert downloads.read_lock(data) == digests
    fetched = len(httpd.requests)
    downloads.download("pubmed", data, mirror=url, progress=False)  # present and checked: nothing fetched
    downloads.verify("pubmed", data)
    assert len(httpd.requests) == fetched
    (data / "planetoid" / "ind.pubmed.y").write_bytes(b"changed")
    with pytest.raises(downloads.ChecksumError, match=r"ind\.pubmed\.y: sha256 \w+ is not the \w+ recorded in"):
        downloads.verify("pubmed", data)


def test_every_load_checks_the_downloaded_files_and_the_command_repairs_them(tmp_path, server, monkeypatch):
    url, httpd = server
    digests = _synthetic(tmp_path, httpd, "pubmed")  # trusted on first use
    data = tmp_path / "data"
    downloads.download("pubmed", data, mirror=url, progress=False)
    assert load_planetoid("pubmed", data / "planetoid").graph.num_nodes() == 512
    graph_file = data / "planetoid" / "ind.pubmed.graph"
    graph_file.write_bytes(b"X" + graph_file.read_bytes()[1:])  # one byte changed, same size
    with pytest.raises(downloads.ChecksumError) as err:
        load_planetoid("pubmed", data / "planetoid")
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{graph_file}: sha256 ")
    assert f"is not the {digests['planetoid/ind.pubmed.graph']} recorded in {data / downloads.LOCK_NAME}" in message
    assert message.endswith("Run `gnnc datasets download pubmed` to fetch it again")
    with pytest.raises(downloads.ChecksumError, match="ind.pubmed.graph"):
        PubmedGraphDataset(raw_dir=data, verbose=False)
    downloads.download("pubmed", data, mirror=url, progress=False)  # fetches the changed (set aside) file again
    assert ("planetoid/ind.pubmed.graph", None) in httpd.requests[-1:]
    assert load_planetoid("pubmed", data / "planetoid").graph.num_nodes() == 512


def test_pinned_files_are_checked_on_load_and_unrecorded_copies_load_unchecked(tmp_path, server, monkeypatch):
    url, httpd = server
    _pin(monkeypatch, "cora", _synthetic(tmp_path, httpd, "cora"))
    data = tmp_path / "data"
    downloads.download("cora", data, mirror=url, progress=False)
    (data / "planetoid" / "ind.cora.test.index").write_text("0\n")
    with pytest.raises(downloads.ChecksumError, match=r"ind\.cora\.test\.index: sha256 \w+ is not the \w+ pinned"):
        load_planetoid("cora", data / "planetoid")
    own = write_planetoid(tmp_path / "own" / "planetoid", "cora")  # no lock above it: read as before
    assert load_planetoid("cora", own).graph.num_nodes() == 512
    (tmp_path / "own" / downloads.LOCK_NAME).write_text("")  # a lock that does not name the files
    assert load_planetoid("cora", own).graph.num_nodes() == 512


def test_a_file_is_hashed_once_per_process_while_it_is_unchanged(tmp_path, server, monkeypatch):
    url, httpd = server
    _synthetic(tmp_path, httpd, "pubmed")
    data = tmp_path / "data"
    downloads.download("pubmed", data, mirror=url, progress=False)
    hashed = []
    real = integrity.hashlib.sha256
    monkeypatch.setattr(integrity.hashlib, "sha256", lambda: hashed.append(1) or real())
    for _ in range(3):
        load_planetoid("pubmed", data / "planetoid")
    assert hashed == []  # the download hashed them already
    os.utime(data / "planetoid" / "ind.pubmed.y", ns=(1, 1))  # a changed mtime: hashed again, once
    for _ in range(2):
        load_planetoid("pubmed", data / "planetoid")
    assert len(hashed) == 1


def test_a_wrong_checksum_is_refused_and_the_file_set_aside(tmp_path, server):
    url, httpd = server
    _synthetic(tmp_path, httpd, "cora")  # not the pinned real Cora
    data = tmp_path / "data"
    with pytest.raises(downloads.ChecksumError, match=r"ind\.cora\.x: sha256 \w+ is not the 23cfa55d\w+ pinned"):
        downloads.download("cora", data, mirror=url, progress=False)
    assert not (data / "planetoid" / "ind.cora.x").exists()
    assert (data / "planetoid" / "ind.cora.x.bad").is_file()


def test_a_cut_connection_is_resumed_by_the_next_call(tmp_path, server, monkeypatch):
    url, httpd = server
    digests = _synthetic(tmp_path, httpd, "cora")
    _pin(monkeypatch, "cora", digests)
    httpd.cut.add("planetoid/ind.cora.allx")
    data = tmp_path / "data"
    with pytest.raises(downloads.DownloadError, match=r"ind\.cora\.allx broke after .* again to resume"):
        downloads.download("cora", data, mirror=url, progress=False)
    part = data / "planetoid" / "ind.cora.allx.part"
    half = part.stat().st_size
    assert 0 < half < len(httpd.files["planetoid/ind.cora.allx"])
    downloads.download("cora", data, mirror=url, progress=False)
    assert ("planetoid/ind.cora.allx", f"bytes={half}-") in httpd.requests
    assert not part.exists()
    downloads.verify("cora", data)


def test_offline_is_one_line_naming_the_command_and_the_folder(tmp_path, capsys):
    data = tmp_path / "data"
    with pytest.raises(downloads.DownloadError) as err:
        downloads.download("WN18RR", data, mirror="http://127.0.0.1:9", progress=False)
    message = str(err.value)
    assert "\n" not in message and "cannot reach http://127.0.0.1:9/kg/WN18RR.tar.gz" in message
    assert f"run `gnnc datasets download WN18RR` (files go to {data})" in message
    assert main(["datasets", "download", "wn18rr", "--data-dir", str(data), "--mirror", "http://127.0.0.1:9"]) == 2
    line = capsys.readouterr().err
    assert line.count("\n") == 1 and line.startswith("gnnc datasets: error: WN18RR: cannot reach")


def test_the_command_downloads_into_the_data_folder(tmp_path, server, monkeypatch, capsys):
    url, httpd = server
    _pin(monkeypatch, "citeseer", _synthetic(tmp_path, httpd, "citeseer"))
    monkeypatch.setenv("GNNC_DATA", str(tmp_path / "data"))
    assert main(["datasets", "download", "citeseer", "--mirror", url]) == 0
    assert f"citeseer: 8 files in {tmp_path / 'data'}, sha256 checked" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "data" / "planetoid").iterdir()) == sorted(
        f"ind.citeseer.{p}" for p in sources.PLANETOID_PARTS
    )


def test_the_real_files_match_their_pins(tmp_path, server, shared_data):
    url, httpd = server
    if not (shared_data / "planetoid" / "ind.cora.x").is_file():
        pytest.skip("no real Planetoid files")
    _serve_planetoid(httpd, shared_data / "planetoid", "cora")
    for name in ("FB15k-237", "WN18RR"):
        httpd.files[f"kg/{name}.tar.gz"] = (shared_data / "kg" / f"{name}.tar.gz").read_bytes()
    for name in ("cora", "FB15k-237", "WN18RR"):
        downloads.download(name, tmp_path / "data", mirror=url, progress=False)
    pins = {f.path: f.sha256 for name in ("cora", "FB15k-237", "WN18RR") for f in sources.SOURCES[name].files}
    assert downloads.read_lock(tmp_path / "data") == pins  # every file was pinned: nothing trusted on first use


def test_the_dataset_classes_hold_what_dgl_holds(shared_data):
    """Figures of DGL 2.1's CoraGraphDataset / CiteseerGraphDataset on the same files (checked in DGL)."""
    if not (shared_data / "planetoid" / "ind.citeseer.x").is_file():
        pytest.skip("no real Planetoid files")
    cora = CoraGraphDataset(raw_dir=shared_data, verbose=False)
    g = cora[0]
    assert (len(cora), cora.num_classes, g.num_nodes(), g.num_edges()) == (1, 7, 2708, 10556)
    assert g.ndata["feat"].dtype == torch.float32 and g.ndata["label"].dtype == torch.int64
    assert g.ndata["feat"].double().sum().item() == pytest.approx(2708.0000444874167, abs=1e-9)
    assert g.ndata["feat"][0].max().item() == pytest.approx(0.1111111119389534, abs=1e-9)
    assert [int(g.ndata[m].sum()) for m in ("train_mask", "val_mask", "test_mask")] == [140, 500, 1000]
    citeseer = CiteseerGraphDataset(raw_dir=shared_data, verbose=False)[0]
    u, v = citeseer.edges()
    assert (citeseer.num_edges(), int((u == v).sum())) == (9228, 124)
    assert citeseer.ndata["feat"].double().sum().item() == pytest.approx(3312.000040203333, abs=1e-9)
    raw = CoraGraphDataset(raw_dir=shared_data, verbose=False, row_normalize=False)[0].ndata["feat"]
    assert set(raw.unique().tolist()) == {0.0, 1.0}


def test_a_missing_dataset_is_downloaded_by_the_class_as_in_dgl(tmp_path, server, monkeypatch):
    url, httpd = server
    _pin(monkeypatch, "cora", _synthetic(tmp_path, httpd, "cora"))
    monkeypatch.setenv(downloads.MIRROR_ENV, url)
    g = CoraGraphDataset(raw_dir=tmp_path / "data", verbose=False)[0]
    assert g.num_nodes() == 512 and torch.allclose(
        g.ndata["feat"].sum(1)[g.ndata["feat"].sum(1) > 0], torch.tensor(1.0)
    )


# a child: pin cora to the served synthetic files, run the download command, then the tutorial under the alias
_BOOT = """
import json, sys
import gnnc.compat.dgl as alias
from gnnc.cli import main
from gnnc.data import sources
from tests.test_downloads import pinned

digests, mirror, script, mode = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
sources.SOURCES["cora"] = pinned("cora", digests)
if main(["datasets", "download", "cora", "--mirror", mirror]):
    sys.exit(1)
alias.install()
code = compile(open(script).read(), script, "exec")
if mode == "eager":
    exec(code, {"__name__": "__main__"})
else:  # every message-passing call compiled; a fallback is an error
    import warnings
    from gnnc.message_passing import compiling
    from gnnc.compiler.driver import FallbackWarning, recording

    warnings.simplefilter("error", FallbackWarning)
    with compiling({}), recording() as plans:
        exec(code, {"__name__": "__main__"})
    print(f"compiled plans: {sum(plan.module is not None for plan in plans)}")
"""


@pytest.mark.parametrize("mode", ["eager", "compiled"])
@pytest.mark.parametrize("script", ["1_introduction.py", "4_link_predict.py"])
def test_dgl_tutorials_run_unchanged_on_downloaded_data(tmp_path, server, script, mode):
    """DGL's blitz tutorials, unchanged, through the alias; Cora (a synthetic Cora-format set) from the command."""
    if not (TUTORIALS / script).is_file():
        pytest.skip(f"DGL's tutorials are not at {TUTORIALS}")
    if script.startswith("4"):
        pytest.importorskip("sklearn")
    url, httpd = server
    digests = _synthetic(tmp_path, httpd, "cora")
    env = {**os.environ, "GNNC_DATA": str(tmp_path / "data"), "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", _BOOT, json.dumps(digests), url, str(TUTORIALS / script), mode],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"cora: 8 files in {tmp_path / 'data'}" in done.stdout
    assert "In epoch 95, loss:" in done.stdout
    assert script.startswith("1") or "AUC" in done.stdout
    if mode == "compiled":
        assert int(re.search(r"compiled plans: (\d+)", done.stdout).group(1)) > 0


def test_info_states_how_planetoid_features_are_processed(shared_data, capsys):
    if not (shared_data / "planetoid" / "ind.cora.x").is_file():
        pytest.skip("no real Planetoid files")
    assert main(["info", "cora", "--data-dir", str(shared_data)]) == 0
    out = capsys.readouterr().out
    assert "processing: features as the files hold them (not normalised)" in out
    assert "gnnc.data.CoraGraphDataset() (dgl.data.CoraGraphDataset through the alias) row-normalises" in out


def test_missing_files_name_the_download_command_and_a_clean_path(no_default_data, tmp_path):
    from gnnc.data import load_planetoid
    from gnnc.data.paths import DataNotFoundError

    with pytest.raises(DataNotFoundError, match="gnnc datasets download NAME") as err:
        load_planetoid("cora")
    assert f"{no_default_data / 'planetoid'}, under {no_default_data} (the per-user default)" in str(err.value)
    with pytest.raises(DataNotFoundError) as err:
        load_planetoid("cora", tmp_path / "nowhere")
    assert str(err.value).endswith(f"or none to use {no_default_data / 'planetoid'} (the per-user default)")
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "train_cora.py"), "--data-dir", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("train_cora.py: Planetoid folder for 'cora' not found")

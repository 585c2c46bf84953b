"""DGL's RDF datasets (``gnnc.data.AIFBDataset`` ...) on tiny archives in DGL's layout (``tests/rdf_archives``),
downloaded from the local HTTP server as ``gnnc datasets download`` fetches them.

``DGL_BUILDS`` is what DGL 2.1's classes built from the same archives (DGL in its own interpreter, with rdflib
7.6: ``python tests/rdf_archives.py OUT``): every node's and edge's id, each relation's edges, the labels
and masks of the predicted category.
"""

import io
import re
import zipfile

import pytest
import torch

from gnnc import data
from gnnc.cli import main
from gnnc.data import downloads, limits, rdf

from .rdf_archives import ARCHIVES, archive_bytes

DGL_BUILDS = {
    "aifb": {
        "predict_category": "Personen",
        "num_classes": 3,
        "node_ids": {
            "Klassen": [1],
            "Personen": [0, 2, 4, 6],
            "Projekte": [3],
            "Publikationen": [7, 8],
            "_Literal": [5, 9, 10, 11, 12, 13],
        },
        "edges": {
            ("Klassen", "rev-22-rdf-syntax-ns#type", "Personen"): ([0], [0], [15]),
            ("Personen", "22-rdf-syntax-ns#type", "Klassen"): ([0], [0], [0]),
            ("Personen", "name", "_Literal"): ([2], [0], [2]),
            ("Personen", "ontology#publication", "Publikationen"): ([3], [0], [3]),
            ("Personen", "ontology#worksAtProject", "Projekte"): ([1], [0], [1]),
            ("Personen", "rev-ontology#author", "Publikationen"): ([0, 1, 2], [1, 1, 0], [21, 22, 26]),
            ("Personen", "rev-ontology#member", "Projekte"): ([1, 3], [0, 0], [19, 20]),
            ("Projekte", "ontology#member", "Personen"): ([0, 0], [1, 3], [4, 5]),
            ("Projekte", "rev-ontology#worksAtProject", "Personen"): ([0], [1], [16]),
            ("Publikationen", "ontology#author", "Personen"): ([1, 1, 0], [0, 1, 2], [6, 7, 11]),
            ("Publikationen", "ontology#pages", "_Literal"): ([0, 0], [4, 5], [12, 13]),
            ("Publikationen", "ontology#title", "_Literal"): ([1, 1], [1, 2], [8, 9]),
            ("Publikationen", "ontology#year", "_Literal"): ([1, 0], [3, 3], [10, 14]),
            ("Publikationen", "rev-ontology#publication", "Personen"): ([0], [3], [18]),
            ("_Literal", "rev-name", "Personen"): ([0], [2], [17]),
            ("_Literal", "rev-ontology#pages", "Publikationen"): ([4, 5], [0, 0], [27, 28]),
            ("_Literal", "rev-ontology#title", "Publikationen"): ([1, 2], [1, 1], [23, 24]),
            ("_Literal", "rev-ontology#year", "Publikationen"): ([3, 3], [1, 0], [25, 29]),
        },
        "label": [0, 1, 1, 2],
        "train_mask": [1, 1, 0, 0],
        "test_mask": [0, 0, 1, 1],
    },
    "am": {
        "predict_category": "proxy",
        "num_classes": 2,
        "node_ids": {"TYPE": [6, 7], "_BNode": [0], "aggr": [2, 5], "proxy": [3, 4, 8], "t": [1]},
        "edges": {
            ("TYPE", "rev-http://www_w3_org/1999/02/22-rdf-syntax-ns#type", "proxy"): ([1], [0], [12]),
            ("TYPE", "rev-related", "proxy"): ([0], [0], [11]),
            ("_BNode", "birthPlace", "t"): ([0], [0], [0]),
            ("_BNode", "rev-maker", "proxy"): ([0], [1], [10]),
            ("aggr", "related", "proxy"): ([0], [0], [1]),
            ("aggr", "rev-aggregatedCHO", "proxy"): ([1, 0], [1, 2], [9, 13]),
            ("proxy", "aggregatedCHO", "aggr"): ([1, 2], [1, 0], [2, 6]),
            ("proxy", "http://www_w3_org/1999/02/22-rdf-syntax-ns#type", "TYPE"): ([0], [1], [5]),
            ("proxy", "maker", "_BNode"): ([1], [0], [3]),
            ("proxy", "related", "TYPE"): ([0], [0], [4]),
            ("proxy", "rev-related", "aggr"): ([0], [0], [8]),
            ("t", "rev-birthPlace", "_BNode"): ([0], [0], [7]),
        },
        "label": [1, 0, 0],
        "train_mask": [1, 1, 0],
        "test_mask": [0, 0, 1],
    },
    "bgs": {
        "predict_category": "Lexicon/NamedRockUnit",
        "num_classes": 2,
        "node_ids": {"EarthMaterialClass/RockName": [1], "Lexicon/NamedRockUnit": [0, 2, 3]},
        "edges": {
            ("EarthMaterialClass/RockName", "rev-Lexicon/hasDominantLithology", "Lexicon/NamedRockUnit"): (
                [0, 0],
                [0, 1],
                [3, 4],
            ),
            ("Lexicon/NamedRockUnit", "Lexicon/hasDominantLithology", "EarthMaterialClass/RockName"): (
                [0, 1],
                [0, 0],
                [0, 1],
            ),
            ("Lexicon/NamedRockUnit", "http://www_w3_org/2004/02/skos/core#broader", "Lexicon/NamedRockUnit"): (
                [2],
                [0],
                [2],
            ),
            ("Lexicon/NamedRockUnit", "rev-http://www_w3_org/2004/02/skos/core#broader", "Lexicon/NamedRockUnit"): (
                [0],
                [2],
                [5],
            ),
        },
        "label": [0, 1, 0],
        "train_mask": [1, 1, 0],
        "test_mask": [0, 0, 1],
    },
    "mutag": {
        "predict_category": "d",
        "num_classes": 2,
        "node_ids": {"SCHEMA": [0, 1], "_Literal": [7, 8, 9], "bond": [2, 4], "d": [3, 6, 10], "hasStructure": [5]},
        "edges": {
            ("SCHEMA", "rdf-schema#subClassOf", "SCHEMA"): ([0], [1], [0]),
            ("SCHEMA", "rev-22-rdf-syntax-ns#type", "d"): ([0], [0], [18]),
            ("SCHEMA", "rev-rdf-schema#subClassOf", "SCHEMA"): ([1], [0], [10]),
            ("_Literal", "rev-amesTestPositive", "d"): ([0], [1], [13]),
            ("_Literal", "rev-charge", "d"): ([1, 2], [0, 0], [16, 17]),
            ("bond", "hasStructure", "hasStructure"): ([1], [0], [2]),
            ("bond", "inBond", "d"): ([0], [0], [1]),
            ("bond", "rev-hasBond", "d"): ([0, 1], [1, 2], [15, 19]),
            ("d", "22-rdf-syntax-ns#type", "SCHEMA"): ([0], [0], [8]),
            ("d", "amesTestPositive", "_Literal"): ([1], [0], [3]),
            ("d", "charge", "_Literal"): ([0, 0], [1, 2], [6, 7]),
            ("d", "hasAtom", "d"): ([1], [0], [4]),
            ("d", "hasBond", "bond"): ([1, 2], [0, 1], [5, 9]),
            ("d", "rev-hasAtom", "d"): ([0], [1], [14]),
            ("d", "rev-inBond", "bond"): ([0], [0], [11]),
            ("hasStructure", "rev-hasStructure", "bond"): ([0], [1], [12]),
        },
        "label": [-1, 0, 1],
        "train_mask": [0, 1, 0],
        "test_mask": [0, 0, 1],
    },
}


def _serve(server, monkeypatch, name: str, body: bytes | None = None) -> None:
    url, httpd = server
    httpd.files[f"rdf/{name}-hetero.zip"] = archive_bytes(name) if body is None else body
    monkeypatch.setenv(downloads.MIRROR_ENV, url)


@pytest.mark.parametrize("name", list(ARCHIVES))
def test_the_graph_is_the_one_dgl_builds(name, tmp_path, server, monkeypatch, capsys):
    _serve(server, monkeypatch, name)
    ds = rdf.RDF_DATASETS[name](raw_dir=tmp_path / "data", verbose=False)
    assert f"rdf/{name}-hetero.zip has no published sha256; trusting this copy" in capsys.readouterr().err
    want, g, cat = DGL_BUILDS[name], ds[0], ds.predict_category
    assert (len(ds), cat, ds.num_classes) == (1, want["predict_category"], want["num_classes"])
    assert g.ntypes == list(want["node_ids"])
    assert {t: g.nodes[t].data["_ID"].tolist() for t in g.ntypes} == want["node_ids"]
    assert g.canonical_etypes == list(want["edges"])
    for rel, (src, dst, ids) in want["edges"].items():
        assert [x.tolist() for x in g.edges(etype=rel)] == [src, dst] and g.edges[rel].data["_ID"].tolist() == ids
    node = g.nodes[cat].data
    assert node["label"].dtype == torch.int64 and node["train_mask"].dtype == torch.bool
    assert node["label"].tolist() == node["labels"].tolist() == want["label"]
    assert [node[m].int().tolist() for m in ("train_mask", "test_mask")] == [want["train_mask"], want["test_mask"]]


def test_without_reverses_and_with_a_transform(tmp_path, server, monkeypatch):
    _serve(server, monkeypatch, "aifb")
    g = data.AIFBDataset(raw_dir=tmp_path / "data", verbose=False, insert_reverse=False)[0]
    assert g.num_edges() == sum(len(e[0]) for e in DGL_BUILDS["aifb"]["edges"].values()) // 2
    assert not [r for r in g.etypes if r.startswith("rev-")]
    ds = data.AIFBDataset(raw_dir=tmp_path / "data", verbose=False, transform=lambda g: ("t", g.num_nodes()))
    assert ds[0] == ("t", 14)
    with pytest.raises(IndexError, match="holds one graph"):
        ds[1]


def test_a_changed_member_fails_the_load_and_the_command_unpacks_it_again(tmp_path, server, monkeypatch):
    _serve(server, monkeypatch, "aifb")
    root = tmp_path / "data"
    data.AIFBDataset(raw_dir=root, verbose=False)
    triples = root / "rdf" / "aifb-hetero" / "aifbfixed_complete.n3"
    triples.write_text(triples.read_text().replace("Carol", "Mallory"))
    with pytest.raises(downloads.ChecksumError) as err:
        data.AIFBDataset(raw_dir=root, verbose=False)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{triples}: sha256 ")
    assert f"recorded in {root / downloads.LOCK_NAME}" in message
    assert message.endswith("Run `gnnc datasets download aifb` to fetch it again")
    assert main(["datasets", "download", "aifb", "--data-dir", str(root)]) == 0
    assert "Carol" in triples.read_text()
    assert data.AIFBDataset(raw_dir=root, verbose=False).num_classes == 3


def _unpacked(tmp_path, name: str, triples=None, **tsv) -> object:
    """A data folder holding ``rdf/<name>-hetero`` unpacked from the test archive (no lock: not checked)."""
    folder = tmp_path / "rdf" / f"{name}-hetero"
    zipfile.ZipFile(io.BytesIO(archive_bytes(name, triples))).extractall(folder)
    for split, text in tsv.items():
        (folder / f"{split}.tsv").write_text(text)
    return folder


@pytest.mark.parametrize(
    "line, error",
    [
        ("@prefix s: <http://swrc.ontoware.org/ontology#> .", "not an N-Triples triple"),
        ('<http://a/x> <http://a/p> "bad \\q escape" .', "a backslash that starts no N-Triples escape"),
        ("<http://a/x> <http://a/p> <http://a/y>", "not an N-Triples triple"),
        ("<http://www.aifb.uni-karlsruhe.de/short> <http://a/p> <http://a/y> .", "has 4 '/'-separated parts"),
    ],
)
def test_a_malformed_line_names_the_file_and_the_line(tmp_path, line, error):
    folder = _unpacked(tmp_path, "aifb", ARCHIVES["aifb"][1][:3] + [line])
    with pytest.raises(ValueError, match=re.escape(f"{folder / 'aifbfixed_complete.n3'}, line 4: ") + ".*" + error):
        data.AIFBDataset(raw_dir=tmp_path, verbose=False)


def test_malformed_splits_name_the_file_and_the_line(tmp_path):
    head, person = ARCHIVES["aifb"][2], "http://www.aifb.uni-karlsruhe.de/Personen/viewPersonOWL/id1instance"
    folder = _unpacked(tmp_path, "aifb", trainingSet=f"{head}\n{person}\tg30\n")
    with pytest.raises(ValueError, match=re.escape(f"{folder / 'trainingSet.tsv'}, line 2: expected 3 tab-separated")):
        data.AIFBDataset(raw_dir=tmp_path, verbose=False)
    publication = "http://www.aifb.uni-karlsruhe.de/Publikationen/viewPublikationOWL/id10instance"
    _unpacked(tmp_path, "aifb", testSet=f"{head}\n\n{publication}\t10\tg30\n")  # a blank line is skipped
    with pytest.raises(ValueError, match=r"testSet\.tsv, line 3: sample .* is entity 'Publikationen/id10instance'"):
        data.AIFBDataset(raw_dir=tmp_path, verbose=False)


def test_a_sample_of_the_wrong_shape_names_the_split_file_and_the_line(tmp_path):
    folder = _unpacked(tmp_path, "am", testSet=f"{ARCHIVES['am'][2]}\nhttp://purl.org/collections/nl/am/x/y\t1\tp\n")
    with pytest.raises(ValueError, match=re.escape(f"{folder / 'testSet.tsv'}, line 2: entity <http://purl")):
        data.AMDataset(raw_dir=tmp_path, verbose=False)


def test_the_limits_bound_lines_and_counts(tmp_path):
    _unpacked(tmp_path, "mutag")
    with limits.configure(max_text_line=40), pytest.raises(ValueError, match=r"line 1: longer than 40 characters"):
        data.MUTAGDataset(raw_dir=tmp_path, verbose=False)
    with limits.configure(max_nodes=5), pytest.raises(ValueError, match=r"declares 11 nodes; .* accepts 0 to 5"):
        data.MUTAGDataset(raw_dir=tmp_path, verbose=False)
    with limits.configure(max_edges=3), pytest.raises(ValueError, match=r"mutag_stripped\.nt, line 4: declares 4"):
        data.MUTAGDataset(raw_dir=tmp_path, verbose=False)


def test_info_and_datasets_describe_the_real_rdf_sets(tmp_path, capsys):
    _unpacked(tmp_path, "aifb")
    assert main(["info", "aifb", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "aifb: real dataset from" in out and "Personen" in out
    assert "processing: as DGL 2.1's AIFBDataset (gnnc.data.AIFBDataset(), dgl.data.AIFBDataset through" in out
    assert "label, train_mask and test_mask on 'Personen'" in out
    assert main(["datasets", "--data-dir", str(tmp_path)]) == 0
    listing = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    assert "gnnc.data.AIFBDataset" in listing["aifb"] and " found " in listing["aifb"]
    assert "rdf/mutag-hetero/*" in listing["mutag"] and " absent " in listing["mutag"]

"""Tiny archives in the layout of DGL's ``<name>-hetero.zip`` (N-Triples file and split TSVs at the top level),
written by the RDF tests, with what DGL 2.1 builds from them.

Each archive exercises its dataset's rules: dropped relations, literals, blank nodes, IRIs outside the
prefixes, duplicate and (after rdflib's normalisation) equal triples, numbers sorted by value, escapes,
``type`` renamed, labelled samples without links. ``python tests/rdf_archives.py OUT`` in DGL's interpreter
(with rdflib importable) writes the archives to OUT, loads each with DGL's class and prints what it built as
JSON: that is how ``tests/test_rdf.py``'s expected values were made.
"""

import io
import json
import sys
import zipfile
from pathlib import Path

XSD = "http://www.w3.org/2001/XMLSchema#"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"

_A, _S = "http://www.aifb.uni-karlsruhe.de/", "http://swrc.ontoware.org/ontology#"
_PERSON, _PUB = _A + "Personen/viewPersonOWL/id{}instance", _A + "Publikationen/viewPublikationOWL/id{}instance"
_PROJECT, _GROUP = _A + "Projekte/viewProjektOWL/id{}instance", _A + "Forschungsgruppen/viewGruppeOWL/id{}instance"
_AIFB = [
    f"<{_PUB.format(10)}> <{_S}author> <{_PERSON.format(1)}> .",
    f"<{_PUB.format(10)}> <{_S}author> <{_PERSON.format(2)}> .",
    f"<{_PUB.format(11)}> <{_S}author> <{_PERSON.format(3)}> .",
    f"<{_PUB.format(10)}> <{_S}author> <{_PERSON.format(1)}> .",  # a duplicate: one edge
    "# a comment, then a blank line",
    "",
    f'<{_PUB.format(11)}> <{_S}year> "2004"^^<{XSD}gYear> .',
    f'<{_PUB.format(10)}> <{_S}year> "2004" .',  # the same _Literal entity as the gYear
    f'<{_PUB.format(10)}> <{_S}title> "Graphs \\u00e9t al" .',
    f'<{_PUB.format(10)}> <{_S}title> "Graphs"@en .',
    f'<{_PUB.format(11)}> <{_S}pages> "12"^^<{XSD}integer> .',
    f'<{_PUB.format(11)}> <{_S}pages>\t"012"^^<{XSD}integer> .',  # normalised to 12: the same triple
    f'<{_PUB.format(11)}> <{_S}pages> "9"^^<{XSD}integer> .',  # 9 sorts before 12
    f"<{_PERSON.format(1)}> <{_S}affiliation> <{_GROUP.format(30)}> .",  # dropped: the label
    f"<{_GROUP.format(30)}> <{_S}employs> <{_PERSON.format(1)}> .",  # dropped
    f"<{_PERSON.format(1)}> <{RDF_TYPE}> <{_A}Klassen/viewKlasseOWL/id40instance> .",  # type -> rdftype
    f"<{_PERSON.format(1)}> <{RDF_TYPE}> <{_S}Employee> .",  # object outside the prefix: dropped
    f"<{_PROJECT.format(20)}> <{_S}member> <{_PERSON.format(2)}> .",
    f"<{_PROJECT.format(20)}> <{_S}member> <{_PERSON.format(4)}> .",
    f"<{_PERSON.format(4)}> <{_S}publication> <{_PUB.format(11)}> .",
    f'<{_PERSON.format(3)}> <http://xmlns.com/foaf/0.1/name> "Carol" .',
    f"_:b1 <{_S}author> <{_PERSON.format(1)}> .",  # blank node: dropped
    f"<{_PERSON.format(2)}> <{_S}worksAtProject> <{_PROJECT.format(20)}> .",
]
_AIFB_HEAD = "person\tid\tlabel_affiliation"
_AIFB_TRAIN = [f"{_PERSON.format(1)}\t1\t{_GROUP.format(30)}", f"{_PERSON.format(2)}\t2\t{_GROUP.format(31)}"]
_AIFB_TRAIN.append(f"{_PERSON.format(5)}\t5\t{_GROUP.format(30)}")  # no links: left out
_AIFB_TEST = [f"{_PERSON.format(3)}\t3\t{_GROUP.format(31)}", f"{_PERSON.format(4)}\t4\t{_GROUP.format(32)}"]

_C = "http://dl-learner.org/carcinogenesis#"
_MUTAG = [
    f"<{_C}d1> <{_C}hasBond> <{_C}bond1> .",
    f"<{_C}d1> <{_C}hasAtom> <{_C}d1_1> .",
    f"<{_C}bond1> <{_C}inBond> <{_C}d1_1> .",
    f'<{_C}d1> <{_C}isMutagenic> "true"^^<{XSD}boolean> .',  # dropped: the label
    f"<{_C}d2> <{_C}hasBond> <{_C}bond2> .",
    f'<{_C}d1_1> <{_C}charge> "-0.117"^^<{XSD}double> .',
    f'<{_C}d1_1> <{_C}charge> "1.0E0"^^<{XSD}double> .',  # normalised to 1.0
    f'<{_C}d1> <{_C}amesTestPositive> "1"^^<{XSD}boolean> .',  # normalised to true
    f"<{_C}d1_1> <{RDF_TYPE}> <{_C}Carbon-22> .",  # another namespace: the object becomes SCHEMA
    f"<{_C}Carbon-22> <http://www.w3.org/2000/01/rdf-schema#subClassOf> <{_C}Carbon> .",  # both SCHEMA
    f"<{_C}bond2> <{_C}hasStructure> <{_C}ring5> .",  # an object of no class takes the relation's name
    f"<{_C}d2> <{_C}hasStructure> _:ring .",  # blank node: dropped
]
_MUTAG_HEAD = "bond\tid\tlabel_mutagenic"
_MUTAG_TRAIN = [f"{_C}d1\t1\t1", f"{_C}d9\t9\t0"]  # d9 has no links
_MUTAG_TEST = [f"{_C}d2\t2\t0"]

_B = "http://data.bgs.ac.uk/"
_ROCK = _B + "id/Lexicon/NamedRockUnit/{}"
_BGS = [
    f"<{_ROCK.format('ABC')}> <{_B}ref/Lexicon/hasDominantLithology> <{_B}id/EarthMaterialClass/RockName/SDST> .",
    f"<{_ROCK.format('DEF')}> <{_B}ref/Lexicon/hasDominantLithology> <{_B}id/EarthMaterialClass/RockName/SDST> .",
    f"<{_ROCK.format('DEF')}> <{_B}ref/Lexicon/hasLithogenesis> <{_B}id/Lexicon/Lithogenesis/FLUV> .",  # dropped
    f'<{_ROCK.format("ABC")}> <http://www.w3.org/2000/01/rdf-schema#label> "Abc" .',  # literal: dropped
    f"<{_ROCK.format('GHI')}> <http://www.w3.org/2004/02/skos/core#broader> <{_ROCK.format('ABC')}> .",
    f"<{_ROCK.format('ABC')}> <{_B}ref/Lexicon/hasStatus> <{_B}ref/CurrentStatus/C> .",  # status: dropped
    f"<{_ROCK.format('ABC')}> <{_B}ref/short> <{_ROCK.format('DEF')}> .",  # a relation of 5 parts: dropped
    f"<{_ROCK.format('GHI')}> <{_B}ref/Lexicon/hasRank> <{_B}ref/RockUnitRank/FM> .",  # 6 parts: dropped
]
_BGS_HEAD = "rock_id\trock\tlabel_lithogenesis"
_BGS_TRAIN = [f"0\t{_ROCK.format('ABC')}\tFLUV", f"1\t{_ROCK.format('DEF')}\tGLACI"]
_BGS_TEST = [f"2\t{_ROCK.format('GHI')}\tFLUV"]

_P = "http://purl.org/collections/nl/am/"
_AM = [
    f"<{_P}proxy-1> <{_P}aggregatedCHO> <{_P}aggr-1> .",
    f"<{_P}proxy-1> <{_P}objectCategory> <{_P}t-5> .",  # dropped: the label
    f"<{_P}proxy-2> <{_P}material> <{_P}t-6> .",  # dropped
    f"<{_P}proxy-1> <{_P}maker> _:m1 .",
    f'_:m1 <{_P}name> "Rembrandt" .',  # literal: dropped
    f"_:m1 <{_P}birthPlace> <{_P}t-7> .",
    f"<{_P}proxy-2> <{RDF_TYPE}> <{_P}ProxyType> .",  # an id without '-': class TYPE
    f"<{_P}proxy-2> <{_P}related> <{_P}a-b-c> .",  # two '-': class TYPE too
    f"<{_P}proxy-3> <{_P}aggregatedCHO> <{_P}aggr-3> .",
    f"<{_P}aggr-3> <{_P}related> <{_P}proxy-2> .",
]
_AM_HEAD = "proxy\tid\tlabel_cateogory"
_AM_TRAIN = [f"{_P}proxy-1\t1\tpainting", f"{_P}proxy-2\t2\tprint"]
_AM_TEST = [f"{_P}proxy-3\t3\tpainting"]

ARCHIVES = {
    "aifb": ("aifbfixed_complete.n3", _AIFB, _AIFB_HEAD, _AIFB_TRAIN, _AIFB_TEST),
    "mutag": ("mutag_stripped.nt", _MUTAG, _MUTAG_HEAD, _MUTAG_TRAIN, _MUTAG_TEST),
    "bgs": ("bgs_stripped.nt", _BGS, _BGS_HEAD, _BGS_TRAIN, _BGS_TEST),
    "am": ("am_stripped.nt", _AM, _AM_HEAD, _AM_TRAIN, _AM_TEST),
}


def archive_bytes(name: str, triples=None) -> bytes:
    """The ``<name>-hetero.zip`` of ``ARCHIVES[name]`` (``triples``: other N-Triples lines instead)."""
    graph_file, lines, head, train, test = ARCHIVES[name]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr(graph_file, "\n".join(lines if triples is None else triples) + "\n")
        for split, rows in (("trainingSet.tsv", train), ("testSet.tsv", test), ("completeDataset.tsv", train + test)):
            z.writestr(split, "\n".join([head, *rows]) + "\n")
    return out.getvalue()


def _dgl_builds(out: Path) -> dict:
    """What DGL's classes build from the archives (run in DGL's interpreter)."""
    import shutil

    import dgl.data.dgl_dataset
    from dgl.data import AIFBDataset, AMDataset, BGSDataset, MUTAGDataset

    classes = {"aifb": AIFBDataset, "mutag": MUTAGDataset, "bgs": BGSDataset, "am": AMDataset}
    results = {}
    for name, cls in classes.items():
        (out / f"{name}-hetero.zip").write_bytes(archive_bytes(name))
        dgl.data.dgl_dataset.download = lambda url, path, name=name, **kw: shutil.copy(out / f"{name}-hetero.zip", path)
        ds = cls(raw_dir=str(out / "dgl"), verbose=False, force_reload=True)
        g, cat = ds[0], ds.predict_category
        results[name] = {
            "predict_category": cat,
            "num_classes": ds.num_classes,
            "ntypes": g.ntypes,
            "num_nodes": {t: g.num_nodes(t) for t in g.ntypes},
            "node_ids": {t: g.nodes[t].data["_ID"].tolist() for t in g.ntypes},
            "edges": {
                "|".join(c): [*(x.tolist() for x in g.edges(etype=c)), g.edges[c].data["_ID"].tolist()]
                for c in g.canonical_etypes
            },
            "category": {k: v.tolist() for k, v in g.nodes[cat].data.items() if k != "_ID"},
            "dtypes": {k: str(v.dtype) for k, v in g.nodes[cat].data.items()},
        }
    return results


if __name__ == "__main__":
    print(json.dumps(_dgl_builds(Path(sys.argv[1])), sort_keys=True))

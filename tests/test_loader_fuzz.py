"""Fuzz of every binary graph format (DGL, gnnc npz, PyG torch.save, Planetoid pickles): truncations, bit
flips and huge values written over 8-byte fields of a small valid file, a fixed seed and count. Every file
is loaded in one child process under RLIMIT_AS (1 GiB above its size after imports): no case may hang, crash
or allocate past that bound; each either loads (a flipped bit inside data that keeps the structure valid
cannot be detected in formats without a checksum) or is refused with a ValueError naming the file."""

import random
import shutil
import struct

import pytest

from .hostile_files import (
    load_in_child,
    write_dgl,
    write_npz,
    write_planetoid,
    write_pyg,
)

SEED, CUTS, FLIPS, HUGE = 41, 12, 36, 16
HUGE_VALUES = (1 << 62, 1 << 40, 1 << 31, 1 << 28, (1 << 64) - 1)


def mutations(data: bytes, rng: random.Random):
    """(name, bytes) of every mutation of ``data``."""
    for i in range(CUTS):
        cut = len(data) * i // CUTS
        yield f"cut{cut}", data[:cut]
    for _ in range(FLIPS):
        at, bit = rng.randrange(len(data)), rng.randrange(8)
        flipped = bytearray(data)
        flipped[at] ^= 1 << bit
        yield f"flip{at}.{bit}", bytes(flipped)
    for _ in range(HUGE):
        at = rng.randrange(0, len(data) - 8) & ~7
        huge = bytearray(data)
        huge[at : at + 8] = struct.pack("<Q", rng.choice(HUGE_VALUES))
        yield f"huge{at}", bytes(huge)


def single_file_cases(kind, original, folder, rng):
    folder.mkdir()
    cases = []
    for i, (name, data) in enumerate(mutations(original.read_bytes(), rng)):
        path = folder / f"{i:03d}-{name}{original.suffix}"
        path.write_bytes(data)
        cases.append((kind, path))
    return cases


def planetoid_cases(root, folder, rng):
    cases = []
    for key in ("allx", "graph"):
        original = (root / f"ind.toy.{key}").read_bytes()
        for i, (name, data) in enumerate(mutations(original, rng)):
            case = folder / f"{key}{i:03d}-{name}"
            shutil.copytree(root, case)
            (case / f"ind.toy.{key}").write_bytes(data)
            cases.append(("planetoid", case / "toy.x"))
    return cases


@pytest.fixture(scope="module")
def fuzz_report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    rng = random.Random(SEED)
    cases = (
        single_file_cases("dgl", write_dgl(tmp / "g.bin", ("coo", "csr", "csc")), tmp / "dgl", rng)
        + single_file_cases("npz", write_npz(tmp / "g.npz"), tmp / "npz", rng)
        + single_file_cases("pyg", write_pyg(tmp / "g.pt"), tmp / "pyg", rng)
        + planetoid_cases(write_planetoid(tmp / "toy"), tmp / "planetoid", rng)
    )
    report = load_in_child(cases, headroom=1 << 30, timeout=240)
    return [(kind, path, r) for (kind, path), r in zip(cases, report["cases"])]


@pytest.mark.parametrize("kind", ["dgl", "npz", "pyg", "planetoid"])
def test_every_mutation_loads_or_is_refused_with_a_value_error_naming_the_file(fuzz_report, kind):
    results = [(path, r) for k, path, r in fuzz_report if k == kind]
    assert len(results) == (CUTS + FLIPS + HUGE) * (2 if kind == "planetoid" else 1)
    crashes = [(path.name, r["outcome"]) for path, r in results if r["outcome"].startswith("CRASH")]
    assert not crashes, crashes
    unnamed = [
        (path, r["outcome"])
        for path, r in results
        if r["outcome"].startswith("ValueError")
        and str(path.parent if kind == "planetoid" else path) not in r["outcome"]
    ]
    assert not unnamed, unnamed
    assert max(r["seconds"] for _, r in results) < 5
    refused = sum(r["outcome"] != "loaded" for _, r in results)
    cuts = [r for path, r in results if "-cut" in path.name or "-cut" in path.parent.name]
    assert all(r["outcome"] != "loaded" for r in cuts)  # no prefix of a file is a whole file
    print(f"{kind}: {len(results)} mutations, {refused} refused, {len(results) - refused} loaded")

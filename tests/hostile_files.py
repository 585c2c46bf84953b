"""Small valid graph files of every binary format, their hostile variants, and a child-process runner that
loads files under ``RLIMIT_AS`` and reports each outcome and its peak RSS (for test_loader_limits and
test_loader_fuzz)."""

import json
import pickle
import struct
import subprocess
import sys

import numpy as np
import scipy.sparse
import torch

import gnnc
from gnnc.data import save_npz
from gnnc.data.dgl_files import CSR_MAGIC, write_dgl_graphs

PLANETOID_KEYS = ("x", "y", "tx", "ty", "allx", "ally", "graph")


def small_graph():
    g = gnnc.heterograph(
        {("user", "follows", "user"): ([0, 1, 2], [1, 2, 0]), ("user", "buys", "item"): ([0, 2], [1, 0])}
    )
    g.nodes["user"].data["h"] = torch.arange(6, dtype=torch.float32).reshape(3, 2)
    g.edges["buys"].data["w"] = torch.tensor([0.5, 2.0])
    return g


def write_dgl(path, formats=("csr",)):
    write_dgl_graphs(path, [small_graph()], {"y": torch.tensor([1])}, formats=formats)
    return path


def write_npz(path):
    save_npz(small_graph(), path)
    return path


def write_pyg(path):
    from torch_geometric.data import Data

    torch.save(
        Data(x=torch.randn(4, 3), y=torch.tensor([0, 1, 1, 0]), edge_index=torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])),
        path,
    )
    return path


def write_planetoid(root, name="toy", allx=None):
    """A 512-node Planetoid set: 4 training rows, 506 more in allx (500 validate), 2 test nodes; ``allx``
    replaces that matrix."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    feats = scipy.sparse.csr_matrix((rng.random((512, 5)) > 0.6).astype(np.float32))
    onehot = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 512)]
    parts = {
        "x": feats[:4],
        "y": onehot[:4],
        "allx": feats[:510] if allx is None else allx,
        "ally": onehot[:510],
        "tx": feats[510:],
        "ty": onehot[510:],
        "graph": {i: [(i + 1) % 512, (i + 5) % 512] for i in range(512)},
    }
    for key in PLANETOID_KEYS:
        (root / f"ind.{name}.{key}").write_bytes(pickle.dumps(parts[key], protocol=4))
    (root / f"ind.{name}.test.index").write_text("511\n510\n")
    return root


def dgl_with_indptr_end(path, end):
    """``write_dgl``'s file with the first relation's CSR indptr made [0, end, .., end] (a 4.8 KB file
    declaring ``end`` edges)."""
    data = bytearray(write_dgl(path).read_bytes())
    at = -1
    for _ in range(3):  # the metagraph's CSR, the relation's own metagraph, then the relation
        at = data.index(struct.pack("<Q", CSR_MAGIC), at + 1)
    shape = at + 8 + 16 + 8 + 8 + 8 + 8  # magic, cols/rows, ndarray magic, reserved, ctx, ndim/type/bits/lanes
    count = struct.unpack_from("<q", data, shape)[0]
    struct.pack_into(f"<{count}q", data, shape + 16, 0, *[end] * (count - 1))
    path.write_bytes(bytes(data))
    return path


CHILD = r"""
import json, resource, sys, time
from pathlib import Path
import gnnc.data as D
from gnnc.data import dgl_files, ogb_raw, planetoid

def load(kind, path):
    if kind == "dgl":
        return D.load_dgl_graphs(path)
    if kind == "npz":
        return D.load_npz(path)
    if kind == "pyg":
        return D.load_pyg_file(path)
    if kind == "ogb":
        return D.load_ogbn(path)
    return D.load_planetoid(Path(path).name.split(".")[0], Path(path).parent)

def status(field):  # bytes; VmHWM is this process's own peak (ru_maxrss keeps the parent's across exec)
    return int(next(l for l in open("/proc/self/status") if l.startswith(field + ":")).split()[1]) * 1024

vm = status("VmSize")
resource.setrlimit(resource.RLIMIT_AS, (vm + int(sys.argv[1]), resource.RLIM_INFINITY))
cases = json.loads(sys.argv[2])
if any(kind == "pyg" for kind, _ in cases):
    import torch_geometric.data  # its import is not a load's time
after_imports = status("VmHWM")
out = []
for kind, path in cases:
    start = time.perf_counter()
    try:
        load(kind, path)
        outcome = "loaded"
    except ValueError as err:
        outcome = "ValueError: " + str(err)[:300]
    except BaseException as err:
        outcome = f"CRASH {type(err).__name__}: {str(err)[:300]}"
    out.append({"outcome": outcome, "seconds": time.perf_counter() - start})
print(json.dumps({"cases": out, "peak_rss": status("VmHWM"), "peak_rss_after_imports": after_imports}))
"""


def load_in_child(cases, headroom=1 << 30, timeout=120):
    """Load ``cases`` ([(kind, path)]) in one child whose address space may grow by ``headroom`` bytes past
    its size after imports; returns {"cases": [{"outcome", "seconds"}], "peak_rss", "peak_rss_after_imports"}
    (bytes, the child's own VmHWM)."""
    cases = [(kind, str(path)) for kind, path in cases]
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(headroom), json.dumps(cases)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode:
        raise AssertionError(f"the loader child died ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])

"""The GPU path outside the kernels: ``g.to(device)`` leaves nothing on the old device, ``gnnc explain``
names the backend and the device it was asked for; on a GPU, compiled models on ``g.to("cuda")`` equal
the CPU's, on the triton backend."""

import os
import subprocess
import sys

import pytest
import torch

import gnnc
from gnnc.compiler.driver import recording
from gnnc.graph.frame import Deferred
from gnnc.ir.context import graph_context
from gnnc.models import GATConv, RGCNConv

from .graphs import random_heterograph

GPU = torch.cuda.is_available()


def reachable_tensors(root) -> list[tuple[str, torch.Tensor]]:
    """Every tensor reachable from ``root`` through gnnc objects' attributes, dicts, lists and tuples,
    with the path it was found at."""
    found, seen, todo = [], set(), [("g", root)]
    while todo:
        path, obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            found.append((path, obj))
        elif isinstance(obj, dict):
            todo += [(f"{path}[{k!r}]", v) for k, v in obj.items()]
        elif isinstance(obj, (list, tuple)):
            todo += [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
        elif type(obj).__module__.startswith("gnnc.") and hasattr(obj, "__dict__"):
            todo += [(f"{path}.{k}", v) for k, v in vars(obj).items()]
    return found


def _graph_with_every_cache():
    """A heterograph with node, edge and type data, an edge result not yet in user order, and every structure
    cache built: CSR by destination and source, type pointers, degree buckets, the compiled calls' contexts."""
    g = random_heterograph(seed=2)
    gen = torch.Generator().manual_seed(0)
    g.ndata_all["x"] = torch.randn(g.num_nodes(), 6, generator=gen)
    g.edata_all["w"] = torch.rand(g.num_edges(), 1, generator=gen)
    g.ntype_data["scale"] = torch.rand(len(g.ntypes), 6, generator=gen)
    gnnc.compile(RGCNConv(6, 4, len(g.etypes)))(g, g.ndata_all["x"])
    g.ndata_all["z"] = torch.randn(g.num_nodes(), 2, 3, generator=gen)
    with gnnc.message_passing.compiling({"backend": "torch"}):
        g.apply_edges(lambda e: {"e": e.src["z"] + e.dst["z"]})
    assert isinstance(g._estore.peek_whole("e"), Deferred)  # kept in internal edge order until read
    index = g.index
    _ = index.in_csr, index.out_csr, index.node_type, index.edge_rel, index.internal_eid
    index.degree_buckets(None)
    index.degree_buckets(0)
    for rel in (None, 0, 1):
        ctx = graph_context(g, rel)
        _ = ctx.dst_local, ctx.edge_rel, ctx.src_type, ctx.dst_type, ctx.in_degrees, ctx.has_in_edges
        _ = ctx.src_pairs, ctx.dst_pairs, ctx.dst_pair_edges  # compact materialization's pair tables
    return g


def test_to_leaves_no_tensor_on_the_old_device():
    g = _graph_with_every_cache()
    before = reachable_tensors(g)
    assert len(before) > 40 and any("g._contexts" in path and "pairs" in path for path, _ in before)
    moved = g.to("meta")  # any other device: caches are copied there or rebuilt there, never shared
    left = [path for path, t in reachable_tensors(moved) if not t.is_meta]
    assert not left, f"left on the CPU after g.to('meta'): {left}"
    assert moved.device.type == "meta" and set(moved.ndata_all.keys()) == {"x", "z"}
    assert set(moved.edata_all.keys()) == {"w", "e"} and moved.ntype_data["scale"].is_meta  # deferred: materialized
    assert all(t.device.type == "cpu" for _, t in reachable_tensors(g))  # the original is untouched
    assert g.to("cpu").index is g.index  # same device: the structure and its caches are shared


def test_explain_cli_names_the_backend_it_runs():
    """``--backend triton`` on the CPU runs the Triton plan under the interpreter and says so per call."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "gnnc.cli", "explain", "--model", "gcn", "--backend", "triton"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    calls = [line for line in run.stdout.splitlines() if line.startswith("== call")]
    assert calls and all(line.endswith("[backend triton]") for line in calls), calls


def test_explain_cli_without_a_gpu_says_so_in_one_line(monkeypatch, capsys):
    from gnnc.cli import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["explain", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert (
        err == f"gnnc explain: error: --device cuda needs an NVIDIA GPU, but torch.cuda.is_available() is "
        f"False here (torch {torch.__version__})\n"
    )
    assert main(["explain", "--model", "gcn", "--backend", "torch"]) == 0
    assert "[backend torch]" in capsys.readouterr().out


@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")
def test_compiled_models_on_a_graph_moved_to_cuda_equal_the_cpu_on_triton():
    g = _graph_with_every_cache()
    x = g.ndata_all["x"]  # the whole graph's rows (g.ndata is DGL's dict per node type on a heterograph)
    for layer in (GATConv(6, 4, num_heads=2), RGCNConv(6, 4, len(g.etypes))):
        want = layer(g, x)
        gpu = g.to("cuda")
        with recording() as plans:
            got = gnnc.compile(layer.to("cuda"))(gpu, x.to("cuda"))
        assert plans and all(p.backend == "triton" for p in plans)
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
        left = [path for path, t in reachable_tensors(gpu) if t.device.type != "cuda"]
        assert not left, f"left on the CPU after g.to('cuda') and a compiled call: {left}"
        assert gpu.to("cuda").index is gpu.index  # "cuda" is the GPU it is on: caches kept
        layer.to("cpu")

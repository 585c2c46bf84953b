"""Build (once) the peer environment the benchmark's DGL systems run in: ``python bench/peer_env.py [PATH]``.

DGL's last wheels on PyPI for this Python (3.11) are dgl 2.1.0, built for
torch 2.0-2.2, while gnnc needs a far newer torch; so the ``dgl`` and
``dgl-udf`` systems run in their own interpreter, a virtual environment made
here with:

  torch 2.2.1     PyPI's only Linux x86-64 build of it is the CUDA 12.1 one,
                  which pulls NVIDIA's runtime libraries (cuBLAS, cuDNN, ...)
                  and triton: about 2.5 GB downloaded, 4.5 GB installed; no GPU
                  is used (PyPI has no CPU-only torch 2.1-2.3 for Linux)
  dgl 2.1.0       installed without its dependencies (so nothing can swap the
                  torch above), then those ``import dgl`` needs: numpy<2 (torch
                  2.2 and DGL 2.1 are built against numpy 1.x), scipy<1.14 (the
                  last for numpy 1.x), networkx, psutil, tqdm, requests, and
                  for dgl.graphbolt (dgl.distributed imports it on ``import
                  dgl``) torchdata 0.7.1 (torch>=2, the last with datapipes),
                  pandas<2.3, pyyaml, pydantic

The environment goes to PATH, else ``$GNNC_PEER_ENV``, else
``~/.cache/gnnc/peer-venv``; the harness looks in the same places
(``harness/peer.py``). A build ends by importing DGL under the new
interpreter and writing ``gnnc-peer.json`` (versions) in the environment:
the harness takes an environment without that file as not built. Building
again over an existing environment re-runs pip (quick once cached).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import venv
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.peer import STAMP, default_env_path  # needs the path above

TORCH = "torch==2.2.1"
DGL = "dgl==2.1.0"
DGL_DEPS = [
    "numpy<2",
    "scipy<1.14",
    "networkx",
    "psutil",
    "tqdm",
    "requests",
    "torchdata==0.7.1",
    "pandas<2.3",
    "pyyaml",
    "pydantic",
]


def _run(cmd: list[str]) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def build(path: Path) -> dict:
    """Create or update the environment at ``path``; its stamp (versions, build seconds)."""
    start = time.monotonic()
    python = path / "bin" / "python"
    if not python.exists():
        venv.EnvBuilder(with_pip=True).create(path)
    pip = [str(python), "-m", "pip", "install", "--no-input"]
    _run([*pip, TORCH, *DGL_DEPS])
    _run([*pip, "--no-deps", DGL])
    probe = (
        "import json, dgl, numpy, torch; print(json.dumps({'dgl': dgl.__version__, 'torch': torch.__version__, "
        "'numpy': numpy.__version__, 'python': '%d.%d.%d' % __import__('sys').version_info[:3]}))"
    )
    found = json.loads(
        subprocess.run(
            [str(python), "-c", probe],
            check=True,
            capture_output=True,
            text=True,
            env={"DGLBACKEND": "pytorch", "PATH": "/usr/bin:/bin"},
        ).stdout
    )
    stamp = {**found, "build_s": round(time.monotonic() - start, 1), "packages": [TORCH, DGL, *DGL_DEPS]}
    (path / STAMP).write_text(json.dumps(stamp, indent=1))
    return stamp


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "path",
        nargs="?",
        type=Path,
        help="where the environment goes (default: $GNNC_PEER_ENV, else ~/.cache/gnnc/peer-venv)",
    )
    args = parser.parse_args(argv)
    path = (args.path or default_env_path()).expanduser().resolve()
    stamp = build(path)
    print(f"peer environment ready at {path}: {json.dumps(stamp)}")
    if args.path and args.path.resolve() != default_env_path().resolve():
        print(f"the harness finds it with GNNC_PEER_ENV={path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

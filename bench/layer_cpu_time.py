"""CPU time of one reference layer's steady calls, compiled, on one thread: a measure that holds on a
machine shared with other jobs, where the harness's wall-clock medians (``run.py``) do not.

Builds the layer and inputs as ``bench/run.py`` does (``harness.models``, ``harness.datasets``), runs
``--warmup`` untimed calls, then ``--runs`` timed ones, and prints the median process CPU time per call
(``time.process_time``: only time this process was on a core) for inference (no grad) and training
(forward, backward of the sum of the output). Run it once per commit with that commit's ``src`` on
``PYTHONPATH`` to compare them.

    PYTHONPATH=src python bench/layer_cpu_time.py --model gmm --datasets cora pubmed
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gnnc  # noqa: E402
from harness.datasets import default_data_root, load  # noqa: E402 - needs the path above
from harness.models import MODELS  # noqa: E402


def _median_cpu_ms(call, warmup: int, runs: int) -> float:
    for _ in range(warmup):
        call()
    times = []
    for _ in range(runs):
        start = time.process_time()
        call()
        times.append((time.process_time() - start) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gmm", choices=sorted(MODELS))
    parser.add_argument("--datasets", nargs="+", default=["cora", "pubmed"])
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)
    spec = MODELS[args.model]
    rows = []
    for name in args.datasets:
        data = load(name, False, 0, default_data_root())
        torch.manual_seed(0)
        layer = gnnc.compile(spec.build(data))
        inputs = spec.inputs(data)

        def infer():
            with torch.no_grad():
                layer(data.graph, data.x, *inputs)

        def train():
            layer.zero_grad(set_to_none=True)
            layer(data.graph, data.x, *inputs).sum().backward()

        for mode, call in (("inference", infer), ("training", train)):
            ms = _median_cpu_ms(call, args.warmup, args.runs)
            rows.append({"model": args.model, "dataset": name, "mode": mode, "cpu_ms": round(ms, 2)})
            print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()

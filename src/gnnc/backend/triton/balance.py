"""Vertex- or edge-balanced: which kernel runs a sum / mean aggregation over a CSR, by a cost rule on the
degree statistics of the CSR structure (computed once per structure, cached with it).

The two kernels (``aggregate``): vertex-balanced gives each program a block of ``bv`` rows, walked in
step up to the block's longest row; edge-balanced gives each program ``bv * SPAN`` consecutive CSR
entries, each of its ``bv`` lanes ``SPAN`` of them, adding a row's messages up in registers and into
the row with an atomic add where the row ends (or the lane's entries do). Counted in steps of one
program (one entry per lane, across the feature tile), with ``C`` programs running at once:

    vertex ~ max(P / (bv * C), D)          P: sum over blocks of bv * the block's longest row
    edge   ~ EDGE_COST * max(E / (bv * C), SPAN)   D: the longest row; E: the entries

The vertex kernel walks the padding P (rows of a block pad to its longest) and cannot finish before its
longest row's program (D steps in sequence); the edge kernel walks E exactly, in SPAN-step programs,
paying EDGE_COST = 2 per step for the row id it also loads and the atomic it issues each step (masked
but where a row ends). Edge-balanced is picked where it is cheaper: padding waste P > 2E, or a row
longer than 2 * max(E / (bv * C), SPAN), one whose program would still run when the rest is done (a
hub among many rows). Ties go to the vertex kernel, which is deterministic. ``C`` is the multiprocessor
count times ``PROGRAMS_PER_SM`` on CUDA, 1 under the interpreter (programs run one after another, so
only the padding counts). EDGE_COST and PROGRAMS_PER_SM are estimates from the kernels' instruction
counts and Triton's default 4 warps per program, not measurements: no GPU was lent when this was
written; calibrate them with a CUDA benchmark.

Determinism: atomic float adds make a row's sum depend on the order its partial sums arrive in, for
rows whose entries span several lanes (only those): edge-balanced results can differ run to run in the
last bits. Max / min and the softmax kernels stay vertex-balanced: they need per-row state across all of
a row's entries (the running extremum with its arg edge, the online max and rescaled denominator), which
atomics cannot merge in one pass.
"""

from __future__ import annotations

import weakref

import torch

from ..pytorch.csr import CsrStructure

# "auto" (the rule above), or "vertex" / "edge" to force one variant (tests, benchmarks).
BALANCE = "auto"
# CSR entries one lane of the edge-balanced kernel adds up in sequence.
SPAN = 32
# Cost of one edge-balanced step relative to a vertex-balanced one (see the module docstring).
EDGE_COST = 2.0
# Programs resident per CUDA multiprocessor (estimate: 4 warps each).
PROGRAMS_PER_SM = 8


class _Profile:
    """Degree statistics of one CSR structure: the row lengths, the padded work per block height, the row
    of each entry (built when first asked for)."""

    def __init__(self, structure: CsrStructure):
        self.degrees = structure.crow.diff()
        self.longest = int(self.degrees.max()) if self.degrees.numel() else 0
        self.padded: dict[int, int] = {}
        self.rows: torch.Tensor | None = None


# id(structure) -> (weak reference to it, its profile); an entry leaves with its structure
_profiles: dict[int, tuple[weakref.ref, _Profile]] = {}


def _profile(structure: CsrStructure) -> _Profile:
    key = id(structure)
    entry = _profiles.get(key)
    if entry is None or entry[0]() is not structure:
        entry = (weakref.ref(structure, lambda _, key=key: _profiles.pop(key, None)), _Profile(structure))
        _profiles[key] = entry
    return entry[1]


def padded_work(structure: CsrStructure, block_rows: int) -> int:
    """P: the entries the vertex-balanced kernel walks in blocks of ``block_rows`` rows, the sum over blocks
    of block_rows times the block's longest row (cached per structure and block height)."""
    prof = _profile(structure)
    if block_rows not in prof.padded:
        degrees = prof.degrees
        blocks = torch.nn.functional.pad(degrees, (0, -degrees.numel() % block_rows)).view(-1, block_rows)
        prof.padded[block_rows] = int(blocks.amax(1).sum()) * block_rows if blocks.numel() else 0
    return prof.padded[block_rows]


def concurrent_programs(device: torch.device) -> int:
    """C: programs running at once on ``device`` (1 for CPU tensors, run by the interpreter)."""
    if device.type != "cuda":
        return 1
    return torch.cuda.get_device_properties(device).multi_processor_count * PROGRAMS_PER_SM


def edge_balanced(structure: CsrStructure, block_rows: int, programs: int | None = None) -> bool:
    """Whether a sum / mean over ``structure`` runs edge-balanced: ``BALANCE`` when forced, else the rule
    of the module docstring with ``programs`` (C) at once (default: ``concurrent_programs``); never
    without entries."""
    num_edges = structure.col.numel()
    if num_edges == 0 or BALANCE != "auto":
        return num_edges > 0 and BALANCE == "edge"
    lanes = block_rows * (programs or concurrent_programs(structure.crow.device))
    vertex = max(padded_work(structure, block_rows) / lanes, _profile(structure).longest)
    return EDGE_COST * max(num_edges / lanes, SPAN) < vertex


def entry_rows(structure: CsrStructure) -> torch.Tensor:
    """[E] the row of each CSR entry, in CSR order (cached per structure)."""
    prof = _profile(structure)
    if prof.rows is None:
        degrees = prof.degrees
        prof.rows = torch.repeat_interleave(
            torch.arange(degrees.numel(), device=degrees.device), degrees, output_size=structure.col.numel()
        )
    return prof.rows

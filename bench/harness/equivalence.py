"""The equivalence gate: a system's outputs (and input gradients) against the eager oracle.

Both sides run on the same input: the dataset's features plus a 1% Gaussian
jitter, a generic point where max-aggregation has no ties (cora's binary
features tie, and at a tie the gradient is not unique). The compared outputs
(``Prepared.view``) must agree; with ``gradients`` so must ``d(sum(out * u))
/ dx`` for one fixed random upstream gradient ``u``. Elementwise tolerance:
``|a - b| <= rtol * (|b| + max|b|)``, so entries near zero are judged
against the tensor's scale rather than their own.

A jittered point can still hold a near-tie: two candidates of a max or min
within float32 rounding of each other (EdgeConv on the pubmed replica: two
messages 4 ulps apart). Two correct implementations that round differently
pick different winners there, so their outputs agree and their input
gradients do not. When only the gradients differ, ``recheck`` tries further
independent jitter points; a system with wrong gradients disagrees at all.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .case import Prepared

RTOL = 1e-4
JITTER = 0.01  # of the features' standard deviation
RETRY_POINTS = 2  # further jitter points when only the input gradients differ
RETRY_SEED_STEP = 1000  # jitter seed of retry k: seed + k * RETRY_SEED_STEP


def error_ratio(actual: torch.Tensor, expected: torch.Tensor, rtol: float = RTOL) -> float:
    """Worst ``|a - b| / tolerance`` over all entries (<= 1 passes); inf for a shape mismatch or NaN."""
    if actual.shape != expected.shape:
        return float("inf")
    if expected.numel() == 0:
        return 0.0
    actual, expected = actual.detach().double(), expected.detach().double()
    scale = expected.abs().max()
    tol = rtol * (expected.abs() + scale) + torch.finfo(torch.float32).tiny
    worst = ((actual - expected).abs() / tol).max()
    return float("inf") if torch.isnan(worst) else float(worst)


def check_input(x: torch.Tensor, seed: int) -> torch.Tensor:
    """``x`` plus the gate's jitter (seeded, drawn on the CPU: the same point on every device)."""
    noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed), dtype=x.dtype)
    return x + JITTER * x.std() * noise.to(x.device)


def upstream_gradient(shape, seed: int) -> torch.Tensor:
    """The fixed random upstream gradient of the check at jitter seed ``seed``."""
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed + 1))


def evaluate(p: Prepared, x: torch.Tensor, seed: int, gradients: bool, upstream: torch.Tensor | None = None):
    """``(compared output, input gradient or None)`` of ``p`` at ``x`` (already jittered), on the CPU
    whatever the device; the input gradient is that of ``sum(out * upstream)``, ``upstream`` by default
    ``upstream_gradient(out.shape, seed)`` (the peer interpreter is handed the one this torch made)."""
    if not gradients:
        with torch.no_grad():
            return p.view(p.call(x)).cpu(), None
    x = x.clone().requires_grad_(True)
    out = p.view(p.call(x))
    if upstream is None:
        upstream = upstream_gradient(out.shape, seed)
    (grad,) = torch.autograd.grad((out * upstream.to(out.device)).sum(), x, allow_unused=True)
    return out.detach().cpu(), (torch.zeros_like(x) if grad is None else grad).cpu()


def save_oracle(results: dict, path: Path) -> None:
    """Save the eager layer's ``{mode: evaluate(...)}`` for the checks of the other systems."""
    torch.save(results, path)


def load_oracle(path: Path) -> dict:
    """``{mode: (output, input gradient or None)}`` as ``save_oracle`` wrote it."""
    return torch.load(path, weights_only=True)


def compare(got, expected, rtol: float = RTOL) -> dict:
    """Verdict on two ``evaluate`` results:
    ``{"status": "ok" | "MISMATCH", "output_err": ratio, ["grad_err": ratio], "detail": ...}``."""
    (out, grad), (ref_out, ref_grad) = got, expected
    verdict = {"status": "ok", "output_err": error_ratio(out, ref_out, rtol), "detail": ""}
    if ref_grad is not None:
        verdict["grad_err"] = error_ratio(grad, ref_grad, rtol)
    if out.shape != ref_out.shape:
        verdict.update(status="MISMATCH", detail=f"output shape {tuple(out.shape)}, eager {tuple(ref_out.shape)}")
        return verdict
    worst = max(verdict["output_err"], verdict.get("grad_err", 0.0))
    if worst > 1:
        which = "outputs" if verdict["output_err"] > 1 else "input gradients"
        verdict.update(
            status="MISMATCH", detail=f"{which} differ beyond rtol {rtol:g} (worst error {worst:.3g}x tolerance)"
        )
    return verdict


def check(
    reference: Prepared, other: Prepared, x: torch.Tensor, seed: int = 0, gradients: bool = False, rtol: float = RTOL
) -> dict:
    """``compare`` of ``other`` against ``reference`` at the jittered ``x``."""
    x = check_input(x, seed)
    return compare(evaluate(other, x, seed, gradients), evaluate(reference, x, seed, gradients), rtol)


def only_gradients_differ(verdict: dict) -> bool:
    """Whether a verdict failed on its input gradients alone (outputs within tolerance)."""
    return verdict["status"] == "MISMATCH" and verdict["output_err"] <= 1 and verdict.get("grad_err", 0.0) > 1


def recheck(reference: Prepared, other: Prepared, x: torch.Tensor, seed: int, first: dict, rtol: float = RTOL) -> dict:
    """``first`` (a gradient check at jitter seed ``seed``), or, when only its input gradients differ,
    the first verdict that passes at up to ``RETRY_POINTS`` further jitter points (with
    ``jitter_seed`` and a detail naming the first failure); ``first`` if none passes."""
    return recheck_with(first, seed, lambda point: check(reference, other, x, point, gradients=True, rtol=rtol))


def retry_seeds(seed: int) -> list[int]:
    """The further jitter seeds ``recheck`` tries, in order."""
    return [seed + k * RETRY_SEED_STEP for k in range(1, RETRY_POINTS + 1)]


def recheck_with(first: dict, seed: int, check_at: Callable[[int], dict]) -> dict:
    """``recheck`` with the gradient check at a jitter seed given as ``check_at(seed) -> verdict``."""
    if not only_gradients_differ(first):
        return first
    for point in retry_seeds(seed):
        again = check_at(point)
        if again["status"] == "ok":
            return {
                **again,
                "jitter_seed": point,
                "detail": f"agreed at jitter seed {point}; at seed {seed} input gradients "
                f"{first['grad_err']:.3g}x tol, outputs agreeing: a near-tie of a max or min",
            }
    return {**first, "detail": f"{first['detail']}; also at {RETRY_POINTS} further jitter points"}

"""The equivalence gate: a system's outputs (and input gradients) against the eager oracle.

Both sides run on the same input: the dataset's features plus a 1% Gaussian
jitter, a generic point where max-aggregation has no ties (cora's binary
features tie, and at a tie the gradient is not unique). The compared outputs
(``Prepared.view``) must agree; with ``gradients`` so must ``d(sum(out * u))
/ dx`` for one fixed random upstream gradient ``u``. Elementwise tolerance:
``|a - b| <= rtol * (|b| + max|b|)``, so entries near zero are judged
against the tensor's scale rather than their own.
"""
from __future__ import annotations

import torch

from .case import Prepared

RTOL = 1e-4
JITTER = 0.01  # of the features' standard deviation


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
    """``x`` plus the gate's jitter (seeded)."""
    noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed), dtype=x.dtype)
    return x + JITTER * x.std() * noise


def evaluate(p: Prepared, x: torch.Tensor, seed: int, gradients: bool):
    """``(compared output, input gradient or None)`` of ``p`` at ``x`` (already jittered)."""
    if not gradients:
        with torch.no_grad():
            return p.view(p.call(x)), None
    x = x.clone().requires_grad_(True)
    out = p.view(p.call(x))
    upstream = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed + 1))
    (grad,) = torch.autograd.grad((out * upstream).sum(), x, allow_unused=True)
    return out.detach(), torch.zeros_like(x) if grad is None else grad


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
        verdict.update(status="MISMATCH", detail=f"{which} differ beyond rtol {rtol:g} "
                                                 f"(worst error {worst:.3g}x tolerance)")
    return verdict


def check(reference: Prepared, other: Prepared, x: torch.Tensor, seed: int = 0, gradients: bool = False,
          rtol: float = RTOL) -> dict:
    """``compare`` of ``other`` against ``reference`` at the jittered ``x``."""
    x = check_input(x, seed)
    return compare(evaluate(other, x, seed, gradients), evaluate(reference, x, seed, gradients), rtol)

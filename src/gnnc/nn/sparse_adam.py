"""Lazy Adam for embedding tables with sparse gradients, with per-row state.

Each parameter keeps ``exp_avg`` and ``exp_avg_sq`` of its own shape and an
int64 ``step`` per row. A step updates ONLY the rows present in the sparse
gradient: their step count goes up by one and they follow Adam exactly, with
bias corrections from their own step count. Rows not touched keep their value
and their state: their moments do not decay (lazy Adam semantics). A row
touched at every step therefore follows dense ``torch.optim.Adam`` exactly;
a row touched now and then follows Adam run on its own touching steps only.
Unlike ``torch.optim.SparseAdam``, whose bias correction uses one step count
per parameter, the correction here is per row, which is what lets a row's
state move between workers or caches on its own.
"""

from __future__ import annotations

import torch


class SparseAdam(torch.optim.Optimizer):
    """Adam over the touched rows of parameters with sparse (COO) gradients."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8):
        if not lr > 0.0:
            raise ValueError(f"SparseAdam: lr must be positive, got {lr}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"SparseAdam: betas must lie in [0, 1), got {betas}")
        if not eps >= 0.0:
            raise ValueError(f"SparseAdam: eps must be non-negative, got {eps}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps))
        # (beta1, beta2, device) -> float64 tables of 1 - beta1**k and sqrt(1 - beta2**k), k = 0, 1, ...
        self._corrections: dict = {}

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for i, p in enumerate(group["params"]):
                if p.grad is None:
                    continue
                if not p.grad.is_sparse:
                    raise TypeError(
                        f"SparseAdam: parameter {i} of a group has a dense gradient; use it for "
                        "embedding tables with sparse gradients (nn.Embedding(sparse=True)) "
                        "and torch.optim.Adam for the rest"
                    )
                self._update(p, p.grad.coalesce(), group)
        return loss

    def _update(self, p: torch.Tensor, grad: torch.Tensor, group: dict) -> None:
        rows, values = grad.indices()[0], grad.values()
        if rows.numel() == 0:
            return
        state = self.state[p]
        if not state:
            state["step"] = torch.zeros(p.shape[0], dtype=torch.int64, device=p.device)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        beta1, beta2 = group["betas"]
        step = state["step"].index_select(0, rows) + 1
        state["step"].index_copy_(0, rows, step)
        exp_avg = state["exp_avg"].index_select(0, rows).lerp_(values, 1 - beta1)
        exp_avg_sq = state["exp_avg_sq"].index_select(0, rows)
        exp_avg_sq.mul_(beta2).addcmul_(values, values, value=1 - beta2)
        state["exp_avg"].index_copy_(0, rows, exp_avg)
        state["exp_avg_sq"].index_copy_(0, rows, exp_avg_sq)
        # Same arithmetic as torch.optim.Adam's single-tensor path, with the
        # bias corrections looked up per row.
        shape = (-1,) + (1,) * (p.dim() - 1)
        bias_correction1, bias_correction2_sqrt = self._bias_corrections(beta1, beta2, step, p.device)
        # A true division: `lr / tensor` would multiply by a reciprocal and round differently.
        step_size = torch.full_like(bias_correction1, group["lr"]).div_(bias_correction1).to(p.dtype).view(shape)
        denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt.to(p.dtype).view(shape)).add_(group["eps"])
        p.index_copy_(0, rows, p.index_select(0, rows).addcdiv_(exp_avg * -step_size, denom))

    def _bias_corrections(self, beta1: float, beta2: float, step: torch.Tensor, device):
        """``1 - beta1**k`` and ``sqrt(1 - beta2**k)`` for each row's step ``k``.

        Computed once per step count with Python floats, exactly as Adam does,
        so a row touched at every step matches torch.optim.Adam bit for bit.
        """
        key = (beta1, beta2, str(device))
        bc1, bc2_sqrt = self._corrections.get(key, (None, None))
        needed = int(step.max()) + 1
        if bc1 is None or bc1.numel() < needed:
            size = max(needed, 2 * (0 if bc1 is None else bc1.numel()), 64)
            ks = [float(k) for k in range(size)]
            bc1 = torch.tensor([1 - beta1**k for k in ks], dtype=torch.float64, device=device)
            bc2_sqrt = torch.tensor([(1 - beta2**k) ** 0.5 for k in ks], dtype=torch.float64, device=device)
            self._corrections[key] = (bc1, bc2_sqrt)
        return bc1.index_select(0, step), bc2_sqrt.index_select(0, step)

"""AdamW as an optimiser whose step is the fused op `frontier::adamw_step` (`frontier.kernels.ops`).

Per parameter, with t the step count (from 1), lr from its group:
    p <- p (1 - lr wd);  m <- beta1 m + (1 - beta1) g;  v <- beta2 v + (1 - beta2) g^2
    p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
With the `reference` implementation this is `torch.optim.AdamW`'s single-tensor step, bit for bit, and the state
(`step`, `exp_avg`, `exp_avg_sq`) is laid out as torch's, so checkpoints of either load into the other.
"""

from __future__ import annotations

import torch

from ..kernels import ops


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, kernels: str = "reference"):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        self.kernels = kernels

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                ops.adamw_step(p, p.grad, state["exp_avg"], state["exp_avg_sq"], group["lr"], beta1, beta2,
                               group["eps"], group["weight_decay"], float(state["step"]), self.kernels)

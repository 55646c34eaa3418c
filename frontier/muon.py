"""Muon: momentum, then the update replaced by the nearest semi-orthogonal matrix (Newton-Schulz).

For each 2-D weight: buf = momentum * buf + (1 - momentum) * grad; the Nesterov direction
g = (1 - momentum) * grad + momentum * buf; the update is orthogonalise(g) scaled by sqrt(max(1, rows / cols)).
orthogonalise runs five Newton-Schulz iterations with the quintic coefficients (a, b, c) = (3.4445, -4.7750,
2.0315) on the Frobenius-normalised matrix (transposed when it is tall, so X X^T is the small Gram matrix).
"""

from __future__ import annotations

import torch

NS_COEFFS = (3.4445, -4.7750, 2.0315)


def newton_schulz(g: torch.Tensor, steps: int = 5, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """An approximation of U V^T for g = U S V^T (singular values pushed towards ~1)."""
    a, b, c = NS_COEFFS
    x = g.to(dtype)
    tall = x.size(-2) > x.size(-1)
    if tall:
        x = x.mT
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for _ in range(steps):
        gram = x @ x.mT
        poly = b * gram + c * (gram @ gram)
        x = a * x + poly @ x
    if tall:
        x = x.mT
    return x.to(g.dtype)


class Muon(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 0.02, momentum: float = 0.95, nesterov: bool = True,
                 ns_steps: int = 5, ns_dtype: torch.dtype = torch.float32):
        super().__init__(params, dict(lr=lr, momentum=momentum, nesterov=nesterov, ns_steps=ns_steps))
        self.ns_dtype = ns_dtype

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            mom = group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p)
                buf = state["momentum_buffer"]
                buf.lerp_(p.grad, 1 - mom)
                g = p.grad.lerp(buf, mom) if group["nesterov"] else buf
                update = newton_schulz(g, group["ns_steps"], self.ns_dtype)
                scale = max(1.0, p.size(-2) / p.size(-1)) ** 0.5
                p.add_(update, alpha=-group["lr"] * scale)

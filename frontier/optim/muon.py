"""Muon: momentum, then the update replaced by the nearest semi-orthogonal matrix (Newton-Schulz).

For each 2-D weight: buf = momentum * buf + (1 - momentum) * grad; the Nesterov direction
g = (1 - momentum) * grad + momentum * buf; the update is orthogonalise(g) scaled by sqrt(max(1, rows / cols)).
orthogonalise is the fused op `frontier::newton_schulz` (`frontier.kernels.ops`; its PyTorch reference is
`frontier.kernels.reference.newton_schulz`): five Newton-Schulz iterations with the quintic coefficients
(a, b, c) = (3.4445, -4.7750, 2.0315) on the Frobenius-normalised matrix (transposed when it is tall, so X X^T is
the small Gram matrix), in `ns_dtype`. Matrices of the same shape are orthogonalised together, as one batch; with
`compile_backend` the batched step around the op (stack, cast, op, cast back) is a compiled graph, one per shape.
With data parallelism, `shard` (`frontier.train.distributed.Dist.map_shards`) has each rank orthogonalise its share of
every batch and gathers the results; the momentum buffers are kept whole on every rank.
"""

from __future__ import annotations

from collections import defaultdict

import torch

from ..kernels import ops
from ..kernels.reference import NS_COEFFS


def newton_schulz(g: torch.Tensor, steps: int = 5, dtype: torch.dtype = torch.float32,
                  impl: str = "reference") -> torch.Tensor:
    """An approximation of U V^T for g = U S V^T (singular values pushed towards ~1), computed in `dtype`."""
    return ops.newton_schulz(g.to(dtype), steps, impl).to(g.dtype)


class Muon(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 0.02, momentum: float = 0.95, nesterov: bool = True,
                 ns_steps: int = 5, ns_dtype: torch.dtype = torch.float32, compile_backend: str | None = None,
                 kernels: str = "reference", shard=None):
        super().__init__(params, dict(lr=lr, momentum=momentum, nesterov=nesterov, ns_steps=ns_steps))
        self.ns_dtype, self.kernels = ns_dtype, kernels
        self.shard = shard  # None: this process orthogonalises every matrix
        self.orthogonalise = newton_schulz
        if compile_backend is not None:
            self.orthogonalise = torch.compile(newton_schulz, backend=compile_backend, dynamic=False,
                                               fullgraph=compile_backend == "neuron")

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            mom = group["momentum"]
            by_shape = defaultdict(list)
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p)
                buf = state["momentum_buffer"]
                buf.lerp_(p.grad, 1 - mom)
                by_shape[p.shape].append((p, p.grad.lerp(buf, mom) if group["nesterov"] else buf))
            for shape, items in by_shape.items():
                stacked = torch.stack([g for _, g in items])
                if self.shard is None:
                    updates = self.orthogonalise(stacked, group["ns_steps"], self.ns_dtype, self.kernels)
                else:
                    updates = self.shard(lambda part: self.orthogonalise(part, group["ns_steps"], self.ns_dtype,
                                                                         self.kernels), stacked)
                scale = max(1.0, shape[-2] / shape[-1]) ** 0.5
                torch._foreach_add_([p for p, _ in items], list(updates.unbind(0)), alpha=-group["lr"] * scale)

"""Which optimiser updates which parameter, and the learning rate by elapsed fraction of the budget.

- Muon: every matrix inside the transformer blocks.
- AdamW (`frontier.optim.adamw`, its step the fused op `adamw_step`): token embedding, head, and the small extras
  (gates, scales, mixture weights); their learning rates are scaled by (n_embd / 768) ** -0.5 as in nanochat.
- The bigram table has its own update (`frontier.model.bigram`): dense AdamW, or the row-wise sparse Adam.
- Schedule: constant, then a linear warm-down over the last `warmdown_frac` of the budget to `final_lr_frac`.
- Muon's momentum warms up linearly from `muon_momentum_start` to `muon_momentum`, over `muon_momentum_warmup_steps`
  steps, or over the first `muon_momentum_warmup_frac` of the run where that is set (a share means the same at any
  step rate; 300 steps is more than a cpu run takes).
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ..config import RunConfig
from ..errors import UserError
from .adamw import AdamW
from .muon import Muon


def lr_multiplier(frac: float, warmdown_frac: float, final_lr_frac: float) -> float:
    """frac = elapsed share of the budget (charged seconds / budget, or step / steps)."""
    frac = min(max(frac, 0.0), 1.0)
    start = 1.0 - warmdown_frac
    if frac <= start or warmdown_frac <= 0:
        return 1.0
    progress = (frac - start) / warmdown_frac
    return 1.0 + (final_lr_frac - 1.0) * progress


def muon_momentum(step: int, cfg, frac: float = 0.0) -> float:
    """Muon's momentum at `step` (elapsed share `frac` of the run): `cfg.muon_momentum_start` rising linearly to
    `cfg.muon_momentum` over `muon_momentum_warmup_frac` of the run, or where that is None over
    `muon_momentum_warmup_steps` steps."""
    if cfg.muon_momentum_warmup_frac is not None:
        w = min(frac / cfg.muon_momentum_warmup_frac, 1.0) if cfg.muon_momentum_warmup_frac > 0 else 1.0
    else:
        w = min(step / max(cfg.muon_momentum_warmup_steps, 1), 1.0)
    return (1 - w) * cfg.muon_momentum_start + w * cfg.muon_momentum


class Optimizers:
    """All of a model's optimisers behind one `step(frac, step, inputs)`."""

    def __init__(self, model: nn.Module, cfg: RunConfig, fused: bool = False, ns_dtype=torch.float32,
                 compile_backend: str | None = None, dist=None):
        """`dist` (`frontier.train.distributed.Dist`, data parallelism): Muon shards its Newton-Schulz work over the
        ranks and the sparse bigram update exchanges its rows; None or one process: neither."""
        dist = dist if dist is not None and dist.enabled else None
        o, d = cfg.optim, cfg.model.n_embd
        self.cfg = cfg
        adam_scale = (d / o.adam_lr_scale_dim) ** -0.5
        groups: dict[str, list[nn.Parameter]] = {"embed": [], "head": [], "scalar": [], "matrix": [], "ngram": []}
        self.bigram_update = None
        bigram_params = set()
        bigram = getattr(model, "bigram", None)
        if bigram is not None:
            from .bigram_update import make_bigram_update

            self.bigram_update = make_bigram_update(bigram, cfg.model.bigram, o, fused=fused,
                                                    exchange=dist.exchange_rows if dist else None)
            bigram_params = {id(p) for p in self.bigram_update.params}
        for name, p in model.named_parameters():
            if id(p) in bigram_params or not p.requires_grad:
                continue
            if name.startswith("wte."):
                groups["embed"].append(p)
            elif name.startswith("lm_head."):
                groups["head"].append(p)
            elif name.startswith("ngram."):
                groups["ngram"].append(p)
            elif name.startswith("blocks.") and p.ndim == 2 and ".gate." not in name:
                groups["matrix"].append(p)
            else:
                groups["scalar"].append(p)
        adam_groups = [
            dict(params=groups["embed"], lr=o.embed_lr * adam_scale, name="embed"),
            dict(params=groups["head"], lr=o.head_lr * adam_scale, name="head"),
            dict(params=groups["scalar"], lr=o.scalar_lr, name="scalar"),
        ]
        if cfg.model.ngram is not None:
            adam_groups.append(dict(params=groups["ngram"], lr=cfg.model.ngram.mix_lr, name="ngram"))
        adam_groups = [g for g in adam_groups if g["params"]]
        kernels = cfg.train.kernels
        self.adam = AdamW(adam_groups, betas=o.adam_betas, eps=o.adam_eps, weight_decay=o.weight_decay,
                          kernels=kernels)
        if cfg.train.compile_optimizer and compile_backend is None:
            raise UserError("this device cannot torch.compile the optimiser step",
                            "use a recipe without compile_optimizer (e.g. 'compile') on this device")
        self.muon = (
            Muon(groups["matrix"], lr=o.matrix_lr, momentum=o.muon_momentum, ns_steps=o.ns_steps, ns_dtype=ns_dtype,
                 compile_backend=compile_backend if cfg.train.compile_optimizer else None, kernels=kernels,
                 shard=dist.map_shards if dist else None)
            if groups["matrix"]
            else None
        )
        self.torch_optimizers = [opt for opt in (self.adam, self.muon) if opt is not None]
        self.updates = 0  # the steps made so far (`step`'s default step number)
        for opt in self.torch_optimizers:
            for g in opt.param_groups:
                g["initial_lr"] = g["lr"]

    def own_gradient_params(self) -> list[nn.Parameter]:
        """Parameters whose gradients an update exchanges itself (the sparse bigram table and its sink), which
        data parallelism must not average."""
        upd = self.bigram_update
        return list(upd.params) if upd is not None and getattr(upd, "exchange", None) is not None else []

    def step(self, frac: float = 0.0, step: int | None = None, inputs: torch.Tensor | None = None) -> float:
        """One update of every parameter; returns the learning-rate multiplier it used. `frac`: the elapsed share
        of the run (0 to 1), which drives the warm-down; `step`: the step number, which drives Muon's momentum
        warm-up (default: the updates made so far); `inputs`: the batch's token ids, which the bigram table's
        update needs (its rows are the bigrams of the batch)."""
        if step is None:
            step = self.updates
        if self.bigram_update is not None and inputs is None:
            raise UserError("this model has a bigram table, whose update needs the batch's token ids",
                            "pass inputs=x (the batch given to the model) to Optimizers.step")
        self.updates = step + 1
        o = self.cfg.optim
        mult = lr_multiplier(frac, o.warmdown_frac, o.final_lr_frac)
        for opt in self.torch_optimizers:
            for g in opt.param_groups:
                g["lr"] = g["initial_lr"] * mult
        if self.muon is not None:
            for g in self.muon.param_groups:
                g["momentum"] = muon_momentum(step, o, frac)
        for opt in self.torch_optimizers:
            opt.step()
        if self.bigram_update is not None:
            self.bigram_update.step(inputs, mult)
        return mult

    def zero_grad(self) -> None:
        for opt in self.torch_optimizers:
            opt.zero_grad(set_to_none=True)
        if self.bigram_update is not None:
            self.bigram_update.zero_grad()

    def state_dict(self) -> dict:
        return {
            "adam": self.adam.state_dict(),
            "muon": self.muon.state_dict() if self.muon is not None else None,
            "bigram": self.bigram_update.state_dict() if self.bigram_update is not None else None,
        }

    def load_state_dict(self, state: dict) -> None:
        self.adam.load_state_dict(state["adam"])
        if self.muon is not None:
            self.muon.load_state_dict(state["muon"])
        if self.bigram_update is not None:
            self.bigram_update.load_state_dict(state["bigram"])

"""An exponential moving average (EMA) of the weights, with its decay set by the elapsed fraction of the run.

The shadow is an fp32 copy of every trained parameter: the network, the bigram table and scale, the n-gram
mixture weights. It leaves out the sparse bigram update's gradient sink (`*.sink`, zeros, not a weight) and the
buffers (the n-gram count tables, the rotary tables): evaluation reads those from the live model.

The trainer calls `update(frac, step)` inside each timed step, after the optimisers, with the step's number
(1, 2, ...) and the elapsed fraction its learning rate used (charged seconds / budget at the step's start, or
(step - 1) / max_steps with --steps). An update happens on the steps whose number is a multiple of `every`:
- the first update at or after `start_frac` copies the live weights;
- a later one, where the fraction advanced by d since the previous update, does
  shadow = decay * shadow + (1 - decay) * live, with decay = 0.5 ** (d / half_life_frac).
So the half-life is a share of the run, the same at any step rate or `every`. A run that never reached an update
(start_frac past its last step) has no shadow: its averaged weights are the live ones (`updates` is 0).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn as nn

from ..config import EMAConfig


def averaged_parameters(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """The (name, parameter) pairs an EMA averages: the trained ones, without the bigram update's sink."""
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad and not n.endswith(".sink")]


class WeightEMA:
    def __init__(self, model: nn.Module, cfg: EMAConfig):
        self.cfg = cfg
        named = averaged_parameters(model)
        self.names = [n for n, _ in named]
        self.params = [p for _, p in named]
        self.shadow: list[torch.Tensor] | None = None  # fp32, allocated at the first update
        self.last_frac: float | None = None  # the elapsed fraction of the last update
        self.updates = 0
        self.first_step: int | None = None  # the step of the first update (the copy)

    @property
    def mib(self) -> float:
        """Memory of the shadow in MiB (fp32: 4 bytes per averaged parameter), allocated or not yet."""
        return sum(p.numel() for p in self.params) * 4 / 2**20

    @torch.no_grad()
    def update(self, frac: float, step: int) -> bool:
        """The update of step number `step` (1-based) at elapsed fraction `frac`; False where it is not due."""
        if step % self.cfg.every != 0 or frac < self.cfg.start_frac:
            return False
        live = [p.detach().float() for p in self.params]
        if self.shadow is None:
            self.shadow = [w.clone() for w in live]
            self.first_step = step
        else:
            decay = 0.5 ** ((frac - self.last_frac) / self.cfg.half_life_frac)
            torch._foreach_mul_(self.shadow, decay)
            torch._foreach_add_(self.shadow, live, alpha=1.0 - decay)
        self.last_frac = frac
        self.updates += 1
        return True

    @torch.no_grad()
    def averaged(self, mix: float | None = None) -> list[torch.Tensor]:
        """mix * shadow + (1 - mix) * live for each parameter, fp32 (mix defaults to the config's; 1.0 gives the
        shadow itself, 0.0 the live weights); the live weights where there is no shadow yet."""
        mix = self.cfg.mix if mix is None else mix
        live = [p.detach().float() for p in self.params]
        if self.shadow is None or mix == 0.0:
            return live
        if mix == 1.0:
            return list(self.shadow)
        return [mix * s + (1.0 - mix) * w for s, w in zip(self.shadow, live)]

    @torch.no_grad()
    def copy_to_model(self, mix: float | None = None) -> None:
        """Overwrite the live parameters with `averaged(mix)` (cast to each parameter's dtype)."""
        for p, a in zip(self.params, self.averaged(mix)):
            p.copy_(a)

    @contextmanager
    def applied(self, mix: float | None = None):
        """The model holds `averaged(mix)` inside the block and its live weights again after it."""
        backup = [p.detach().clone() for p in self.params]
        try:
            self.copy_to_model(mix)
            yield
        finally:
            with torch.no_grad():
                for p, b in zip(self.params, backup):
                    p.copy_(b)

    def summary(self) -> dict:
        """For the run record: the shadow's memory, how many updates it had, where it started and last moved."""
        return {"mib": self.mib, "params": sum(p.numel() for p in self.params), "updates": self.updates,
                "first_step": self.first_step, "last_frac": self.last_frac}

    def state_dict(self) -> dict:
        return {"names": list(self.names), "shadow": self.shadow,
                "last_frac": self.last_frac, "updates": self.updates, "first_step": self.first_step}

    def load_state_dict(self, state: dict) -> None:
        if state["names"] != self.names:
            raise ValueError("the saved EMA averages other parameters than this model has")
        shadow = state["shadow"]
        self.shadow = None if shadow is None else [s.to(p.device, torch.float32).clone()
                                                   for s, p in zip(shadow, self.params)]
        self.last_frac, self.updates, self.first_step = state["last_frac"], state["updates"], state["first_step"]

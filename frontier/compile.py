"""torch.compile as a measured part of a run: which backend, how long it took, and whether it recompiled.

Compilation happens inside the first training steps, which the competition does not charge (up to the start-up
allowance); a laptop's clock charges everything. The trainer records both. A recompilation after the warm-up
steps is a silent slow path (the clock pays for a compile every time a shape or guard changes), so it is a
warning in the log and an error under `--strict`.
"""

from __future__ import annotations

import warnings

import torch

from .devices import DeviceInfo


class RecompileError(RuntimeError):
    pass


def compile_model(model: torch.nn.Module, device: DeviceInfo) -> torch.nn.Module:
    if device.compile_backend is None:
        raise RuntimeError(f"the {device.backend} backend cannot torch.compile; use a recipe without compilation")
    if device.compile_backend == "neuron":
        return torch.compile(model, backend="neuron", fullgraph=True, dynamic=False)
    return torch.compile(model, backend=device.compile_backend, dynamic=False)


def dynamo_counts() -> dict:
    """Frames compiled (each compile or recompile of a Python frame) and graph breaks, from torch._dynamo."""
    from torch._dynamo.utils import counters

    return {
        "frames_compiled": int(counters["frames"]["total"]),
        "graph_breaks": int(sum(counters["graph_break"].values())),
        "unique_graphs": int(counters["stats"]["unique_graphs"]),
    }


class CompileWatch:
    """Counts what dynamo compiled during warm-up and after; flags recompilation after warm-up."""

    def __init__(self, enabled: bool, strict: bool, log=print):
        self.enabled, self.strict, self.log = enabled, strict, log
        self.start = dynamo_counts() if enabled else None
        self.warm = None
        self.warned = False

    def warmup_done(self) -> None:
        if self.enabled and self.warm is None:
            self.warm = dynamo_counts()

    def after_step(self, step: int) -> None:
        if not self.enabled or self.warm is None:
            return
        now = dynamo_counts()
        extra = now["frames_compiled"] - self.warm["frames_compiled"]
        if extra > 0:
            msg = f"step {step}: torch.compile recompiled {extra} frame(s) after warm-up (a silent slow path)"
            if self.strict:
                raise RecompileError(msg + "; rerun without --strict to allow it, or fix the changing shape/guard")
            if not self.warned:
                warnings.warn(msg, stacklevel=2)
                self.log(f"warning: {msg}")
                self.warned = True

    def summary(self) -> dict | None:
        if not self.enabled:
            return None
        now = dynamo_counts()
        warm = self.warm or now

        def delta(a, b, k):
            return b[k] - a[k]

        return {
            "frames_compiled_in_warmup": delta(self.start, warm, "frames_compiled"),
            "recompiles_after_warmup": delta(warm, now, "frames_compiled"),
            "graph_breaks": delta(self.start, now, "graph_breaks"),
            "unique_graphs": delta(self.start, now, "unique_graphs"),
        }

"""torch.compile as a measured part of a run: which backend, how long it took, and whether it recompiled.

Compilation happens inside the first training steps, which the competition does not charge (up to the start-up
allowance); a laptop's clock charges everything. The trainer records both. A recompilation after the warm-up
steps is a silent slow path (the clock pays for a compile every time a shape or guard changes), so it is a
warning in the log and an error under `--strict`.

Dynamo's counters and caches are process-wide, and its compiled code is keyed on the code object of the function it
compiled (GPT.forward for every GPT): a second compiled run in one process (a second seed, a notebook that ran
`frontier bench` first) would reuse the first one's compile and count none of its own. So a compiled training run
starts with `fresh_compile()` (`torch._dynamo.reset()`: it compiles for itself) and `CompileWatch` counts from
there. Inductor's and AOTAutograd's on-disk caches survive a reset; their hits and misses during the run are
recorded, so a compile time read off a warm cache can be told from a cold one.
"""

from __future__ import annotations

import warnings

import torch

from ..devices import DeviceInfo


class RecompileError(RuntimeError):
    pass


def compile_model(model: torch.nn.Module, device: DeviceInfo) -> torch.nn.Module:
    if device.compile_backend is None:
        raise RuntimeError(f"the {device.backend} backend cannot torch.compile; use a recipe without compilation")
    if device.compile_backend == "neuron":
        # One graph, or the compile fails: a graph break would leave work off the device's compiled graph. The one
        # island allowed is the n-gram bias, eager by design (`frontier.model.ngram`: it hashes token ids).
        inner = getattr(model, "module", model)  # under DDP, the model itself
        fullgraph = getattr(inner, "ngram", None) is None
        return torch.compile(model, backend="neuron", fullgraph=fullgraph, dynamic=False)
    return torch.compile(model, backend=device.compile_backend, dynamic=False)


def fresh_compile() -> None:
    """Forget every compile of this process (dynamo's in-memory caches; on-disk caches stay), so that what a run
    compiles next is compiled, and counted, for that run."""
    torch._dynamo.reset()


# On-disk cache events, as torch counts them: record field -> (counters group, counter).
DISK_CACHE_COUNTERS = {
    "fxgraph_cache_hits": ("inductor", "fxgraph_cache_hit"),
    "fxgraph_cache_misses": ("inductor", "fxgraph_cache_miss"),
    "fxgraph_cache_bypasses": ("inductor", "fxgraph_cache_bypass"),
    "autograd_cache_hits": ("aot_autograd", "autograd_cache_hit"),
    "autograd_cache_misses": ("aot_autograd", "autograd_cache_miss"),
}


def dynamo_counts() -> dict:
    """Process-wide running totals from torch._dynamo's counters: frames compiled (each compile or recompile of a
    Python frame), graph breaks, unique graphs, and the on-disk cache hits and misses of `DISK_CACHE_COUNTERS`.
    Only differences between two readings belong to a run."""
    from torch._dynamo.utils import counters

    counts = {
        "frames_compiled": int(counters["frames"]["total"]),
        "graph_breaks": int(sum(counters["graph_break"].values())),
        "unique_graphs": int(counters["stats"]["unique_graphs"]),
    }
    for key, (group, name) in DISK_CACHE_COUNTERS.items():
        counts[key] = int(counters[group][name]) if group in counters else 0
    return counts


class CompileWatch:
    """Counts what dynamo compiled from its creation, during warm-up and after; flags recompilation after warm-up.

    `summary()`: frames_compiled_in_warmup, recompiles_after_warmup, graph_breaks, unique_graphs, and the on-disk
    cache events of `DISK_CACHE_COUNTERS` (fxgraph_cache_hits, ...), all counted since the watch was created.
    """

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
            **{k: delta(self.start, now, k) for k in DISK_CACHE_COUNTERS},
        }

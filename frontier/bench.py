"""`frontier bench`: training throughput of recipes, measured side by side in one process.

Each recipe's model and optimisers are built once and warmed up (this is where compilation happens; the time
of the first step is reported). Then the recipes are timed in alternation, A B A B ..., `repeats` rounds of
`steps` steps each, so that a machine that speeds up or slows down during the benchmark affects all of them
alike. Reported per recipe: tokens/s (min, median, max over rounds), the ratio of its median to the first
recipe's, and peak memory (CUDA: the allocator's peak; CPU: the peak resident memory of a separate process that
builds the recipe and runs a few steps, Python and torch included, since one process's RSS never goes down).
"""

from __future__ import annotations

import json
import statistics
from contextlib import contextmanager, nullcontext
import subprocess
import sys
import time
from dataclasses import dataclass, field

import torch

from . import records
from .compile import CompileWatch, compile_model
from .data import Dataset, embedded_dataset
from .dataloader import TrainLoader
from .devices import DeviceInfo, select_device
from .optim import Optimizers
from .profiles import get_profile
from .recipes import resolve
from .trainer import build_model, make_loader, train_step


@dataclass
class Entry:
    recipe: str
    cfg: object
    model: torch.nn.Module
    step_model: torch.nn.Module
    opts: Optimizers
    loader: TrainLoader
    first_step_s: float = 0.0
    warmup_s: float = 0.0
    tokens_per_s: list = field(default_factory=list)
    step_ms: list = field(default_factory=list)
    peak_mib: float | None = None
    compile_counts: dict | None = None


def _step(e: Entry, dev: DeviceInfo, step: int) -> None:
    """The trainer's own step (streaming n-gram counting included: the bench sits in the first epoch)."""
    train_step(e.step_model, e.opts, e.loader, dev, 0.0, step, getattr(e.model, "ngram", None))


def build_entry(recipe: str, profile, dev: DeviceInfo, dataset: Dataset) -> Entry:
    cfg = resolve(recipe, profile)
    dataset.check_vocab(cfg.model.vocab_size, f"profile {cfg.profile!r}")
    torch.manual_seed(0)
    model = build_model(cfg).to(dev.device)
    opts = Optimizers(model, cfg, fused=dev.fused_optimizer, ns_dtype=dev.newton_schulz_dtype,
                      compile_backend=dev.compile_backend)
    step_model = compile_model(model, dev) if cfg.train.compile else model
    loader = make_loader(cfg, dataset, seed=0)
    return Entry(recipe, cfg, model, step_model, opts, loader)


def peak_memory_child(recipe: str, profile: str, data: str, steps: int = 3) -> float:
    """Peak resident MiB of a fresh process that builds `recipe` and runs `steps` CPU steps (Python and torch
    included: compare recipes by their difference)."""
    # VmHWM (the peak RSS of this address space) starts afresh at exec; ru_maxrss would carry the parent's.
    code = (
        "import json, sys, torch\n"
        "from frontier.bench import build_entry, _step\n"
        "from frontier.data import Dataset\n"
        "from frontier.devices import select_device\n"
        "dev = select_device('cpu')\n"
        "e = build_entry(sys.argv[1], sys.argv[2], dev, Dataset(sys.argv[3]))\n"
        "for i in range(int(sys.argv[4])): _step(e, dev, i)\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
        "print(json.dumps({'peak_mib': int(hwm) / 1024}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, recipe, profile, data, str(steps)], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_mib"]


@contextmanager
def cold_compile_caches():
    """Turn off Inductor's and AOTAutograd's on-disk caches, so a compile is timed from scratch."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    saved = inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache
    inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache = False, False
    try:
        yield
    finally:
        inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache = saved


def run_bench(recipes: list[str], profile: str = "cpu", steps: int = 10, repeats: int = 3, device: str = "auto",
              data: str | None = None, warmup_steps: int | None = None, memory: bool = True, cold: bool = False,
              log=print) -> dict:
    """`cold`: compile without the on-disk caches, so that `first_step_s` is the whole cost of compiling."""
    with cold_compile_caches() if cold else nullcontext():
        return _run_bench(recipes, profile, steps, repeats, device, data, warmup_steps, memory, log)


def _run_bench(recipes, profile, steps, repeats, device, data, warmup_steps, memory, log) -> dict:
    prof = get_profile(profile)
    dev = select_device(device)
    dataset = Dataset(data) if data else embedded_dataset(prof.vocab_size, log=log)
    entries = []
    for r in recipes:
        e = build_entry(r, prof, dev, dataset)
        watch = CompileWatch(e.cfg.train.compile, strict=False, log=log)
        n_warm = warmup_steps if warmup_steps is not None else max(e.cfg.train.uncharged_steps, 2)
        t0 = time.perf_counter()
        for i in range(n_warm):
            t = time.perf_counter()
            _step(e, dev, i)
            if i == 0:
                e.first_step_s = time.perf_counter() - t
        e.warmup_s = time.perf_counter() - t0
        watch.warmup_done()
        e.compile_counts = watch.summary()
        entries.append(e)
        log(f"bench: {r} warmed up ({n_warm} steps, first step {e.first_step_s:.2f}s)")
    tokens = None
    for _ in range(repeats):
        for e in entries:
            if dev.kind == "cuda":
                torch.cuda.reset_peak_memory_stats()
            tokens = e.cfg.train.batch_size * e.cfg.train.seq_len
            t = time.perf_counter()
            for i in range(steps):
                _step(e, dev, 1000 + i)
            dt = time.perf_counter() - t
            e.tokens_per_s.append(steps * tokens / dt)
            e.step_ms.append(1000 * dt / steps)
            if dev.kind == "cuda":
                e.peak_mib = max(e.peak_mib or 0.0, torch.cuda.max_memory_allocated() / 2**20)
    if memory and dev.kind == "cpu":
        for e in entries:
            e.peak_mib = peak_memory_child(e.recipe, prof.name, str(dataset.folder))
    base = statistics.median(entries[0].tokens_per_s)
    rows = []
    for e in entries:
        med = statistics.median(e.tokens_per_s)
        rows.append({
            "recipe": e.recipe,
            "tokens_per_s_min": min(e.tokens_per_s),
            "tokens_per_s_median": med,
            "tokens_per_s_max": max(e.tokens_per_s),
            "ratio": med / base,
            "step_ms_median": statistics.median(e.step_ms),
            "first_step_s": e.first_step_s,
            "warmup_s": e.warmup_s,
            "peak_mib": e.peak_mib,
            "compile": e.compile_counts,
            "samples": e.tokens_per_s,
        })
    return {"profile": prof.name, "device": dev.describe(), "steps": steps, "repeats": repeats,
            "tokens_per_step": tokens, "rows": rows, "hardware": records.hardware(dev.device)}


def format_bench(result: dict) -> str:
    d = result["device"]
    lines = [f"bench: profile {result['profile']}, {d['backend']} ({d['dtype_policy']}), "
             f"{result['repeats']} rounds x {result['steps']} steps, alternating; ratio = median / first recipe's median",
             f"{'recipe':<16}{'tok/s min':>11}{'median':>10}{'max':>10}{'ratio':>8}{'step ms':>9}{'peak MiB':>10}{'first step s':>14}"]
    for r in result["rows"]:
        peak = "-" if r["peak_mib"] is None else f"{r['peak_mib']:.0f}"
        lines.append(f"{r['recipe']:<16}{r['tokens_per_s_min']:>11,.0f}{r['tokens_per_s_median']:>10,.0f}"
                     f"{r['tokens_per_s_max']:>10,.0f}{r['ratio']:>7.2f}x{r['step_ms_median']:>9.1f}{peak:>10}"
                     f"{r['first_step_s']:>14.2f}")
    return "\n".join(lines)

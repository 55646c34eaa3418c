"""`frontier bench`: training throughput of recipes, measured side by side in one process.

Each recipe's model and optimisers are built once and warmed up (this is where compilation happens; the time
of the first step is reported). Then the recipes are timed in alternation, A B A B ..., `repeats` rounds of
`steps` steps each, so that a machine that speeds up or slows down during the benchmark affects all of them
alike. Reported per recipe: tokens/s (min, median, max over rounds), the ratio of its median to the first
recipe's, and peak memory (CUDA: the allocator's peak; CPU: the peak resident memory of a separate process that
builds the recipe and runs a few steps, Python and torch included, since one process's RSS never goes down).

Bench records. `run_bench(..., out=...)` keeps its result as a bench record (`frontier.records`: the header, every
round's samples, the derived `rows`, and `path`); the CLI's default folder is `runs/bench/<profile>/`.

Process counts (`nproc`, `frontier bench baseline --nproc 1,2`): one process against N data-parallel processes
(`frontier.train.distributed`), side by side in one record. Each count is a job of its own, run one after the other (a
NeuronCore serves one process at a time, so two jobs cannot share a chip): 1 is `frontier bench` in a fresh
process, N > 1 the same command under torchrun, where every rank builds and steps the recipes on its share of each
batch and rank 0 times the rounds (between barriers, so a round ends when the slowest rank has finished it). Within
a job the recipes alternate as above; tokens/s counts the global batch, so the counts compare directly. Each row
says its `nproc`; `ratio` is against the first row; peak memory is measured for one process only.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import records
from ..config import RunConfig
from ..data.dataset import Dataset, profile_dataset
from ..devices import DeviceInfo, select_device
from ..errors import UserError
from ..kernels import IMPLEMENTATIONS, calls, reset_calls
from ..profiles import get_profile
from ..recipes import resolve
from ..train import distributed
from ..train.compile import CompileWatch, fresh_compile
from ..train.ema import WeightEMA
from ..train.step import Training, setup_training, train_step

from . import bench_records


@dataclass
class Entry:
    """A recipe as the bench steps it: what the trainer steps (`run`), and what the bench measured of it."""

    recipe: str
    cfg: RunConfig
    run: Training
    first_step_s: float = 0.0
    warmup_s: float = 0.0
    tokens_per_s: list = field(default_factory=list)
    step_ms: list = field(default_factory=list)
    peak_mib: float | None = None
    compile_counts: dict | None = None
    ema: WeightEMA | None = None  # the bench's own EMA: it starts at the first step (see `build_entry`)
    kernel_calls: dict = field(default_factory=dict)  # {op: {implementation: calls}} over its timed rounds


def _step(e: Entry, dev: DeviceInfo, step: int) -> None:
    """The trainer's own step (streaming n-gram counting included: the bench sits in the first epoch; the EMA's
    update too, where the recipe has one)."""
    r = e.run
    train_step(r.step_model, r.opts, r.loader, dev, 0.0, step, r.ngram, e.ema, r.dist)


def build_entry(recipe: str, profile, dev: DeviceInfo, dataset: Dataset,
                dist: distributed.Dist = distributed.ONE, kernels: str = "reference") -> Entry:
    """A recipe built for the bench, its fused ops run by `kernels` (checked before it is built, as a run is);
    `recipe@impl` (e.g. `baseline@interpreter`) runs that recipe's fused ops by `impl` instead, so that one bench
    can put two implementations side by side.
    Its EMA, where it has one, starts at the first step (start_frac 0): the bench runs at fraction 0, and times
    the steps as they are once the average has started."""
    name, _, impl = recipe.partition("@")
    if impl and impl not in IMPLEMENTATIONS:
        raise UserError(f"{recipe!r}: unknown kernel implementation {impl!r}",
                        f"write RECIPE@IMPL with IMPL one of {', '.join(IMPLEMENTATIONS)}")
    cfg = resolve(name, profile, kernels=impl or kernels)
    dataset.check_vocab(cfg.model.vocab_size, f"profile {cfg.profile!r}")
    run = setup_training(cfg, dataset, dev, seed=0, dist=dist)
    ema = WeightEMA(run.model, dataclasses.replace(cfg.train.ema, start_frac=0.0)) if cfg.train.ema else None
    return Entry(recipe, cfg, run, ema=ema)


def peak_memory_child(recipe: str, profile: str, data: str, steps: int = 3, kernels: str = "reference") -> float:
    """Peak resident MiB of a fresh process that builds `recipe` and runs `steps` CPU steps (Python and torch
    included: compare recipes by their difference)."""
    # VmHWM (the peak RSS of this address space) starts afresh at exec; ru_maxrss would carry the parent's.
    code = (
        "import json, sys, torch\n"
        "from frontier.study.bench import build_entry, _step\n"
        "from frontier.data.dataset import Dataset\n"
        "from frontier.devices import select_device\n"
        "dev = select_device('cpu')\n"
        "e = build_entry(sys.argv[1], sys.argv[2], dev, Dataset(sys.argv[3]), kernels=sys.argv[5])\n"
        "for i in range(int(sys.argv[4])): _step(e, dev, i)\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
        "print(json.dumps({'peak_mib': int(hwm) / 1024}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, recipe, profile, data, str(steps), kernels], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_mib"]


@contextmanager
def cold_compile_caches():
    """Turn off Inductor's and AOTAutograd's on-disk caches, and forget this process's earlier compiles
    (`fresh_compile`: a notebook that replayed a compiled run, or benched it before, holds its graph in memory), so
    a compile is timed from scratch."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    fresh_compile()
    saved = inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache
    inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache = False, False
    try:
        yield
    finally:
        inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache = saved


def run_bench(recipes: list[str], profile: str = "cpu", steps: int = 10, repeats: int = 3, device: str = "auto",
              data: str | None = None, warmup_steps: int | None = None, memory: bool = True, cold: bool = False,
              log=print, out: str | Path | None = None, command: list[str] | None = None,
              nproc: list[int] | None = None, kernels: str = "reference") -> dict:
    """Bench `recipes` side by side, their fused ops run by `kernels` (`frontier.kernels`; each row records the
    implementations its timed steps called); the result holds every round's samples, the derived figures (`summarise`)
    and the record's header. `cold`: compile without the on-disk caches, so that `first_step_s` is the whole cost
    of compiling. `out` (a folder, or a .json file that must not exist; checked before the bench runs): write the
    result there as a bench record; `result["path"]` is its file (None without `out`). `command`: how the bench
    was asked for (default: this call, written as Python). `nproc`: process counts to compare, each a job of its
    own (see the module's docstring; None: this process, or under torchrun every rank of the job)."""
    arguments = {"recipes": list(recipes), "profile": profile, "steps": steps, "repeats": repeats, "device": device,
                 "data": data, "warmup_steps": warmup_steps, "memory": memory, "cold": cold}
    if kernels != "reference":
        arguments["kernels"] = kernels
    if nproc is not None:
        arguments["nproc"] = list(nproc)
    path = bench_records.new_record_path(out, "bench", recipes) if out is not None and distributed.env_rank() == 0 else None
    if nproc is not None and not distributed.launched():
        result = _run_bench_jobs(recipes, profile, steps, repeats, device, data, warmup_steps, memory, cold, nproc,
                                 log, kernels)
    else:
        with cold_compile_caches() if cold else nullcontext():
            result = _run_bench(recipes, profile, steps, repeats, device, data, warmup_steps, memory, log, kernels)
    return bench_records.bench_record("bench", arguments, command, f"{__name__}.run_bench", result, path)


def _run_bench_jobs(recipes, profile, steps, repeats, device, data, warmup_steps, memory, cold, counts, log,
                    kernels="reference") -> dict:
    """Each process count in `counts` as a job of its own (`frontier bench` in a fresh process, under torchrun for
    N > 1), one after the other; their rows side by side, `ratio` against the first row."""
    import tempfile

    if warmup_steps is not None:
        raise UserError("warmup_steps cannot be passed to the jobs of a bench over process counts",
                        "leave it at its default (the recipe's uncharged steps)")
    prof = get_profile(profile)
    dataset = Dataset(data) if data else profile_dataset(prof, log=log)  # prepared before any job
    for n in counts:
        distributed.check_batch(prof.batch_size, n)
    jobs, rows = [], []
    with tempfile.TemporaryDirectory(prefix="frontier-bench-") as tmp:
        for n in counts:
            path = Path(tmp) / f"nproc{n}.json"
            argv = bench_records.cli_command("bench", list(recipes), {"--profile": prof.name, "--steps": steps, "--repeats": repeats,
                                                        "--device": device, "--data": str(dataset.folder),
                                                        "--cold": cold, "--no-memory": not memory,
                                                        "--kernels": kernels, "--out": str(path)})[1:]
            if n == 1:
                cmd = [sys.executable, "-m", "frontier", *argv]
            else:
                cmd = [sys.executable, "-m", "torch.distributed.run", *distributed.torchrun_args(n, argv)]
            log(f"bench: {n} process{'es' if n > 1 else ''}: {' '.join(cmd[1:])}")
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                last = ([l for l in proc.stderr.splitlines() if l.strip()] or ["no message"])[-1]
                raise UserError(f"the bench on {n} process(es) failed ({last.strip()[:300]})",
                                f"run it alone to see why: {' '.join(cmd)}")
            job = bench_records.load_bench_record(path)
            jobs.append({"nproc": n, "command": cmd, "device": job["device"], "hardware": job["hardware"],
                         "distributed": job.get("distributed")})
            rows += [{**row, "nproc": n} for row in job["rows"]]
    base = rows[0]["tokens_per_s_median"]
    for row in rows:
        row["ratio"] = row["tokens_per_s_median"] / base
    return {"profile": prof.name, "device": jobs[0]["device"], "steps": steps, "repeats": repeats,
            "tokens_per_step": prof.batch_size * prof.seq_len, "rows": rows, "hardware": jobs[0]["hardware"],
            "jobs": jobs}


def machine_load() -> dict:
    """The machine's run-queue load averages over 1, 5 and 15 minutes (`os.getloadavg`; None where there are none)
    and its core count: a bench is side by side, so load touches both recipes alike, but a load above the cores
    makes every round's tokens/s scatter, and a reader should see it."""
    try:
        one, five, fifteen = os.getloadavg()
    except (OSError, AttributeError):
        return {"load_1m": None, "load_5m": None, "load_15m": None, "cores": os.cpu_count()}
    return {"load_1m": round(one, 2), "load_5m": round(five, 2), "load_15m": round(fifteen, 2), "cores": os.cpu_count()}


def summarise(recipes: list[str], samples: list[list[float]], step_ms: list[list[float]]) -> list[dict]:
    """The derived figures of a bench from its rounds: per recipe the min, median and max of its tokens/s
    `samples`, `ratio` = its median / the first recipe's median, and the median of its `step_ms`."""
    base = statistics.median(samples[0])
    return [{
        "recipe": r,
        "tokens_per_s_min": min(s),
        "tokens_per_s_median": statistics.median(s),
        "tokens_per_s_max": max(s),
        "ratio": statistics.median(s) / base,
        "step_ms_median": statistics.median(ms),
        "samples": list(s),
        "step_ms_samples": list(ms),
    } for r, s, ms in zip(recipes, samples, step_ms)]


def _run_bench(recipes, profile, steps, repeats, device, data, warmup_steps, memory, log, kernels="reference") -> dict:
    """The bench in this process; under torchrun on every rank of the job (rank 0 times the rounds and logs)."""
    prof = get_profile(profile)
    dist, dev = distributed.init(select_device(device))
    if not dist.is_main:
        log = lambda *a, **k: None  # noqa: E731 -- rank 0 speaks for the job
    dataset = dist.main_first(lambda: Dataset(data) if data else profile_dataset(prof, log=log))
    entries = []
    for r in recipes:
        e = build_entry(r, prof, dev, dataset, dist, kernels)
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
    load_start = machine_load()
    for _ in range(repeats):
        for e in entries:
            if dev.kind == "cuda":
                torch.cuda.reset_peak_memory_stats()
            tokens = e.cfg.train.batch_size * e.cfg.train.seq_len  # the global batch's
            dist.barrier()  # with data parallelism a round starts and ends on every rank
            reset_calls()
            t = time.perf_counter()
            for i in range(steps):
                _step(e, dev, 1000 + i)
            dist.barrier()
            for op, impls in calls().items():
                for impl, n in impls.items():
                    e.kernel_calls.setdefault(op, {}).setdefault(impl, 0)
                    e.kernel_calls[op][impl] += n
            dt = dist.from_main(time.perf_counter() - t)
            e.tokens_per_s.append(steps * tokens / dt)
            e.step_ms.append(1000 * dt / steps)
            if dev.kind == "cuda":
                e.peak_mib = max(e.peak_mib or 0.0, torch.cuda.max_memory_allocated() / 2**20)
    if memory and dev.kind == "cpu" and not dist.enabled:
        for e in entries:
            e.peak_mib = peak_memory_child(e.recipe, prof.name, str(dataset.folder), kernels=kernels)
    rows = summarise([e.recipe for e in entries], [e.tokens_per_s for e in entries], [e.step_ms for e in entries])
    for row, e in zip(rows, entries):
        row.update(first_step_s=e.first_step_s, warmup_s=e.warmup_s, peak_mib=e.peak_mib, compile=e.compile_counts,
                   kernel_calls=e.kernel_calls)
    return {"profile": prof.name, "device": dev.describe(), "steps": steps, "repeats": repeats,
            "tokens_per_step": tokens, "rows": rows, "hardware": records.hardware(dev.device),
            "load": {"rounds_start": load_start, "rounds_end": machine_load()},
            "world_size": dist.world_size, "distributed": dist.describe(prof.batch_size)}


def format_bench(result: dict) -> str:
    d = result["device"]
    lines = [f"bench: profile {result['profile']}, {d['backend']} ({d['dtype_policy']}), "
             f"{result['repeats']} rounds x {result['steps']} steps, alternating; ratio = median / first recipe's median"
             + ("; x N = N data-parallel processes (one job per count, one after another)" if result.get("jobs")
                else ""),
             f"{'recipe':<16}{'tok/s min':>11}{'median':>10}{'max':>10}{'ratio':>8}{'step ms':>9}{'peak MiB':>10}{'first step s':>14}"]
    for r in result["rows"]:
        peak = "-" if r["peak_mib"] is None else f"{r['peak_mib']:.0f}"
        name = r["recipe"] + (f" x{r['nproc']}" if "nproc" in r else "")  # x N: N data-parallel processes
        lines.append(f"{name:<16}{r['tokens_per_s_min']:>11,.0f}{r['tokens_per_s_median']:>10,.0f}"
                     f"{r['tokens_per_s_max']:>10,.0f}{r['ratio']:>7.2f}x{r['step_ms_median']:>9.1f}{peak:>10}"
                     f"{r['first_step_s']:>14.2f}")
    load = result.get("load") or {}
    start, end = load.get("rounds_start") or {}, load.get("rounds_end") or {}
    if start.get("load_1m") is not None and end.get("load_1m") is not None:
        # the bench's own threads count in the average (up to a core each), and the average trails by a minute
        busy = max(start["load_1m"], end["load_1m"]) > start["cores"] + 1
        lines.append(f"machine load (1-minute average, the bench's own threads included): {start['load_1m']:.2f} at "
                     f"the first round, {end['load_1m']:.2f} after the last, on {start['cores']} cores"
                     + ("; more than a core above them: other work shared the cores" if busy else ""))
    return "\n".join(lines)

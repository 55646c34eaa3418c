"""`frontier clock-check`: does a budget buy the same steps on a slower machine?

The same recipe, seed and budget trained under one rule (`clock`: "steps", the smoke and cpu profiles' rule, whose
steps are decided before the run, or "reference", the reference clock, `frontier.train.clock`) under three
conditions on this machine, one after another in this process:

- `2-threads`: torch's threads at 2 (the reference machine's setting);
- `1-thread`: torch's threads at 1, a machine about half as fast;
- `loaded`: 2 threads, with another CPU-bound process (a busy loop) pinned to one of the cores all the while.

Each run's steps and wall seconds go side by side into a bench record (kind `clock-check`, beside the run records
it trained, which are kept): under the steps rule the steps are the same and val_bpb moves only by the thread
count's rounding, under the reference clock the steps should agree within a few percent, while the wall seconds
differ about twofold. Before the runs the probe itself is timed `spread_repeats` times in one process (its
spread: the noise of one timing); each run's record has its own probe timings, whose drift over the run is listed.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from .. import records
from ..devices import select_device
from ..errors import UserError
from ..profiles import get_profile
from ..recipes import get_recipe, resolve
from ..train.probes import ProbeShapes, source_hash, time_probe
from ..train.trainer import train

from . import bench_records

CONDITIONS = ("2-threads", "1-thread", "loaded")


def _busy_process() -> subprocess.Popen:
    """A CPU-bound process (a busy loop) pinned to this machine's last core where the system allows it."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []

    def pin():
        if cores:
            os.sched_setaffinity(0, {cores[-1]})

    return subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=pin)


def check_arguments(recipes: list[str], profile: str, conditions: tuple[str, ...], budget_s: float | None,
                    probe_only: bool = False) -> None:
    """Every argument error, each in one line, before anything is trained or written."""
    if probe_only and recipes:
        raise UserError("--probe-only trains nothing, but recipes were given", "drop the recipes or --probe-only")
    if not recipes and not probe_only:
        raise UserError("clock-check needs at least one recipe", "pass recipe names, e.g. baseline ngram-sized")
    for r in recipes:
        get_recipe(r)
    p = get_profile(profile)
    if not p.probe_ref_s:
        raise UserError(f"profile {p.name!r} states no reference probe time: nothing to check",
                        "pass a profile with the reference clock (smoke or cpu)")
    bad = [c for c in conditions if c not in CONDITIONS]
    if bad or not conditions:
        raise UserError(f"unknown clock-check condition {', '.join(bad) or '(none given)'}",
                        f"choose among {', '.join(CONDITIONS)}")
    if budget_s is not None and not budget_s > 0:
        raise UserError(f"budget must be positive (got {budget_s})", "pass --budget SECONDS > 0")


def probe_spread(profile: str, repeats: int = 20) -> dict:
    """The probe timed `repeats` times in one process at `profile`'s shapes: its median, the standard deviation
    and the range (max - min) relative to the median."""
    p = get_profile(profile)
    t = time_probe(p.probe, ProbeShapes.of(p), repeats)["repeats_s"]
    med = statistics.median(t)
    return {"repeats_s": t, "median_s": med, "sd_rel": statistics.stdev(t) / med if len(t) > 1 else None,
            "range_rel": (max(t) - min(t)) / med, "threads": torch.get_num_threads()}


def run_clock_check(recipes: list[str], profile: str = "cpu", seed: int = 0, budget_s: float | None = None,
                    conditions: tuple[str, ...] = CONDITIONS, spread_repeats: int = 20,
                    out: str | Path | None = None, command: list[str] | None = None, log=print,
                    probe_only: bool = False, clock: str = "steps") -> dict:
    """Train each recipe under each condition (see the module's docstring) and write a bench record to `out` (a
    folder or a new .json file; the run folders go beside it, in `clock-check-runs-TIME/`). `probe_only`: time the
    probe's spread and nothing else (how a profile's reference probe time is measured)."""
    conditions = tuple(conditions)
    check_arguments(recipes, profile, conditions, budget_s, probe_only)
    p = get_profile(profile)
    path = bench_records.new_record_path(out, "clock-check", list(recipes) or ["probe"]) if out is not None else None
    root = (path.parent if path else Path("runs") / "bench" / p.name) / f"clock-check-runs-{time.strftime('%Y%m%d-%H%M%S')}"
    dev = select_device("cpu")
    threads0 = torch.get_num_threads()
    log(f"clock-check: probe {p.probe} timed {spread_repeats} times ...")
    spread = probe_spread(p.name, spread_repeats)
    log(f"  median {spread['median_s'] * 1e3:.1f} ms, sd {spread['sd_rel']:.1%}, range {spread['range_rel']:.1%}")
    runs = []
    for recipe in recipes:
        for cond in conditions:
            cfg = resolve(recipe, p, budget_s=budget_s, clock=clock)
            busy = _busy_process() if cond == "loaded" else None
            torch.set_num_threads(1 if cond == "1-thread" else 2)
            try:
                log(f"  {recipe} {cond}: training {cfg.train.budget_s:g} reference seconds ...")
                rec = train(cfg, _dataset(p), root / recipe / cond, dev, seed=seed, progress=False,
                            label=f"{recipe}-clock-check-{cond}",
                            command=command or ["frontier.study.clock_check.run_clock_check"])
            finally:
                torch.set_num_threads(threads0)
                if busy is not None:
                    busy.kill()
                    busy.wait()
            pr = rec["probe"] or {"probe_s_median": None, "drift": None, "drifted": None}
            runs.append({"recipe": recipe, "condition": cond, "threads": 1 if cond == "1-thread" else 2,
                         "loaded": cond == "loaded", "steps": rec["steps"], "wall_s": rec["wall_s"],
                         "charged_s": rec["charged_s"], "charged_wall_s": rec["charged_wall_s"],
                         "probe_s_median": pr["probe_s_median"], "probe_drift": pr["drift"],
                         "probe_drifted": pr["drifted"], "val_bpb": rec["val_bpb"], "cpu_share": rec.get("cpu_share"),
                         "budget": rec.get("budget"), "run_dir": records.repo_named(root / recipe / cond)})
            log(f"    {rec['steps']} steps, {rec['charged_wall_s']:.1f} wall s charged ({rec['wall_s']:.1f} wall s "
                f"of steps), val_bpb {rec['val_bpb']:.4f}")
    body = {"profile": p.name, "seed": seed, "budget_s": budget_s or p.budget_s, "clock": clock,
            "probe": {"name": p.probe, "source_sha256": source_hash(p.probe), "ref_s": p.probe_ref_s,
                      "shapes": vars(ProbeShapes.of(p))},
            "spread": spread, "runs": runs, "summary": summarise(runs)}
    arguments = {"recipes": list(recipes), "profile": p.name, "seed": seed, "budget_s": budget_s,
                 "conditions": list(conditions), "spread_repeats": spread_repeats, "probe_only": probe_only,
                 "clock": clock}
    return bench_records.bench_record("clock-check", arguments, command, "frontier.study.clock_check.run_clock_check",
                                body, path, cpu=True)


def _dataset(p):
    from ..data.dataset import profile_dataset

    return profile_dataset(p, log=lambda *a: None)


def summarise(runs: list[dict]) -> dict:
    """Per recipe: each condition's steps and wall seconds against the first condition's (`steps_rel`: steps /
    first's steps - 1; `wall_ratio`: wall seconds / first's)."""
    out = {}
    for r in runs:
        first = next(x for x in runs if x["recipe"] == r["recipe"])
        out.setdefault(r["recipe"], {})[r["condition"]] = {
            "steps": r["steps"], "wall_s": r["charged_wall_s"], "steps_rel": r["steps"] / first["steps"] - 1,
            "wall_ratio": r["charged_wall_s"] / first["charged_wall_s"]}
    return out


def format_clock_check(result: dict) -> str:
    s = result["spread"]
    lines = [f"clock-check, profile {result['profile']}, {result['budget_s']:g} reference seconds, seed "
             f"{result['seed']}; probe {result['probe']['name']} (reference {result['probe']['ref_s'] * 1e3:.1f} ms)",
             f"probe spread ({len(s['repeats_s'])} timings, {s['threads']} threads): median {s['median_s'] * 1e3:.1f} "
             f"ms, sd {s['sd_rel']:.1%}, range {s['range_rel']:.1%}",
             f"rule: {result.get('clock', 'reference')}",
             f"{'recipe':<14} {'condition':<10} {'steps':>6} {'vs first':>9} {'wall s':>8} {'x first':>8} "
             f"{'probe ms':>9} {'drift':>7} {'val_bpb':>8}"]
    for r in result["runs"]:
        sm = result["summary"][r["recipe"]][r["condition"]]
        probe = f"{r['probe_s_median'] * 1e3:>9.1f} {r['probe_drift']:>7.1%}" if r["probe_s_median"] else f"{'-':>9} {'-':>7}"
        lines.append(f"{r['recipe']:<14} {r['condition']:<10} {r['steps']:>6} {sm['steps_rel']:>+9.1%} "
                     f"{r['charged_wall_s']:>8.1f} {sm['wall_ratio']:>8.2f} {probe} {r['val_bpb']:>8.4f}")
    return "\n".join(lines)

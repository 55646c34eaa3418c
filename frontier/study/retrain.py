"""Retrain: train a recorded run again, whole, on this machine, and put its numbers beside the record's.

`frontier replay` checks a record's first steps; this trains the run from its start to its end with the record's
config, seed and steps, and scores it, so a reader can check a number where it matters, on the scores. A run
budgeted by the steps rule (`frontier.train.cost`) is bought again at the cost its record names (the committed table's
entry of its day, which the table may have re-measured since), and that buys the same steps on any machine, at any
thread count and under any load; so the steps must agree, and the scores differ only by how this
machine's float arithmetic rounds (another CPU model, another thread count, a compiled model's own run-to-run
rounding) and by whatever changed in the code. A run whose steps the machine decided (the wall or reference clock,
a cost measured on the spot) is retrained for the steps it took, and the record says so.

The retrained run goes to its own folder (never over the record), and the comparison to a bench record of kind
`retrain` (`runs/bench/PROFILE/` by default): both records' steps, epochs, val_bpb and test_bpb, their
differences, and the hardware and code on each side.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .. import records
from ..config import RunConfig
from ..data.dataset import Dataset, run_dataset
from ..devices import select_device
from ..errors import UserError
from ..train.cost import StepCost, cost_key, load_table
from ..train.trainer import train
from . import bench_records

SCORES = ("val_bpb", "test_bpb")


def steps_of(rec: dict, table: dict[str, StepCost] | None = None) -> tuple[int | None, str, dict | None]:
    """The steps to train again, why, and the cost table to buy them with: for a steps-rule record at a committed
    cost, None steps (the budget buys them again, by the same rule) and a table holding the record's own entry; the
    record's own steps otherwise. `table`: the committed table (default: `cost.load_table()`), only to say whether
    it has re-measured the entry since."""
    budget = rec.get("budget") or {}
    if budget.get("rule") == "steps" and budget.get("source") == "table" and not budget.get("explicit_steps"):
        key = cost_key(RunConfig.from_dict(rec["config"]))
        fields = {f.name for f in dataclasses.fields(StepCost)} - {"key"}
        theirs = StepCost(key=key, **{k: v for k, v in budget["cost"].items() if k in fields})
        now = (load_table() if table is None else table).get(key)
        changed = [] if now is None else [f for f in ("step_s", "fixed_s", "count_s_per_token")
                                          if getattr(now, f) != getattr(theirs, f)]
        if now is not None and not changed:
            why = "the steps rule at the committed table's cost buys them again"
        else:
            since = (f"the committed table has measured it again since ({', '.join(changed)}; a step now "
                     f"{now.step_s * 1e3:.1f} reference ms, {records.shown_path(now.record)})" if now
                     else "the committed table no longer holds it")
            why = (f"the steps rule at the record's own cost ({theirs.step_s * 1e3:.1f} reference ms a step, "
                   f"{records.shown_path(theirs.record)}) buys them again; {since}")
        return None, why, {key: theirs}
    if budget.get("explicit_steps") or rec.get("max_steps"):
        return int(rec["steps"]), "a run of a fixed number of steps", None
    return int(rec["steps"]), "the steps its machine's clock bought (another machine's clock would buy others)", None


def retrain(run_dir: str | Path, out: str | Path, data: str | Path | None = None, device: str = "auto",
            record_dir: str | Path | None = None, log=print) -> dict:
    """Train the run in `run_dir` again into `out` and write the comparison as a bench record (see the module)."""
    run_dir, out = Path(run_dir), Path(out)
    rec = records.load_record(run_dir)
    if rec.get("status") != "finished":
        raise UserError(f"{run_dir} holds a run that did not finish ({rec.get('status')})", "pick a finished run")
    if out.exists() and any(out.iterdir()):
        raise UserError(f"{str(out)!r} is not empty", "pass a new folder as the retrained run's --out")
    profile = rec["config"]["profile"]
    path = bench_records.new_record_path(record_dir or bench_records.default_record_dir(profile), "retrain",
                                         [(rec.get("label") or rec["recipe"]).replace("/", "-"), f"s{rec['seed']}"])
    dataset = Dataset(data) if data else run_dataset(rec["data"], log=log)
    cfg = RunConfig.from_dict(rec["config"])
    steps, why, table = steps_of(rec)
    log(f"retraining {run_dir} ({rec['recipe']}, seed {rec['seed']}) into {out}: {why}")
    dev = select_device(device)
    new = train(cfg, dataset, out, dev, seed=rec["seed"], steps=steps, progress=False, log=log, cost_table=table)
    if new["steps"] != rec["steps"]:
        log(f"note: {new['steps']} steps here against the record's {rec['steps']}")

    def side(r: dict) -> dict:
        return {"steps": r["steps"], "epochs": records.epochs_read(r), **{k: r.get(k) for k in SCORES},
                "hardware": r.get("hardware"), "code": r.get("code"), "budget": r.get("budget")}

    body = {"run": records.repo_named(run_dir), "retrained": records.repo_named(out), "steps_rule": steps is None,
            "why": why, "record_side": side(rec), "here": side(new), "same_steps": new["steps"] == rec["steps"],
            "differences": {k: new[k] - rec[k] for k in SCORES if rec.get(k) is not None and new.get(k) is not None}}
    hw = new.get("hardware") or {}  # the threads and kernel caps it ran under, so that the command reproduces it
    command = _caps(hw) + bench_records.cli_command("retrain", [str(run_dir)], {
        "--out": str(out), "--data": data, "--threads": hw.get("torch_threads")})
    result = bench_records.bench_record("retrain", {"run": str(run_dir), "out": str(out), "data": data}, command,
                                        "frontier.study.retrain.retrain", body, path, cpu=dev.backend == "cpu")
    return result


def _caps(hw: dict) -> list[str]:
    """The kernel caps a hardware record names (`records.ISA_CAPS`), as NAME=value."""
    return [f"{k}={v}" for k, v in sorted((hw.get("isa_caps") or {}).items())]


def machine(hw: dict) -> str:
    """A side's machine as its hardware record names it: the CPU, its id and vector kernels (with any caps that held
    them back: `records.ISA_CAPS`) where recorded, and the torch threads."""
    kernels = ", ".join(filter(None, [hw.get("cpu_id"), hw.get("cpu_isa"), *_caps(hw)]))
    return f"{hw.get('cpu')}" + (f" ({kernels})" if kernels else "") + f", {hw.get('torch_threads')} thread(s)"


def format_retrain(result: dict) -> str:
    a, b = result["record_side"], result["here"]
    lines = [f"{result['run']} retrained into {result['retrained']} ({result['why']})",
             f"{'':<10} {'steps':>6} {'val_bpb':>12} {'test_bpb':>12}  machine"]
    for name, s in (("record", a), ("here", b)):
        hw = s.get("hardware") or {}
        scores = " ".join(f"{s[k]:>12.6f}" if s.get(k) is not None else f"{'-':>12}" for k in SCORES)
        lines.append(f"{name:<10} {s['steps']:>6} {scores}  {machine(hw)}")
    diffs = ", ".join(f"{k} {v:+.3g}" for k, v in result["differences"].items())
    lines.append(f"same steps: {'yes' if result['same_steps'] else 'NO'}; here - record: {diffs}")
    if result.get("path"):
        lines.append(f"bench record: {result['path']}")
    return "\n".join(lines)

"""Retrain: train a recorded run again, whole, on this machine, and put its numbers beside the record's.

`frontier replay` checks a record's first steps; this trains the run from its start to its end with the record's
config, seed and steps, and scores it, so a reader can check a number where it matters, on the scores. A run
budgeted by the steps rule at the committed table's cost (`frontier.train.cost`) buys the same steps on any
machine, at any thread count and under any load; so the steps must agree, and the scores differ only by how this
machine's float arithmetic rounds (another CPU model, another thread count, a compiled model's own run-to-run
rounding) and by whatever changed in the code. A run whose steps the machine decided (the wall or reference clock,
a cost measured on the spot) is retrained for the steps it took, and the record says so.

The retrained run goes to its own folder (never over the record), and the comparison to a bench record of kind
`retrain` (`runs/bench/PROFILE/` by default): both records' steps, epochs, val_bpb and test_bpb, their
differences, and the hardware and code on each side.
"""

from __future__ import annotations

from pathlib import Path

from .. import records
from ..config import RunConfig
from ..data.dataset import Dataset, run_dataset
from ..devices import select_device
from ..errors import UserError
from ..train.trainer import train
from . import bench_records

SCORES = ("val_bpb", "test_bpb")


def steps_of(rec: dict) -> tuple[int | None, str]:
    """The steps to train again and why: None (the budget buys them again, by the same rule) for a steps-rule
    record at the committed table's cost; the record's own steps otherwise."""
    budget = rec.get("budget") or {}
    if budget.get("rule") == "steps" and budget.get("source") == "table" and not budget.get("explicit_steps"):
        return None, "the steps rule at the committed table's cost buys them again"
    if budget.get("explicit_steps") or rec.get("max_steps"):
        return int(rec["steps"]), "a run of a fixed number of steps"
    return int(rec["steps"]), "the steps its machine's clock bought (another machine's clock would buy others)"


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
    steps, why = steps_of(rec)
    log(f"retraining {run_dir} ({rec['recipe']}, seed {rec['seed']}) into {out}: {why}")
    dev = select_device(device)
    new = train(cfg, dataset, out, dev, seed=rec["seed"], steps=steps, progress=False, log=log)
    if new["steps"] != rec["steps"]:
        log(f"note: {new['steps']} steps here against the record's {rec['steps']}")

    def side(r: dict) -> dict:
        return {"steps": r["steps"], "epochs": records.epochs_read(r), **{k: r.get(k) for k in SCORES},
                "hardware": r.get("hardware"), "code": r.get("code"), "budget": r.get("budget")}

    body = {"run": str(run_dir), "retrained": str(out), "steps_rule": steps is None, "why": why,
            "record_side": side(rec), "here": side(new), "same_steps": new["steps"] == rec["steps"],
            "differences": {k: new[k] - rec[k] for k in SCORES if rec.get(k) is not None and new.get(k) is not None}}
    command = bench_records.cli_command("retrain", [str(run_dir)], {"--out": str(out), "--data": data})
    result = bench_records.bench_record("retrain", {"run": str(run_dir), "out": str(out), "data": data}, command,
                                        "frontier.study.retrain.retrain", body, path, cpu=dev.backend == "cpu")
    return result


def format_retrain(result: dict) -> str:
    a, b = result["record_side"], result["here"]
    lines = [f"{result['run']} retrained into {result['retrained']} ({result['why']})",
             f"{'':<10} {'steps':>6} {'val_bpb':>12} {'test_bpb':>12}  machine"]
    for name, s in (("record", a), ("here", b)):
        hw = s.get("hardware") or {}
        scores = " ".join(f"{s[k]:>12.6f}" if s.get(k) is not None else f"{'-':>12}" for k in SCORES)
        lines.append(f"{name:<10} {s['steps']:>6} {scores}  {hw.get('cpu')}, {hw.get('torch_threads')} threads")
    diffs = ", ".join(f"{k} {v:+.6f}" for k, v in result["differences"].items())
    lines.append(f"same steps: {'yes' if result['same_steps'] else 'NO'}; here - record: {diffs}")
    if result.get("path"):
        lines.append(f"bench record: {result['path']}")
    return "\n".join(lines)

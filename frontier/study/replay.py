"""Replay: is a finished run record still what the current code produces?

A chapter quotes a record written earlier only when the current code is shown to produce the same numbers.
The rule, which a reader can check by running `frontier replay RUN_DIR`:

1. **Training.** Rebuild the record's model, optimisers and data order from its config and seed, train its first
   steps (up to `REPLAY_STEPS`, those the record logged at full learning rate, so the charged clock that drives
   the schedule does not enter), and compare the training losses with the record's logged curve. An eager model
   must reproduce every one bit for bit. A compiled model must reproduce each within `REL_TOL_COMPILED`
   (relative): on CPU, Inductor's code is not bit-stable from run to run (two runs of the same code and seed
   differ by one float32 rounding, about 1e-7 relative, at some steps), so bit-for-bit would reject the code
   that wrote the record; any change to what is computed moves ten steps' losses far more than that. A record of
   a data-parallel run (`world_size` > 1; the replay runs one process on the whole batch, which trains the same
   thing with its sums in another order) must reproduce them within `REL_TOL_DATA_PARALLEL`. On a CPU model other
   than the record's, or with another number of torch threads, an eager model is held to `REL_TOL_COMPILED` too:
   another CPU's vector kernels round differently (an eager run trained on one CPU model replays on another one
   float32 rounding apart, about 2e-7 relative, at some steps), and another thread count splits the same sums in
   another order (a run trained by a one-thread worker, replayed with two threads); bit-for-bit would
   send every such record to be trained again.
2. **Scoring.** The current scorer counts the same validation tokens and bytes as the record (`val_tokens`,
   `val_bytes`: the windows and the byte counting), and the scoring functions of `frontier/train/bpb.py`
   (`SCORER_FUNCTIONS`: the formula, which positions and bytes count, the evaluation loop) have the same source
   as at the record's commit (git). Where this repository does not hold that commit (work that never landed), a
   retrain of one of its runs by code that is here stands in for the source: the same scores, within
   `RETRAIN_SCORE_TOL`, from today's scorer (`_scorer_by_retrain`).

A record written by this very code (the same `source_sha256`), or by code whose training source is the same (the
same `training_sha256`: only the study tools or figures differ, which no run's numbers depend on), needs no replay.
Each check is written beside the record as `replay-<training hash>.json` (the current code's version, the hardware,
both loss lists and the verdict), never over it; a later check by code with the same training source reads that
file instead of training again, so editing the study tools does not send every quoted run to be replayed. Hardware matters: a record from another machine is rarely reproduced bit for bit, so
the tolerance above applies there; one not reproduced within it is trained again rather than quoted.
"""

from __future__ import annotations

import ast
import json
import subprocess
import time
from pathlib import Path

from .. import records
from ..config import RunConfig
from ..data.dataset import Dataset
from ..devices import DeviceInfo

REPLAY_STEPS = 10
REL_TOL_COMPILED = 1e-6  # about 8 float32 roundings; the same code's compiled runs differ by 1 (about 1e-7)
REL_TOL_DATA_PARALLEL = 1e-5  # 2 ranks against 1 process: measured within 1.6e-7 (tests/test_distributed.py)
RETRAIN_SCORE_TOL = 1e-6  # a whole retrain on another thread count scored within 3e-8 relative (docs/log.md)
SCORER_FILE = "frontier/train/bpb.py"
SCORER_FILE_EARLIER = ("frontier/bpb.py",)  # where it lived at older commits (before the package had rooms)
SCORER_FUNCTIONS = ("bits_per_byte", "scored_bytes", "evaluate_bpb")


def replay_path(run_dir: str | Path, training_sha: str) -> Path:
    """Where the check of a record by code of this training hash (`records.training_sha256`) lies."""
    return Path(run_dir) / f"replay-{training_sha}.json"


def replay_losses(cfg: RunConfig, dataset: Dataset, device: DeviceInfo, seed: int, steps: int,
                  fracs: list[float] | None = None) -> list[float]:
    """The training losses of the first `steps` steps of `cfg` with `seed`, as `frontier.train.trainer.train` takes
    them (same set-up, same step), each step at the elapsed fraction of the run it ran at (`fracs`, the record's
    `early_fracs`, which drive the schedules; a record written before they were kept: 0, which its steps at full
    learning rate also ran at)."""
    from ..train.run import setup
    from ..train.step import train_step

    # set up as training is: a compiled run compiles for itself, or a process replaying many compiled runs would hit
    # dynamo's recompile limit and replay the rest eager
    run = setup(cfg, dataset, device, seed)
    if run.ngram is not None and run.ngram.cfg.counting == "shards":
        run.ngram.count_tokens(dataset.train_tokens(), cfg.train.seq_len)
    losses = []
    for step in range(steps):
        frac = fracs[step] if fracs and step < len(fracs) else 0.0
        loss, _ = train_step(run.step_model, run.opts, run.loader, device, frac, step, run.ngram)
        losses.append(float(loss.detach()))
    return losses


def scorer_source(text: str) -> dict[str, str]:
    """The source of each scoring function (`SCORER_FUNCTIONS`) in the text of the scorer's file."""
    tree = ast.parse(text)
    return {node.name: ast.get_source_segment(text, node) for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name in SCORER_FUNCTIONS}


def _commit_known(sha: str) -> bool:
    """Whether this repository holds commit `sha` (work that never landed does not)."""
    try:
        out = subprocess.run(["git", "-C", str(records.REPO), "cat-file", "-e", f"{sha}^{{commit}}"],
                             capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0


def _scorer_by_retrain(sha: str, root: Path | None = None) -> tuple[bool, str]:
    """For a record whose commit this repository does not hold (work that never landed), whose scoring functions
    cannot be read at that commit: shown unchanged when a run trained by that commit was retrained whole
    (`frontier retrain`, a bench record of kind `retrain` under `root`, default runs/) by code whose commit is here
    and whose scorer is today's, and scored within `RETRAIN_SCORE_TOL` (relative) of its record on every split."""
    root = root or records.REPO / "runs"
    for path in sorted(root.glob("bench/*/retrain-*.json")):
        r = json.loads(path.read_text())
        theirs, here = r["record_side"], (r["here"].get("code") or {}).get("git_sha")
        if (theirs.get("code") or {}).get("git_sha") != sha or not here or not _commit_known(here):
            continue
        if not _scorer_unchanged_since(here)[0] or not r.get("same_steps"):
            continue
        diffs = r.get("differences") or {}
        if diffs and all(abs(d) <= RETRAIN_SCORE_TOL * abs(theirs[k]) for k, d in diffs.items()):
            return True, (f"{sha[:8]} is not in this repository; a run it trained, retrained by {here[:8]} (today's "
                          f"scorer), scores the same ({path.name}: " + ", ".join(f"{k} {d:+.1e}" for k, d in diffs.items())
                          + ")")
    return False, (f"{sha[:8]} is not in this repository, and no retrain of a run it trained shows its scorer "
                   "unchanged (`frontier retrain RUN_DIR --out DIR`)")


def _scorer_unchanged_since(sha: str | None) -> tuple[bool, str]:
    if not sha:
        return False, "the record names no git commit"
    if not _commit_known(sha):
        return _scorer_by_retrain(sha)
    for where in (SCORER_FILE, *SCORER_FILE_EARLIER):  # the scorer's file at that commit: its first path there
        try:
            out = subprocess.run(["git", "-C", str(records.REPO), "show", f"{sha}:{where}"],
                                 capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, f"git is not available ({e})"
        if out.returncode == 0:
            break
    else:
        return False, f"git cannot show {SCORER_FILE} at {sha[:8]} ({out.stderr.strip()[:120]})"
    now = scorer_source((records.REPO / SCORER_FILE).read_text())
    if scorer_source(out.stdout) != now:
        return False, f"the scoring functions of {SCORER_FILE} changed since {sha[:8]}"
    return True, f"{', '.join(SCORER_FUNCTIONS)} in {SCORER_FILE} unchanged since {sha[:8]}"


def check_losses(logged_steps: list[int], logged: list[float], replayed: list[float],
                 rel_tol: float = 0.0) -> tuple[bool, str]:
    """Compare the record's logged losses (at steps 1..len(replayed)) with the replay's: each within `rel_tol`
    relative (0.0: bit for bit)."""
    pairs = [(s, a, replayed[s - 1]) for s, a in zip(logged_steps, logged) if 1 <= s <= len(replayed)]
    if not pairs:
        return False, f"the record logs no loss within the first {len(replayed)} steps"
    for s, a, b in pairs:
        if abs(a - b) > rel_tol * abs(a):
            return False, f"loss at step {s}: record {a!r}, replay {b!r}"
    how = "bit for bit" if rel_tol == 0.0 else f"within {rel_tol:g} relative"
    return True, f"losses at steps {', '.join(str(s) for s, _, _ in pairs)} reproduced {how}"


def loss_tolerance(cfg: RunConfig, world_size: int = 1, same_cpu: bool = True) -> float:
    """0.0 (bit for bit) for an eager model replayed on the CPU model and thread count that trained it;
    `REL_TOL_COMPILED` for a compiled one, whose losses are not bit-stable from one run of the same code to the next
    on CPU, and for an eager one on another CPU model or thread count (`same_cpu` False: its kernels round
    differently, or its sums run in another order); `REL_TOL_DATA_PARALLEL` for a record of `world_size` > 1
    processes (replayed by one)."""
    tol = REL_TOL_COMPILED if cfg.train.compile or not same_cpu else 0.0
    return max(tol, REL_TOL_DATA_PARALLEL) if world_size > 1 else tol


def stored_check(run_dir: str | Path, rec: dict) -> dict | None:
    """The current code's check of a record, where one exists (`verify` wrote it, or the record is this code's own);
    None where the current code has not checked it. Reads only: never replays."""
    code, theirs = records.code_version(), rec.get("code") or {}
    if theirs.get("source_sha256") == code["source_sha256"]:
        return {"reproduced": True, "why": "trained by this code (same source hash)", "code": code}
    if theirs.get("training_sha256") == code["training_sha256"]:
        return {"reproduced": True, "why": "trained by code with this training source (same training hash; only the "
                                           "study tools or figures differ)", "code": code}
    path = replay_path(run_dir, code["training_sha256"])
    return json.loads(path.read_text()) if path.is_file() else None


def verify(run_dir: str | Path, rec: dict, dataset: Dataset, device: DeviceInfo, log=print, write: bool = True) -> dict:
    """Check (or read the earlier check by this code of) whether the current code reproduces the record; the verdict
    is written beside it (`replay_path`) unless `write` is False."""
    known = stored_check(run_dir, rec)
    if known is not None:
        return known
    code = records.code_version()
    path = replay_path(run_dir, code["training_sha256"])
    cfg = RunConfig.from_dict(rec["config"])
    curve = rec.get("curve", {})
    # A logged loss at step s is comparable when the update of step s ran at full learning rate: the schedule
    # only decays, so every update before it did too.
    steps = [s for s, m in zip(curve.get("step", []), curve.get("lr_mult", [])) if s <= REPLAY_STEPS and m == 1.0]
    result = {"record": str(Path(run_dir) / records.RECORD), "record_code": rec.get("code"), "code": code,
              "hardware": records.hardware(device.device), "checked_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    replayed: list[float] = []
    if not steps:
        ok, why = False, "the record logs no full-learning-rate loss in its first steps to compare"
    else:
        t0 = time.perf_counter()
        replayed = replay_losses(cfg, dataset, device, rec["seed"], max(steps), rec.get("early_fracs"))
        result["replay_s"] = time.perf_counter() - t0
        logged = dict(zip(curve["step"], curve["train_loss"]))
        theirs_hw = rec.get("hardware") or {}
        ours_hw = result["hardware"] if "cpu_isa" in theirs_hw else {**result["hardware"], "cpu_isa": None}
        theirs, ours = _kernels(theirs_hw), _kernels(ours_hw)  # a record that does not name its kernels: the CPU's
        ok, why = check_losses(steps, [logged[s] for s in steps], replayed,
                              loss_tolerance(cfg, rec.get("world_size", 1), same_cpu=theirs == ours))
        if theirs != ours:
            why += f" (on another CPU or thread count: {ours}; the record's {theirs})"
    result["steps"] = steps
    result["losses"] = {"record": [dict(zip(curve.get("step", []), curve.get("train_loss", [])))[s] for s in steps],
                        "replay": [replayed[s - 1] for s in steps] if replayed else []}
    if ok:
        val_tokens, val_bytes = count_scored(dataset, cfg)
        if (val_tokens, val_bytes) != (rec.get("val_tokens"), rec.get("val_bytes")):
            ok, why = False, (f"the scorer counts {val_tokens} tokens / {val_bytes} bytes, the record "
                              f"{rec.get('val_tokens')} / {rec.get('val_bytes')}")
        else:
            same, scorer_why = _scorer_unchanged_since((rec.get("code") or {}).get("git_sha"))
            ok, why = same, f"{why}; {scorer_why}"
    result.update(reproduced=ok, why=why)
    if write:
        records.write_json(path, result)
    log(f"{run_dir}: replay by code {str(code.get('git_sha'))[:8]} ({code['source_sha256']}): "
        f"{'reproduced' if ok else 'NOT reproduced'}: {why}")
    return result


def _kernels(hardware: dict) -> str:
    """What decides how an eager CPU step rounds: the CPU model, the vector kernels torch dispatches to and the
    torch threads (a record from before these were kept: the CPU alone)."""
    threads, isa = hardware.get("torch_threads"), hardware.get("cpu_isa")
    caps = hardware.get("isa_caps") or {}
    isa = ", ".join([isa] * bool(isa) + [f"{k}={v}" for k, v in sorted(caps.items())])
    return (f"{hardware.get('cpu')}" + (f" ({isa})" if isa else "")
            + (f", {threads} torch threads" if threads is not None else ""))


def count_scored(dataset: Dataset, cfg: RunConfig) -> tuple[int, int]:
    """Validation tokens and bytes the scorer counts under the record's convention (no model needed)."""
    from ..data.loader import eval_windows
    from ..train.bpb import scored_bytes

    tok, tokens, n_tok, n_bytes = dataset.tokenizer, dataset.val_tokens(), 0, 0
    for w in eval_windows(tokens, cfg.train.seq_len, cfg.train.eval_batch_size):
        mask, nbytes = scored_bytes(tok, w.inputs.numpy(), w.targets.numpy(), cfg.train.bpb_convention)
        n_tok, n_bytes = n_tok + int(mask.sum()), n_bytes + int(nbytes.sum())
    return n_tok, n_bytes

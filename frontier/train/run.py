"""One run in its folder: what it trains, where it stands, and how it writes its record and checkpoints.

`Run.start` opens a new run folder for a config; `Run.reopen` continues an interrupted one from its checkpoint,
with the config, seed and step limit the checkpoint holds (nothing the caller passes replaces them). The trainer
(`frontier.train.trainer`) drives a `Run` step by step; everything here is bookkeeping around that loop:

- the record (`result.json`, `frontier.records`): written `running` at the start and rewritten at every stop;
- the checkpoints (`frontier.train.checkpoint`): the state to resume from, kept by rank 0 alone;
- the reference clock's speed probe (`frontier.train.probes`): timed at the start, at every `PROBE_EVERY` of the
  run and at the end, all uncharged.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import torch

from .. import kernels, records
from ..config import RunConfig
from ..data.dataset import Dataset, run_dataset
from ..devices import DeviceInfo
from ..errors import UserError
from ..profiles import get_profile
from . import checkpoint
from .clock import PROBE_REPEATS, BudgetClock
from .compile import CompileWatch, fresh_compile
from .cost import cost_for, counted_tokens
from .distributed import ONE, Dist
from .probes import ProbeShapes, source_hash, time_probe
from .step import Training, setup_training

EARLY_STEPS = 16  # the elapsed fractions of a run's first steps are recorded, so a replay drives its schedules alike


class RunStopped(Exception):
    """Raised after the record and checkpoint are safely written, so the CLI can exit non-zero. `cli`: the message
    in the command line's words, where they differ."""

    EXIT_CODES = {"diverged": 3, "interrupted": 130}

    def __init__(self, status: str, message: str, record: dict, cli: str | None = None):
        super().__init__(message)
        self.status, self.record, self.cli = status, record, cli

    def for_cli(self) -> str:
        return self.cli or str(self)

    @property
    def exit_code(self) -> int:
        return self.EXIT_CODES[self.status]


def check_request(cfg: RunConfig, dataset: Dataset, steps: int | None) -> None:
    """What can be refused about a run before anything is built (`setup_training` refuses the rest: fused ops that
    cannot run here, a batch the ranks cannot share)."""
    dataset.check_vocab(cfg.model.vocab_size, f"the model of {cfg.recipe!r} / {cfg.profile!r}")
    if cfg.train.budget_s <= 0 and not steps:
        raise UserError(f"the budget must be positive (got budget_s={cfg.train.budget_s})",
                        "give the config a budget_s > 0, or pass steps", "pass --budget SECONDS > 0")
    if steps is not None and steps <= 0:
        raise UserError(f"steps must be positive (got {steps})", "pass steps=N with N > 0, or None for the budget",
                        "pass --steps N > 0")


def budget_steps(cfg: RunConfig, dataset: Dataset, device: DeviceInfo, steps: int | None, table: dict | None, log,
                 probe_timer, dist: Dist) -> dict | None:
    """Under the steps rule (`frontier.train.cost`), the record's `budget`: the rule, the step cost (`cost`, None
    where `steps` was given and the table has none), where it came from (`source`: "table", "measured here" or
    "none") and the steps the run takes (`steps` where given, else what the budget buys). None under the clocks."""
    if cfg.train.clock != "steps":
        return None
    cost, source = cost_for(cfg, dataset, device, table, measure=steps is None, probe_timer=probe_timer, log=log)
    if source == "measured here" and dist.enabled:  # every rank must take the same steps: rank 0's measurement
        cost = dataclasses.replace(cost, step_s=dist.from_main(cost.step_s), fixed_s=dist.from_main(cost.fixed_s),
                                   count_s_per_token=dist.from_main(cost.count_s_per_token))
    counted = counted_tokens(cfg, dataset)
    n = steps if steps is not None else cost.steps_for(cfg.train.budget_s, counted)
    return {"rule": "steps", "cost": dataclasses.asdict(cost) if cost else None, "source": source, "steps": n,
            "explicit_steps": steps is not None, "counted_tokens": counted,
            "once_s": cost.once_s(counted) if cost else None}


def setup(cfg: RunConfig, dataset: Dataset, device: DeviceInfo, seed: int, dist: Dist = ONE) -> Training:
    """`setup_training`, after a fresh compile cache for a compiled run (its compile time and counts are its own;
    a replay, `frontier.study.replay`, sets up the same way, so that it runs the compiled code it checks)."""
    if cfg.train.compile or cfg.train.compile_optimizer:
        fresh_compile()
    return setup_training(cfg, dataset, device, seed, dist)


def open_run_dir(run_dir: Path, resuming: bool) -> None:
    """Make the folder and check it is writable; a new run never writes over another run's record."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UserError(f"cannot write to run folder {str(run_dir)!r} ({e.strerror})",
                        "choose a writable run_dir", "pass a writable --out") from None
    if not resuming and (run_dir / records.RECORD).exists():
        raise UserError(f"{str(run_dir)!r} already holds a run", "choose another run_dir, or resume(run_dir) that one",
                        "choose another --out, or continue it with --resume")


class Run:
    """A run's state (config, seed, the `Training`, clock, loss curve) and its bookkeeping."""

    def __init__(self, cfg: RunConfig, dataset: Dataset, run_dir: Path, device: DeviceInfo, seed: int,
                 training: Training, clock: BudgetClock, *, label: str | None, command: list[str] | None, strict: bool,
                 log, dist: Dist, probe_timer, sessions: list[int]):
        self.cfg, self.dataset, self.run_dir, self.device, self.seed = cfg, dataset, run_dir, device, seed
        self.training, self.clock, self.dist, self.log = training, clock, dist, log
        self.curve: dict[str, list] = {"step": [], "charged_s": [], "train_loss": [], "lr_mult": []}
        self.early_fracs: list[float] = []  # the elapsed fraction each of the first EARLY_STEPS steps ran at
        self.tokens_per_step = cfg.train.batch_size * cfg.train.seq_len
        self.reference = cfg.train.clock == "reference"
        self.shapes = ProbeShapes.of(get_profile(cfg.profile)) if self.reference else None
        self.probe_timer = probe_timer or time_probe
        self.watch = CompileWatch(cfg.train.compile or cfg.train.compile_optimizer, strict, log)
        self.counting = training.ngram.cfg.counting if training.ngram is not None else None
        self.counting_s = None  # seconds spent counting the train shards (the session that counted)
        self.ngram_checks: dict = {}  # the false-hit rate of the tables, measured once training is over
        self.base = self._base_record(label, command, strict, sessions)

    @classmethod
    def start(cls, cfg: RunConfig, dataset: Dataset, run_dir: Path, device: DeviceInfo, seed: int, steps: int | None,
              dist: Dist = ONE, cost_table: dict | None = None, **kw) -> "Run":
        check_request(cfg, dataset, steps)
        kernels.check(cfg, device)  # before its cost is benched: a run that cannot run here measures nothing
        budget = budget_steps(cfg, dataset, device, steps, cost_table, kw.get("log", print), kw.get("probe_timer"),
                              dist)
        training = setup(cfg, dataset, device, seed, dist)  # before the folder: a run that cannot run leaves none
        dist.agree(lambda: open_run_dir(run_dir, resuming=False))  # rank 0 writes; its refusal stops every rank
        clock = BudgetClock(cfg.train.budget_s, cfg.train.uncharged_steps, cfg.train.startup_allowance_s,
                            max_steps=budget["steps"] if budget else steps,
                            step_cost_s=budget["cost"]["step_s"] if budget and budget["cost"] else None)
        if clock.step_cost_s is not None:
            clock.charge_fixed(budget["once_s"])
        run = cls(cfg, dataset, run_dir, device, seed, training, clock, dist=dist, sessions=[dist.world_size], **kw)
        run.base["budget"] = budget
        return run

    @classmethod
    def reopen(cls, run_dir: Path, dataset: Dataset | None, device: DeviceInfo, dist: Dist = ONE,
               label: str | None = None, **kw) -> "Run":
        old = records.load_record(run_dir)
        if old.get("status") == "finished":
            raise UserError(f"{str(run_dir)!r} already finished", "start a new run in another run_dir",
                            "start a new run with another --out")
        state = checkpoint.load(run_dir)
        cfg, seed = state["run_config"], state["seed"]
        dataset = dataset if dataset is not None else run_dataset(old["data"])
        check_request(cfg, dataset, state["clock"]["max_steps"])
        training = setup(cfg, dataset, device, seed, dist)
        dist.agree(lambda: open_run_dir(run_dir, resuming=True))
        checkpoint.load_weights(training.model, state["model"])
        training.opts.load_state_dict(state["optim"])
        training.loader.load_state_dict(state["loader"])
        if training.ema is not None:
            training.ema.load_state_dict(state["ema"])
        torch.set_rng_state(state["rng"])
        sessions = old.get("world_size_by_session", [old.get("world_size", 1)]) + [dist.world_size]
        run = cls(cfg, dataset, run_dir, device, seed, training, BudgetClock.from_state(state["clock"]),
                  label=label or old.get("label"), dist=dist, sessions=sessions, **kw)
        run.curve, run.early_fracs = state["curve"], state["early_fracs"]
        run.base["budget"] = old.get("budget")
        return run

    def _base_record(self, label, command, strict, sessions) -> dict:
        cfg, dataset, dist = self.cfg, self.dataset, self.dist
        return {
            "recipe": cfg.recipe, "label": label or cfg.recipe, "profile": cfg.profile,
            "config": cfg.to_dict(), "config_hash": cfg.digest(), "seed": self.seed, "command": command,
            "device": self.device.describe(), "hardware": records.hardware(self.device.device),
            "code": records.code_version(),
            "data": {"folder": str(dataset.folder), "manifest_hash": dataset.manifest_hash,
                     "train_tokens": sum(len(t) for t in dataset.train_tokens()),  # epochs read = tokens / this
                     "corpus": records.manifest_corpus(dataset.manifest)},
            "params": self.training.model.num_params(), "strict": strict, "kernels": cfg.train.kernels,
            "clock": cfg.train.clock,
            "world_size": dist.world_size,  # processes (data-parallel ranks); not in the config: it trains the same
            "distributed": dist.describe(cfg.train.batch_size),
            # a run resumed on another process count: each session's (it trains the same either way)
            **({"world_size_by_session": sessions} if len(set(sessions)) > 1 else {}),
        }

    def record(self, status: str, **extra) -> dict:
        """Write the run record. A finished run records `cpu_share`: the process's CPU seconds over the training
        loop's wall seconds times torch's threads, near 1 when the run had its cores to itself, well below 1 when
        other work took them (its steps and tokens/s are then not this machine's own). The clock's fields:
        `charged_s`, all charged seconds (what the budget stops on) = `charged_step_s` (charged seconds of steps) +
        `charged_other_s` (charged work that is not a step: counting the n-gram shards, also in
        `ngram.counting_s` for the session that counted); `max_charged_step_s`, the most charged seconds of one
        step (a run on the budget ends less than its last step's charged seconds past it); `charged_steps`, the
        charged steps, a warm-up step the allowance covered in part counting as its charged share; `tokens_per_s`
        = charged_steps * tokens per step / charged_step_s (None before any charged step): the steps' throughput,
        which charged work outside the steps does not lower; under the reference clock the charged seconds are
        reference seconds (`charged_wall_s` and `tokens_per_wall_s`: the same in wall seconds)."""
        clock, ngram, ema = self.clock, self.training.ngram, self.training.ema
        rec = {
            **self.base, "status": status, "budget_s": self.cfg.train.budget_s, "max_steps": clock.max_steps,
            "charged_s": clock.charged_s, "charged_step_s": clock.charged_step_s,
            "charged_other_s": clock.charged_other_s, "charged_wall_s": clock.charged_wall_s,
            "uncharged_s": clock.uncharged_s, "wall_s": clock.wall_s, "first_step_s": clock.first_step_s,
            "step_s_median": clock.step_s_median,
            "compile_s": clock.compile_s if self.cfg.train.compile else None,
            "max_charged_step_s": clock.max_charged_step_s, "steps": clock.steps,
            "charged_steps": clock.charged_steps, "tokens": clock.steps * self.tokens_per_step,
            "epochs": clock.steps * self.tokens_per_step / max(self.base["data"]["train_tokens"], 1),  # of the split
            "tokens_per_s": clock.tokens_per_s(self.tokens_per_step) or None,
            "tokens_per_wall_s": clock.tokens_per_wall_s(self.tokens_per_step) or None,
            "probe": self.probe_record(), "compile": self.watch.summary(),
            "ngram": (dict(ngram.summary(), counting=self.counting, counting_s=self.counting_s, **self.ngram_checks)
                      if ngram is not None else None),
            **({"ema": ema.summary()} if ema is not None else {}),
            "curve": self.curve, "early_fracs": self.early_fracs,
            # what ran each fused op, counted as the ops ran in this session (not read from the config)
            "implementations": kernels.implementations(self.cfg, self.device), "kernel_calls": kernels.calls(),
            **extra,
        }
        if self.dist.is_main:
            records.write_record(self.run_dir, rec)
        return {**rec, "run_dir": str(self.run_dir)}  # where it lies is not part of the record

    def save(self, name: str = checkpoint.CHECKPOINT) -> None:
        """Save the state to resume from (rank 0 alone: the state is the same on every rank)."""
        if not self.dist.is_main:
            return
        t = self.training
        checkpoint.save(self.run_dir / name, {
            "config": self.cfg.to_dict(), "seed": self.seed, "model": t.model.state_dict(),
            "optim": t.opts.state_dict(), "loader": t.loader.state_dict(), "clock": self.clock.state_dict(),
            "curve": self.curve, "early_fracs": self.early_fracs, "rng": torch.get_rng_state(),
            **({"ema": t.ema.state_dict()} if t.ema is not None else {}),
        })

    def stop(self, status: str, message: str, name: str, cli: str | None = None, **extra) -> RunStopped:
        """Save the state and the record of a run that stops before its end; the caller raises what this returns."""
        self.save(name)
        rec = self.record(status, val_bpb=None, **extra)
        self.dist.barrier()  # no rank ends before rank 0 has saved
        return RunStopped(status, message, rec, cli)

    def log_point(self, loss: float, lr_mult: float) -> None:
        """The loss curve: every `log_every` steps, the last step, and a step whose loss is not finite."""
        if self.clock.steps % self.cfg.train.log_every == 0 or self.clock.done or not math.isfinite(loss):
            for k, v in zip(self.curve, (self.clock.steps, self.clock.charged_s, loss, lr_mult)):
                self.curve[k].append(v)

    def count_shards(self) -> None:
        """Counting the train shards into the n-gram tables is training work: charged (a new run's first session)."""
        if self.counting == "shards" and self.clock.steps == 0:
            ngram = self.training.ngram
            self.counting_s = self.dist.from_main(ngram.count_tokens(self.dataset.train_tokens(),
                                                                     self.cfg.train.seq_len))
            self.clock.add_charged(self.counting_s)

    def time_probe(self, where: str) -> None:
        """Under the reference clock, time the probe (uncharged) and charge from now on at reference time / this
        time; every rank times it (it runs beside the others, as the steps do) and takes rank 0's, as the clock is
        rank 0's. `where="during"` times it only when a multiple of `PROBE_EVERY` of the run has passed."""
        if not self.reference or (where == "during" and not self.clock.probe_due()):
            return
        timing = self.probe_timer(self.cfg.train.probe, self.shapes, PROBE_REPEATS)
        timing = {**timing, "probe_s": self.dist.from_main(timing["probe_s"]), "where": where,
                  "threads": torch.get_num_threads()}
        self.clock.add_probe(timing, self.cfg.train.probe_ref_s)

    def probe_record(self) -> dict | None:
        """The reference clock's probe: its name, source hash, reference time, every timing and the drift."""
        if not self.reference:
            return None
        return {"name": self.cfg.train.probe, "source_sha256": source_hash(self.cfg.train.probe),
                "ref_s": self.cfg.train.probe_ref_s, "shapes": dataclasses.asdict(self.shapes),
                **self.clock.probe_summary(), "timings_s": self.clock.probes}

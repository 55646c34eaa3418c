"""The trainer: train a recipe inside a charged budget, score it, and leave a run folder behind.

    rec = train(cfg, dataset, "runs/mine", device="cpu", seed=0)      # a new run
    rec = resume("runs/mine")                                        # an interrupted one, as its checkpoint says

A run folder holds `result.json` (the run record, written at the start with status `running` and rewritten at
the end) and `checkpoint.pt` (`frontier.train.checkpoint`). Ctrl-C or SIGTERM finishes the current step, saves a
checkpoint and a record with status `interrupted`; `resume` continues it. A NaN or infinite loss stops the run with
status `diverged` (checkpoint and record kept). Evaluation and checkpointing are never charged.

`run_steps` below is the whole loop; its bookkeeping is `frontier.train.run.Run` (the record, checkpoints, the
reference clock's probe), one step is `frontier.train.step.train_step`, the score `frontier.train.evaluate`.

A run whose config has an EMA of the weights (`frontier.train.ema`) updates it inside each timed step (charged), keeps
it in its checkpoints (so `resume` continues it), and is scored twice, or three times (free): `val_bpb_live`
and `val_loss_live` for the live weights, `val_bpb_ema` and `val_loss_ema` for the EMA alone, and `val_bpb`,
`val_loss` for the weights the config declares, mix * EMA + (1 - mix) * live (the EMA's when mix is 1).

Data parallelism (`dist`, `frontier.train.distributed`: N processes under torchrun): every rank runs `train` on its rows
of the same global batches; the loss is averaged over the ranks, the clock is rank 0's, every rank stops at the
same step, and rank 0 alone writes the record and checkpoints and evaluates. With one process nothing changes.

Under the steps rule (`TrainConfig.clock == "steps"`, the smoke and cpu profiles' default; `frontier.train.cost`)
the budget is bought as steps before the run, at the recipe's step cost from the committed table (measured on the
spot where the table has none); the record's `budget` says how many, at what cost, and where the cost came from.
Under the reference clock (`TrainConfig.clock`, `frontier.train.clock`) the speed probe is timed before the first
step (of each session: a resumed run times it again before going on), at every `PROBE_EVERY` of the run and once
after the last step, all uncharged; the record's `probe` keeps every timing (`timings_s`), the drift and its flag,
and `charged_s` is in reference seconds beside `charged_wall_s`, the wall seconds of the same work. Under the wall
clock no probe runs, `probe` is None and the two are equal. `clock` names the clock.

A finished run with an n-gram model records `ngram.false_hits` (`frontier.model.ngram.false_hit_rate`, uncharged, its
seconds in `ngram.false_hits_s`): how often its tables report seen a validation context never counted, measured
against exactly the batches the tables counted (the train shards' windows, or with streamed counting the
first-epoch batches of the run's data order, replayed from its seed).
"""

from __future__ import annotations

import math
import signal
import sys
import time
from pathlib import Path

import torch

from .. import kernels
from ..config import RunConfig
from ..data.dataset import Dataset
from ..devices import DeviceInfo, as_device
from .checkpoint import CHECKPOINT, DIVERGED_CHECKPOINT, FAILED_CHECKPOINT
from .clock import BudgetClock
from .distributed import ONE, Dist
from .evaluate import evaluate_run, false_hits, score_run
from .run import EARLY_STEPS, Run, RunStopped
from .step import train_step

# Also importable from here, where the chapters and older scripts import them:
from .checkpoint import load_run_model, load_weights  # noqa: F401, E402
from .step import Training, build_model, make_loader, setup_training  # noqa: F401, E402

evaluate = evaluate_run  # the public name: re-score a run folder's checkpoint


class _StopFlag:
    """SIGINT/SIGTERM set a flag that the loop checks after each step; a second signal acts as usual."""

    def __init__(self):
        self.signal = None
        self._old = {}

    def __enter__(self):
        for s in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[s] = signal.signal(s, self._handle)
            except ValueError:  # not the main thread: no handlers
                pass
        return self

    def _handle(self, signum, frame):
        self.signal = signal.Signals(signum).name
        for s, old in self._old.items():
            signal.signal(s, old)

    def __exit__(self, *exc):
        for s, old in self._old.items():
            signal.signal(s, old)


class Progress:
    """One line that redraws on a terminal; a line every tenth of the run otherwise (logs, notebooks)."""

    def __init__(self, enabled: bool, stream=None):
        self.enabled, self.stream = enabled, stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.next_tenth = 1

    def update(self, clock: BudgetClock, loss: float, tok_s: float, final: bool = False) -> None:
        if not self.enabled:
            return
        frac = min(clock.fraction, 1.0)
        if clock.max_steps:
            where = f"step {clock.steps}/{clock.max_steps}"
        else:
            where = f"{clock.charged_s:6.1f}/{clock.budget_s:.0f}s step {clock.steps}"
        bar = "#" * int(frac * 20) + "." * (20 - int(frac * 20))
        line = f"[{bar}] {where} loss {loss:.4f} {tok_s:,.0f} tok/s"
        if self.tty:
            self.stream.write("\r" + line + ("\n" if final else ""))
            self.stream.flush()
        elif final or frac * 10 >= self.next_tenth:
            self.next_tenth = int(frac * 10) + 1
            print(line, file=self.stream, flush=True)


def train(cfg: RunConfig, dataset: Dataset, run_dir: str | Path, device: DeviceInfo | str = "cpu", seed: int = 0,
          steps: int | None = None, *, strict: bool = False, progress: bool = True, command: list[str] | None = None,
          label: str | None = None, log=print, dist: Dist = ONE, probe_timer=None,
          cost_table: dict | None = None) -> dict:
    """Train `cfg` on `dataset` in a new run folder and return the run record (also in `run_dir/result.json`).
    `device`: a `DeviceInfo` or a name ("cpu", "cuda", "neuron", "auto"). `steps`: stop after that many steps
    instead of on the budget. `label` names what was run when it is a variant of its recipe (e.g.
    `bigram-640steps`); the record keeps it. `strict`: a recompile after warm-up stops the run. `dist`: this
    process's place in a data-parallel job (`frontier.train.distributed.init`); a rank other than 0 writes nothing
    and returns its own bookkeeping without a score. `probe_timer`: what times the speed probe under the reference
    clock (default `frontier.train.probes.time_probe`; tests pass a fake one). `cost_table`: the step costs the
    steps rule reads (`frontier.train.cost`; default the committed table)."""
    device = as_device(device)
    run = Run.start(cfg, dataset, Path(run_dir), device, seed, steps, dist, cost_table, label=label, command=command,
                    strict=strict, log=log, probe_timer=probe_timer)
    return run_steps(run, progress)


def resume(run_dir: str | Path, dataset: Dataset | None = None, device: DeviceInfo | str = "cpu", *,
           strict: bool = False, progress: bool = True, command: list[str] | None = None, log=print,
           dist: Dist = ONE, probe_timer=None) -> dict:
    """Continue an interrupted run from its checkpoint, with the config, seed and step limit it was started with;
    `dataset` defaults to the data folder its record names. Returns the run record, as `train` does."""
    run = Run.reopen(Path(run_dir), dataset, as_device(device), dist, command=command, strict=strict, log=log,
                     probe_timer=probe_timer)
    return run_steps(run, progress)


def run_steps(run: Run, progress: bool = True) -> dict:
    """The loop: step until the clock says the budget is spent, then save, score and record the run."""
    clock, t, dist, cfg = run.clock, run.training, run.dist, run.cfg
    kernels.reset_calls()
    run.time_probe("resume" if clock.steps else "start")  # before anything charged, and before the record says running
    run.record("running")  # from here on a signal is a clean interruption
    run.count_shards()
    last_loss, t_shown = float("nan"), 0.0
    show = Progress(progress and dist.is_main)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    try:
        with _StopFlag() as stop:
            while not clock.done:
                run.time_probe("during")
                t0 = time.perf_counter()
                if clock.steps < EARLY_STEPS:
                    run.early_fracs.append(clock.fraction)
                loss, lr_mult = train_step(t.step_model, t.opts, t.loader, run.device, clock.fraction, clock.steps,
                                           t.ngram, t.ema, dist)
                last_loss, signalled = dist.step_sync(loss, stop.signal)  # mean over ranks; a signal any rank got
                clock.add_step(dist.from_main(time.perf_counter() - t0))  # the job's clock is rank 0's
                if clock.steps >= clock.uncharged_steps:
                    run.watch.warmup_done()  # the first call marks the end of warm-up
                run.log_point(last_loss, lr_mult)
                if not math.isfinite(last_loss):
                    raise run.stop("diverged", f"diverged at step {clock.steps}: loss is {last_loss}; the state is in "
                                   f"{run.run_dir / DIVERGED_CHECKPOINT}; lower the learning rates or check the data",
                                   DIVERGED_CHECKPOINT, diverged_at_step=clock.steps)
                run.watch.after_step(clock.steps)
                if time.perf_counter() - t_shown > 0.5 or clock.done:
                    t_shown = time.perf_counter()
                    show.update(clock, last_loss, clock.tokens_per_s(run.tokens_per_step), final=clock.done)
                if signalled:
                    saved = f"{signalled} at step {clock.steps}: saved {run.run_dir / CHECKPOINT}"
                    raise run.stop("interrupted", f"{saved}; continue it with resume({str(run.run_dir)!r})", CHECKPOINT,
                                   cli=f"{saved}; continue with --resume {run.run_dir}", signal=signalled)
    except (RunStopped, KeyboardInterrupt):
        raise
    except Exception as e:  # a crash (a compiler error, out of memory): keep the record and the state
        run.save(FAILED_CHECKPOINT)
        run.record("failed", val_bpb=None, error=f"{type(e).__name__}: {e}"[:4000])
        raise
    cpu_share = (time.process_time() - cpu0) / ((time.perf_counter() - wall0) * torch.get_num_threads())
    run.time_probe("end")  # the closing timing: how far the machine's speed moved over the run (charges nothing)
    run.save()
    if not dist.is_main:  # rank 0 evaluates (the weights are the same everywhere) and writes the record
        return {"status": "trained", "rank": dist.rank, "steps": clock.steps, "curve": run.curve}
    if t.ngram is not None:
        t0 = time.perf_counter()
        run.ngram_checks["false_hits"] = false_hits(t.ngram, cfg, run.dataset, run.seed, clock.steps)
        run.ngram_checks["false_hits_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    score = score_run(t.model, t.ema, cfg, run.dataset, run.device)
    return run.record("finished", eval_s=time.perf_counter() - t0, final_train_loss=last_loss, cpu_share=cpu_share,
                      **score)

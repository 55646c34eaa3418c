"""The trainer: train a recipe inside a charged budget, evaluate it, and leave a run folder behind.

A run folder holds `result.json` (the run record, written at the start with status `running` and rewritten at
the end), `checkpoint.pt`, and `loss.png`. Ctrl-C or SIGTERM finishes the current step, saves a checkpoint and a
record with status `interrupted`; `resume` continues it. A NaN or infinite loss stops the run with status
`diverged` (checkpoint and record kept). Evaluation and checkpointing are never charged.

A run whose config has an EMA of the weights (`frontier.train.ema`) updates it inside each timed step (charged), keeps
it in its checkpoints (so `resume` continues it), and is scored twice, or three times (free): `val_bpb_live`
and `val_loss_live` for the live weights, `val_bpb_ema` and `val_loss_ema` for the EMA alone, and `val_bpb`,
`val_loss` for the weights the config declares, mix * EMA + (1 - mix) * live (the EMA's when mix is 1).

Data parallelism (`dist`, `frontier.train.distributed`: N processes under torchrun): every rank runs `train` on its rows
of the same global batches; the loss is averaged over the ranks, the clock is rank 0's, every rank stops at the
same step, and rank 0 alone writes the record and checkpoints and evaluates. With one process nothing changes.

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

import dataclasses
import math
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .. import kernels, records
from ..config import RunConfig
from ..data.dataset import Dataset
from ..data.loader import TrainLoader
from ..devices import DeviceInfo
from ..errors import UserError
from ..model.gpt import GPT
from ..optim.optimizers import Optimizers
from .bpb import evaluate_bpb_adaptive, evaluate_bpb_by_document
from ..profiles import get_profile
from .clock import PROBE_REPEATS, BudgetClock
from .probes import ProbeShapes, source_hash, time_probe
from .compile import CompileWatch, compile_model, fresh_compile
from .distributed import ONE, Dist
from .ema import WeightEMA

CHECKPOINT = "checkpoint.pt"
DIVERGED_CHECKPOINT = "checkpoint-diverged.pt"
FAILED_CHECKPOINT = "checkpoint-failed.pt"
EXIT_DIVERGED = 3
EXIT_INTERRUPTED = 130
EARLY_STEPS = 16  # the elapsed fractions of a run's first steps are recorded, so a replay drives its schedules alike


class RunStopped(Exception):
    """Raised after the record and checkpoint are safely written, so the CLI can exit non-zero."""

    def __init__(self, status: str, message: str, record: dict):
        super().__init__(message)
        self.status, self.record = status, record

    @property
    def exit_code(self) -> int:
        return EXIT_DIVERGED if self.status == "diverged" else EXIT_INTERRUPTED


def build_model(cfg: RunConfig, batch_size: int | None = None) -> torch.nn.Module:
    """`cfg`'s model; `batch_size`: the rows of a training batch in this process (default the config's; a rank
    of a data-parallel job has its share), the shape of the sparse bigram update's gradient sink."""
    if not cfg.model.network:
        from ..model.ngram import NGramOnly

        return NGramOnly(cfg.model.ngram, cfg.model.vocab_size)
    return GPT(cfg.model, max_seq_len=cfg.train.seq_len, batch_size=batch_size or cfg.train.batch_size,
               kernels=cfg.train.kernels)


def load_weights(model: torch.nn.Module, state: dict) -> None:
    """Load a checkpoint's model state. The sparse bigram update's gradient sink (`*.sink`: zeros of a training
    batch's shape, not a weight) is left as the model has it: its shape is the rows of one process's batch, which
    differ between a run on one process and a rank of N, or evaluation."""
    sinks = {k for k, v in model.state_dict().items() if k.endswith(".sink")}
    missing, unexpected = model.load_state_dict({k: v for k, v in state.items() if k not in sinks}, strict=False)
    if set(missing) - sinks or unexpected:
        raise RuntimeError(f"the checkpoint does not fit the model: missing {sorted(set(missing) - sinks)}, "
                           f"unexpected {sorted(unexpected)}")


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


def make_loader(cfg: RunConfig, dataset: Dataset, seed: int, dist: Dist = ONE) -> TrainLoader:
    folds = cfg.model.ngram.folds if cfg.model.ngram is not None else 1
    return TrainLoader(dataset.train_tokens(), cfg.train.seq_len, cfg.train.batch_size, seed, folds,
                       rank=dist.rank, world_size=dist.world_size)


@dataclass
class Training:
    """What a run steps: the model, the model as each step calls it (compiled or not, under DDP with data
    parallelism), the optimisers, the data order, the n-gram tables when the recipe mixes them in, the EMA of the
    weights when it has one, and where this process stands in a data-parallel job."""

    model: torch.nn.Module
    step_model: torch.nn.Module
    opts: Optimizers
    loader: TrainLoader
    ngram: torch.nn.Module | None
    ema: WeightEMA | None = None
    dist: Dist = ONE


def setup_training(cfg: RunConfig, dataset: Dataset, device: DeviceInfo, seed: int, dist: Dist = ONE) -> Training:
    """`cfg`'s model, optimisers and data order with `seed`, built in one order so that the trainer, the bench and
    a replay (`frontier.study.replay`) start from the same weights and batches (on every rank of a data-parallel job:
    the same seed gives every rank the same weights). First `kernels.check`: an implementation of the fused ops
    that cannot run here stops the run before anything is built."""
    kernels.check(cfg, device)
    rows = dist.rank_batch(cfg.train.batch_size)
    torch.manual_seed(seed)
    np.random.seed(seed)
    model = (build_model(cfg, rows) if dist.enabled else build_model(cfg)).to(device.device)
    opts = Optimizers(model, cfg, fused=device.fused_optimizer, ns_dtype=device.newton_schulz_dtype,
                      compile_backend=device.compile_backend, dist=dist)
    loader = make_loader(cfg, dataset, seed, dist)
    own = {id(p) for p in opts.own_gradient_params()}
    step_model = dist.wrap(model, ignore=[n for n, p in model.named_parameters() if id(p) in own])
    step_model = compile_model(step_model, device) if cfg.train.compile else step_model
    ema = WeightEMA(model, cfg.train.ema) if cfg.train.ema is not None else None
    return Training(model, step_model, opts, loader, getattr(model, "ngram", None), ema, dist)


def train_step(step_model, opts: Optimizers, loader: TrainLoader, device: DeviceInfo, frac: float, step: int,
               ngram=None, ema: WeightEMA | None = None, dist: Dist = ONE) -> tuple[torch.Tensor, float]:
    """One step on the next batch, all of it charged: forward, backward, update, (streaming n-gram counting,
    first epoch only) counting the batch after the step that used it, so a batch never sees its own counts, and
    the EMA's update of step number `step + 1` at `frac` (where the run has one). With data parallelism the
    batch is this rank's rows (the returned loss their mean) and the counting sees the whole batch."""
    x, y = loader.next_batch()
    count_it = ngram is not None and ngram.cfg.counting == "stream" and loader.epoch == 0  # a first-epoch batch
    x, y = x.to(device.device, non_blocking=True), y.to(device.device, non_blocking=True)
    with device.autocast():
        loss = step_model(x, y) if ngram is None else step_model(x, y, fold=loader.batch_fold)
    loss.backward()
    lr_mult = opts.step(frac, step, x)
    opts.zero_grad()
    if count_it:  # every rank counts the whole batch: the tables stay the same everywhere
        ngram.observe(dist.all_gather_rows(x), dist.all_gather_rows(y), loader.batch_fold)
    if ema is not None:
        ema.update(frac, step + 1)
    device.step_end()
    return loss, lr_mult


def _prepare_run_dir(run_dir: Path, resume: bool) -> None:
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UserError(f"cannot write to run folder {str(run_dir)!r} ({e.strerror})", "pass a writable --out") from None
    if not resume and (run_dir / records.RECORD).exists():
        raise UserError(
            f"{str(run_dir)!r} already holds a run", "choose another --out, or continue it with --resume"
        )


def _save(path: Path, payload: dict) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)


def train(
    cfg: RunConfig,
    dataset: Dataset,
    run_dir: str | Path,
    device: DeviceInfo,
    seed: int = 0,
    steps: int | None = None,
    resume: bool = False,
    strict: bool = False,
    progress: bool = True,
    command: list[str] | None = None,
    label: str | None = None,
    log=print,
    dist: Dist = ONE,
    probe_timer=None,
) -> dict:
    """Train `cfg` on `dataset` and return the run record (also in `run_dir/result.json`). `label` names what was
    run when it is a variant of its recipe (e.g. `bigram-640steps`); the record keeps it. `dist`: this process's
    place in a data-parallel job (`frontier.train.distributed.init`); a rank other than 0 writes nothing and returns
    its own bookkeeping without a score. `probe_timer`: what times the speed probe under the reference clock
    (default `frontier.train.probes.time_probe`; tests pass a fake one)."""
    run_dir = Path(run_dir)
    dataset.check_vocab(cfg.model.vocab_size, f"the model of {cfg.recipe!r} / {cfg.profile!r}")
    if cfg.train.budget_s <= 0 and not steps:
        raise UserError(f"budget must be positive (got {cfg.train.budget_s})", "pass --budget SECONDS > 0")
    if steps is not None and steps <= 0:
        raise UserError(f"--steps must be positive (got {steps})", "pass --steps N > 0")
    kernels.check(cfg, device)  # before anything is written: a choice that cannot run here leaves no run folder
    dist.rank_batch(cfg.train.batch_size)  # a batch the ranks cannot share stops every rank, before anything
    dist.agree(lambda: _prepare_run_dir(run_dir, resume))  # rank 0 writes; its refusal stops every rank
    ckpt, sessions = None, [dist.world_size]  # the process count of each session of the run
    if resume:
        if not (run_dir / CHECKPOINT).is_file():
            raise UserError(f"{str(run_dir)!r} has no {CHECKPOINT} to resume", "resume a run folder that was interrupted")
        ckpt = torch.load(run_dir / CHECKPOINT, map_location="cpu", weights_only=False)
        cfg, seed, steps = RunConfig.from_dict(ckpt["config"]), ckpt["seed"], ckpt["clock"]["max_steps"]
        old = records.load_record(run_dir)
        if old.get("status") == "finished":
            raise UserError(f"{str(run_dir)!r} already finished", "start a new run with another --out")
        label = label or old.get("label")
        sessions = old.get("world_size_by_session", [old.get("world_size", 1)]) + sessions

    if cfg.train.compile or cfg.train.compile_optimizer:
        fresh_compile()  # this run compiles for itself: its compile time and counts are its own

    run = setup_training(cfg, dataset, device, seed, dist)
    model, step_model, opts, loader, ngram = run.model, run.step_model, run.opts, run.loader, run.ngram
    ema = run.ema
    reference = cfg.train.clock == "reference"
    clock = BudgetClock(cfg.train.budget_s, cfg.train.uncharged_steps, cfg.train.startup_allowance_s, max_steps=steps)
    curve: dict[str, list] = {"step": [], "charged_s": [], "train_loss": [], "lr_mult": []}
    early_fracs: list[float] = []  # the elapsed fraction each of the first EARLY_STEPS steps ran at
    tokens_per_step = cfg.train.batch_size * cfg.train.seq_len
    if ckpt is not None:
        load_weights(model, ckpt["model"])
        opts.load_state_dict(ckpt["optim"])
        loader.load_state_dict(ckpt["loader"])
        clock = BudgetClock.from_state(ckpt["clock"])
        curve = ckpt["curve"]
        early_fracs = ckpt.get("early_fracs", [])
        torch.set_rng_state(ckpt["rng"])
        if ema is not None:
            ema.load_state_dict(ckpt["ema"])

    base_record = {
        "recipe": cfg.recipe,
        "label": label or cfg.recipe,
        "profile": cfg.profile,
        "config": cfg.to_dict(),
        "config_hash": cfg.digest(),
        "seed": seed,
        "command": command,
        "device": device.describe(),
        "hardware": records.hardware(device.device),
        "code": records.code_version(),
        "data": {"folder": str(dataset.folder), "manifest_hash": dataset.manifest_hash,
                 "train_tokens": sum(len(t) for t in dataset.train_tokens())},  # epochs read = tokens / this
        "params": model.num_params(),
        "strict": strict,
        "kernels": cfg.train.kernels,
        "clock": cfg.train.clock,
        "world_size": dist.world_size,  # processes (data-parallel ranks); not in the config: it trains the same
        "distributed": dist.describe(cfg.train.batch_size),
        # a run resumed on another process count: each session's (it trains the same either way)
        **({"world_size_by_session": sessions} if len(set(sessions)) > 1 else {}),
    }

    def record(status: str, **extra) -> dict:
        """Write the run record. A finished run records `cpu_share`: the process's CPU seconds over the training
        loop's wall seconds times torch's threads, near 1 when the run had its cores to itself, well below 1 when
        other work took them (its steps and tokens/s are then not this machine's own). The clock's fields: `charged_s`, all charged seconds (what the budget stops on)
        = `charged_step_s` (charged seconds of steps) + `charged_other_s` (charged work that is not a step:
        counting the n-gram shards, also in `ngram.counting_s` for the session that counted);
        `max_charged_step_s`, the most charged seconds of one step (a run on the budget, without --steps, ends
        less than its last step's charged seconds past it); `charged_steps`, the charged steps, a warm-up step the allowance covered in part counting
        as its charged share; `tokens_per_s` = charged_steps * tokens per step / charged_step_s (None before any
        charged step): the steps' throughput, which charged work outside the steps does not lower; under the
        reference clock the charged seconds are reference seconds (`charged_wall_s` and `tokens_per_wall_s`: the
        same in wall seconds)."""
        rec = {
            **base_record,
            "status": status,
            "budget_s": cfg.train.budget_s,
            "max_steps": clock.max_steps,
            "charged_s": clock.charged_s,
            "charged_step_s": clock.charged_step_s,
            "charged_other_s": clock.charged_other_s,
            "charged_wall_s": clock.charged_wall_s,
            "uncharged_s": clock.uncharged_s,
            "wall_s": clock.wall_s,
            "first_step_s": clock.first_step_s,
            "step_s_median": clock.step_s_median,
            "compile_s": clock.compile_s if cfg.train.compile else None,
            "max_charged_step_s": clock.max_charged_step_s,
            "steps": clock.steps,
            "charged_steps": clock.charged_steps,
            "tokens": clock.steps * tokens_per_step,
            "tokens_per_s": clock.tokens_per_s(tokens_per_step) or None,
            "tokens_per_wall_s": clock.tokens_per_wall_s(tokens_per_step) or None,
            "probe": probe_record(),
            "compile": watch.summary(),
            "ngram": (dict(ngram.summary(), counting=counting, counting_s=counting_s, **ngram_checks)
                      if ngram is not None else None),
            **({"ema": ema.summary()} if ema is not None else {}),
            "curve": curve,
            "early_fracs": early_fracs,
            # what ran each fused op, counted as the ops ran in this session (not read from the config)
            "implementations": kernels.implementations(cfg, device),
            "kernel_calls": kernels.calls(),
            **extra,
        }
        if dist.is_main:
            records.write_record(run_dir, rec)
        return {**rec, "run_dir": str(run_dir)}  # where it lies is not part of the record

    def probe_record() -> dict | None:
        """The reference clock's probe: its name, source hash, reference time, every timing and the drift."""
        if not reference:
            return None
        return {"name": cfg.train.probe, "source_sha256": source_hash(cfg.train.probe), "ref_s": cfg.train.probe_ref_s,
                "shapes": dataclasses.asdict(shapes), **clock.probe_summary(), "timings_s": clock.probes}

    def time_the_probe(where: str) -> None:
        """Time the probe (uncharged) and charge from now on at reference time / this time; every rank times it
        (it runs beside the others, as the steps do) and takes rank 0's, as the clock is rank 0's."""
        timing = (probe_timer or time_probe)(cfg.train.probe, shapes, PROBE_REPEATS)
        timing = {**timing, "probe_s": dist.from_main(timing["probe_s"]), "where": where,
                  "threads": torch.get_num_threads()}
        clock.add_probe(timing, cfg.train.probe_ref_s)

    shapes = ProbeShapes.of(get_profile(cfg.profile)) if reference else None

    def checkpoint(path: Path) -> None:
        if not dist.is_main:  # the state is the same on every rank: rank 0 keeps it
            return
        _save(path, {
            "config": cfg.to_dict(), "seed": seed, "model": model.state_dict(), "optim": opts.state_dict(),
            "loader": loader.state_dict(), "clock": clock.state_dict(), "curve": curve, "early_fracs": early_fracs,
            "rng": torch.get_rng_state(),
            **({"ema": ema.state_dict()} if ema is not None else {}),
        })

    watch = CompileWatch(cfg.train.compile or cfg.train.compile_optimizer, strict, log)
    counting = ngram.cfg.counting if ngram is not None else None
    counting_s = None  # seconds spent counting the train shards (this session; a resumed run does not recount)
    ngram_checks = {}  # the false-hit rate of the tables, measured once training is over
    kernels.reset_calls()
    if reference:  # before anything charged (the shard counting is charged at the probe's rate too), and before the
        # record says running (from then on a signal is a clean interruption)
        time_the_probe("resume" if clock.steps else "start")
    record("running")
    if counting == "shards" and clock.steps == 0:  # counting the train shards is training work: charged
        counting_s = dist.from_main(ngram.count_tokens(dataset.train_tokens(), cfg.train.seq_len))
        clock.add_charged(counting_s)
    last_loss, t_last = float("nan"), 0.0
    show = Progress(progress and dist.is_main)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    try:
        with _StopFlag() as stop:
            while not clock.done:
                if reference and clock.probe_due():
                    time_the_probe("during")
                t0 = time.perf_counter()
                if clock.steps < EARLY_STEPS:
                    early_fracs.append(clock.fraction)
                loss, lr_mult = train_step(step_model, opts, loader, device, clock.fraction, clock.steps, ngram, ema,
                                           dist)
                last_loss, signalled = dist.step_sync(loss, stop.signal)  # mean over ranks; a signal any rank got
                clock.add_step(dist.from_main(time.perf_counter() - t0))  # the job's clock is rank 0's
                if clock.steps >= clock.uncharged_steps:
                    watch.warmup_done()  # the first call marks the end of warm-up
                if clock.steps % cfg.train.log_every == 0 or clock.done or not math.isfinite(last_loss):
                    for k, v in zip(curve, (clock.steps, clock.charged_s, last_loss, lr_mult)):
                        curve[k].append(v)
                if not math.isfinite(last_loss):
                    checkpoint(run_dir / DIVERGED_CHECKPOINT)
                    rec = record("diverged", val_bpb=None, diverged_at_step=clock.steps)
                    dist.barrier()  # no rank ends before rank 0 has saved
                    msg = (f"diverged at step {clock.steps}: loss is {last_loss}; the state is in "
                           f"{run_dir / DIVERGED_CHECKPOINT}; lower the learning rates or check the data")
                    raise RunStopped("diverged", msg, rec)
                watch.after_step(clock.steps)
                t_now = time.perf_counter()
                if t_now - t_last > 0.5 or clock.done:
                    t_last = t_now
                    show.update(clock, last_loss, clock.tokens_per_s(tokens_per_step), final=clock.done)
                if signalled:
                    checkpoint(run_dir / CHECKPOINT)
                    rec = record("interrupted", val_bpb=None, signal=signalled)
                    dist.barrier()  # no rank ends before rank 0 has saved
                    raise RunStopped("interrupted", f"{signalled} at step {clock.steps}: saved {run_dir / CHECKPOINT}; "
                                     f"continue with --resume {run_dir}", rec)
    except (RunStopped, KeyboardInterrupt):
        raise
    except Exception as e:  # a crash (a compiler error, out of memory): keep the record and the state
        checkpoint(run_dir / FAILED_CHECKPOINT)
        record("failed", val_bpb=None, error=f"{type(e).__name__}: {e}"[:4000])
        raise

    cpu_share = (time.process_time() - cpu0) / ((time.perf_counter() - wall0) * torch.get_num_threads())
    if reference:  # the closing timing: how far the machine's speed moved over the run (charges nothing)
        time_the_probe("end")
    checkpoint(run_dir / CHECKPOINT)
    if not dist.is_main:  # rank 0 evaluates (the weights are the same everywhere) and writes the record
        return {"status": "trained", "rank": dist.rank, "steps": clock.steps, "curve": curve}
    if ngram is not None:
        t0 = time.perf_counter()
        ngram_checks["false_hits"] = false_hits(ngram, cfg, dataset, seed, clock.steps)
        ngram_checks["false_hits_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    score = score_run(model, ema, cfg, dataset, device)
    rec = record("finished", eval_s=time.perf_counter() - t0, final_train_loss=last_loss, cpu_share=cpu_share, **score)
    plot_run(rec, run_dir / "loss.png")
    return rec


def counted_batches(cfg: RunConfig, dataset: Dataset, seed: int, steps: int):
    """The batches (x, y, fold) a run's n-gram tables counted in its `steps` steps: the train shards' windows
    (shard counting), or the first-epoch batches of its data order (streamed counting, one process's view of the
    global batches, which every rank counts whole)."""
    from ..model.ngram import shard_batches

    if cfg.model.ngram.counting == "shards":
        yield from shard_batches(dataset.train_tokens(), cfg.train.seq_len, cfg.model.ngram.folds)
        return
    loader = make_loader(cfg, dataset, seed)
    for _ in range(steps):
        x, y = loader.next_batch()
        if loader.epoch > 0:
            return
        yield x, y, loader.batch_fold


def false_hits(ngram, cfg: RunConfig, dataset: Dataset, seed: int, steps: int) -> dict:
    """`frontier.model.ngram.false_hit_rate` of a run's tables on the validation split, against what they counted."""
    from ..model.ngram import false_hit_rate

    return false_hit_rate(ngram, counted_batches(cfg, dataset, seed, steps), dataset.val_tokens(), cfg.train.seq_len,
                          cfg.train.eval_batch_size)


def plot_run(rec: dict, path: Path) -> None:
    from ..figures import loss_curve_figure, save_figure

    save_figure(loss_curve_figure([rec]), path)


WEIGHTS = ("live", "ema")


def load_run_model(run_dir: str | Path, device: torch.device | str = "cpu",
                   weights: str | None = None) -> tuple[torch.nn.Module, RunConfig]:
    """The model saved in a run folder's checkpoint, in eval mode, and its config. `weights`: None, the weights
    its `val_bpb` scores (for a run with an EMA, mix * EMA + (1 - mix) * live); "live", the trained weights;
    "ema", the EMA alone (`val_bpb_ema`)."""
    run_dir = Path(run_dir)
    if weights is not None and weights not in WEIGHTS:
        raise UserError(f"unknown weights {weights!r}", f"choose one of {', '.join(WEIGHTS)}")
    if not (run_dir / CHECKPOINT).is_file():
        raise UserError(f"{str(run_dir)!r} has no {CHECKPOINT}", "evaluate a run folder written by `frontier train`")
    ckpt = torch.load(run_dir / CHECKPOINT, map_location="cpu", weights_only=False)
    cfg = RunConfig.from_dict(ckpt["config"])
    model = build_model(cfg)
    load_weights(model, ckpt["model"])
    if weights == "ema" and cfg.train.ema is None:
        raise UserError(f"the run in {str(run_dir)!r} has no EMA of its weights",
                        "evaluate its live weights (--weights live, or no --weights)")
    if cfg.train.ema is not None and weights != "live":
        ema = WeightEMA(model, cfg.train.ema)
        ema.load_state_dict(ckpt["ema"])
        ema.copy_to_model(1.0 if weights == "ema" else None)
    return model.to(device).eval(), cfg


def evaluate_run(run_dir: str | Path, dataset: Dataset | None, device: DeviceInfo, log=print,
                 weights: str | None = None, adaptive: bool = False, adaptive_batch: int = 1) -> dict:
    """Re-score a run's checkpoint on the validation split (`frontier eval`); `weights` as in `load_run_model`.
    `adaptive`: also `val_bpb_adaptive` and `val_loss_adaptive` (`frontier.train.bpb.evaluate_bpb_adaptive`; not the
    competition's score), after `val_bpb`; the run needs an n-gram model. `adaptive_batch` windows are scored
    before each count: 1, window by window, is what `frontier eval --adaptive` and the chapters report; more is
    faster, and each window then misses the counts of the others in its batch (the chapters' smoke runs)."""
    rec = records.load_record(run_dir)
    model, cfg = load_run_model(run_dir, device.device, weights)
    if dataset is None:
        dataset = Dataset(rec["data"]["folder"])
    dataset.check_vocab(cfg.model.vocab_size, f"the run in {str(run_dir)!r}")
    if dataset.manifest_hash != rec["data"]["manifest_hash"]:
        log(f"note: {dataset.folder} is not the data this run trained on (manifest {dataset.manifest_hash} != "
            f"{rec['data']['manifest_hash']})")
    if adaptive and getattr(model, "ngram", None) is None:
        raise UserError(f"the run in {str(run_dir)!r} ({cfg.recipe}) has no n-gram tables for --adaptive to count "
                        "into", "evaluate it without --adaptive, or pass a run of an n-gram recipe")
    score = score_model(model, cfg, dataset, device)
    if not adaptive:
        return score
    a = evaluate_bpb_adaptive(model, dataset.val_tokens(), dataset.tokenizer, cfg.train.seq_len, adaptive_batch,
                              device.device, cfg.train.bpb_convention, device.autocast())
    return {**score, "val_bpb_adaptive": a["val_bpb_adaptive"], "val_loss_adaptive": a["val_loss_adaptive"]}


def score_run(model: torch.nn.Module, ema: WeightEMA | None, cfg: RunConfig, dataset: Dataset,
              device: DeviceInfo) -> dict:
    """`score_model` of the weights the config declares. With an EMA: mix * EMA + (1 - mix) * live, and beside it
    `val_bpb_live`, `val_loss_live` (the live weights) and `val_bpb_ema`, `val_loss_ema` (the EMA alone); the
    model holds its live weights again afterwards. Without one: the live weights, nothing added."""
    live = score_model(model, cfg, dataset, device)
    if ema is None:
        return live
    with ema.applied(1.0):
        averaged = score_model(model, cfg, dataset, device)
    mix = ema.cfg.mix
    if mix == 1.0 or ema.shadow is None:
        declared = averaged
    elif mix == 0.0:
        declared = live
    else:
        with ema.applied(mix):
            declared = score_model(model, cfg, dataset, device)
    return {**declared, "val_bpb_live": live["val_bpb"], "val_loss_live": live["val_loss"],
            "val_bpb_ema": averaged["val_bpb"], "val_loss_ema": averaged["val_loss"]}


def score_model(model: torch.nn.Module, cfg: RunConfig, dataset: Dataset, device: DeviceInfo) -> dict:
    """val_bpb of `model` on the whole validation split, as `cfg` says to evaluate (never charged), with its bits
    and bytes per validation document (`val_by_document`)."""
    return evaluate_bpb_by_document(model, dataset.val_tokens(), dataset.tokenizer, cfg.train.seq_len,
                                    cfg.train.eval_batch_size, device.device, cfg.train.bpb_convention,
                                    device.autocast())

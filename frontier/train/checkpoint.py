"""Checkpoints: saving a run's state, loading it back, and loading a run's model to score or inspect it.

A run folder holds `checkpoint.pt` (the state a finished or interrupted run left), and where a run stopped badly
`checkpoint-diverged.pt` (a NaN or infinite loss) or `checkpoint-failed.pt` (a crash). A checkpoint is one dict:

    config  seed  model  optim  loader  clock  curve  early_fracs  rng  [ema]

Checkpoints written before a field existed load as their code ran: `load` fills what older code did not save
(`early_fracs`, the EMA's state of a run without one), and `frontier.config.RunConfig.from_dict` and
`frontier.train.clock.BudgetClock` fill the config's and clock's later fields with the defaults older runs ran with.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..config import RunConfig
from ..errors import UserError

CHECKPOINT = "checkpoint.pt"
DIVERGED_CHECKPOINT = "checkpoint-diverged.pt"
FAILED_CHECKPOINT = "checkpoint-failed.pt"
WEIGHTS = ("live", "ema")  # which weights of a run with an EMA to load (None: the ones its val_bpb scores)


def save(path: str | Path, state: dict) -> None:
    """Write `state` to `path` atomically: a crash mid-write leaves the previous checkpoint whole."""
    path = Path(path)
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    tmp.replace(path)


def load(run_dir: str | Path, name: str = CHECKPOINT) -> dict:
    """A run folder's checkpoint, brought to today's fields (the config as a `RunConfig` under `run_config`)."""
    path = Path(run_dir) / name
    if not path.is_file():
        if (Path(run_dir) / "result.json").is_file():  # a run's record without its checkpoint: a committed record
            raise UserError(f"{str(run_dir)!r} holds a run's record but not its {name} (checkpoints are not "
                            "committed)", "train it again with frontier.study.retrain.retrain(run_dir, out) and "
                            "pass that folder", cli=f"train it again (`frontier retrain {run_dir} --out DIR`), then "
                            "pass --run DIR")
        raise UserError(f"{str(run_dir)!r} has no {name}", "pass a run folder written by `frontier train`")
    state = torch.load(path, map_location="cpu", weights_only=False)
    state.setdefault("early_fracs", [])  # checkpoints older than the replay of the schedules' first fractions
    state["run_config"] = RunConfig.from_dict(state["config"])
    return state


def load_weights(model: torch.nn.Module, state: dict) -> None:
    """Load a checkpoint's model state. The sparse bigram update's gradient sink (`*.sink`: zeros of a training
    batch's shape, not a weight) is left as the model has it: its shape is the rows of one process's batch, which
    differ between a run on one process and a rank of N, or evaluation."""
    sinks = {k for k, v in model.state_dict().items() if k.endswith(".sink")}
    missing, unexpected = model.load_state_dict({k: v for k, v in state.items() if k not in sinks}, strict=False)
    if set(missing) - sinks or unexpected:
        raise RuntimeError(f"the checkpoint does not fit the model: missing {sorted(set(missing) - sinks)}, "
                           f"unexpected {sorted(unexpected)}")


def load_run_model(run_dir: str | Path, device: torch.device | str = "cpu",
                   weights: str | None = None) -> tuple[torch.nn.Module, RunConfig]:
    """The model saved in a run folder's checkpoint, in eval mode, and its config. `weights`: None, the weights
    its `val_bpb` scores (for a run with an EMA, mix * EMA + (1 - mix) * live); "live", the trained weights;
    "ema", the EMA alone (`val_bpb_ema`)."""
    from .ema import WeightEMA
    from .step import build_model

    if weights is not None and weights not in WEIGHTS:
        raise UserError(f"unknown weights {weights!r}", f"choose one of {', '.join(WEIGHTS)}")
    state = load(run_dir)
    cfg = state["run_config"]
    if weights == "ema" and cfg.train.ema is None:
        raise UserError(f"the run in {str(run_dir)!r} has no EMA of its weights",
                        "evaluate its live weights (weights='live', or None)",
                        cli="pass --weights live, or drop --weights")
    model = build_model(cfg)
    load_weights(model, state["model"])
    if cfg.train.ema is not None and weights != "live":
        ema = WeightEMA(model, cfg.train.ema)
        ema.load_state_dict(state["ema"])
        ema.copy_to_model(1.0 if weights == "ema" else None)
    if isinstance(device, str):
        device = torch.device(device)
    return model.to(device).eval(), cfg

"""Scoring a run: bits per byte of its weights on the held-out split, and the checks made once training is over.

Never charged. `score_run` scores the weights a config declares (with an EMA of the weights: the mix it names, and
beside it the live weights and the EMA alone); `evaluate_run` re-scores a run folder's checkpoint (`frontier eval`);
`false_hits` measures how often a run's n-gram tables report seen a context they never counted.
"""

from __future__ import annotations

from pathlib import Path

import torch

from .. import records
from ..config import RunConfig
from ..data.dataset import Dataset, run_dataset
from ..devices import DeviceInfo, as_device
from ..errors import UserError
from .bpb import evaluate_bpb_adaptive, evaluate_bpb_by_document
from .checkpoint import load_run_model
from .ema import WeightEMA
from .step import make_loader


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


def evaluate_run(run_dir: str | Path, dataset: Dataset | None = None, device: DeviceInfo | str = "cpu", log=print,
                 weights: str | None = None, adaptive: bool = False, adaptive_batch: int = 1) -> dict:
    """Re-score a run's checkpoint on the validation split (`frontier eval`); `weights` as in `load_run_model`.
    `adaptive`: also `val_bpb_adaptive` and `val_loss_adaptive` (`frontier.train.bpb.evaluate_bpb_adaptive`; not the
    competition's score), after `val_bpb`; the run needs an n-gram model. `adaptive_batch` windows are scored
    before each count: 1, window by window, is what `frontier eval --adaptive` and the chapters report; more is
    faster, and each window then misses the counts of the others in its batch (the chapters' smoke runs)."""
    device = as_device(device)
    rec = records.load_record(run_dir)
    model, cfg = load_run_model(run_dir, device.device, weights)
    if dataset is None:
        dataset = run_dataset(rec["data"], log=log)
    dataset.check_vocab(cfg.model.vocab_size, f"the run in {str(run_dir)!r}")
    if dataset.manifest_hash != rec["data"]["manifest_hash"]:
        log(f"note: {dataset.folder} is not the data this run trained on (manifest {dataset.manifest_hash} != "
            f"{rec['data']['manifest_hash']})")
    if adaptive and getattr(model, "ngram", None) is None:
        raise UserError(f"the run in {str(run_dir)!r} ({cfg.recipe}) has no n-gram tables for --adaptive to count "
                        "into", "evaluate it with adaptive=False, or pass a run of an n-gram recipe",
                        cli="drop --adaptive, or pass a run of an n-gram recipe")
    score = score_model(model, cfg, dataset, device)
    if not adaptive:
        return score
    a = evaluate_bpb_adaptive(model, dataset.val_tokens(), dataset.tokenizer, cfg.train.seq_len, adaptive_batch,
                              device.device, cfg.train.bpb_convention, device.autocast())
    return {**score, "val_bpb_adaptive": a["val_bpb_adaptive"], "val_loss_adaptive": a["val_loss_adaptive"]}


def score_run(model: torch.nn.Module, ema: WeightEMA | None, cfg: RunConfig, dataset: Dataset,
              device: DeviceInfo) -> dict:
    """`score_model` of the weights the config declares. With an EMA: mix * EMA + (1 - mix) * live, and beside it
    `val_bpb_live`, `val_loss_live` (the live weights) and `val_bpb_ema`, `val_loss_ema` (the EMA alone), on
    validation only (the test split scores the declared weights alone); the model holds its live weights again
    afterwards. Without one: the live weights, nothing added."""
    if ema is None:
        return score_model(model, cfg, dataset, device)
    mix = ema.cfg.mix
    declared_is = "averaged" if mix == 1.0 or ema.shadow is None else "live" if mix == 0.0 else "mixed"
    live = score_model(model, cfg, dataset, device, test=declared_is == "live")
    with ema.applied(1.0):
        averaged = score_model(model, cfg, dataset, device, test=declared_is == "averaged")
    if declared_is == "mixed":
        with ema.applied(mix):
            declared = score_model(model, cfg, dataset, device)
    else:
        declared = averaged if declared_is == "averaged" else live
    return {**declared, "val_bpb_live": live["val_bpb"], "val_loss_live": live["val_loss"],
            "val_bpb_ema": averaged["val_bpb"], "val_loss_ema": averaged["val_loss"]}


def score_model(model: torch.nn.Module, cfg: RunConfig, dataset: Dataset, device: DeviceInfo,
                test: bool = True) -> dict:
    """val_bpb of `model` on the whole validation split, as `cfg` says to evaluate (never charged), with its bits
    and bytes per validation document (`val_by_document`); where the data has a test split, the same for it beside
    (`test_bpb`, `test_loss`, `test_tokens`, `test_bytes`, `test_by_document`): reported, never chosen on.
    `test=False`: validation only."""
    score = _score_split(model, cfg, dataset.val_tokens(), dataset, device)
    if test and getattr(dataset, "has_test", False):
        test = _score_split(model, cfg, dataset.test_tokens(), dataset, device)
        score.update({"test_" + k[len("val_"):]: v for k, v in test.items() if k.startswith("val_")})
    return score


def _score_split(model, cfg: RunConfig, tokens, dataset: Dataset, device: DeviceInfo) -> dict:
    return evaluate_bpb_by_document(model, tokens, dataset.tokenizer, cfg.train.seq_len, cfg.train.eval_batch_size,
                                    device.device, cfg.train.bpb_convention, device.autocast())

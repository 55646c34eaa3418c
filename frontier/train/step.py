"""What one training step is: the model a config builds, the optimisers, the data order, and the step itself.

`setup_training` builds them in one order, so that the trainer, the bench and a replay (`frontier.study.replay`)
start from the same weights and batches; `train_step` is one charged step. The trainer (`frontier.train.trainer`)
loops over it; nothing here knows about budgets, records or run folders.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import kernels
from ..config import RunConfig
from ..data.dataset import Dataset
from ..data.loader import TrainLoader
from ..devices import DeviceInfo
from ..model.gpt import GPT
from ..optim.optimizers import Optimizers
from .compile import compile_model
from .distributed import ONE, Dist
from .ema import WeightEMA


def build_model(cfg: RunConfig, batch_size: int | None = None) -> torch.nn.Module:
    """`cfg`'s model; `batch_size`: the rows of a training batch in this process (default the config's; a rank
    of a data-parallel job has its share), the shape of the sparse bigram update's gradient sink."""
    if not cfg.model.network:
        from ..model.ngram import NGramOnly

        return NGramOnly(cfg.model.ngram, cfg.model.vocab_size)
    return GPT(cfg.model, max_seq_len=cfg.train.seq_len, batch_size=batch_size or cfg.train.batch_size,
               kernels=cfg.train.kernels)


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

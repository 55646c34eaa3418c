"""Batches of training windows, and the validation split cut into windows that score every token once.

Training: the train shards are cut into windows of `seq_len + 1` tokens (stride `seq_len`); each epoch visits
every window once in an order drawn from the seed, so the same seed gives the same batches. The loader's
position is part of a checkpoint. With data parallelism (`frontier.train.distributed`) every rank draws the same batches
and reads only its own rows of each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..errors import UserError


def training_windows(shards: list[np.ndarray], seq_len: int) -> np.ndarray:
    """Every training window as a row (shard, start), in shard order: `seq_len + 1` tokens each, stride `seq_len`."""
    starts = [np.arange(0, len(s) - seq_len, seq_len, dtype=np.int64) for s in shards]
    return np.concatenate(
        [np.stack([np.full_like(st, i), st], axis=1) for i, st in enumerate(starts)] or [np.zeros((0, 2), np.int64)]
    )


def window_folds(n_windows: int, folds: int) -> np.ndarray:
    """The cross-fitting fold of each window: window i belongs to fold i mod folds."""
    return np.arange(n_windows) % folds


class TrainLoader:
    """Training batches. With `folds` > 1, window i belongs to fold i mod folds and every batch comes from a
    single fold, folds taking turns (`batch_fold` says which): the n-gram mix counts folds separately and lets a
    batch read only the other folds' counts.

    `batch_size` is the whole (global) batch. Rank `rank` of `world_size` data-parallel processes reads rows
    [rank * b, (rank + 1) * b) of each batch, b = batch_size / world_size: the ranks together read exactly the
    batches one process would, each a disjoint part."""

    def __init__(self, shards: list[np.ndarray], seq_len: int, batch_size: int, seed: int, folds: int = 1,
                 rank: int = 0, world_size: int = 1):
        self.shards, self.seq_len, self.batch_size, self.seed, self.folds = shards, seq_len, batch_size, seed, folds
        self.rank, self.rows = rank, batch_size // world_size  # this rank's rows of every batch
        self.windows = training_windows(shards, seq_len)
        if len(self.windows) < batch_size * folds:
            need = batch_size * folds * (seq_len + 1)
            have = sum(len(s) for s in shards)
            raise UserError(
                f"the training split has {have:,} tokens, fewer than one batch per fold needs ({need:,})",
                "give more training text or use a smaller profile",
            )
        self.epoch, self.cursor, self.batch_fold = 0, 0, 0
        self._order = self._permutation(0)

    def _permutation(self, epoch: int) -> np.ndarray:
        """The order of windows in an epoch (with folds: batch k from fold k mod folds)."""
        if self.folds == 1:
            return np.random.default_rng([self.seed, epoch]).permutation(len(self.windows))
        ids, fold = np.arange(len(self.windows)), window_folds(len(self.windows), self.folds)
        per_fold = [np.random.default_rng([self.seed, epoch, f]).permutation(ids[fold == f])
                    for f in range(self.folds)]
        B = self.batch_size
        n = min(len(p) for p in per_fold) // B
        return np.concatenate([p[b * B : (b + 1) * B] for b in range(n) for p in per_fold])

    @property
    def windows_per_epoch(self) -> int:
        return len(self._order) // self.batch_size * self.batch_size

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(inputs, targets) of this rank's rows of the next batch, each (rows, seq_len) int64 on the CPU (one
        process: the whole batch)."""
        if self.cursor + self.batch_size > len(self._order):
            self.epoch, self.cursor = self.epoch + 1, 0
            self._order = self._permutation(self.epoch)
        self.batch_fold = (self.cursor // self.batch_size) % self.folds
        picks = self.windows[self._order[self.cursor : self.cursor + self.batch_size]]
        picks = picks[self.rank * self.rows : (self.rank + 1) * self.rows]
        self.cursor += self.batch_size
        T = self.seq_len
        rows = np.stack([self.shards[s][o : o + T + 1] for s, o in picks]).astype(np.int64)
        rows = torch.from_numpy(rows)
        return rows[:, :-1], rows[:, 1:]

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "cursor": self.cursor, "seed": self.seed}

    def load_state_dict(self, state: dict) -> None:
        self.seed, self.epoch, self.cursor = state["seed"], state["epoch"], state["cursor"]
        self._order = self._permutation(self.epoch)


@dataclass(frozen=True)
class EvalWindow:
    inputs: torch.Tensor  # (B, T)
    targets: torch.Tensor  # (B, T)


def eval_windows(tokens: np.ndarray, seq_len: int, batch_size: int):
    """Non-overlapping windows over the whole stream: every target (tokens[1:]) appears exactly once.

    Full windows come in batches of `batch_size`; the last partial window comes alone, shorter.
    """
    n_targets = len(tokens) - 1
    full = n_targets // seq_len
    data = torch.from_numpy(np.asarray(tokens, dtype=np.int64))
    for b in range(0, full, batch_size):
        idx = torch.arange(b, min(b + batch_size, full)) * seq_len
        grid = idx[:, None] + torch.arange(seq_len + 1)[None, :]
        rows = data[grid]
        yield EvalWindow(rows[:, :-1], rows[:, 1:])
    rest = n_targets - full * seq_len
    if rest:
        rows = data[full * seq_len :][None, :]
        yield EvalWindow(rows[:, :-1], rows[:, 1:])

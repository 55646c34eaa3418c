"""The hashed bigram embedding: a table row per (previous token, current token) pair, added to the token embedding.

For position t the row is `(36313 * tok[t] XOR 27191 * tok[t-1]) mod (rows - 1)`; position 0 of a sequence uses
the reserved row `rows - 1`. The row, times a fixed random sign (one per `(prev XOR cur) mod 8192`, so colliding
bigrams tend to cancel rather than add) and a learned scale, is added to the token embedding. The table starts at
zero. It has one more physical row than `rows`: a scratch row the hash never reaches, which the sparse update uses
as padding.

How the table is updated is `frontier.optim.bigram_update`'s concern: with `update="dense"` the table is an
ordinary parameter (a dense gradient for every row, AdamW over all of them); with `update="sparse"` (the write-up's
"embedding fix") the forward pass gathers the touched rows without asking autograd for the table's gradient, and a
zero "sink" of the batch's shape is added to them, so that after `backward()` the sink's gradient is the gradient
of every position's row, which `SparseRowAdam` applies to the touched rows only.

The sink has the training batch's shape. A training-mode forward (with gradients on) of a batch of another shape
raises an error: it would otherwise leave the table untrained while the run record says `sparse`. Evaluation
(`model.eval()`, as `frontier.train.bpb` does) reads the table without the sink, at any batch shape.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..config import BigramConfig
from ..errors import UserError

HASH_CUR, HASH_PREV = 36313, 27191
SIGN_BUCKETS = 8192


def bigram_rows(idx: torch.Tensor, rows: int) -> torch.Tensor:
    """(B, T) token ids -> (B, T) table rows."""
    prev = F.pad(idx[:, :-1], (1, 0))
    h = torch.bitwise_xor(HASH_CUR * idx, HASH_PREV * prev) % (rows - 1)
    h[:, 0] = rows - 1
    return h


def sign_index(idx: torch.Tensor) -> torch.Tensor:
    prev = F.pad(idx[:, :-1], (1, 0))
    return torch.bitwise_xor(idx, prev) % SIGN_BUCKETS


class BigramEmbedding(nn.Module):
    def __init__(self, cfg: BigramConfig, dim: int, batch_shape: tuple[int, int]):
        super().__init__()
        self.cfg = cfg
        self.table = nn.Parameter(torch.zeros(cfg.rows + 1, dim))  # the last row is scratch, never hashed to
        self.scale = nn.Parameter(torch.tensor(cfg.scale_init))
        signs = torch.ones(SIGN_BUCKETS)
        if cfg.signs:
            g = torch.Generator().manual_seed(8192)
            signs = torch.randint(0, 2, (SIGN_BUCKETS,), generator=g).float() * 2 - 1
        self.register_buffer("signs", signs, persistent=False)
        # The sparse update's gradient sink: zeros of the training batch's shape (not a weight; never updated).
        self.sink = nn.Parameter(torch.zeros(*batch_shape, dim)) if cfg.update == "sparse" else None

    def rows(self, idx: torch.Tensor) -> torch.Tensor:
        return bigram_rows(idx, self.cfg.rows)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        rows = self.rows(idx)
        if self.sink is None:
            vals = F.embedding(rows, self.table)  # dense gradient for the whole table
        else:
            vals = self.table.detach()[rows]
            if self.training:
                if vals.shape == self.sink.shape:
                    vals = vals + self.sink
                elif torch.is_grad_enabled():
                    raise UserError(
                        f"the sparse bigram update got a training batch of shape {tuple(idx.shape)} but its gradient "
                        f"sink has shape {tuple(self.sink.shape[:-1])}, so the table would not be trained",
                        f"train with batches of shape {tuple(self.sink.shape[:-1])} (batch_size, seq_len), or call "
                        "model.eval() before reading other shapes")
        return self.scale * self.signs[sign_index(idx)][..., None] * vals

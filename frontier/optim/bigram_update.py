"""The bigram table's update, and the fix for its slow path (the write-up's "embedding fix").

The slow update (`BigramConfig.update="dense"`, the reference): the table is an ordinary parameter; the backward
pass writes a dense gradient for all rows (almost all zeros) and AdamW reads and writes every row's weights and
moments, every step. A step touches at most batch x sequence rows, so nearly all of that work is padding.

The fix (`update="sparse"`): the table's forward (`frontier.model.bigram`) leaves the gradient of every position's
row on its "sink"; `SparseRowAdam` sums those per row and runs Adam on the touched rows only. Every shape in it is
fixed (batch x sequence slots, unused slots pointing at the scratch row), so XLA and torch.compile see the same
graph every step and never recompile; nothing waits on the host for the number of unique rows.

How it differs from dense AdamW, precisely:
1. Untouched rows do not change at all. Dense AdamW decays their moments (m <- b1 m, v <- b2 v) and keeps moving
   them with the decaying momentum (and applies weight decay to them).
2. Bias correction uses each row's own count of updates, not the global step.
The two agree exactly when every step touches the same rows from a fresh state (tests check this).

`SparseRowAdam.step` in training mode raises when the sink has no gradient: the table would otherwise stay
untrained while the run record says `sparse`.

Why not `torch.optim.SparseAdam`? The table benchmark (`frontier.study.bench_table`, `frontier bench-table`) times
it as a third kind, "torch-sparseadam", beside the two above; `sparseadam_fit` there says how it fits fixed shapes
and compilation. It is not a training option.
"""

from __future__ import annotations

import torch

from ..config import BigramConfig, OptimConfig
from ..errors import UserError
from ..model.bigram import BigramEmbedding


class TorchTableOptimizer:
    """A `torch.optim` optimizer over the whole table (`self.opt`), its learning rate set by the schedule."""

    emb: BigramEmbedding
    opt: torch.optim.Optimizer
    base_lr: float

    def step(self, inputs: torch.Tensor, lr_mult: float) -> None:
        for g in self.opt.param_groups:
            g["lr"] = self.base_lr * lr_mult
        self.opt.step()

    def zero_grad(self) -> None:
        self.opt.zero_grad(set_to_none=True)

    def state_dict(self) -> dict:
        return self.opt.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.opt.load_state_dict(state)


class DenseTableAdamW(TorchTableOptimizer):
    """The reference: AdamW over the whole table, every step."""

    def __init__(self, emb: BigramEmbedding, cfg: BigramConfig, o: OptimConfig, fused: bool = False):
        self.emb = emb
        self.params = [emb.table]
        self.opt = torch.optim.AdamW([emb.table], lr=cfg.lr, betas=o.adam_betas, eps=o.adam_eps,
                                     weight_decay=o.weight_decay, fused=fused or None)
        self.base_lr = cfg.lr


class SparseRowAdam:
    """Adam on the rows a step touched; per-row moments and step counts; fixed shapes throughout.

    Unused slots point at the scratch row with a zero gradient: Adam leaves a zero-gradient, zero-moment row
    where it is, so every slot can be written back without a mask (all writes to the scratch row are equal).
    """

    def __init__(self, emb: BigramEmbedding, cfg: BigramConfig, o: OptimConfig, exchange=None):
        self.emb = emb
        self.params = [emb.table, emb.sink]
        # Data parallelism: (row ids, gradient rows) of this rank's positions -> those of the whole batch
        # (`frontier.train.distributed.Dist.exchange_rows`), so every rank updates the same rows alike. None: one process.
        self.exchange = exchange
        self.base_lr, (self.b1, self.b2), self.eps, self.wd = cfg.lr, o.adam_betas, o.adam_eps, o.weight_decay
        table = emb.table
        self.moments = torch.zeros(table.size(0), 2, table.size(1), device=table.device)  # m and v side by side
        self.count = torch.zeros(table.size(0), device=table.device)  # updates each row has had

    @torch.no_grad()
    def step(self, inputs: torch.Tensor, lr_mult: float) -> None:
        """Adam on the rows `inputs` touched. Raises if the table is in training mode and the sink has no
        gradient (no forward with gradients on, or no backward through it, since the last `zero_grad`); in eval
        mode a step without a gradient does nothing."""
        grad = self.emb.sink.grad
        if grad is None:
            if self.emb.training:
                raise UserError(
                    "the sparse bigram update has no gradient to apply (its sink got none since the last zero_grad)",
                    "run a training-mode forward of the batch, with gradients on, and backward() before step()")
            return
        rows = self.emb.rows(inputs).reshape(-1)
        grads = grad.reshape(rows.numel(), -1)
        if self.exchange is not None:
            rows, grads = self.exchange(rows, grads)
        slots, g = sum_by_row(rows, grads, scratch=self.emb.table.size(0) - 1)
        lr = self.base_lr * lr_mult
        p, mv, c = self.emb.table[slots], self.moments[slots], self.count[slots] + 1
        m = mv[:, 0].lerp_(g, 1 - self.b1)
        v = mv[:, 1].mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
        denom = (v / (1 - self.b2**c)[:, None]).sqrt_().add_(self.eps).mul_((1 - self.b1**c)[:, None])
        if self.wd:
            p.mul_(1 - lr * self.wd)
        p.addcdiv_(m, denom, value=-lr)
        self.emb.table.index_copy_(0, slots, p)
        self.moments.index_copy_(0, slots, mv)
        self.count.index_copy_(0, slots, c)

    def zero_grad(self) -> None:
        self.emb.sink.grad = None
        self.emb.table.grad = None

    def state_dict(self) -> dict:
        return {"moments": self.moments, "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        self.moments.copy_(state["moments"])
        self.count.copy_(state["count"])


def sum_by_row(rows: torch.Tensor, grads: torch.Tensor, scratch: int):
    """Sum per-position gradients by row, in N = len(rows) slots (N is fixed; the unique count is not).

    Returns (slot_rows (N,), summed (N, D)): slots 0..U-1 hold the U unique rows and their summed gradients;
    slots U..N-1 point at the scratch row with a zero gradient.
    """
    n = rows.numel()
    sorted_rows, order = rows.sort()
    is_new = torch.ones(n, dtype=torch.bool, device=rows.device)
    is_new[1:] = sorted_rows[1:] != sorted_rows[:-1]
    seg = is_new.long().cumsum(0) - 1  # slot of each sorted position
    slot_of = torch.empty_like(seg).scatter_(0, order, seg)  # slot of each original position
    slots = torch.full_like(rows, scratch).scatter_(0, seg, sorted_rows)
    summed = torch.zeros_like(grads).index_add_(0, slot_of, grads)
    return slots, summed


def make_bigram_update(emb: BigramEmbedding, cfg: BigramConfig, o: OptimConfig, fused: bool = False,
                       exchange=None):
    """The table's update; `exchange`: see `SparseRowAdam` (the dense update's gradient is an ordinary one, which
    data parallelism averages like any other)."""
    return SparseRowAdam(emb, cfg, o, exchange) if cfg.update == "sparse" else DenseTableAdamW(emb, cfg, o, fused)

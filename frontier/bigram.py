"""The hashed bigram embedding, and the fix for its slow update.

The table. For position t the row is `(36313 * tok[t] XOR 27191 * tok[t-1]) mod (rows - 1)`; position 0 of a
sequence uses the reserved row `rows - 1`. The row, times a fixed random sign (one per `(prev XOR cur) mod 8192`,
so colliding bigrams tend to cancel rather than add) and a learned scale, is added to the token embedding. The
table starts at zero. It has one more physical row than `rows`: a scratch row the hash never reaches, which
the sparse update uses as padding.

The slow update (`update="dense"`, the reference). The table is an ordinary parameter: the backward pass writes
a dense gradient for all rows (almost all zeros) and AdamW reads and writes every row's weights and moments,
every step. A step touches at most batch x sequence rows, so nearly all of that work is padding.

The fix (`update="sparse"`). The forward pass gathers the touched rows without asking autograd for the table's
gradient; a zero "sink" of the batch's shape is added to them, so that after `backward()` the sink's gradient is
the gradient of every position's row. `SparseRowAdam` sums those per row and runs Adam on the touched rows only.
Every shape in it is fixed (batch x sequence slots, unused slots pointing at the scratch row), so XLA and
torch.compile see the same graph every step and never recompile; nothing waits on the host for the number of
unique rows.

How it differs from dense AdamW, precisely:
1. Untouched rows do not change at all. Dense AdamW decays their moments (m <- b1 m, v <- b2 v) and keeps moving
   them with the decaying momentum (and applies weight decay to them).
2. Bias correction uses each row's own count of updates, not the global step.
The two agree exactly when every step touches the same rows from a fresh state (tests check this).
"""

from __future__ import annotations

import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import BigramConfig, OptimConfig

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
            if self.training and vals.shape == self.sink.shape:
                vals = vals + self.sink
        return self.scale * self.signs[sign_index(idx)][..., None] * vals


class DenseTableAdamW:
    """The reference: AdamW over the whole table, every step."""

    def __init__(self, emb: BigramEmbedding, cfg: BigramConfig, o: OptimConfig, fused: bool = False):
        self.emb = emb
        self.params = [emb.table]
        self.opt = torch.optim.AdamW([emb.table], lr=cfg.lr, betas=o.adam_betas, eps=o.adam_eps,
                                     weight_decay=o.weight_decay, fused=fused or None)
        self.base_lr = cfg.lr

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


class SparseRowAdam:
    """Adam on the rows a step touched; per-row moments and step counts; fixed shapes throughout.

    Unused slots point at the scratch row with a zero gradient: Adam leaves a zero-gradient, zero-moment row
    where it is, so every slot can be written back without a mask (all writes to the scratch row are equal).
    """

    def __init__(self, emb: BigramEmbedding, cfg: BigramConfig, o: OptimConfig):
        self.emb = emb
        self.params = [emb.table, emb.sink]
        self.base_lr, (self.b1, self.b2), self.eps, self.wd = cfg.lr, o.adam_betas, o.adam_eps, o.weight_decay
        table = emb.table
        self.moments = torch.zeros(table.size(0), 2, table.size(1), device=table.device)  # m and v side by side
        self.count = torch.zeros(table.size(0), device=table.device)  # updates each row has had

    @torch.no_grad()
    def step(self, inputs: torch.Tensor, lr_mult: float) -> None:
        grad = self.emb.sink.grad
        if grad is None:
            return
        rows = self.emb.rows(inputs).reshape(-1)
        slots, g = sum_by_row(rows, grad.reshape(rows.numel(), -1), scratch=self.emb.table.size(0) - 1)
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


def make_bigram_update(emb: BigramEmbedding, cfg: BigramConfig, o: OptimConfig, fused: bool = False):
    return SparseRowAdam(emb, cfg, o) if cfg.update == "sparse" else DenseTableAdamW(emb, cfg, o, fused)


def table_step(emb: BigramEmbedding, upd, idx: torch.Tensor, upstream: torch.Tensor, lr_mult: float = 1.0) -> None:
    """The table's whole share of a training step: gather, backward of `upstream` into the table, update."""
    emb(idx).backward(upstream)
    upd.step(idx, lr_mult)
    upd.zero_grad()


def travel_after_one_touch(o: OptimConfig | None = None, warm_steps: int = 100, after: int = 50) -> dict:
    """How far a row moves after the only step that touches it, late in training, under each update: a one-wide
    table, learning rate 1, no schedule, the same unit gradient. Dense AdamW moves the row on that step and then
    keeps moving it with the decaying momentum of that one gradient; the sparse update moves it once. Returns
    {update: {"first_step": distance after the touch, "total": distance `after` steps later}}."""
    o = o or OptimConfig()
    busy, rare_idx = torch.tensor([[1, 2]]), torch.tensor([[1, 3]])
    out = {}
    for kind in ("dense", "sparse"):
        cfg = BigramConfig(rows=64, update=kind, lr=1.0, signs=False, scale_init=1.0)
        emb = BigramEmbedding(cfg, 1, (1, 2))
        upd = make_bigram_update(emb, cfg, o)
        rare = int(emb.rows(rare_idx)[0, 1])
        assert rare not in emb.rows(busy).tolist()[0]
        unit = torch.ones(1, 2, 1)
        for _ in range(warm_steps):
            table_step(emb, upd, busy, unit)
        start = float(emb.table.detach()[rare, 0])
        table_step(emb, upd, rare_idx, unit)
        first = abs(float(emb.table.detach()[rare, 0]) - start)
        for _ in range(after):
            table_step(emb, upd, busy, unit)
        out[kind] = {"first_step": first, "total": abs(float(emb.table.detach()[rare, 0]) - start)}
    return out


def touched_rows(idx: torch.Tensor, rows: int) -> int:
    """How many distinct rows a batch touches (what the naive update pads up to the whole table)."""
    return int(bigram_rows(idx, rows).unique().numel())


def bench_update(rows: int, dim: int, batch: torch.Tensor, updates=("dense", "sparse"), steps: int = 5,
                 repeats: int = 3, seed: int = 0) -> dict:
    """Time of the table's whole share of a training step (gather, backward into the table, update), in ms.

    Each update kind gets its own table; they are timed in alternation. A random gradient stands in for the
    rest of the network.
    """
    o = OptimConfig()
    torch.manual_seed(seed)
    B, T = batch.shape
    upstream = torch.randn(B, T, dim)
    setups = {}
    for kind in updates:
        emb = BigramEmbedding(BigramConfig(rows=rows, update=kind), dim, (B, T))
        setups[kind] = (emb, make_bigram_update(emb, emb.cfg, o))
    times = {k: [] for k in updates}
    for emb, upd in setups.values():
        table_step(emb, upd, batch, upstream)  # warm-up
    for _ in range(repeats):
        for kind, (emb, upd) in setups.items():
            t = time.perf_counter()
            for _ in range(steps):
                table_step(emb, upd, batch, upstream)
            times[kind].append(1000 * (time.perf_counter() - t) / steps)
    return times


def update_time_curve(rows_list: list[int], dim: int, batch: torch.Tensor, steps: int = 5, repeats: int = 3) -> list[dict]:
    """`bench_update` at each table size: the best round of each update, in ms per step, and dense / sparse."""
    curve = []
    for rows in rows_list:
        t = bench_update(rows, dim, batch, steps=steps, repeats=repeats)
        dense, sparse = min(t["dense"]), min(t["sparse"])
        curve.append({"rows": rows, "dense_ms": dense, "sparse_ms": sparse, "ratio": dense / sparse})
    return curve

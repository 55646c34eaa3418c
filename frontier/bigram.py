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

The sink has the training batch's shape. A training-mode forward (with gradients on) of a batch of another shape
raises an error, and so does `SparseRowAdam.step` in training mode when the sink has no gradient: either would
otherwise leave the table untrained while the run record says `sparse`. Evaluation (`model.eval()`, as
`frontier.bpb` does) reads the table without the sink, at any batch shape.

Why not `torch.optim.SparseAdam`? The table benchmark (`bench_update`, `frontier bench-table`) times it as a third
kind, "torch-sparseadam", beside the two above; `sparseadam_fit` says how it fits fixed shapes and compilation.
It is not a training option.
"""

from __future__ import annotations

import re
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import BigramConfig, OptimConfig
from .errors import UserError

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
        # (`frontier.distributed.Dist.exchange_rows`), so every rank updates the same rows alike. None: one process.
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


# ----------------------------------------------------------------------------- the table benchmark

TORCH_SPARSEADAM = "torch-sparseadam"
UPDATE_KINDS = ("dense", "sparse", TORCH_SPARSEADAM)  # what `bench_update` and `update_time_curve` time


class SparseGradBigram(BigramEmbedding):
    """The benchmark's third kind, not a training option: the table read with `F.embedding(..., sparse=True)`, so
    `backward()` leaves a sparse COO gradient on the table (one entry per position, uncoalesced) for
    `torch.optim.SparseAdam`. Built with `update="torch-sparseadam"`, it has no sink."""

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        vals = F.embedding(self.rows(idx), self.table, sparse=True)
        return self.scale * self.signs[sign_index(idx)][..., None] * vals


class TorchSparseAdam(TorchTableOptimizer):
    """`torch.optim.SparseAdam` on the table. What it does (read in torch 2.13's `torch/optim/sparse_adam.py` and
    `_functional.py::sparse_adam`, and tested): it coalesces the gradient and updates the moments and weights of
    the rows in it only (lazy Adam, like `SparseRowAdam`), but corrects the bias with one step count for the whole
    table (`state["step"]`, +1 on every step with a gradient), where `SparseRowAdam` counts each row's own
    updates; it adds eps to sqrt(v), not to the bias-corrected sqrt(v / (1 - b2^t)); it has no weight decay."""

    def __init__(self, emb: SparseGradBigram, cfg: BigramConfig, o: OptimConfig):
        if o.weight_decay:
            raise ValueError("torch.optim.SparseAdam has no weight decay; use OptimConfig(weight_decay=0)")
        self.emb = emb
        self.params = [emb.table]
        self.opt = torch.optim.SparseAdam([emb.table], lr=cfg.lr, betas=o.adam_betas, eps=o.adam_eps)
        self.base_lr = cfg.lr


def table_setup(kind: str, rows: int, dim: int, batch_shape: tuple[int, int], o: OptimConfig | None = None,
                **cfg_fields):
    """A fresh table and its update for one of `UPDATE_KINDS`: (embedding, update)."""
    o = o or OptimConfig()
    cfg = BigramConfig(rows=rows, update=kind, **cfg_fields)
    if kind == TORCH_SPARSEADAM:
        emb = SparseGradBigram(cfg, dim, batch_shape)
        return emb, TorchSparseAdam(emb, cfg, o)
    if kind not in ("dense", "sparse"):
        raise ValueError(f"unknown table update {kind!r}; choose one of {UPDATE_KINDS}")
    emb = BigramEmbedding(cfg, dim, batch_shape)
    return emb, make_bigram_update(emb, cfg, o)


def bench_update(rows: int, dim: int, batch: torch.Tensor, updates=UPDATE_KINDS, steps: int = 5,
                 repeats: int = 3, seed: int = 0) -> dict:
    """Time of the table's whole share of a training step (gather, backward into the table, update), in ms.

    Each update kind gets its own table; after one warm-up step each, they are timed in alternation, `repeats`
    rounds of `steps` steps. A random gradient stands in for the rest of the network. Returns {kind: [ms per
    step, one per round]}.
    """
    torch.manual_seed(seed)
    B, T = batch.shape
    upstream = torch.randn(B, T, dim)
    setups = {kind: table_setup(kind, rows, dim, (B, T)) for kind in updates}
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


def curve_point(rows: int, times: dict) -> dict:
    """One table size's entry of the curve from its rounds {kind: [ms, ...]}: each kind's best round as
    `<kind>_ms` (dashes as underscores), `ratio` = dense / sparse (None without both), `vs_sparse` = {kind: its
    best / sparse's best}, and the rounds themselves as `samples`."""
    best = {k: min(v) for k, v in times.items()}
    point = {"rows": rows, **{f"{k.replace('-', '_')}_ms": ms for k, ms in best.items()}}
    point["ratio"] = best["dense"] / best["sparse"] if {"dense", "sparse"} <= best.keys() else None
    point["vs_sparse"] = {k: ms / best["sparse"] for k, ms in best.items()} if "sparse" in best else None
    point["samples"] = {k: list(v) for k, v in times.items()}
    return point


def update_time_curve(rows_list: list[int], dim: int, batch: torch.Tensor, steps: int = 5, repeats: int = 3,
                      updates=UPDATE_KINDS, out=None, profile: str | None = None, command=None) -> list[dict]:
    """`bench_update` at each table size, one `curve_point` each (best round in ms per step, dense / sparse).

    `out` (a folder, or a .json file that must not exist): also keep the curve as a bench record there
    (`frontier.bench.run_table_bench`, which returns the record and its path; `profile` and `command` go into it).
    """
    if out is not None:
        from .bench import run_table_bench

        return run_table_bench(rows_list, dim, batch, steps, repeats, updates, profile=profile, out=out,
                               command=command)["curve"]
    return [curve_point(rows, bench_update(rows, dim, batch, updates, steps=steps, repeats=repeats))
            for rows in rows_list]


def _first_line(e: BaseException) -> str:
    """'Class: first line', and torch.compile's 'Explanation: ...' line in parentheses where there is one (memory
    addresses dropped, so that the text is the same from run to run)."""
    lines = [re.sub(r" at 0x[0-9a-f]+", "", l.strip()) for l in str(e).strip().splitlines()]
    why = next((l for l in lines if l.startswith("Explanation:")), None)
    return f"{type(e).__name__}: {lines[0] if lines else ''}" + (f" ({why})" if why else "")


def sparseadam_fit(rows: int = 1 << 12, dim: int = 8, batch_shape: tuple[int, int] = (4, 64), batches: int = 4,
                   backend: str = "inductor") -> dict:
    """How `torch.optim.SparseAdam` fits fixed shapes and compiled steps, tried on the CPU:

    - `forward_backward_fullgraph`: `torch.compile(fullgraph=True, dynamic=False, backend=backend)` of the
      table's forward (`SparseGradBigram`), then `backward()`: "ok", or the exception's class and first line
      (and torch.compile's explanation);
    - `gradient`: the layout and entry count of the table's gradient then, and `positions` (batch x sequence);
    - `step_fullgraph`: the same for `torch.compile(SparseAdam.step, fullgraph=True, backend=backend)`;
    - `coalesced_rows`: `grad.coalesce()._nnz()` for `batches` random batches, next to `touched_rows`: the
      number of rows SparseAdam works on is data-dependent (SparseRowAdam keeps `positions` slots instead).
    """
    B, T = batch_shape
    g = torch.Generator().manual_seed(0)
    vocabs = [16 * 4**i for i in range(batches)]  # narrower and wider token ranges: fewer and more distinct rows
    xs = [torch.randint(0, v, batch_shape, generator=g) for v in vocabs]
    upstream = torch.randn(B, T, dim, generator=g)
    out = {"torch": torch.__version__, "backend": backend, "positions": B * T}
    emb, upd = table_setup(TORCH_SPARSEADAM, rows, dim, batch_shape)
    try:
        torch.compile(emb, fullgraph=True, dynamic=False, backend=backend)(xs[0]).backward(upstream)
        out["forward_backward_fullgraph"] = "ok"
    except Exception as e:  # noqa: BLE001 -- the fact to report
        out["forward_backward_fullgraph"] = _first_line(e)
        emb.zero_grad()
        emb(xs[0]).backward(upstream)
    grad = emb.table.grad
    out["gradient"] = {"layout": str(grad.layout), "entries": int(grad._nnz()) if grad.is_sparse else grad.numel()}
    try:
        torch.compile(upd.opt.step, fullgraph=True, backend=backend)()
        out["step_fullgraph"] = "ok"
    except Exception as e:  # noqa: BLE001
        out["step_fullgraph"] = _first_line(e)
    out["coalesced_rows"], out["touched_rows"] = [], []
    for x in xs:
        upd.zero_grad()
        emb(x).backward(upstream)
        out["coalesced_rows"].append(int(emb.table.grad.coalesce()._nnz()))
        out["touched_rows"].append(touched_rows(x, rows))
    return out

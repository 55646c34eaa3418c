"""The bigram table's update timed: dense AdamW, the sparse row-wise Adam and `torch.optim.SparseAdam`
(`frontier bench-table`), and the small studies chapter 04 shows beside it (how far a rarely touched row travels,
how SparseAdam fits fixed shapes and compilation).

`run_table_bench` keeps the curve (`update_time_curve`: per table size, each kind's share of a step in ms, timed in
alternation) as a bench record (`frontier.study.bench_records.write_bench_record`).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from ..config import BigramConfig, OptimConfig
from ..model.bigram import BigramEmbedding, bigram_rows, sign_index
from ..optim.bigram_update import TorchTableOptimizer, make_bigram_update

from . import bench_records


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
    (`frontier.study.bench_table.run_table_bench`, which returns the record and its path; `profile` and `command` go into it).
    """
    if out is not None:
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


def run_table_bench(rows_list: list[int], dim: int, batch: torch.Tensor, steps: int = 5, repeats: int = 3,
                    updates=None, profile: str | None = None, out: str | Path | None = None,
                    command: list[str] | None = None) -> dict:
    """`update_time_curve` as a bench record: the header, the table width, the batch's shape, and
    `curve` (per table size: each kind's rounds in `samples`, its best round in ms, dense / sparse). `updates`:
    the kinds timed (default `UPDATE_KINDS`). `out`: as for `run_bench`; `result["path"]` is the file
    written (None without `out`). Runs on the CPU."""
    updates = tuple(updates or UPDATE_KINDS)
    arguments = {"rows": list(rows_list), "dim": dim, "batch_shape": list(batch.shape), "steps": steps,
                 "repeats": repeats, "updates": list(updates), "profile": profile}
    path = bench_records.new_record_path(out, "bench-table", updates) if out is not None else None
    curve = update_time_curve(rows_list, dim, batch, steps, repeats, updates)
    return bench_records.bench_record("bench-table", arguments, command, f"{__name__}.run_table_bench",
                                {"profile": profile, "dim": dim, "batch_shape": list(batch.shape),
                                 "positions": batch.numel(), "steps": steps, "repeats": repeats,
                                 "updates": list(updates), "curve": curve}, path, cpu=True)


def format_table_bench(result: dict) -> str:
    """The table bench as `frontier bench-table` prints it: each kind's best ms per step, then each other kind's
    best / sparse's best (the first of those columns is dense / sparse)."""
    kinds = result["updates"]
    others = [k for k in kinds if k != "sparse"] if "sparse" in kinds else []
    w_ms = {k: max(11, len(k) + 5) for k in kinds}
    w_ratio = {k: max(14, len(k) + 9) for k in others}
    lines = [f"bigram table update, width {result['dim']}, {result['positions']:,} positions per step (profile "
             f"{result['profile']}); ms per step, best of {result['repeats']} alternating rounds",
             f"{'rows':>10}" + "".join(f"{k + ' ms':>{w_ms[k]}}" for k in kinds)
             + "".join(f"{k + '/sparse':>{w_ratio[k]}}" for k in others)]
    for c in result["curve"]:
        log2 = c["rows"].bit_length() - 1
        name = f"2^{log2}" if c["rows"] == 1 << log2 else str(c["rows"])
        lines.append(f"{name:>10}" + "".join(f"{c[k.replace('-', '_') + '_ms']:>{w_ms[k]}.2f}" for k in kinds)
                     + "".join(f"{c['vs_sparse'][k]:>{w_ratio[k] - 1}.1f}x" for k in others))
    return "\n".join(lines)

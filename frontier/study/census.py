"""Each NKI kernel run once in the interpreter at a profile's shapes: what it counted, and how far it is from the
PyTorch reference on the same inputs (`frontier kernels --census PROFILE`, a JSON record beside the bench records).

Per op (`frontier.kernels.op_cases`: forward and backward at the run's activation shapes, the optimiser ops at the
model's matrix shapes), the interpreter's Counts of every kernel call it made, summed per kernel (HBM bytes read and
written, DMA transfers, matmul FLOPs, elements and instructions per engine, peak SBUF bytes and PSUM banks per
partition), the interpreter's wall seconds, and the largest |interpreter - reference| of each output and gradient
relative to the largest |reference|. An op a kernel cannot run at these shapes is recorded with the reason.
"""

from __future__ import annotations

import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import records
from ..errors import UserError
from ..kernels import interpreted, op_cases
from ..kernels.interpreter import Counts
from ..recipes import resolve

CENSUS_RECORD = "frontier-kernel-census"


def _sum(counts: list[Counts]) -> dict:
    total = Counts()
    for c in counts:
        for k in ("hbm_read_bytes", "hbm_write_bytes", "dma_transfers", "dma_bytes", "matmul_flops"):
            setattr(total, k, getattr(total, k) + getattr(c, k))
        for k in ("instructions", "static_instructions", "elements", "free_elements"):
            for e, v in getattr(c, k).items():
                getattr(total, k)[e] += v
        total.peak_sbuf_bytes = max(total.peak_sbuf_bytes, c.peak_sbuf_bytes)
        total.peak_psum_banks = max(total.peak_psum_banks, c.peak_psum_banks)
    return {**total.as_dict(), "calls": len(counts)}


def census(profile: str, recipe: str = "baseline", ops: list[str] | None = None, log=print) -> dict:
    cfg = resolve(recipe, profile)
    cases = list(op_cases(cfg, torch.device("cpu")))
    unknown = sorted(set(ops or ()) - {op for op, _ in cases})
    if unknown:
        raise UserError(f"no op named {', '.join(unknown)} to count", f"choose among {', '.join(op for op, _ in cases)}")
    rows = []
    for op, fn in cases:
        if ops and op not in ops:
            continue
        ref = fn("reference")
        interpreted.COUNTS.clear()
        t0 = time.perf_counter()
        try:
            got = fn("interpreter")
        except Exception as e:  # a shape the kernel refuses: recorded, not hidden
            rows.append({"op": op, "runs": False, "why_not": f"{type(e).__name__}: {str(e).strip().splitlines()[0]}"})
            log(f"census: {op}: cannot run at these shapes ({rows[-1]['why_not']})")
            continue
        wall = time.perf_counter() - t0
        errors = [float((a - b).abs().max() / b.abs().max().clamp_min(1e-30)) for a, b in zip(got, ref)]
        kernels = {name: _sum(cs) for name, cs in interpreted.COUNTS.items()}
        rows.append({"op": op, "runs": True, "interpreter_s": wall, "max_rel_error": max(errors),
                     "rel_errors": errors, "kernels": kernels})
        log(f"census: {op}: {wall:.1f}s in the interpreter, max rel error {max(errors):.2e}")
    m, t = cfg.model, cfg.train
    shapes = {"tokens": t.batch_size * t.seq_len, "batch": t.batch_size, "seq_len": t.seq_len, "width": m.n_embd,
              "heads": m.n_head, "head_dim": m.head_dim, "mlp": m.mlp_ratio * m.n_embd, "vocab": m.vocab_size,
              "eval_tokens": t.eval_batch_size * t.seq_len}
    return {"record": CENSUS_RECORD, "profile": profile, "recipe": recipe, "shapes": shapes, "rows": rows,
            "code": records.code_version(), "hardware": records.hardware()}


def format_census(result: dict) -> str:
    lines = [f"kernel census: profile {result['profile']} ({', '.join(f'{k} {v:,}' for k, v in result['shapes'].items())})",
             f"{'kernel':<16}{'calls':>6}{'HBM read MB':>13}{'HBM write MB':>14}{'DMAs':>9}{'matmul GFLOP':>14}"
             f"{'peak SBUF KiB':>15}{'PSUM banks':>12}"]
    for row in result["rows"]:
        if not row["runs"]:
            lines.append(f"{row['op']}: cannot run: {row['why_not']}")
            continue
        lines.append(f"{row['op']} (max rel error vs reference {row['max_rel_error']:.1e}, {row['interpreter_s']:.1f}s)")
        for name, c in row["kernels"].items():
            lines.append(f"  {name:<14}{c['calls']:>6}{c['hbm_read_bytes'] / 1e6:>13.1f}{c['hbm_write_bytes'] / 1e6:>14.1f}"
                         f"{c['dma_transfers']:>9,}{c['matmul_flops'] / 1e9:>14.2f}{c['peak_sbuf_bytes'] / 1024:>15.1f}"
                         f"{c['peak_psum_banks']:>12}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- trained
class _Capture(TorchDispatchMode):
    """Every `frontier::` fused-op call dispatched, with copies of its arguments as they were before it ran."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "frontier":
            self.calls.append((func._opname, tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a
                                                   for a in args)))
        return func(*args, **(kwargs or {}))


def trained_activations(dataset, steps: int, profile: str = "smoke", recipe: str = "baseline", seed: int = 0,
                        run_dir=None, log=print) -> tuple[list, dict]:
    """The fused-op calls of one training step at a trained checkpoint: `recipe` trained `steps` steps on `dataset`
    (reference kernels, CPU; checkpoint and record in `run_dir`, a temporary folder by default), its checkpoint
    loaded, and a forward, backward and optimiser step on the next batch captured. Returns (calls, run record)."""
    import tempfile
    from pathlib import Path

    from ..devices import select_device
    from ..optim.optimizers import Optimizers
    from ..train.checkpoint import load_run_model
    from ..train.step import make_loader
    from ..train.trainer import train

    cfg = resolve(recipe, profile, vocab_size=dataset.vocab_size)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(run_dir) if run_dir is not None else Path(tmp) / "run"
        rec = train(cfg, dataset, folder, select_device("cpu"), seed=seed, steps=steps, progress=False,
                    log=lambda *a: None)
        model, cfg = load_run_model(folder)
    log(f"trained {recipe}/{profile} {steps} steps: train loss {rec['curve']['train_loss'][-1]:.4f}")
    model.train()
    x, y = make_loader(cfg, dataset, seed + 1).next_batch()
    opts = Optimizers(model, cfg)
    with _Capture() as capture:
        model(x, y).backward()
        opts.step(1.0, steps, x)
    return capture.calls, rec


def verify_trained(dataset, steps: int = 60, profile: str = "smoke", vchunk: int = 128, log=print) -> dict:
    """Every kernel against float64 (fp32 and bf16) on the activations of a checkpoint trained `steps` steps, with
    what they exercise (`frontier.kernels.verify.verify_calls`): the trained counterpart of checking the kernels at
    initialisation, where the logits are ~0, the online rescaling never moves and tanh never bends."""
    from ..kernels.verify import verify_calls

    calls, rec = trained_activations(dataset, steps, profile, log=log)
    out = verify_calls(calls, vchunk=vchunk, log=log)
    return {**out, "steps": steps, "profile": profile, "train_loss": rec["curve"]["train_loss"][-1],
            "code": records.code_version()}

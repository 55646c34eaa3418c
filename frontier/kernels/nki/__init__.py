"""NKI kernels for Trn2, written for the top-level `nki` package (NKI 0.7, Neuron SDK 2.33: `frontier.kernels.toolchain`).

Each kernel module imports `nki`, `nki.language as nl` and `nki.isa as nisa` at module level, so it imports only
where the real `nki` is installed (a Neuron machine). Anywhere else, `frontier.kernels.interpreter.load(MODULE)`
runs the same source with the interpreter's NumPy `nki`. This package itself imports no `nki`.

    rmsnorm  rmsnorm_fwd(x, eps), rmsnorm_bwd(x, dy, eps): RMSNorm without a learned weight
    adamw    adamw(param, grad, m, v, step_size, inv_bc2, decay, beta1, beta2, eps): one AdamW step, flat fp32
    rotary   rope_fwd(x, cos, sin), rope_bwd(dy, cos, sin): rotary embedding (rotate-half), backward = sin negated
    relu2_mlp  mlp_fwd(x, w1, w2), mlp_bwd(x, w1, w2, dy, pos_block): relu(x W1^T)^2 W2^T; the backward recomputes h
    head_ce  head_ce_fwd(hidden, w, targets, cap, pos_block, vchunk), head_ce_bwd(...), and the _bias_ variants:
             head + softcap + cross-entropy, online log-sum-exp over vocabulary chunks; the backward recomputes each
             logit tile
    newton_schulz  newton_schulz(g, steps=5): Muon's orthogonalisation
    tiles    no kernel: the helpers the matmul kernels share (PSUM banks, chunks, operand dtypes, transposes, each
             core's token tiles, HBM sums), imported relatively (`from .tiles import ...`)

What every kernel keeps to, and what checks it (frontier.kernels.interpreter, frontier.kernels.verify):
- its source, and every helper it calls, keeps to NKI 0.7's documented rules (interpreter/subset.py: no
  `nl.dynamic_range`, no keyword-only `*` in a kernel signature, string dict keys, classes from NKIObject), checked
  before it runs;
- PSUM tiles are allocated once, in whole 2 KiB banks, so that no matmul output crosses a bank wherever the compiler
  places them;
- the matmul kernels (relu2_mlp, head_ce, newton_schulz) take `matmul_dtype`, a compile-time "bfloat16" (default:
  TensorE's fast path, 79 TFLOP/s against 20 in fp32) or "float32", the dtype of every matmul operand; PSUM
  accumulates in fp32 and everything else is fp32 either way;
- it is launched at LNC=2 (`frontier.kernels.toolchain.LNC`) and divides its work between the two physical cores
  by `nl.program_id` (Newton-Schulz excepted: both cores compute all of it and write the same values); no
  HBM byte is read-add-written by both cores (the backward kernels sum weight gradients per core, meet at
  `nisa.core_barrier`, then each writes half of the sum);
- the instructions it emits at the trn2 shapes of one worker stay within the interpreter's budget
  (`STATIC_INSTRUCTION_LIMIT`): the long token loops are compiled loops (`nl.fori_loop`), whose body is emitted
  once and addresses HBM rows by `.ap(scalar_offset=)`.

The model and the optimisers reach these kernels through the fused ops of `frontier.kernels.ops` (`--kernels nki`
on a NeuronCore, `--kernels interpreter` anywhere); `frontier kernels` lists what can run here.

Per-step scalars never enter a kernel as Python numbers (they are compile-cache keys: every step would
recompile): `adamw_step_scalars` makes them [128, 1] fp32 arrays for the kernel's HBM inputs. The head kernel takes
the n-gram bias dense: `dense_bias` builds it from the op's parts and `bias_grads` reads the parts' gradients from
the kernel's dz (used by both the interpreter and the Neuron implementation).
"""

from __future__ import annotations

import numpy as np
import torch

from ..bias import LogitBias

KERNELS = tuple(f"frontier.kernels.nki.{m}" for m in ("rmsnorm", "adamw", "rotary", "relu2_mlp", "head_ce",
                                                       "newton_schulz"))
P = 128


def adamw_step_scalars(lr: float, step: int, beta1: float, beta2: float, weight_decay: float) -> dict[str, np.ndarray]:
    """The per-step inputs of `adamw.adamw` for step `step` (1-based, as torch.optim.AdamW counts), as [128, 1] fp32:
    step_size = lr / (1 - beta1^step), inv_bc2 = 1 / (1 - beta2^step), decay = 1 - lr * weight_decay."""
    values = {
        "step_size": lr / (1.0 - beta1**step),
        "inv_bc2": 1.0 / (1.0 - beta2**step),
        "decay": 1.0 - lr * weight_decay,
    }
    return {k: np.full((P, 1), v, dtype=np.float32) for k, v in values.items()}


def dense_bias(h, w, bias):
    """The bias as one dense [N, V] fp32 tensor for the head kernel (None when there is none): the row, plus the
    sparse corrections scattered at their tokens, plus any dense part."""
    bias = LogitBias(*bias)
    if bias.row is None and bias.tokens is None and bias.dense is None:
        return None
    return bias.add_to(torch.zeros(h.size(0), w.size(0), dtype=torch.float32, device=h.device))


def bias_grads(dz, bias):
    """(d row, d values) from the kernel's dz [N, V]: the row's gradient sums over positions, the corrections'
    gathers at their tokens."""
    row, toks, vals, _ = bias
    return (dz.sum(0) if row is not None else None), (dz.gather(-1, toks) if vals is not None else None)

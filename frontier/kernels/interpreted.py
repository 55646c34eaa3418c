"""The `interpreter` implementation of the fused ops: each op's NKI kernel (`frontier.kernels.nki`), its source
unmodified, run by the project's NumPy interpreter (`frontier.kernels.interpreter`) on host copies of the tensors.

It is for verification, not speed: every call copies its inputs to NumPy, runs the kernel instruction by instruction
under the interpreter's Trn2 limits, and copies the outputs back to the inputs' device. The kernels take and return
fp32 (any other dtype is refused with `UnsupportedError`, never converted quietly) and run as on Trn2: the matmul
kernels with their default bf16 operands and fp32 accumulation. Their compile-time options (`matmul_dtype`, the head's
`vchunk`) can be passed as keywords to the matmul ops' functions, for verification (`frontier.kernels.verify`). What
each kernel call did (HBM bytes, FLOPs, work per engine) is kept in `COUNTS` per kernel name, for a cost model.

Layouts: the kernels take 2-D [tokens, features] HBM tensors, so (B, T, ...) activations are flattened to rows
(RoPE: [B * T, H * hd], token n at position n % T); AdamW's state goes in flat; the n-gram bias goes to the head
kernel dense ([N, V]: the sparse corrections scattered first), and the gradients of its parts are read from the
kernel's dz.
"""

from __future__ import annotations

from collections import defaultdict
from functools import cache

import numpy as np
import torch

from .interpreter import Counts, UnsupportedError, load, run
from .nki import adamw_step_scalars, bias_grads, dense_bias

COUNTS: dict[str, list[Counts]] = defaultdict(list)  # kernel name -> the Counts of each call, in order


@cache
def kernels(module: str):
    return load(f"frontier.kernels.nki.{module}")


def _np(t: torch.Tensor, what: str) -> np.ndarray:
    if t.dtype != torch.float32:
        raise UnsupportedError(f"the interpreted NKI kernels are fp32; {what} is {t.dtype}")
    return t.detach().to("cpu").contiguous().numpy()


def _call(module: str, name: str, *arrays, **scalars):
    out, counts = run(getattr(kernels(module), name), *arrays, **scalars)
    COUNTS[name].append(counts)
    return out


def _torch(a: np.ndarray, like: torch.Tensor, shape=None) -> torch.Tensor:
    t = torch.from_numpy(a).to(like.device)
    return t.view(shape) if shape is not None else t


# ---------------------------------------------------------------------------------------------------- RMSNorm
def rmsnorm_fwd(x, eps):
    eps = torch.finfo(x.dtype).eps if eps is None else eps
    y = _call("rmsnorm", "rmsnorm_fwd", _np(x, "x").reshape(-1, x.size(-1)), eps=eps)
    return _torch(y, x, x.shape)


def rmsnorm_bwd(x, dy, eps):
    eps = torch.finfo(x.dtype).eps if eps is None else eps
    d = x.size(-1)
    dx = _call("rmsnorm", "rmsnorm_bwd", _np(x, "x").reshape(-1, d), _np(dy, "dy").reshape(-1, d), eps=eps)
    return _torch(dx, x, x.shape)


# ---------------------------------------------------------------------------------------------------- RoPE
def _rope(name, x, cos, sin):
    B, T, H, hd = x.shape
    y = _call("rotary", name, _np(x, "x").reshape(B * T, H * hd), _np(cos, "cos"), _np(sin, "sin"))
    return _torch(y, x, x.shape)


def rotary_fwd(x, cos, sin):
    return _rope("rope_fwd", x, cos, sin)


def rotary_bwd(dy, cos, sin):
    return _rope("rope_bwd", dy, cos, sin)


# ---------------------------------------------------------------------------------------------------- ReLU^2 MLP
def relu2_mlp_fwd(x, w1, w2, **options):
    y = _call("relu2_mlp", "mlp_fwd", _np(x, "x").reshape(-1, x.size(-1)), _np(w1, "w1"), _np(w2, "w2"), **options)
    return _torch(y, x, (*x.shape[:-1], w2.size(0))), x.new_empty((0,))


def relu2_mlp_bwd(x, w1, w2, dy, saved, **options):
    d = x.size(-1)
    dx, dw1, dw2 = _call("relu2_mlp", "mlp_bwd", _np(x, "x").reshape(-1, d), _np(w1, "w1"), _np(w2, "w2"),
                         _np(dy, "dy").reshape(-1, dy.size(-1)), **options)
    return _torch(dx, x, x.shape), _torch(dw1, w1), _torch(dw2, w2)


# ---------------------------------------------------------------------------------------------------- head + CE
def head_ce_fwd(h, w, targets, cap, bias, **options):
    t = targets.detach().to("cpu", torch.int32).numpy()
    z = dense_bias(h, w, bias)
    if z is None:
        loss, lse = _call("head_ce", "head_ce_fwd", _np(h, "hidden"), _np(w, "w"), t, cap=cap, **options)
    else:
        loss, lse = _call("head_ce", "head_ce_bias_fwd", _np(h, "hidden"), _np(w, "w"), t, _np(z, "bias"), cap=cap,
                          **options)
    return _torch(loss, h), _torch(lse, h)


def head_ce_bwd(h, w, targets, lse, dloss, cap, bias, **options):
    t = targets.detach().to("cpu", torch.int32).numpy()
    z = dense_bias(h, w, bias)
    args = (_np(h, "hidden"), _np(w, "w"), t)
    if z is None:
        dh, dw = _call("head_ce", "head_ce_bwd", *args, _np(lse, "lse"), _np(dloss, "dloss"), cap=cap, **options)
        return _torch(dh, h), _torch(dw, w), None, None
    dh, dw, dz = _call("head_ce", "head_ce_bias_bwd", *args, _np(z, "bias"), _np(lse, "lse"), _np(dloss, "dloss"),
                       cap=cap, **options)
    return (_torch(dh, h), _torch(dw, w), *bias_grads(_torch(dz, h), bias))


# ---------------------------------------------------------------------------------------------------- Muon
def newton_schulz(g, steps, **options):
    flat = _np(g, "g").reshape(-1, *g.shape[-2:])
    out = np.stack([_call("newton_schulz", "newton_schulz", m, steps=steps, **options) for m in flat])
    return _torch(out, g, g.shape)


# ---------------------------------------------------------------------------------------------------- AdamW
def adamw_step(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step):
    s = adamw_step_scalars(lr, int(step), beta1, beta2, weight_decay)
    p, m, v = _call("adamw", "adamw", _np(param, "param").reshape(-1), _np(grad, "grad").reshape(-1),
                    _np(exp_avg, "exp_avg").reshape(-1), _np(exp_avg_sq, "exp_avg_sq").reshape(-1),
                    s["step_size"], s["inv_bc2"], s["decay"], beta1=beta1, beta2=beta2, eps=eps)
    for dst, new in ((param, p), (exp_avg, m), (exp_avg_sq, v)):
        dst.copy_(_torch(new, dst, dst.shape))

"""The `nki` implementation of the fused ops: the NKI kernels of `frontier.kernels.nki`, compiled by the real `nki`
and run on a NeuronCore through native TorchNeuron (torch-neuronx >= 2.13, device "neuron").

Each raw kernel call is registered once with torch-neuronx's `nki_op` (`frontier_nki::<kernel>`, a custom op whose
body calls the `@nki.jit` kernel on Neuron tensors; torch-neuronx compiles it on first use per shape and, inside
`torch.compile(backend="neuron")`, makes it one node of the graph). The `frontier::` ops call these. Nothing here
is imported before a run asks for `--kernels nki`, and `frontier.kernels.check` has by then verified that the real
`nki` and a Neuron device are present; any failure below raises (there is no fallback).

Unverified here (no Trainium in this project's machines): the `nki_op` registration and the kernels' compilation
by neuronx-cc. The kernels' semantics are verified in the interpreter (tests/test_nki_*.py).
"""

from __future__ import annotations

import importlib
from functools import cache

import torch

from .nki import adamw_step_scalars, bias_grads, dense_bias


@cache
def _module(name: str):
    return importlib.import_module(f"frontier.kernels.nki.{name}")


@cache
def _op(module: str, kernel: str, n_out: int):
    """`frontier_nki::<kernel>`: the kernel as a torch-neuronx custom op returning `n_out` tensors."""
    from torch_neuronx import nki_op  # the real package: `frontier.kernels.check` looked for it

    fn = getattr(_module(module), kernel)

    def call(*args, **consts):
        out = fn(*args, **consts)
        return out if n_out > 1 else (out,)

    return nki_op(f"frontier_nki::{kernel}", mutates_args={})(call)


def _run(module, kernel, n_out, *args, **consts):
    out = _op(module, kernel, n_out)(*args, **consts)
    return out if n_out > 1 else out[0]


def rmsnorm_fwd(x, eps):
    eps = torch.finfo(x.dtype).eps if eps is None else eps
    return _run("rmsnorm", "rmsnorm_fwd", 1, x.reshape(-1, x.size(-1)), eps=eps).view(x.shape)


def rmsnorm_bwd(x, dy, eps):
    eps = torch.finfo(x.dtype).eps if eps is None else eps
    d = x.size(-1)
    return _run("rmsnorm", "rmsnorm_bwd", 1, x.reshape(-1, d), dy.reshape(-1, d), eps=eps).view(x.shape)


def _rope(kernel, x, cos, sin):
    B, T, H, hd = x.shape
    return _run("rotary", kernel, 1, x.reshape(B * T, H * hd), cos.contiguous(), sin.contiguous()).view(x.shape)


def rotary_fwd(x, cos, sin):
    return _rope("rope_fwd", x, cos, sin)


def rotary_bwd(dy, cos, sin):
    return _rope("rope_bwd", dy, cos, sin)


def relu2_mlp_fwd(x, w1, w2):
    y = _run("relu2_mlp", "mlp_fwd", 1, x.reshape(-1, x.size(-1)), w1, w2)
    return y.view(*x.shape[:-1], w2.size(0)), x.new_empty((0,))


def relu2_mlp_bwd(x, w1, w2, dy, saved):
    dx, dw1, dw2 = _run("relu2_mlp", "mlp_bwd", 3, x.reshape(-1, x.size(-1)), w1, w2, dy.reshape(-1, dy.size(-1)))
    return dx.view(x.shape), dw1, dw2


def head_ce_fwd(h, w, targets, cap, bias):
    z = dense_bias(h, w, bias)
    if z is None:
        return _run("head_ce", "head_ce_fwd", 2, h, w, targets.to(torch.int32), cap=cap)
    return _run("head_ce", "head_ce_bias_fwd", 2, h, w, targets.to(torch.int32), z, cap=cap)


def head_ce_bwd(h, w, targets, lse, dloss, cap, bias):
    z = dense_bias(h, w, bias)
    if z is None:
        dh, dw = _run("head_ce", "head_ce_bwd", 2, h, w, targets.to(torch.int32), lse, dloss, cap=cap)
        return dh, dw, None, None
    dh, dw, dz = _run("head_ce", "head_ce_bias_bwd", 3, h, w, targets.to(torch.int32), z, lse, dloss, cap=cap)
    return (dh, dw, *bias_grads(dz, bias))


def newton_schulz(g, steps):
    flat = g.reshape(-1, *g.shape[-2:])
    return torch.stack([_run("newton_schulz", "newton_schulz", 1, m, steps=steps) for m in flat]).view(g.shape)


def adamw_step(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step):
    s = {k: torch.from_numpy(v).to(param.device)
         for k, v in adamw_step_scalars(lr, int(step), beta1, beta2, weight_decay).items()}
    p, m, v = _run("adamw", "adamw", 3, param.reshape(-1), grad.reshape(-1), exp_avg.reshape(-1),
                   exp_avg_sq.reshape(-1), s["step_size"], s["inv_bc2"], s["decay"], beta1=beta1, beta2=beta2,
                   eps=eps)
    for dst, new in ((param, p), (exp_avg, m), (exp_avg_sq, v)):
        dst.copy_(new.view(dst.shape))

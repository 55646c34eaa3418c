"""The fused ops, each defined once as a `torch.library.custom_op` in the `frontier::` namespace.

    rmsnorm(x, impl)                                   RMSNorm over the last dim, no learned weight
    rotary(x, cos, sin, impl)                          RoPE of q or k, x (B, T, H, hd), tables (T, hd / 2)
    relu2_mlp(x, w1, w2, impl)                         relu(x W1^T)^2 W2^T
    head_softcap_cross_entropy(hidden, w, targets, cap, impl, bias=...)
                                                       per-position cross-entropy of cap tanh(hidden W^T / cap)
                                                       (+ the n-gram bias); the logits never exist whole
    newton_schulz(g, steps, impl)                      Muon's orthogonalisation (no autograd: optimiser work)
    adamw_step(param, grad, m, v, ..., impl)           one AdamW step in place (no autograd: optimiser work)

Each op has a fake (meta) function, so `torch.compile(fullgraph=True)` sees it as one graph node, and the model's
ops an autograd formula (`register_autograd`) whose backward is itself a `frontier::*_backward` op. `impl` is the
implementation that runs behind it (a string argument of the op, so a compiled graph carries it as a constant):

    reference    PyTorch (`frontier.kernels.reference`)
    interpreter  the NKI kernel's unmodified source run by the project's NumPy interpreter (any machine; slow)
    nki          the NKI kernel on a NeuronCore (`frontier.kernels.neuron`: torch-neuronx's `nki_op`)

Inlined reference on the CPU. Under `torch.compile` on the CPU the `reference` implementation is not called through
its opaque custom op: the wrappers below call the plain-torch reference (forward and backward, as an
`autograd.Function`) so that Inductor traces through it and fuses it with its neighbours. Such calls are counted as
`reference (inlined into the compiled graph)` (INLINED) by `frontier::count`, a side-effecting op placed in the
compiled graph (forward and backward), so the count is per compiled call as it runs, not guessed at trace time.
Everywhere else (eager, CUDA graphs, the interpreter implementation) the ops stay opaque.

The kernels visible to the Neuron compiler. For `nki` the functions below do not go through the opaque `frontier::`
op either: they call the `nki` implementation (`frontier.kernels.neuron`) in the caller's code, forward and backward
as an `autograd.Function`, so the registered `nki_op` ops themselves (`frontier_nki::mlp_fwd`, ...) are what
`torch.compile(backend="neuron")` finds in the graph, each one node it lowers to its kernel (torch-neuronx exposes a
kernel to the compiler only when the `nki_op` op is in the traced code). Each kernel counts its call in its op's body
as it runs (`frontier.kernels.tally`), not at trace time. The `frontier::` ops still take `impl="nki"` (opcheck
checks them), but the model never calls them with it.

The head keeps tanh(logits / cap) for its backward when the logits fit `reference.KEEP_ELEMENTS` (a stated
budget), else recomputes them in chunks; each backward counts which path ran under
`head_softcap_cross_entropy_logits` (`kept` or `recomputed`; the kernels always recompute).

There is no fallback: an implementation that cannot run raises. Every call is counted per (op, implementation) as
it runs (`calls()`, `reset_calls()`); a run record's `implementations` are read from these counts, not from the
config. `frontier.kernels.check` refuses, before training, an implementation that cannot run a config.
"""

from typing import Optional

import torch

from .bias import LogitBias
from .tally import CALLS as _CALLS, LOGITS

IMPLEMENTATIONS = ("reference", "interpreter", "nki")
OPS = ("rmsnorm", "rotary", "relu2_mlp", "head_softcap_cross_entropy", "newton_schulz", "adamw_step")
INLINED = "reference (inlined into the compiled graph)"
_TALLY = torch.zeros((), dtype=torch.int64)  # what `frontier::count` names as mutated, so no graph drops it


def backend(impl: str):
    """The module implementing every op for `impl` (imported on first use: the nki one needs a Neuron machine)."""
    if impl == "reference":
        from . import reference

        return reference
    if impl == "interpreter":
        from . import interpreted

        return interpreted
    if impl == "nki":
        from . import neuron

        return neuron
    raise ValueError(f"unknown kernel implementation {impl!r}; choose one of {', '.join(IMPLEMENTATIONS)}")


def _run(name: str, impl: str, fn: str, *args, **kwargs):
    if impl != "nki":  # the nki kernels count their launches themselves, as they run (frontier.kernels.neuron)
        _CALLS[(name, impl)] += 1
    return getattr(backend(impl), fn)(*args, **kwargs)


@torch.library.custom_op("frontier::count", mutates_args=("tally",))
def _count(tally: torch.Tensor, name: str, impl: str) -> None:
    """Counts one call of `name` by `impl` when it runs (a node of the compiled graph, kept for its side effect)."""
    _CALLS[(name, impl)] += 1


@_count.register_fake
def _(tally, name, impl):
    return None


def _inlined(impl: str, *tensors) -> bool:
    """Whether this call is the reference traced into a graph being compiled for the CPU (module docstring)."""
    return (impl == "reference" and torch.compiler.is_compiling()
            and all(t.device.type == "cpu" for t in tensors if t is not None))


def _nki():
    """The nki implementation (`frontier.kernels.neuron`), whose functions call the registered `nki_op` ops."""
    from . import neuron

    return neuron


def calls() -> dict[str, dict[str, int]]:
    """{op: {implementation: calls}} since the last `reset_calls()`; backward passes appear as `op.backward`."""
    out: dict[str, dict[str, int]] = {}
    for (name, impl), n in sorted(_CALLS.items()):
        out.setdefault(name, {})[impl] = n
    return out


def reset_calls() -> None:
    _CALLS.clear()


def _autocast(*tensors):
    """The floating tensors in the autocast dtype when autocast is on for their device (what nn.Linear would get),
    else unchanged: the matmul ops keep the eager model's mixed precision on CUDA."""
    dev = tensors[0].device.type
    if not torch.amp.is_autocast_available(dev) or not torch.is_autocast_enabled(dev):  # meta: never
        return tensors
    dtype = torch.get_autocast_dtype(dev)
    return tuple(t.to(dtype) if t is not None and t.is_floating_point() else t for t in tensors)


# ---------------------------------------------------------------------------------------------------- RMSNorm
@torch.library.custom_op("frontier::rmsnorm", mutates_args=())
def _rmsnorm(x: torch.Tensor, eps: Optional[float], impl: str) -> torch.Tensor:
    return _run("rmsnorm", impl, "rmsnorm_fwd", x, eps)


@torch.library.custom_op("frontier::rmsnorm_backward", mutates_args=())
def _rmsnorm_backward(x: torch.Tensor, dy: torch.Tensor, eps: Optional[float], impl: str) -> torch.Tensor:
    return _run("rmsnorm.backward", impl, "rmsnorm_bwd", x, dy, eps)


@_rmsnorm.register_fake
def _(x, eps, impl):
    return torch.empty_like(x)


@_rmsnorm_backward.register_fake
def _(x, dy, eps, impl):
    return torch.empty_like(x)


def _rmsnorm_setup(ctx, inputs, output):
    x, ctx.eps, ctx.impl = inputs
    ctx.save_for_backward(x)


def _rmsnorm_grad(ctx, dy):
    (x,) = ctx.saved_tensors
    return _rmsnorm_backward(x, dy, ctx.eps, ctx.impl), None, None


_rmsnorm.register_autograd(_rmsnorm_grad, setup_context=_rmsnorm_setup)


class _RMSNormInlined(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, eps):
        _count(_TALLY, "rmsnorm", INLINED)
        ctx.eps = eps
        ctx.save_for_backward(x)
        return _reference().rmsnorm_fwd(x, eps)

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        _count(_TALLY, "rmsnorm.backward", INLINED)
        return _reference().rmsnorm_bwd(x, dy, ctx.eps), None


class _RMSNormNKI(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, eps):
        ctx.eps = eps
        ctx.save_for_backward(x)
        return _nki().rmsnorm_fwd(x, eps)

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        return _nki().rmsnorm_bwd(x, dy.contiguous(), ctx.eps), None


def rmsnorm(x: torch.Tensor, impl: str = "reference", eps: float | None = None) -> torch.Tensor:
    """x * rsqrt(mean(x^2) + eps) over the last dim; eps None = x's dtype epsilon (as F.rms_norm)."""
    if impl == "nki":
        return _RMSNormNKI.apply(x.contiguous(), eps)
    if _inlined(impl, x):
        return _RMSNormInlined.apply(x, eps)
    return _rmsnorm(x, eps, impl)


# ---------------------------------------------------------------------------------------------------- RoPE
@torch.library.custom_op("frontier::rotary", mutates_args=())
def _rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, impl: str) -> torch.Tensor:
    return _run("rotary", impl, "rotary_fwd", x, cos, sin)


@torch.library.custom_op("frontier::rotary_backward", mutates_args=())
def _rotary_backward(dy: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, impl: str) -> torch.Tensor:
    return _run("rotary.backward", impl, "rotary_bwd", dy, cos, sin)


@_rotary.register_fake
def _(x, cos, sin, impl):
    return torch.empty_like(x)


@_rotary_backward.register_fake
def _(dy, cos, sin, impl):
    return torch.empty_like(dy)


def _rotary_setup(ctx, inputs, output):
    _, cos, sin, ctx.impl = inputs
    ctx.save_for_backward(cos, sin)


def _rotary_grad(ctx, dy):
    cos, sin = ctx.saved_tensors
    return _rotary_backward(dy.contiguous(), cos, sin, ctx.impl), None, None, None


_rotary.register_autograd(_rotary_grad, setup_context=_rotary_setup)


class _RotaryInlined(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin):
        _count(_TALLY, "rotary", INLINED)
        ctx.save_for_backward(cos, sin)
        return _reference().rotary_fwd(x, cos, sin)

    @staticmethod
    def backward(ctx, dy):
        cos, sin = ctx.saved_tensors
        _count(_TALLY, "rotary.backward", INLINED)
        return _reference().rotary_bwd(dy, cos, sin), None, None


class _RotaryNKI(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin):
        ctx.save_for_backward(cos, sin)
        return _nki().rotary_fwd(x, cos, sin)

    @staticmethod
    def backward(ctx, dy):
        cos, sin = ctx.saved_tensors
        return _nki().rotary_bwd(dy.contiguous(), cos, sin), None, None


def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, impl: str = "reference") -> torch.Tensor:
    """x (B, T, H, hd) rotated per head by each position's angles; cos, sin (>= T, hd / 2), fp32."""
    T = x.size(1)
    if impl == "nki":
        return _RotaryNKI.apply(x.contiguous(), cos[:T].contiguous(), sin[:T].contiguous())
    if _inlined(impl, x):
        return _RotaryInlined.apply(x, cos[:T], sin[:T])
    return _rotary(x.contiguous(), cos[:T], sin[:T], impl)


# ---------------------------------------------------------------------------------------------------- ReLU^2 MLP
@torch.library.custom_op("frontier::relu2_mlp", mutates_args=())
def _relu2_mlp(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, impl: str) -> tuple[torch.Tensor, torch.Tensor]:
    return _run("relu2_mlp", impl, "relu2_mlp_fwd", x, w1, w2)


@torch.library.custom_op("frontier::relu2_mlp_backward", mutates_args=())
def _relu2_mlp_backward(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, dy: torch.Tensor, saved: torch.Tensor,
                        impl: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _run("relu2_mlp.backward", impl, "relu2_mlp_bwd", x, w1, w2, dy, saved)


def _saved_shape(x, w1, impl):
    """The reference saves r = relu(x W1^T) for its backward; a kernel recomputes it and saves nothing."""
    return (*x.shape[:-1], w1.size(0)) if impl == "reference" else (0,)


@_relu2_mlp.register_fake
def _(x, w1, w2, impl):
    return x.new_empty((*x.shape[:-1], w2.size(0))), x.new_empty(_saved_shape(x, w1, impl))


@_relu2_mlp_backward.register_fake
def _(x, w1, w2, dy, saved, impl):
    return torch.empty_like(x), torch.empty_like(w1), torch.empty_like(w2)


def _relu2_mlp_setup(ctx, inputs, output):
    x, w1, w2, ctx.impl = inputs
    ctx.save_for_backward(x, w1, w2, output[1])


def _relu2_mlp_grad(ctx, dy, _dsaved):
    x, w1, w2, saved = ctx.saved_tensors
    dx, dw1, dw2 = _relu2_mlp_backward(x, w1, w2, dy.contiguous(), saved, ctx.impl)
    return dx, dw1, dw2, None


_relu2_mlp.register_autograd(_relu2_mlp_grad, setup_context=_relu2_mlp_setup)


class _ReLU2MLPInlined(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w1, w2):
        _count(_TALLY, "relu2_mlp", INLINED)
        y, r = _reference().relu2_mlp_fwd(x, w1, w2)
        ctx.save_for_backward(x, w1, w2, r)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, w1, w2, r = ctx.saved_tensors
        _count(_TALLY, "relu2_mlp.backward", INLINED)
        return _reference().relu2_mlp_bwd(x, w1, w2, dy.contiguous(), r)


class _ReLU2MLPNKI(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w1, w2):
        ctx.save_for_backward(x, w1, w2)
        return _nki().relu2_mlp_fwd(x, w1, w2)[0]

    @staticmethod
    def backward(ctx, dy):
        x, w1, w2 = ctx.saved_tensors
        return _nki().relu2_mlp_bwd(x, w1, w2, dy.contiguous(), None)


def relu2_mlp(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, impl: str = "reference") -> torch.Tensor:
    """relu(x W1^T)^2 W2^T for x (..., D), W1 (F, D), W2 (D, F)."""
    x, w1, w2 = _autocast(x, w1, w2)
    if impl == "nki":
        return _ReLU2MLPNKI.apply(x.contiguous(), w1, w2)
    if _inlined(impl, x):
        return _ReLU2MLPInlined.apply(x.contiguous(), w1, w2)
    return _relu2_mlp(x.contiguous(), w1, w2, impl)[0]


# ---------------------------------------------------------------------------------------------------- head + CE
def _reference():
    from . import reference

    return reference


def _kept_shape(hidden, w, impl):
    """The reference keeps tanh(l / cap) (N, V) for its backward when it fits the budget; else nothing is kept."""
    n, v = hidden.size(0), w.size(0)
    return (n, v) if impl == "reference" and _reference().keeps_logits(n, v) else (0,)


@torch.library.custom_op("frontier::head_softcap_cross_entropy", mutates_args=())
def _head_ce(hidden: torch.Tensor, w: torch.Tensor, targets: torch.Tensor, cap: float, impl: str,
             bias_row: Optional[torch.Tensor], bias_tokens: Optional[torch.Tensor],
             bias_values: Optional[torch.Tensor], bias_dense: Optional[torch.Tensor]
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    out = _run("head_softcap_cross_entropy", impl, "head_ce_fwd", hidden, w, targets, cap,
               LogitBias(bias_row, bias_tokens, bias_values, bias_dense))
    if len(out) == 2:  # a kernel: nothing kept
        out = (*out, hidden.new_empty((0,), dtype=torch.float32))
    return tuple(out)


@torch.library.custom_op("frontier::head_softcap_cross_entropy_backward", mutates_args=())
def _head_ce_backward(hidden: torch.Tensor, w: torch.Tensor, targets: torch.Tensor, lse: torch.Tensor,
                      dloss: torch.Tensor, kept: torch.Tensor, cap: float, impl: str, bias_row: Optional[torch.Tensor],
                      bias_tokens: Optional[torch.Tensor], bias_values: Optional[torch.Tensor],
                      bias_dense: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    bias = LogitBias(bias_row, bias_tokens, bias_values, bias_dense)
    keep = kept.numel() > 0 and impl == "reference"  # a kernel recomputes whatever it is handed (the roofline
    # replays a reference call's arguments through the interpreter)
    if impl != "nki":  # the nki kernel counts its own (always recomputed)
        _CALLS[(LOGITS, "kept" if keep else "recomputed")] += 1
    if keep:
        dh, dw, drow, dvals = _run("head_softcap_cross_entropy.backward", impl, "head_ce_bwd", hidden, w, targets,
                                   lse, dloss, cap, bias, kept=kept)
    else:
        dh, dw, drow, dvals = _run("head_softcap_cross_entropy.backward", impl, "head_ce_bwd", hidden, w, targets,
                                   lse, dloss, cap, bias)

    def empty():
        return hidden.new_empty((0,), dtype=torch.float32)

    return dh, dw, empty() if drow is None else drow, empty() if dvals is None else dvals


@_head_ce.register_fake
def _(hidden, w, targets, cap, impl, bias_row, bias_tokens, bias_values, bias_dense):
    n = hidden.size(0)
    f32 = torch.float32
    return (hidden.new_empty((n,), dtype=f32), hidden.new_empty((n,), dtype=f32),
            hidden.new_empty(_kept_shape(hidden, w, impl), dtype=f32))


@_head_ce_backward.register_fake
def _(hidden, w, targets, lse, dloss, kept, cap, impl, bias_row, bias_tokens, bias_values, bias_dense):
    f32 = torch.float32
    drow = hidden.new_empty((w.size(0),) if bias_row is not None else (0,), dtype=f32)
    dvals = hidden.new_empty(bias_values.shape if bias_values is not None else (0,), dtype=f32)
    return torch.empty_like(hidden), torch.empty_like(w), drow, dvals


def _head_ce_setup(ctx, inputs, output):
    hidden, w, targets, ctx.cap, ctx.impl, row, toks, vals, dense = inputs
    ctx.has = (row is not None, toks is not None, vals is not None, dense is not None)
    ctx.save_for_backward(hidden, w, targets, output[1], output[2],
                          *(t for t in (row, toks, vals, dense) if t is not None))


def _head_ce_grad(ctx, dloss, _dlse, _dkept):
    hidden, w, targets, lse, kept, *present = ctx.saved_tensors
    it = iter(present)
    row, toks, vals, dense = (next(it) if has else None for has in ctx.has)
    if dense is not None and ctx.needs_input_grad[8]:
        raise NotImplementedError("head_softcap_cross_entropy: no gradient for a dense bias (evaluation only)")
    dh, dw, drow, dvals = _head_ce_backward(hidden, w, targets, lse, dloss.contiguous(), kept, ctx.cap, ctx.impl,
                                            row, toks, vals, dense)
    return (dh, dw, None, None, None, drow if row is not None else None, None,
            dvals if vals is not None else None, None)


_head_ce.register_autograd(_head_ce_grad, setup_context=_head_ce_setup)


class _HeadInlined(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, w, targets, cap, row, toks, vals, dense):
        _count(_TALLY, "head_softcap_cross_entropy", INLINED)
        bias = LogitBias(row, toks, vals, dense)
        loss, lse, kept = _reference().head_ce_fwd(hidden, w, targets, cap, bias)
        ctx.cap, ctx.has = cap, tuple(t is not None for t in bias)
        ctx.save_for_backward(hidden, w, targets, lse, kept, *(t for t in bias if t is not None))
        return loss

    @staticmethod
    def backward(ctx, dloss):
        hidden, w, targets, lse, kept, *present = ctx.saved_tensors
        it = iter(present)
        bias = LogitBias(*(next(it) if has else None for has in ctx.has))
        if bias[3] is not None and ctx.needs_input_grad[7]:
            raise NotImplementedError("head_softcap_cross_entropy: no gradient for a dense bias (evaluation only)")
        _count(_TALLY, "head_softcap_cross_entropy.backward", INLINED)
        _count(_TALLY, LOGITS, "kept" if kept.numel() else "recomputed")
        dh, dw, drow, dvals = _reference().head_ce_bwd(hidden, w, targets, lse, dloss.contiguous(), ctx.cap, bias,
                                                      kept=kept if kept.numel() else None)
        return dh, dw, None, None, drow, None, dvals, None


class _HeadNKI(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, w, targets, cap, row, toks, vals, dense):
        bias = LogitBias(row, toks, vals, dense)
        loss, lse = _nki().head_ce_fwd(hidden, w, targets, cap, bias)
        ctx.cap, ctx.has = cap, tuple(t is not None for t in bias)
        ctx.save_for_backward(hidden, w, targets, lse, *(t for t in bias if t is not None))
        return loss

    @staticmethod
    def backward(ctx, dloss):
        hidden, w, targets, lse, *present = ctx.saved_tensors
        it = iter(present)
        bias = LogitBias(*(next(it) if has else None for has in ctx.has))
        if bias[3] is not None and ctx.needs_input_grad[7]:
            raise NotImplementedError("head_softcap_cross_entropy: no gradient for a dense bias (evaluation only)")
        dh, dw, drow, dvals = _nki().head_ce_bwd(hidden, w, targets, lse, dloss.contiguous(), ctx.cap, bias)
        return dh, dw, None, None, drow, None, dvals, None


def head_softcap_cross_entropy(hidden: torch.Tensor, w: torch.Tensor, targets: torch.Tensor, cap: float,
                               impl: str = "reference", bias_row=None, bias_tokens=None, bias_values=None,
                               bias_dense=None) -> torch.Tensor:
    """Per-position cross-entropy (nats, fp32, shape (N,)) of z = cap tanh(hidden W^T / cap) + bias, for hidden
    (N, D), W (V, D), targets (N,). The bias: a row added to every position (V,), sparse corrections `bias_values`
    (N, E) scattered at `bias_tokens` (N, E) (the n-gram mix of a training batch), or a dense (N, V) one
    (evaluation). Its logits are kept for the backward when they fit the stated budget
    (`reference.KEEP_ELEMENTS`), else computed a chunk of rows at a time, forward and backward."""
    hidden, w = _autocast(hidden, w)
    if impl == "nki":
        return _HeadNKI.apply(hidden.contiguous(), w, targets.contiguous(), float(cap), bias_row, bias_tokens,
                              bias_values, bias_dense)
    if _inlined(impl, hidden):
        return _HeadInlined.apply(hidden.contiguous(), w, targets.contiguous(), float(cap), bias_row, bias_tokens,
                                  bias_values, bias_dense)
    return _head_ce(hidden.contiguous(), w, targets.contiguous(), float(cap), impl, bias_row, bias_tokens,
                    bias_values, bias_dense)[0]


# ---------------------------------------------------------------------------------------------------- Muon
@torch.library.custom_op("frontier::newton_schulz", mutates_args=())
def _newton_schulz(g: torch.Tensor, steps: int, impl: str) -> torch.Tensor:
    return _run("newton_schulz", impl, "newton_schulz", g, steps)


@_newton_schulz.register_fake
def _(g, steps, impl):
    return torch.empty_like(g)


def newton_schulz(g: torch.Tensor, steps: int = 5, impl: str = "reference") -> torch.Tensor:
    """Muon's orthogonalisation of g (..., m, n) in g's dtype (matrices along leading dims are independent)."""
    if impl == "nki":
        return _nki().newton_schulz(g.contiguous(), steps)
    if _inlined(impl, g):
        _count(_TALLY, "newton_schulz", INLINED)
        return _reference().newton_schulz(g, steps)
    return _newton_schulz(g.contiguous(), steps, impl)


# ---------------------------------------------------------------------------------------------------- AdamW
@torch.library.custom_op("frontier::adamw_step", mutates_args=("param", "exp_avg", "exp_avg_sq"))
def _adamw_step(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
                lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, step: float,
                impl: str) -> None:
    _run("adamw_step", impl, "adamw_step", param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay,
         step)


@_adamw_step.register_fake
def _(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step, impl):
    return None


def adamw_step(param, grad, exp_avg, exp_avg_sq, lr: float, beta1: float, beta2: float, eps: float,
               weight_decay: float, step: float, impl: str = "reference") -> None:
    """One AdamW step of `param` in place (its moments too); `step` counts from 1. The kernel implementations
    receive the per-step values (step size, bias corrections, decay) as small tensors, never as constants."""
    if impl == "nki":
        _nki().adamw_step(param, grad, exp_avg, exp_avg_sq, float(lr), float(beta1), float(beta2), float(eps),
                          float(weight_decay), float(step))
        return
    if _inlined(impl, param):
        _count(_TALLY, "adamw_step", INLINED)
        _reference().adamw_step(param, grad, exp_avg, exp_avg_sq, float(lr), float(beta1), float(beta2), float(eps),
                                float(weight_decay), float(step))
        return
    _adamw_step(param, grad, exp_avg, exp_avg_sq, float(lr), float(beta1), float(beta2), float(eps),
                float(weight_decay), float(step), impl)

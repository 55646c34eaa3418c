"""The `nki` implementation of the fused ops: the NKI kernels of `frontier.kernels.nki`, compiled by the real `nki`
and run on a NeuronCore through native TorchNeuron (device "neuron"), as the one supported toolchain
(`frontier.kernels.toolchain`: Neuron SDK 2.33, NKI 0.7) provides them.

Registration. torch-neuronx's `nki_op(name, mutates_args=...)` builds a `torch.library.custom_op` whose schema is
inferred from the decorated function's signature (`torch.library.infer_schema`), which refuses `*args` / `**kwargs`
and unannotated parameters. So every kernel entry point has its own typed wrapper here (`entry_points`): tensors
annotated `torch.Tensor`, compile-time constants annotated `float` / `int`, outputs a `torch.Tensor` or a tuple of
them; its body calls the `@nki.jit` kernel and returns what the kernel allocated. Each is registered once as
`frontier_nki::<kernel>` with a fake (meta) function, so that inside `torch.compile(backend="neuron")` the kernel
is one node of the graph. `frontier.kernels.ops` calls these (through `NeuronKernels`) in the model's own
traced code, never inside an opaque `frontier::` op, so the compiler sees the kernels themselves; each counts a call of
its fused op when its body runs (`OP_OF`).

The toolchain is found lazily and by what it offers, never by an import that succeeds (PyPI holds empty
placeholders named torch-neuronx and nki): `find_toolchain` wants `torch_neuronx.nki_op` callable and the real
`nki` (`jit`, `simulate`, NKI 0.7 exactly; `interpreter.find_real_nki`), and says which is missing. Nothing here is
imported before a run asks for `--kernels nki`, and `frontier.kernels.check` has by then refused a machine without
them; any failure below raises (there is no fallback).

A `Toolchain` is the pair (nki_op, kernel lookup), so the same registration runs on any machine with a stand-in:
tests/test_neuron_registration.py registers every entry point with an `nki_op` built on `torch.library.custom_op`
and an `nki` that only provides `jit` (its kernels run in the interpreter), and calls each one.

Unverified here (no Trainium in this project's machines): torch-neuronx's own `nki_op` (that it accepts these
signatures as `torch.library.custom_op` does), the real `nki.jit` taking compile-time constants as keywords, and the
kernels' compilation by neuronx-cc.
"""

import importlib
from dataclasses import dataclass
from typing import Callable

import torch

from ..devices import optional_import
from .nki import adamw_step_scalars, bias_grads, dense_bias
from .tally import CALLS, LOGITS
from .toolchain import LNC, NAME

NAMESPACE = "frontier_nki"


@dataclass(frozen=True)
class Toolchain:
    """What registers and runs the kernels: `nki_op(name, mutates_args=...)`, a decorator over a typed function as
    torch-neuronx's, `kernel(module, name)`, the `@nki.jit` kernel `name` of `frontier.kernels.nki.<module>`, and the
    Logical NeuronCore degree `lnc` every kernel is launched at (`kernel[lnc](...)`; toolchain.LNC on a Trn2)."""

    nki_op: Callable
    kernel: Callable
    name: str
    lnc: int = LNC


def _real_kernel(module: str, name: str):
    return getattr(importlib.import_module(f"frontier.kernels.nki.{module}"), name)


def find_toolchain() -> tuple[Toolchain | None, str]:
    """(the real toolchain, "") when torch-neuronx offers nki_op and the real nki of the supported version is
    installed, else (None, why not)."""
    tnx, why = optional_import("torch_neuronx", f"torch-neuronx is not installed (install {NAME} from AWS's Neuron "
                                                 "pip index)")
    if tnx is None:
        return None, why
    if not callable(getattr(tnx, "nki_op", None)):
        return None, ("the installed torch_neuronx offers no nki_op (PyPI's empty placeholder, or the XLA flavour): "
                      f"the kernels register with the nki_op of {NAME}")
    from .interpreter import find_real_nki

    nki, why = find_real_nki()
    if nki is None:
        return None, why
    return Toolchain(tnx.nki_op, _real_kernel, f"torch_neuronx {getattr(tnx, '__version__', '?')}, "
                                               f"nki {getattr(nki, '__version__', '?')}"), ""


# ---------------------------------------------------------------------------------------------------- entry points
Tensor = torch.Tensor

# kernel -> the fused op (`frontier.kernels.ops`) whose call it is, as `ops.calls()` counts it: each entry point counts
# one call of its op when its body runs (newton_schulz: one per matrix, a launch each)
OP_OF = {"rmsnorm_fwd": "rmsnorm", "rmsnorm_bwd": "rmsnorm.backward", "rope_fwd": "rotary",
         "rope_bwd": "rotary.backward", "mlp_fwd": "relu2_mlp", "mlp_bwd": "relu2_mlp.backward",
         "head_ce_fwd": "head_softcap_cross_entropy", "head_ce_bias_fwd": "head_softcap_cross_entropy",
         "head_ce_bwd": "head_softcap_cross_entropy.backward",
         "head_ce_bias_bwd": "head_softcap_cross_entropy.backward", "newton_schulz": "newton_schulz",
         "adamw": "adamw_step"}


def _f32(t: Tensor, *shape) -> Tensor:
    return t.new_empty(shape, dtype=torch.float32)


def entry_points(kernel: Callable, lnc: int = LNC) -> dict[str, tuple[Callable, Callable]]:
    """kernel name -> (typed wrapper, fake), the wrapper launching kernel(module, name) (a jitted kernel) at the LNC
    degree `lnc`: `kernel[lnc](...)`, the explicit launch degree, so that it matches neuronx-cc's (NCC_EVRF066)."""

    def k(module, name):
        """The kernel at its launch degree, counted as a call of its fused op (`OP_OF`) as it runs."""
        CALLS[(OP_OF[name], "nki")] += 1
        if name in ("head_ce_bwd", "head_ce_bias_bwd"):
            CALLS[(LOGITS, "recomputed")] += 1
        return kernel(module, name)[lnc]

    def rmsnorm_fwd(x: Tensor, eps: float) -> Tensor:
        return k("rmsnorm", "rmsnorm_fwd")(x, eps=eps)

    def rmsnorm_bwd(x: Tensor, dy: Tensor, eps: float) -> Tensor:
        return k("rmsnorm", "rmsnorm_bwd")(x, dy, eps=eps)

    def rope_fwd(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        return k("rotary", "rope_fwd")(x, cos, sin)

    def rope_bwd(dy: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        return k("rotary", "rope_bwd")(dy, cos, sin)

    def mlp_fwd(x: Tensor, w1: Tensor, w2: Tensor) -> Tensor:
        return k("relu2_mlp", "mlp_fwd")(x, w1, w2)

    def mlp_bwd(x: Tensor, w1: Tensor, w2: Tensor, dy: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return tuple(k("relu2_mlp", "mlp_bwd")(x, w1, w2, dy))

    def head_ce_fwd(hidden: Tensor, w: Tensor, targets: Tensor, cap: float) -> tuple[Tensor, Tensor]:
        return tuple(k("head_ce", "head_ce_fwd")(hidden, w, targets, cap=cap))

    def head_ce_bias_fwd(hidden: Tensor, w: Tensor, targets: Tensor, bias: Tensor,
                         cap: float) -> tuple[Tensor, Tensor]:
        return tuple(k("head_ce", "head_ce_bias_fwd")(hidden, w, targets, bias, cap=cap))

    def head_ce_bwd(hidden: Tensor, w: Tensor, targets: Tensor, lse: Tensor, dloss: Tensor,
                    cap: float) -> tuple[Tensor, Tensor]:
        return tuple(k("head_ce", "head_ce_bwd")(hidden, w, targets, lse, dloss, cap=cap))

    def head_ce_bias_bwd(hidden: Tensor, w: Tensor, targets: Tensor, bias: Tensor, lse: Tensor, dloss: Tensor,
                         cap: float) -> tuple[Tensor, Tensor, Tensor]:
        return tuple(k("head_ce", "head_ce_bias_bwd")(hidden, w, targets, bias, lse, dloss, cap=cap))

    def newton_schulz(g: Tensor, steps: int) -> Tensor:
        return k("newton_schulz", "newton_schulz")(g, steps=steps)

    def adamw(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, step_size: Tensor, inv_bc2: Tensor, decay: Tensor,
              beta1: float, beta2: float, eps: float) -> tuple[Tensor, Tensor, Tensor]:
        return tuple(k("adamw", "adamw")(param, grad, m, v, step_size, inv_bc2, decay, beta1=beta1, beta2=beta2,
                                         eps=eps))

    # fakes: the outputs' shapes and dtypes, for tracing (the kernels write fp32 except where noted)
    def like(t, *rest):
        return torch.empty_like(t)

    fakes = {
        "rmsnorm_fwd": like,
        "rmsnorm_bwd": lambda x, dy, eps: torch.empty_like(dy),
        "rope_fwd": like,
        "rope_bwd": like,
        "mlp_fwd": lambda x, w1, w2: _f32(x, x.size(0), w2.size(0)),
        "mlp_bwd": lambda x, w1, w2, dy: (_f32(x, *x.shape), _f32(x, *w1.shape), _f32(x, *w2.shape)),
        "head_ce_fwd": lambda h, w, t, cap: (_f32(h, h.size(0)), _f32(h, h.size(0))),
        "head_ce_bias_fwd": lambda h, w, t, b, cap: (_f32(h, h.size(0)), _f32(h, h.size(0))),
        "head_ce_bwd": lambda h, w, t, lse, dl, cap: (_f32(h, *h.shape), _f32(h, *w.shape)),
        "head_ce_bias_bwd": lambda h, w, t, b, lse, dl, cap: (_f32(h, *h.shape), _f32(h, *w.shape),
                                                              _f32(h, h.size(0), w.size(0))),
        "newton_schulz": lambda g, steps: _f32(g, *g.shape),
        "adamw": lambda p, g, m, v, s, i, d, b1, b2, eps: (_f32(p, *p.shape), _f32(p, *p.shape), _f32(p, *p.shape)),
    }
    wrappers = (rmsnorm_fwd, rmsnorm_bwd, rope_fwd, rope_bwd, mlp_fwd, mlp_bwd, head_ce_fwd, head_ce_bias_fwd,
                head_ce_bwd, head_ce_bias_bwd, newton_schulz, adamw)
    return {fn.__name__: (fn, fakes[fn.__name__]) for fn in wrappers}


def register(toolchain: Toolchain, namespace: str = NAMESPACE) -> dict[str, Callable]:
    """Every entry point registered with the toolchain's nki_op as `<namespace>::<kernel>` (with its fake when the
    op offers register_fake, as a torch.library custom op does)."""
    ops = {}
    for name, (wrapper, fake) in entry_points(toolchain.kernel, toolchain.lnc).items():
        op = toolchain.nki_op(f"{namespace}::{name}", mutates_args={})(wrapper)
        if hasattr(op, "register_fake"):
            op.register_fake(fake)
        ops[name] = op
    return ops


class NeuronKernels:
    """The fused ops' `nki` implementation (the functions `ops.backend("nki")` calls) over registered ops.

    Output dtypes are the `frontier::` ops' (their fakes in ops.py, the reference's): the matmul kernels write fp32
    (PSUM accumulates in fp32), and under bf16 autocast, where their inputs are bf16, the MLP's output and gradients
    and the head's gradients are cast back to their inputs' dtypes here (what nn.Linear under autocast returns), so a
    traced graph's fake tensors and the tensors that run agree."""

    def __init__(self, toolchain: Toolchain, namespace: str = NAMESPACE):
        self.toolchain = toolchain
        self.ops = register(toolchain, namespace)

    def rmsnorm_fwd(self, x, eps):
        eps = torch.finfo(x.dtype).eps if eps is None else eps
        return self.ops["rmsnorm_fwd"](x.reshape(-1, x.size(-1)), float(eps)).view(x.shape)

    def rmsnorm_bwd(self, x, dy, eps):
        eps = torch.finfo(x.dtype).eps if eps is None else eps
        d = x.size(-1)
        return self.ops["rmsnorm_bwd"](x.reshape(-1, d), dy.reshape(-1, d), float(eps)).view(x.shape).to(x.dtype)

    def _rope(self, kernel, x, cos, sin):
        B, T, H, hd = x.shape
        return self.ops[kernel](x.reshape(B * T, H * hd), cos.contiguous(), sin.contiguous()).view(x.shape)

    def rotary_fwd(self, x, cos, sin):
        return self._rope("rope_fwd", x, cos, sin)

    def rotary_bwd(self, dy, cos, sin):
        return self._rope("rope_bwd", dy, cos, sin)

    def relu2_mlp_fwd(self, x, w1, w2):
        y = self.ops["mlp_fwd"](x.reshape(-1, x.size(-1)), w1, w2)
        return y.view(*x.shape[:-1], w2.size(0)).to(x.dtype), x.new_empty((0,))

    def relu2_mlp_bwd(self, x, w1, w2, dy, saved):
        dx, dw1, dw2 = self.ops["mlp_bwd"](x.reshape(-1, x.size(-1)), w1, w2, dy.reshape(-1, dy.size(-1)))
        return dx.view(x.shape).to(x.dtype), dw1.to(w1.dtype), dw2.to(w2.dtype)

    def head_ce_fwd(self, h, w, targets, cap, bias):
        z = dense_bias(h, w, bias)
        t = targets.to(torch.int32)
        if z is None:
            return self.ops["head_ce_fwd"](h, w, t, float(cap))
        return self.ops["head_ce_bias_fwd"](h, w, t, z, float(cap))

    def head_ce_bwd(self, h, w, targets, lse, dloss, cap, bias):
        z = dense_bias(h, w, bias)
        t = targets.to(torch.int32)
        if z is None:
            dh, dw = self.ops["head_ce_bwd"](h, w, t, lse, dloss, float(cap))
            return dh.to(h.dtype), dw.to(w.dtype), None, None
        dh, dw, dz = self.ops["head_ce_bias_bwd"](h, w, t, z, lse, dloss, float(cap))
        return (dh.to(h.dtype), dw.to(w.dtype), *bias_grads(dz, bias))

    def newton_schulz(self, g, steps):
        flat = g.reshape(-1, *g.shape[-2:])
        out = []
        for m in flat:
            out.append(self.ops["newton_schulz"](m.contiguous(), int(steps)))
        return torch.stack(out).view(g.shape).to(g.dtype)

    def adamw_step(self, param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step):
        s = {k: torch.from_numpy(v).to(param.device)
             for k, v in adamw_step_scalars(lr, int(step), beta1, beta2, weight_decay).items()}
        p, m, v = self.ops["adamw"](param.reshape(-1), grad.reshape(-1), exp_avg.reshape(-1), exp_avg_sq.reshape(-1),
                                    s["step_size"], s["inv_bc2"], s["decay"], float(beta1), float(beta2), float(eps))
        for dst, new in ((param, p), (exp_avg, m), (exp_avg_sq, v)):
            dst.copy_(new.view(dst.shape))


_KERNELS: list[NeuronKernels] = []  # the one registration of this process, made on first use


def _default() -> NeuronKernels:
    """The registered kernels (registered on first use; a module global rather than functools.cache, so that the
    model's traced code reads it as a constant instead of tracing into a cache wrapper)."""
    if not _KERNELS:
        toolchain, why = find_toolchain()
        if toolchain is None:
            raise RuntimeError(f"--kernels nki needs torch-neuronx's nki_op and the real nki: {why}")
        _KERNELS.append(NeuronKernels(toolchain))
    return _KERNELS[0]


# the implementation's functions, as `frontier.kernels.ops` calls them (the toolchain found on first use)
def rmsnorm_fwd(x, eps):
    return _default().rmsnorm_fwd(x, eps)


def rmsnorm_bwd(x, dy, eps):
    return _default().rmsnorm_bwd(x, dy, eps)


def rotary_fwd(x, cos, sin):
    return _default().rotary_fwd(x, cos, sin)


def rotary_bwd(dy, cos, sin):
    return _default().rotary_bwd(dy, cos, sin)


def relu2_mlp_fwd(x, w1, w2):
    return _default().relu2_mlp_fwd(x, w1, w2)


def relu2_mlp_bwd(x, w1, w2, dy, saved):
    return _default().relu2_mlp_bwd(x, w1, w2, dy, saved)


def head_ce_fwd(h, w, targets, cap, bias):
    return _default().head_ce_fwd(h, w, targets, cap, bias)


def head_ce_bwd(h, w, targets, lse, dloss, cap, bias):
    return _default().head_ce_bwd(h, w, targets, lse, dloss, cap, bias)


def newton_schulz(g, steps):
    return _default().newton_schulz(g, steps)


def adamw_step(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step):
    return _default().adamw_step(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step)

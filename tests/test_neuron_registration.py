"""Registering the NKI kernels the way torch-neuronx does, on any machine (frontier/kernels/neuron.py).

torch-neuronx's `nki_op(name, mutates_args=...)` builds a `torch.library.custom_op`, whose schema is inferred from the
decorated function's signature; `torch.library.infer_schema` refuses `*args` / `**kwargs` ("We do not support
positional-only args, varargs, or varkwargs"), so the old generic `call(*args, **consts)` wrapper failed to register
for every op. Here the toolchain is a stand-in: an `nki_op` built on `torch.library.custom_op`, and an `nki` that only
provides `jit`, whose kernels run through the interpreter. Every entry point of `--kernels nki` (each method
`ops.backend("nki")` calls) goes through its registered op and must give exactly what the interpreted implementation
gives (the same kernel source, run by the same interpreter: any difference is the registration's plumbing); the
registered ops pass torch.library.opcheck's schema and fake-tensor checks; and without the real SDK the detection
says what is missing.
"""

from __future__ import annotations

import sys
import types
from functools import cache

import ml_dtypes
import numpy as np
import pytest
import torch

from frontier.kernels import availability, interpreted, neuron as neuron_module, ops
from frontier.kernels.interpreter import load, run
from frontier.kernels.neuron import NeuronKernels, Toolchain, entry_points, find_toolchain
from frontier.kernels.nki import adamw_step_scalars
from frontier.kernels.toolchain import LNC


class _Jitted:
    """The stand-in `nki.jit`'s kernel: called with torch tensors (and constants as keywords) like the real one."""

    def __init__(self, fn, lnc=1):
        self.fn, self.lnc = fn, lnc

    def __getitem__(self, lnc):  # the launch at an LNC degree, kernel[2](...)
        return _Jitted(self.fn, lnc)

    def __call__(self, *tensors, **consts):
        arrays = [_array(t) for t in tensors]
        out, _ = run(self.fn, *arrays, lnc=self.lnc, **consts)
        device = tensors[0].device
        if isinstance(out, tuple):
            return tuple(_tensor(o, device) for o in out)
        return _tensor(out, device)


def _array(t: torch.Tensor) -> np.ndarray:
    """A host copy of t as NumPy (bf16 as ml_dtypes.bfloat16, bit for bit)."""
    t = t.detach().to("cpu").contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _tensor(a: np.ndarray, device) -> torch.Tensor:
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).to(device)
    return torch.from_numpy(a).to(device)


STANDIN_NKI = types.ModuleType("nki", "a stand-in nki: it provides jit and nothing else")
STANDIN_NKI.jit = _Jitted


def standin_nki_op(name, mutates_args):
    """torch-neuronx's nki_op as its docs describe it: a custom op whose schema comes from the function."""
    return torch.library.custom_op(name, mutates_args=mutates_args)


@cache
def _module(name):
    return load(f"frontier.kernels.nki.{name}", nki=STANDIN_NKI)


def standin_kernel(module, name):
    return getattr(_module(module), name)


@pytest.fixture(scope="module")
def neuron():
    """Launched at LNC=1, so that every output is the interpreted implementation's bit for bit."""
    return NeuronKernels(Toolchain(standin_nki_op, standin_kernel, "stand-in", lnc=1), namespace="frontier_nki_test")


@pytest.fixture(scope="module")
def neuron_lnc2():
    """Launched at the toolchain's degree (LNC=2 on Trn2): both physical cores of a logical core."""
    return NeuronKernels(Toolchain(standin_nki_op, standin_kernel, "stand-in"), namespace="frontier_nki_lnc2")


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _same(a, b):
    if a is None or b is None:
        assert a is None and b is None
        return
    assert a.dtype == b.dtype and a.shape == b.shape
    assert torch.equal(a, b)


def _cases():
    g = _gen()
    B, T, H, hd, D, F, V = 2, 16, 2, 8, 32, 64, 96
    x = torch.randn(B, T, H, hd, generator=g)
    ang = torch.rand(T, hd // 2, generator=g)
    h = torch.randn(B * T, D, generator=g)
    w = torch.randn(V, D, generator=g) * 0.3
    targets = torch.randint(0, V, (B * T,), generator=g)
    w1, w2 = torch.randn(F, D, generator=g) * D**-0.5, torch.randn(D, F, generator=g) * F**-0.5
    dy = torch.randn(B * T, D, generator=g)
    none_bias = (None, None, None, None)
    sparse = (torch.randn(V, generator=g), torch.randint(0, V, (B * T, 4), generator=g),
              torch.randn(B * T, 4, generator=g), None)
    lse = torch.logsumexp(15 * torch.tanh(h @ w.T / 15), -1)
    dloss = torch.rand(B * T, generator=g)
    return {
        "rmsnorm_fwd": (x, None),
        "rmsnorm_bwd": (x, torch.randn_like(x), 1e-6),
        "rotary_fwd": (x, ang.cos(), ang.sin()),
        "rotary_bwd": (x, ang.cos(), ang.sin()),
        "relu2_mlp_fwd": (h.view(B, T, D), w1, w2),
        "relu2_mlp_bwd": (h.view(B, T, D), w1, w2, dy.view(B, T, D), None),
        "head_ce_fwd": (h, w, targets, 15.0, none_bias),
        "head_ce_fwd+bias": (h, w, targets, 15.0, sparse),
        "head_ce_bwd": (h, w, targets, lse, dloss, 15.0, none_bias),
        "head_ce_bwd+bias": (h, w, targets, lse, dloss, 15.0, sparse),
        "newton_schulz": (torch.randn(2, 24, 40, generator=g), 5),
    }


@pytest.mark.parametrize("case", list(_cases()))
def test_every_nki_entry_point_registers_and_runs_through_its_op(neuron, case):
    args = _cases()[case]
    method = case.split("+")[0]
    got = getattr(neuron, method)(*args)
    want = getattr(interpreted, method)(*args)
    got, want = (x if isinstance(x, tuple) else (x,) for x in (got, want))
    assert len(got) == len(want)
    for a, b in zip(got, want):
        _same(a, b)


@pytest.mark.parametrize("case", list(_cases()))
def test_every_entry_point_at_lnc2_gives_the_lnc1_result(neuron_lnc2, case):
    """At the launch degree of Trn2 (toolchain.LNC = 2) each kernel shards its tokens between the two cores: per-token
    outputs are the interpreter's (LNC=1) bit for bit; the weight gradients, a sum whose two halves the cores add
    apart, agree to fp32 rounding."""
    assert neuron_lnc2.toolchain.lnc == LNC == 2
    args = _cases()[case]
    method = case.split("+")[0]
    got = getattr(neuron_lnc2, method)(*args)
    want = getattr(interpreted, method)(*args)
    got, want = (x if isinstance(x, tuple) else (x,) for x in (got, want))
    summed = {"relu2_mlp_bwd": (1, 2), "head_ce_bwd": (1, 2, 3)}.get(method, ())
    for i, (a, b) in enumerate(zip(got, want)):
        if a is None or i not in summed:
            _same(a, b)
        else:
            assert a.dtype == b.dtype and a.shape == b.shape
            assert float((a - b).abs().max()) <= 1e-6 * float(b.abs().max())


def test_adamw_entry_point_updates_in_place_like_the_interpreter(neuron):
    state = {impl: [torch.randn(300, generator=_gen(i)) for i in range(4)] for impl in ("stand-in", "interpreter")}
    for impl, (p, grad, m, v) in state.items():
        v.abs_()
        step = neuron.adamw_step if impl == "stand-in" else interpreted.adamw_step
        step(p, grad, m, v, 1e-3, 0.8, 0.95, 1e-10, 0.1, 3)
    for a, b in zip(state["stand-in"], state["interpreter"]):
        assert torch.equal(a, b)


def test_every_wrapper_has_a_schema_without_varargs():
    """The defect itself: each entry point's signature is one torch.library.infer_schema accepts."""
    for name, (wrapper, _) in entry_points(standin_kernel).items():
        schema = torch.library.infer_schema(wrapper, mutates_args=())
        assert "*" not in schema.split("->")[0], (name, schema)


# ---------------------------------------------------------------------------------------------------- opcheck
# torch.library.opcheck runs each op for real and on fake tensors (test_faketensor compares their dtypes and shapes),
# checks its schema, its autograd registration and its AOT dispatch. Every op, in fp32 and with the bf16 inputs it
# receives under bf16 autocast (inside the autocast context): the registered frontier_nki:: ops (their kernels in the
# interpreter) and the frontier:: ops with impl "nki" reaching them (the stand-in toolchain as the nki backend).
CAP = 15.0


def _opcheck_inputs(dtype):
    """Small inputs for every op; the model's activations and matmul weights in `dtype` (bf16: what autocast hands
    the ops), RoPE's tables, the head's lse / dloss and the optimisers' state fp32."""
    g = _gen(3)
    B, T, H, hd, D, F, V, N = 2, 8, 2, 8, 16, 64, 96, 16

    def r(*shape, scale=1.0, dt=dtype):
        return (torch.randn(*shape, generator=g) * scale).to(dt)

    x = r(N, D)
    w1, w2, w = r(F, D, scale=0.25), r(D, F, scale=0.125), r(V, D, scale=0.3)
    targets = torch.randint(0, V, (N,), generator=g)
    lse = torch.logsumexp(CAP * torch.tanh(x.float() @ w.float().T / CAP), -1)
    ang = torch.rand(T, hd // 2, generator=g)
    return {"x": x, "dy": r(N, D), "q": r(B, T, H, hd), "cos": ang.cos(), "sin": ang.sin(), "w1": w1, "w2": w2,
            "w": w, "targets": targets, "t32": targets.to(torch.int32), "lse": lse,
            "dloss": torch.rand(N, generator=g), "g": r(16, 24, dt=torch.float32),
            "sparse": (torch.randn(V, generator=g), torch.randint(0, V, (N, 4), generator=g),
                       torch.randn(N, 4, generator=g), None),
            "adamw": [torch.randn(300, generator=g) for _ in range(4)]}


def _registered_cases(a):
    s = {k: torch.from_numpy(v) for k, v in adamw_step_scalars(1e-3, 3, 0.8, 0.95, 0.1).items()}
    z = torch.randn(a["x"].size(0), a["w"].size(0), generator=_gen(4))
    x, w, t, lse, dl = a["x"], a["w"], a["t32"], a["lse"], a["dloss"]
    p, grad, m, v = a["adamw"]
    return {"rmsnorm_fwd": (x, 1e-6), "rmsnorm_bwd": (x, a["dy"], 1e-6),
            "rope_fwd": (a["q"].flatten(2).flatten(0, 1), a["cos"], a["sin"]),
            "rope_bwd": (a["q"].flatten(2).flatten(0, 1), a["cos"], a["sin"]),
            "mlp_fwd": (x, a["w1"], a["w2"]), "mlp_bwd": (x, a["w1"], a["w2"], a["dy"]),
            "head_ce_fwd": (x, w, t, CAP), "head_ce_bias_fwd": (x, w, t, z, CAP),
            "head_ce_bwd": (x, w, t, lse, dl, CAP), "head_ce_bias_bwd": (x, w, t, z, lse, dl, CAP),
            "newton_schulz": (a["g"], 5),
            "adamw": (p, grad, m, v.abs(), s["step_size"], s["inv_bc2"], s["decay"], 0.8, 0.95, 1e-10)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16-autocast"])
def test_every_registered_op_passes_opcheck(neuron, dtype):
    cases = _registered_cases(_opcheck_inputs(dtype))
    assert set(cases) == set(neuron.ops)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        for name, args in cases.items():
            torch.library.opcheck(neuron.ops[name], args)


def _frontier_cases(a):
    none = (None, None, None, None)
    x, w, tg, lse, dl = a["x"], a["w"], a["targets"], a["lse"], a["dloss"]
    empty = x.new_empty((0,), dtype=torch.float32)
    p, grad, m, v = a["adamw"]
    return {"rmsnorm": (ops._rmsnorm, (a["q"], None, "nki")),
            "rmsnorm_backward": (ops._rmsnorm_backward, (a["q"], a["q"] * 0.5, 1e-6, "nki")),
            "rotary": (ops._rotary, (a["q"], a["cos"], a["sin"], "nki")),
            "rotary_backward": (ops._rotary_backward, (a["q"], a["cos"], a["sin"], "nki")),
            "relu2_mlp": (ops._relu2_mlp, (x, a["w1"], a["w2"], "nki")),
            "relu2_mlp_backward": (ops._relu2_mlp_backward, (x, a["w1"], a["w2"], a["dy"], empty, "nki")),
            "head_softcap_cross_entropy": (ops._head_ce, (x, w, tg, CAP, "nki", *none)),
            "head_softcap_cross_entropy+bias": (ops._head_ce, (x, w, tg, CAP, "nki", *a["sparse"])),
            "head_softcap_cross_entropy_backward": (ops._head_ce_backward,
                                                    (x, w, tg, lse, dl, empty, CAP, "nki", *none)),
            "head_softcap_cross_entropy_backward+bias": (ops._head_ce_backward,
                                                         (x, w, tg, lse, dl, empty, CAP, "nki", *a["sparse"])),
            "newton_schulz": (ops._newton_schulz, (a["g"], 5, "nki")),
            "adamw_step": (ops._adamw_step, (p, grad, m, v.abs(), 1e-3, 0.8, 0.95, 1e-10, 0.1, 3.0, "nki"))}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16-autocast"])
def test_every_frontier_op_passes_opcheck_with_the_nki_implementation(neuron, monkeypatch, dtype):
    """The defect: under bf16 autocast the MLP's and the head backward's fakes said bf16 while the kernels returned
    fp32, which test_faketensor refuses."""
    monkeypatch.setattr(neuron_module, "_default", lambda: neuron)
    cases = _frontier_cases(_opcheck_inputs(dtype))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        for name, (op, args) in cases.items():
            torch.library.opcheck(op, args)


def test_without_the_sdk_the_toolchain_says_what_is_missing(monkeypatch):
    toolchain, why = find_toolchain()
    assert toolchain is None and why  # this machine has no Neuron SDK
    placeholder = types.ModuleType("torch_neuronx")  # PyPI's empty torch-neuronx: importable, offers nothing
    monkeypatch.setitem(sys.modules, "torch_neuronx", placeholder)
    toolchain, why = find_toolchain()
    assert toolchain is None and "offers no nki_op" in why
    placeholder.nki_op = standin_nki_op
    monkeypatch.setitem(sys.modules, "nki", STANDIN_NKI)  # an nki without simulate is not the real one
    toolchain, why = find_toolchain()
    assert toolchain is None and "lacks" in why and "simulate" in why
    assert availability("nki")  # and --kernels nki is refused here, with a reason

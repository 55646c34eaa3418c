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

import pytest
import torch

from frontier.kernels import availability, interpreted
from frontier.kernels.interpreter import load, run
from frontier.kernels.neuron import NeuronKernels, Toolchain, entry_points, find_toolchain


class _Jitted:
    """The stand-in `nki.jit`'s kernel: called with torch tensors (and constants as keywords) like the real one."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *tensors, **consts):
        arrays = [t.detach().to("cpu").contiguous().numpy() for t in tensors]
        out, _ = run(self.fn, *arrays, **consts)
        device = tensors[0].device
        if isinstance(out, tuple):
            return tuple(torch.from_numpy(o).to(device) for o in out)
        return torch.from_numpy(out).to(device)


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
    return NeuronKernels(Toolchain(standin_nki_op, standin_kernel, "stand-in"), namespace="frontier_nki_test")


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


def test_registered_ops_pass_opcheck(neuron):
    g = _gen(3)
    x, dy = torch.randn(40, 16, generator=g), torch.randn(40, 16, generator=g)
    w1, w2 = torch.randn(64, 16, generator=g) * 0.25, torch.randn(16, 64, generator=g) * 0.125
    cases = {"rmsnorm_fwd": (x, 1e-6), "rmsnorm_bwd": (x, dy, 1e-6), "mlp_fwd": (x, w1, w2),
             "mlp_bwd": (x, w1, w2, dy), "newton_schulz": (torch.randn(16, 24, generator=g), 5)}
    for name, args in cases.items():
        torch.library.opcheck(neuron.ops[name], args, test_utils=("test_schema", "test_faketensor"))


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

"""The NKI kernels (frontier/kernels/nki) run through the interpreter against their PyTorch references.

Shapes: a small one, the smoke profile's (width 64 over 8 x 64 tokens; the q/k norms at head size 32 over
8 x 64 x 2 heads; AdamW on the 512 x 64 embedding), and ones that are not multiples of the 128-partition tile.

Tolerances (fp32; eps32 = 2^-23 ~ 1.2e-7):
- RMSNorm forward: rtol 1e-5, atol 1e-6. y = x * rsqrt(mean(x^2) + eps) is a row sum of D squares (the
  interpreter's order differs from torch's: ~log2(D) rounding steps, pairwise), then an rsqrt and a product: a few
  eps32 relative, ~1e-6. 1e-5 leaves a 10x margin and still catches sum for mean or a bf16 round trip (~4e-3).
- RMSNorm backward: rtol 1e-5, atol 1e-5 * max|dx|: the extra row dot product and the cancellation in
  dy - xhat * mean(dy * xhat) make the error absolute, on the scale of the largest |dx|.
- AdamW: each output is a chain of <= 5 fp32 roundings in a different order from torch's (m: lerp vs
  beta*m + (1-beta)*g; the update: m * (1/denom) vs m / denom; sqrt(v * inv_bc2) vs sqrt(v) / sqrt(bc2)), so p', m', v'
  may differ by a few ulps of the largest term: atol 4 * eps32 * max|ref|, rtol 4 * eps32 (measured: <= 1 ulp of
  max|p|, ~1 ulp of max|m|). Since that hides the update under p's rounding, the update is also checked alone (from
  p = 0) element by element against 8 ulps of its terms (measured <= 3).
Where the real nki 0.7 is installed, the same cases also go through `nki.simulate` and must agree with the
interpreter to the same tolerances (both compute ScalarE's functions exactly; the simulator models only sin's).
"""

from __future__ import annotations

import importlib

import ml_dtypes
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from frontier.kernels.interpreter import find_real_nki, load, run
from frontier.kernels.nki import adamw_step_scalars

F32 = np.float32
EPS32 = float(np.finfo(F32).eps)
RMS_EPS = EPS32  # what F.rms_norm uses for fp32 when eps=None, as gpt.py calls it

RMS_SHAPES = {
    "small": (16, 32),
    "smoke-residual": (8 * 64, 64),
    "smoke-qk": (8 * 64 * 2, 32),
    "ragged-200x96": (200, 96),
}
ADAMW_SIZES = {
    "small": 1000,  # 7 columns of 128 + a 104-element tail
    "smoke-embedding": 512 * 64,
    "smoke-gate": 64,  # under one partition's worth: the tail tile only
    "ragged-19301": 19_301,  # 150 columns + 101
    "chunks-320037": 128 * 2500 + 37,  # two column tiles (2,048 + 452) + 37
}
ADAMW_HP = dict(lr=3e-3, betas=(0.8, 0.95), eps=1e-10, weight_decay=0.1)  # the project's betas and eps


@pytest.fixture(scope="module")
def rms():
    return load("frontier.kernels.nki.rmsnorm")


@pytest.fixture(scope="module")
def adamw():
    return load("frontier.kernels.nki.adamw")


def _rng(seed):
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------------------------- RMSNorm


def _rms_case(shape, seed=0):
    x = (_rng(seed).standard_normal(shape) * 3 + 0.5).astype(F32)
    dy = _rng(seed + 1).standard_normal(shape).astype(F32)
    return x, dy


def _rms_reference(x, dy):
    xt = torch.from_numpy(x).requires_grad_()
    y = F.rms_norm(xt, (x.shape[-1],), eps=RMS_EPS)
    y.backward(torch.from_numpy(dy))
    return y.detach().numpy(), xt.grad.numpy()


@pytest.mark.parametrize("shape", RMS_SHAPES.values(), ids=RMS_SHAPES.keys())
def test_rmsnorm_forward_matches_torch(rms, shape):
    x, dy = _rms_case(shape)
    y, _ = run(rms.rmsnorm_fwd, x, eps=RMS_EPS)
    y_ref, _ = _rms_reference(x, dy)
    assert y.dtype == F32 and y.shape == shape
    np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", RMS_SHAPES.values(), ids=RMS_SHAPES.keys())
def test_rmsnorm_backward_matches_torch_autograd(rms, shape):
    x, dy = _rms_case(shape)
    dx, _ = run(rms.rmsnorm_bwd, x, dy, eps=RMS_EPS)
    _, dx_ref = _rms_reference(x, dy)
    np.testing.assert_allclose(dx, dx_ref, rtol=1e-5, atol=1e-5 * np.abs(dx_ref).max())


def test_rmsnorm_bf16_rounds_only_at_the_ends(rms):
    """bf16 in and out, fp32 inside: within one bf16 rounding (2^-8 relative) of the fp32 result on bf16 inputs."""
    x, _ = _rms_case((200, 96))
    xb = x.astype(ml_dtypes.bfloat16)
    y, _ = run(rms.rmsnorm_fwd, xb, eps=RMS_EPS)
    assert y.dtype == np.dtype(ml_dtypes.bfloat16)
    y_ref = F.rms_norm(torch.from_numpy(xb.astype(F32)), (96,), eps=RMS_EPS).numpy()
    np.testing.assert_allclose(y.astype(F32), y_ref, rtol=2.0**-8, atol=1e-6)


def test_rmsnorm_counts_by_hand(rms):
    n, d = 200, 96  # two tiles: 128 rows and 72 rows
    x, dy = _rms_case((n, d))
    _, c = run(rms.rmsnorm_fwd, x, eps=RMS_EPS)
    assert c.hbm_read_bytes == n * d * 4 and c.hbm_write_bytes == n * d * 4  # read once, written once
    assert c.dma_transfers == 2 * 2 and c.dma_bytes == 2 * n * d * 4
    # per tile: ScalarE square+sum (+ the register read-out) and rsqrt; VectorE x * rstd
    assert c.instructions == {"tensor": 0, "vector": 2, "scalar": 6, "gpsimd": 0}
    assert c.elements["scalar"] == n * d + n + n and c.free_elements["scalar"] == 2 * (d + 1 + 1)
    assert c.elements["vector"] == n * d and c.free_elements["vector"] == 2 * d
    assert c.matmul_flops == 0 and c.peak_psum_banks == 0
    # the next tile's x is allocated while this tile's x, y and rstd live: 3 rows of d fp32 + one fp32 column
    assert c.peak_sbuf_bytes == 3 * d * 4 + 4

    _, c = run(rms.rmsnorm_bwd, x, dy, eps=RMS_EPS)
    assert c.hbm_read_bytes == 2 * n * d * 4 and c.hbm_write_bytes == n * d * 4
    assert c.dma_transfers == 3 * 2
    # per tile: ScalarE square+sum (+ read-out), rsqrt, xhat, dx; VectorE dy*xhat, row sum, -mean, dy - xhat*mean
    assert c.instructions == {"tensor": 0, "vector": 8, "scalar": 10, "gpsimd": 0}
    assert c.elements["scalar"] == 3 * n * d + 2 * n and c.elements["vector"] == 3 * n * d + n


# --------------------------------------------------------------------------------------------- AdamW


def _adamw_case(n, seed=0, step=5, zero_state=False, zero_param=False):
    """State after step - 1 steps of gradients ~1e-2: |m| ~ 1e-3, sqrt(v) between 5e-3 and ~4e-2."""
    r = _rng(seed)
    p = np.zeros(n, F32) if zero_param else r.standard_normal(n).astype(F32)
    g = (r.standard_normal(n) * 1e-2).astype(F32)
    g[::7] = 0.0  # exact zeros (unused rows): v is exactly 0 there on the first step
    if zero_state:
        m, v = np.zeros(n, F32), np.zeros(n, F32)
    else:
        m = (r.standard_normal(n) * 1e-3).astype(F32)
        v = ((0.5 + np.abs(r.standard_normal(n))) * 1e-2).astype(F32) ** 2
    return p, g, m, v, step


def _adamw_reference(p, g, m, v, step):
    """torch.optim.AdamW from state (m, v) after step - 1 steps: its step number `step`."""
    param = torch.nn.Parameter(torch.from_numpy(p.copy()))
    opt = torch.optim.AdamW([param], foreach=False, **ADAMW_HP)
    param.grad = torch.from_numpy(g.copy())
    if step > 1:
        opt.state[param] = {"step": torch.tensor(float(step - 1)), "exp_avg": torch.from_numpy(m.copy()),
                            "exp_avg_sq": torch.from_numpy(v.copy())}
    opt.step()
    st = opt.state[param]
    return param.detach().numpy(), st["exp_avg"].numpy(), st["exp_avg_sq"].numpy()


def _adamw_args(p, g, m, v, step):
    hp = ADAMW_HP
    sc = adamw_step_scalars(hp["lr"], step, *hp["betas"], hp["weight_decay"])
    arrays = (p, g, m, v, sc["step_size"], sc["inv_bc2"], sc["decay"])
    return arrays, dict(beta1=hp["betas"][0], beta2=hp["betas"][1], eps=hp["eps"])


def _close_fp32(got, ref):
    np.testing.assert_allclose(got, ref, rtol=4 * EPS32, atol=4 * EPS32 * np.abs(ref).max())


@pytest.mark.parametrize("n", ADAMW_SIZES.values(), ids=ADAMW_SIZES.keys())
def test_adamw_matches_torch(adamw, n):
    case = _adamw_case(n)
    arrays, consts = _adamw_args(*case)
    (p2, m2, v2), _ = run(adamw.adamw, *arrays, **consts)
    p_ref, m_ref, v_ref = _adamw_reference(*case)
    _close_fp32(m2, m_ref)
    _close_fp32(v2, v_ref)
    _close_fp32(p2, p_ref)


def test_adamw_update_to_a_few_ulps(adamw):
    """From p = 0 the result is the update itself (-step_size * m' / denom), not hidden under p's rounding. Element by
    element it must be within 8 ulps of the magnitude of its terms, step_size * (beta1|m| + (1-beta1)|g|) / denom
    (m' = beta1 m + (1-beta1) g may cancel; the rest are products and quotients)."""
    p, g, m, v, step = case = _adamw_case(ADAMW_SIZES["ragged-19301"], zero_param=True)
    arrays, consts = _adamw_args(*case)
    (p2, _, v2), _ = run(adamw.adamw, *arrays, **consts)
    p_ref, _, _ = _adamw_reference(*case)
    (b1, b2), lr, eps = ADAMW_HP["betas"], ADAMW_HP["lr"], ADAMW_HP["eps"]
    denom = np.sqrt(v2.astype(np.float64) / (1 - b2**step)) + eps
    scale = lr / (1 - b1**step) * (b1 * np.abs(m) + (1 - b1) * np.abs(g)) / denom
    assert (np.abs(p2 - p_ref) <= 8 * EPS32 * scale).all()


def test_adamw_first_step_from_zero_state(adamw):
    """Step 1 from m = v = 0 with exact zero gradients: v' = 0 there, and the kernel's sqrt floor keeps ScalarE's
    sqrt in range without changing the result (the zero-gradient entries only decay)."""
    case = _adamw_case(1000, step=1, zero_state=True)
    arrays, consts = _adamw_args(*case)
    (p2, m2, v2), _ = run(adamw.adamw, *arrays, **consts)
    p_ref, m_ref, v_ref = _adamw_reference(*case)
    assert (v2[::7] == 0).all()
    _close_fp32(p2, p_ref)
    _close_fp32(m2, m_ref)
    _close_fp32(v2, v_ref)


def test_adamw_counts_by_hand(adamw):
    n = 1000  # a [128, 7] tile and a [104, 1] tile
    arrays, consts = _adamw_args(*_adamw_case(n))
    _, c = run(adamw.adamw, *arrays, **consts)
    assert c.hbm_read_bytes == 3 * 128 * 4 + 4 * n * 4  # three [128, 1] scalars, then p, g, m, v once
    assert c.hbm_write_bytes == 3 * n * 4  # p', m', v' once
    assert c.dma_transfers == 3 + 2 * (4 + 3)
    assert c.instructions == {"tensor": 0, "vector": 2 * 5, "scalar": 2 * 4, "gpsimd": 0}
    assert c.elements["vector"] == 5 * n and c.elements["scalar"] == 4 * n
    assert c.free_elements["vector"] == 5 * (7 + 1) and c.free_elements["scalar"] == 4 * (7 + 1)
    # scalars (3 columns), then one tile step: p, g, m, v and the work tile of 7 fp32 each
    assert c.peak_sbuf_bytes == 3 * 4 + 5 * 7 * 4


# --------------------------------------------------------------------------------------------- nki.simulate

SIM_CASES = ([("rmsnorm_fwd", k) for k in RMS_SHAPES] + [("rmsnorm_bwd", k) for k in RMS_SHAPES]
             + [("adamw", k) for k in ADAMW_SIZES])


@pytest.mark.parametrize("kernel,case", SIM_CASES, ids=[f"{k}-{c}" for k, c in SIM_CASES])
def test_interpreter_agrees_with_nki_simulate(kernel, case, rms, adamw, monkeypatch):
    """The same cases through the official simulator (only where the real nki 0.7 is installed)."""
    nki, why = find_real_nki()
    if nki is None:
        pytest.skip(f"nki.simulate comparison not run: {why}")
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")
    if kernel == "adamw":
        arrays, consts = _adamw_args(*_adamw_case(ADAMW_SIZES[case]))
        interpreted, real = adamw.adamw, importlib.import_module("frontier.kernels.nki.adamw").adamw
    else:
        x, dy = _rms_case(RMS_SHAPES[case])
        arrays, consts = ((x,) if kernel == "rmsnorm_fwd" else (x, dy)), {"eps": RMS_EPS}
        interpreted = getattr(rms, kernel)
        real = getattr(importlib.import_module("frontier.kernels.nki.rmsnorm"), kernel)
    ours, _ = run(interpreted, *arrays, **consts)
    simulated = nki.simulate(real)(*[a.copy() for a in arrays], *consts.values())  # constants in signature order
    ours = ours if isinstance(ours, tuple) else (ours,)
    simulated = tuple(simulated) if isinstance(simulated, (tuple, list)) else (simulated,)
    assert len(ours) == len(simulated)
    for got, sim in zip(ours, simulated):
        sim = np.asarray(sim)
        np.testing.assert_allclose(got, sim, rtol=1e-5, atol=1e-5 * np.abs(sim).max())


def test_rmsnorm_and_adamw_at_lnc2_give_the_lnc1_result(rms, adamw):
    """LNC=2: each core takes half of the token tiles (RMSNorm) or of the column chunks (AdamW; the ragged tail on
    core 1); every output element is computed as at LNC=1, by one core, without a race."""
    x = np.random.default_rng(0).standard_normal((300, 64)).astype(np.float32)
    dy = np.random.default_rng(1).standard_normal((300, 64)).astype(np.float32)
    for kernel, args in ((rms.rmsnorm_fwd, (x,)), (rms.rmsnorm_bwd, (x, dy))):
        one, _ = run(kernel, *args, eps=1e-6)
        two, c = run(kernel, *args, eps=1e-6, lnc=2)
        np.testing.assert_array_equal(one, two)
        assert c.lnc_conflicts == 0 and all(k.dma_transfers > 0 for k in c.per_core)
    n = 128 * 2 * adamw.FMAX + 77  # two column chunks and a tail
    state = [np.random.default_rng(i).standard_normal(n).astype(np.float32) for i in range(4)]
    state[3] = np.abs(state[3])
    from frontier.kernels.nki import adamw_step_scalars
    s = adamw_step_scalars(1e-3, 3, 0.8, 0.95, 0.1)
    args = (*state, s["step_size"], s["inv_bc2"], s["decay"])
    one, _ = run(adamw.adamw, *[a.copy() for a in args], beta1=0.8, beta2=0.95, eps=1e-10)
    two, c = run(adamw.adamw, *[a.copy() for a in args], beta1=0.8, beta2=0.95, eps=1e-10, lnc=2)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
    assert c.lnc_conflicts == 0 and all(k.dma_transfers > 3 for k in c.per_core)

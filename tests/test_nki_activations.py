"""ScalarE's approximated functions: the kernels' tolerances absorb the stated approximation error.

The interpreter computes exp, tanh, log, sqrt, rsqrt and reciprocal exactly unless a run asks otherwise; on ScalarE
they are piecewise-polynomial approximations of unstated accuracy. The bound we hold the hardware to
(frontier/kernels/interpreter/limits.py, from the simulator guide's hardware comparison) is

    |f_hw(x) - f(x)| <= EPS_R |f(x)| + EPS_A,      EPS_R = 1e-2, EPS_A = 1e-5,

on every approximated instruction's output (identity, square, relu, abs and sign are exact). Each test runs a kernel
with its outputs perturbed within that bound (`approximate_activations`: a pseudo-random error that is a function of
the input, and the two one-sided extremes) and checks every output element against a float64 reference with the
kernel's exact-mode tolerance plus the first-order propagation of the bound through the kernel's formula, stated per
kernel below (x 1.1 for the second-order terms). Kernels whose ScalarE work is only exact functions (RoPE's copies,
the MLP's relu) must give the same bits perturbed or not. Matmuls run in fp32 here, so what is measured is the
activations' effect; the bf16 operands' error adds to it (test_nki_kernels_model.py bounds that part).

Propagated bounds (t = tanh(l / cap), tau = EPS_R |t| + EPS_A the error of t, S = sum_v exp(z_v - max z), C vocabulary
chunks of the forward):
- RMSNorm: rstd is rsqrt's output; y = x rstd: |dy| <= |x| (EPS_R rstd + EPS_A); dx = rstd (dy - rstd^2 x mean(dy x))
  depends on rstd as dy - 3 rstd^2 x mean(dy x): |d dx| <= (EPS_R rstd + EPS_A)(|dy| + 3 rstd^2 |x mean(dy x)|).
- AdamW: the update u = step_size m' recip, recip = reciprocal(sqrt(v') + eps), both approximated:
  |d recip| <= recip^2 (EPS_R sqrt + EPS_A) + EPS_R recip + EPS_A, |d p'| <= step_size |m'| |d recip|; m', v' exact.
- head + CE forward: z = cap t moves lse by at most cap max tau; the exps (1 + (C - 1) rescalings, each an exp too)
  by C (EPS_R + V EPS_A / S) in log space; the log by EPS_R |log S| + EPS_A. loss adds cap tau at the target.
  Backward, with the forward's lse: the exponent cap t - lse is off by zeta = cap tau + tol(lse), so
  |dp| <= p (e^zeta (1 + EPS_R) - 1) + EPS_A; 1 - t^2 by 2|t| tau + tau^2; |dg| <= dloss (|dp| (1 - t^2 + 2|t| tau
  + tau^2) + |p - onehot| (2|t| tau + tau^2)); dhidden and dW by |dg| |W| and |dg|^T |hidden|.
- Newton-Schulz: only the norm's sqrt is approximated, the same value on every partition, so X0 is G / ||G|| scaled
  by one factor within 1 +- (EPS_R + EPS_A / ||G||). That moves every singular value's image through the five
  quintic steps by at most max_s |s d(p^5)/ds| = 8.63 (computed below) times the log of the factor, with U and V
  unchanged: |d out| <= 8.63 (EPS_R + EPS_A / ||G||) per element.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from frontier.kernels.interpreter import ActivationError, approximate_activations, load, run
from frontier.kernels.interpreter.limits import ACTIVATION_ABS_ERROR as EPS_A
from frontier.kernels.interpreter.limits import ACTIVATION_REL_ERROR as EPS_R
from frontier.kernels.nki import adamw_step_scalars
from frontier.optim.muon import newton_schulz as ns_reference

F32 = np.float32
EPS32 = float(np.finfo(F32).eps)
MODES = ("random", "high", "low")
CAP = 15.0
SLACK = 1.1


def _rng(seed):
    return np.random.default_rng(seed)


def _perturbed(kernel, *arrays, mode, **consts):
    with approximate_activations(ActivationError(mode=mode, seed=5)):
        out, _ = run(kernel, *arrays, **consts)
    return out if isinstance(out, tuple) else (out,)


def _within(got, ref64, bound, exact_tol, name):
    err = np.abs(np.asarray(got, np.float64) - ref64)
    tol = SLACK * bound + exact_tol
    worst = np.unravel_index(np.argmax(err - tol), err.shape)
    assert (err <= tol).all(), (f"{name}: |kernel - float64| = {err[worst]:.3g} > {tol[worst]:.3g} at {worst} "
                                f"(activation bound {bound[worst]:.3g})")


def _exact_tol(ref64, ref32=None):
    """The kernels' exact-mode fp32 tolerance (test_nki_kernels*.py): 4 x torch fp32's error + one ulp of the max."""
    torch_err = 0.0 if ref32 is None else np.abs(np.asarray(ref32, np.float64) - ref64).max()
    return 4 * torch_err + 4 * EPS32 * np.abs(ref64).max()


# ---------------------------------------------------------------------------------------------- no approximated ops


@pytest.mark.parametrize("mode", MODES)
def test_kernels_with_only_exact_functions_are_unchanged(mode):
    rope, mlp = load("frontier.kernels.nki.rotary"), load("frontier.kernels.nki.relu2_mlp")
    r = _rng(0)
    x = r.standard_normal((128, 64)).astype(F32)
    ang = r.random((64, 16)).astype(F32)
    cos, sin = np.cos(ang), np.sin(ang)
    w1, w2 = (r.standard_normal((96, 64)) * 0.1).astype(F32), (r.standard_normal((64, 96)) * 0.1).astype(F32)
    for kernel, args in ((rope.rope_fwd, (x, cos, sin)), (rope.rope_bwd, (x, cos, sin)), (mlp.mlp_fwd, (x, w1, w2)),
                         (mlp.mlp_bwd, (x, w1, w2, x))):
        exact, _ = run(kernel, *args)
        exact = exact if isinstance(exact, tuple) else (exact,)
        for a, b in zip(_perturbed(kernel, *args, mode=mode), exact):
            np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------------- RMSNorm


@pytest.mark.parametrize("mode", MODES)
def test_rmsnorm_tolerance_absorbs_rsqrt_error(mode):
    rms = load("frontier.kernels.nki.rmsnorm")
    r = _rng(1)
    x = (r.standard_normal((200, 96)) * 3 + 0.5).astype(F32)
    dy = r.standard_normal((200, 96)).astype(F32)
    eps = EPS32
    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    rstd = 1 / np.sqrt((x64**2).mean(1, keepdims=True) + eps)
    y64 = x64 * rstd
    m0 = (dy64 * x64).mean(1, keepdims=True)
    dx64 = rstd * dy64 - rstd**3 * x64 * m0
    drstd = EPS_R * rstd + EPS_A
    (y,) = _perturbed(rms.rmsnorm_fwd, x, mode=mode, eps=eps)
    _within(y, y64, np.abs(x64) * drstd, 1e-5 * np.abs(y64) + 1e-6, "rmsnorm y")
    (dx,) = _perturbed(rms.rmsnorm_bwd, x, dy, mode=mode, eps=eps)
    _within(dx, dx64, drstd * (np.abs(dy64) + 3 * rstd**2 * np.abs(x64 * m0)), 1e-5 * np.abs(dx64).max(),
            "rmsnorm dx")


# ---------------------------------------------------------------------------------------------- AdamW


@pytest.mark.parametrize("mode", MODES)
def test_adamw_tolerance_absorbs_sqrt_and_reciprocal_error(mode):
    adamw = load("frontier.kernels.nki.adamw")
    r = _rng(2)
    n, step, lr, (b1, b2), eps, wd = 1000, 5, 3e-3, (0.8, 0.95), 1e-10, 0.1
    p = r.standard_normal(n).astype(F32)
    g = (r.standard_normal(n) * 1e-2).astype(F32)
    m = (r.standard_normal(n) * 1e-3).astype(F32)
    v = (((0.5 + np.abs(r.standard_normal(n))) * 1e-2) ** 2).astype(F32)
    sc = adamw_step_scalars(lr, step, b1, b2, wd)
    args = (p, g, m, v, sc["step_size"], sc["inv_bc2"], sc["decay"])
    consts = dict(beta1=b1, beta2=b2, eps=eps)
    exact, _ = run(adamw.adamw, *args, **consts)
    p2, m2, v2 = _perturbed(adamw.adamw, *args, mode=mode, **consts)
    np.testing.assert_array_equal(m2, exact[1])  # the moments use only exact functions
    np.testing.assert_array_equal(v2, exact[2])
    m64, v64 = b1 * m.astype(np.float64) + (1 - b1) * g, b2 * v.astype(np.float64) + (1 - b2) * g.astype(np.float64)**2
    step_size = lr / (1 - b1**step)
    root = np.sqrt(v64 / (1 - b2**step))
    recip = 1 / (root + eps)
    p64 = p * (1 - lr * wd) - step_size * m64 * recip
    drecip = recip**2 * (EPS_R * root + EPS_A) + EPS_R * recip + EPS_A
    _within(p2, p64, step_size * np.abs(m64) * drecip, 8 * EPS32 * np.abs(p64).max(), "adamw p")


# ---------------------------------------------------------------------------------------------- head + CE


def _ce64(hidden, w, targets, dloss, vchunk):
    """float64 forward and backward, and the bounds of the module docstring."""
    h, W = hidden.astype(np.float64), w.astype(np.float64)
    n, v = h.shape[0], W.shape[0]
    t = np.tanh(h @ W.T / CAP)
    z = CAP * t
    S = np.exp(z - z.max(1, keepdims=True)).sum(1)
    lse = z.max(1) + np.log(S)
    rows = np.arange(n)
    loss = lse - z[rows, targets]
    onehot = np.zeros_like(z)
    onehot[rows, targets] = 1
    p = np.exp(z - lse[:, None])
    e = p - onehot
    g = dloss[:, None] * e * (1 - t**2)
    tau = EPS_R * np.abs(t) + EPS_A
    chunks = -(-v // vchunk)
    tol_lse = CAP * tau.max(1) + chunks * (EPS_R + v * EPS_A / S) + EPS_R * np.abs(np.log(S)) + EPS_A
    tol_loss = tol_lse + CAP * tau[rows, targets]
    zeta = CAP * tau + SLACK * tol_lse[:, None]
    dp = p * (np.exp(zeta) * (1 + EPS_R) - 1) + EPS_A
    dt2 = 2 * np.abs(t) * tau + tau**2
    dg = dloss[:, None] * (dp * (1 - t**2 + dt2) + np.abs(e) * dt2)
    return (loss, lse, g @ W, g.T @ h), (tol_loss, tol_lse, dg @ np.abs(W), dg.T @ np.abs(h))


@pytest.mark.parametrize("mode", MODES)
def test_head_ce_tolerance_absorbs_tanh_exp_and_log_error(mode):
    """Two vocabulary chunks (the online rescaling, its alpha an approximated exp too), a softcap that bends."""
    ce = load("frontier.kernels.nki.head_ce")
    r = _rng(3)
    n, d, v = 130, 96, 1000
    hidden = r.standard_normal((n, d)).astype(F32)
    w = (r.standard_normal((v, d)) * 4 / d**0.5).astype(F32)
    targets = r.integers(0, v, n).astype(np.int32)
    dloss = ((0.5 + r.random(n)) / n).astype(F32)
    refs, bounds = _ce64(hidden, w, targets, dloss, 512)
    loss, lse = _perturbed(ce.head_ce_fwd, hidden, w, targets, mode=mode, cap=CAP, matmul_dtype="float32")
    dh, dw = _perturbed(ce.head_ce_bwd, hidden, w, targets, lse, dloss, mode=mode, cap=CAP, matmul_dtype="float32")
    for name, got, ref, bound in zip(("loss", "lse", "dhidden", "dW"), (loss, lse, dh, dw), refs, bounds):
        _within(got, ref, bound, _exact_tol(ref) + 1e-6 * np.abs(ref).max(), f"head_ce {name}")


# ---------------------------------------------------------------------------------------------- Newton-Schulz


def test_the_quintic_sensitivity_constant():
    """max over s in (0, 1] of |s d(p^5)/ds| for p(s) = a s + b s^3 + c s^5 (the constant of the NS bound)."""
    a, b, c = 3.4445, -4.7750, 2.0315
    s = np.logspace(-8, 0, 200_001)
    x, elasticity = s.copy(), np.ones_like(s)
    for _ in range(5):
        elasticity *= x * (a + 3 * b * x**2 + 5 * c * x**4) / (a * x + b * x**3 + c * x**5)
        x = a * x + b * x**3 + c * x**5
    assert np.abs(elasticity * x).max() <= NS_SENSITIVITY


NS_SENSITIVITY = 8.63 + 0.01


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(64, 256), (300, 200)], ids=["wide", "tall-blocks"])
def test_newton_schulz_tolerance_absorbs_the_norms_sqrt_error(mode, shape):
    ns = load("frontier.kernels.nki.newton_schulz")
    g = (_rng(4).standard_normal(shape) * 1e-2).astype(F32)
    ref64 = ns_reference(torch.from_numpy(g).double(), dtype=torch.float64).numpy()
    ref32 = ns_reference(torch.from_numpy(g)).numpy()
    (out,) = _perturbed(ns.newton_schulz, g, mode=mode, matmul_dtype="float32")
    norm = float(np.linalg.norm(g.astype(np.float64)))
    bound = np.full(ref64.shape, NS_SENSITIVITY * (EPS_R + EPS_A / norm))
    _within(out, ref64, bound, _exact_tol(ref64, ref32), "newton_schulz")

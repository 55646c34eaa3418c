"""Conformance with AWS's published NKI tutorials (github.com/aws-neuron/nki-samples, src/nki_samples/tutorials):
for a few of them, a kernel of our own that computes what the tutorial computes, written only in documented NKI 0.7
API, run by the interpreter against a NumPy reference. None of AWS's code is used; the tutorials say what to compute:

- tensor_addition (and spmd_multiple_nc_tensor_addition): c = a + b over [128, 512] tiles, the tiles divided
  between the physical cores of a logical core (here by nl.program_id at LNC=2, the launch Trn2 uses);
- matrix_multiplication (nki_matmul_basic_, nki_matmul_tiled_): result = lhsT.T @ rhs, a single tile, then tiled
  128 (M) x 128 (K) x 512 (N) with the K tiles accumulated in PSUM;
- transpose2d: each partition's row holds a row-major f1 x f2 matrix; the output holds its f2 x f1 transpose (an
  SBUF-to-SBUF copy through an access pattern);
- average_pool2d: a C x H x W input pooled over square windows (the window's two axes reduced on VectorE);
- fused_mamba: a Mamba-v1 layer's selective scan, out[b, c, t] = sum_s C[b, s, t] h[b, c, s, t] with
  h[t] = exp(delta[t] A[c, s]) h[t-1] + delta[t] B[b, s, t] u[t] (nl.broadcast_to for the per-state rows,
  nisa.tensor_tensor_scan for the recurrence).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from frontier.kernels.interpreter import run
from frontier.kernels.interpreter import isa as nisa
from frontier.kernels.interpreter import language as nl

F32 = np.float32


def _rand(*shape, seed=0, dtype=F32):
    return np.random.default_rng(seed).standard_normal(shape).astype(F32).astype(dtype)


# ---------------------------------------------------------------------------------------------------- tensor addition
def tensor_add(a, b):
    """c = a + b, a and b [R * 128, C * 512]; the row tiles divided between the cores by program_id."""
    rows, cols = a.shape
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    tiles = rows // 128
    per_core = tiles // nl.num_programs()
    first = nl.program_id(0) * per_core
    for i in nl.affine_range(per_core):
        r = (first + i) * 128
        for j in nl.affine_range(cols // 512):
            c = j * 512
            x = nl.load(a[r:r + 128, c:c + 512])
            y = nl.load(b[r:r + 128, c:c + 512])
            s = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=s, data1=x, data2=y, op=nl.add)
            nl.store(out[r:r + 128, c:c + 512], s)
    return out


@pytest.mark.parametrize("lnc", [1, 2])
def test_tensor_addition_tiled_and_divided_between_cores(lnc):
    a, b = _rand(512, 1024, seed=1), _rand(512, 1024, seed=2)
    got, counts = run(tensor_add, a, b, lnc=lnc)
    np.testing.assert_array_equal(got, a + b)  # one fp32 add per element: exact
    assert counts.lnc_conflicts == 0
    assert counts.dma_transfers == 3 * 4 * 2  # two loads and a store per tile, 8 tiles, whichever core


# ---------------------------------------------------------------------------------------------------- matmul
def matmul_basic(lhsT, rhs):
    """result [M, N] = lhsT[K, M].T @ rhs[K, N] in one nc_matmul (K, M <= 128, N <= 512)."""
    (k, m), (_, n) = lhsT.shape, rhs.shape
    a = nl.ndarray(lhsT.shape, dtype=lhsT.dtype, buffer=nl.sbuf)
    b = nl.ndarray(rhs.shape, dtype=rhs.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=lhsT)
    nisa.dma_copy(dst=b, src=rhs)
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=a, moving=b)
    res = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=res)
    return out


def matmul_tiled(lhsT, rhs):
    """result [M, N] = lhsT[K, M].T @ rhs[K, N], M, K, N multiples of the tile sizes; each output tile sums its K
    tiles in one PSUM accumulation group (the first matmul overwrites, the rest add)."""
    (K, M), (_, N) = lhsT.shape, rhs.shape
    tm, tk, tn = nl.tile_size.gemm_stationary_fmax, nl.tile_size.pmax, nl.tile_size.gemm_moving_fmax
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // tm):
        for n in nl.affine_range(N // tn):
            acc = nl.ndarray((tm, tn), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // tk):
                a = nl.ndarray((tk, tm), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((tk, tn), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * tk:(k + 1) * tk, m * tm:(m + 1) * tm])
                nisa.dma_copy(dst=b, src=rhs[k * tk:(k + 1) * tk, n * tn:(n + 1) * tn])
                nisa.nc_matmul(dst=acc, stationary=a, moving=b, accumulate=k > 0)
            res = nl.ndarray((tm, tn), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * tm:(m + 1) * tm, n * tn:(n + 1) * tn], src=res)
    return out


def _matmul_reference(lhsT, rhs):
    return lhsT.astype(np.float64).T @ rhs.astype(np.float64)


def test_matmul_basic():
    lhsT, rhs = _rand(64, 128, seed=3), _rand(64, 512, seed=4)
    got, counts = run(matmul_basic, lhsT, rhs)
    np.testing.assert_allclose(got, _matmul_reference(lhsT, rhs), rtol=1e-5, atol=1e-5)
    assert counts.matmul_flops == 2 * 64 * 128 * 512


@pytest.mark.parametrize("dtype", [F32, ml_dtypes.bfloat16], ids=["fp32", "bf16"])
def test_matmul_tiled_accumulates_k_tiles_in_psum(dtype):
    lhsT, rhs = _rand(384, 256, seed=5, dtype=dtype), _rand(384, 1024, seed=6, dtype=dtype)
    got, counts = run(matmul_tiled, lhsT, rhs)
    # bf16 operands widen exactly; products and sums in fp32: within fp32 rounding of the exact result
    want = _matmul_reference(lhsT, rhs)
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    assert counts.matmul_flops == 2 * 384 * 256 * 1024


# ---------------------------------------------------------------------------------------------------- transpose2d
def transpose2d(x, f1, f2):
    """Each partition's row x[p, i * f2 + j] (an f1 x f2 matrix) -> out[p, j * f1 + i]: read through the access
    pattern [[F, P], [1, f2], [f2, f1]] (element (p, j, i) = x[p, i * f2 + j]) into a [P, f2, f1] view."""
    p, free = x.shape
    t = nl.load(x)
    res = nl.ndarray((p, free), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res.reshape((p, f2, f1)), src=t.ap([[free, p], [1, f2], [f2, f1]], offset=0))
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, res)
    return out


@pytest.mark.parametrize("dtype", [F32, np.int32])
def test_transpose2d_within_each_partition(dtype):
    P, f1, f2 = 5, 3, 4
    x = np.arange(P * f1 * f2).astype(dtype).reshape(P, f1 * f2)
    got, _ = run(transpose2d, x, f1=f1, f2=f2)
    np.testing.assert_array_equal(got, x.reshape(P, f1, f2).transpose(0, 2, 1).reshape(P, f1 * f2))


# ---------------------------------------------------------------------------------------------------- average pool
def avgpool2d(x, pool):
    """x [C, H, W] -> [C, H / pool, W / pool], the mean of each pool x pool window: the input on C partitions, the
    windows' two axes made the last two of a 5-D access pattern and summed, then scaled by 1 / pool^2."""
    C, H, W = x.shape
    ho, wo = H // pool, W // pool
    t = nl.ndarray((C, H * W), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.reshape((C, H * W)))
    windows = t.ap([[H * W, C], [pool * W, ho], [pool, wo], [W, pool], [1, pool]], offset=0)
    s = nl.ndarray((C, ho * wo), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=s.reshape((C, ho, wo)), op=nl.add, data=windows, axis=(3, 4))
    nisa.tensor_scalar(dst=s, data=s, op0=nl.multiply, operand0=1.0 / (pool * pool))
    out = nl.ndarray((C, ho, wo), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out.reshape((C, ho * wo)), src=s)
    return out


def test_average_pool2d():
    C, H, W, pool = 4, 12, 8, 2
    x = _rand(C, H, W, seed=7)
    got, _ = run(avgpool2d, x, pool=pool)
    want = x.astype(np.float64).reshape(C, H // pool, pool, W // pool, pool).mean(axis=(2, 4))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------------------------------- fused mamba
def mamba_scan(delta, u, A, B, C):
    """delta, u [batch, channels <= 128, L], A [channels, states], B, C [batch, states, L] -> [batch, channels, L]:
    channels on partitions, time on the free axis; per state, exp(delta * A[:, s]) on ScalarE (A's column as the
    [P, 1] scale), the state rows of B and C broadcast across the channels' partitions, the recurrence one
    tensor_tensor_scan (op0 multiply, op1 add, from 0), the states summed into an fp32 accumulator."""
    nb, nc, L = delta.shape
    ns = A.shape[1]
    out = nl.ndarray((nb, nc, L), dtype=nl.float32, buffer=nl.shared_hbm)
    a_sb = nl.load(A)
    for b in nl.affine_range(nb):
        d = nl.load(delta[b])
        du = nl.ndarray((nc, L), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=du, data1=d, data2=nl.load(u[b]), op=nl.multiply)
        acc = nl.ndarray((nc, L), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        for s in nl.affine_range(ns):
            da = nl.ndarray((nc, L), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=da, op=nl.exp, data=d, scale=a_sb[:, s:s + 1])
            dbu = nl.ndarray((nc, L), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=dbu, data1=du, data2=nl.broadcast_to(nl.load(B[b, s:s + 1, :]), (nc, L)),
                               op=nl.multiply)
            h = nl.ndarray((nc, L), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor_scan(dst=h, data0=da, data1=dbu, initial=0.0, op0=nl.multiply, op1=nl.add)
            hc = nl.ndarray((nc, L), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=hc, data1=h, data2=nl.broadcast_to(nl.load(C[b, s:s + 1, :]), (nc, L)),
                               op=nl.multiply)
            nisa.tensor_tensor(dst=acc, data1=acc, data2=hc, op=nl.add)
        nl.store(out[b], acc)
    return out


def _mamba_reference(delta, u, A, B, C):
    delta, u, A, B, C = (x.astype(np.float64) for x in (delta, u, A, B, C))
    dA = np.exp(delta[:, :, None, :] * A[None, :, :, None])  # [batch, channels, states, L]
    dBu = delta[:, :, None, :] * B[:, None, :, :] * u[:, :, None, :]
    h = np.zeros_like(dA)
    for t in range(dA.shape[-1]):
        h[..., t] = dA[..., t] * (h[..., t - 1] if t else 0.0) + dBu[..., t]
    return (C[:, None, :, :] * h).sum(axis=2)


def test_fused_mamba_selective_scan():
    rng = np.random.default_rng(8)
    nb, nc, ns, L = 2, 64, 4, 48
    delta = rng.uniform(0.01, 0.2, (nb, nc, L)).astype(F32)  # positive step sizes
    A = -rng.uniform(0.5, 2.0, (nc, ns)).astype(F32)  # decaying states
    u, B, C = (rng.standard_normal(shape).astype(F32) for shape in ((nb, nc, L), (nb, ns, L), (nb, ns, L)))
    got, counts = run(mamba_scan, delta, u, A, B, C)
    want = _mamba_reference(delta, u, A, B, C)
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    assert counts.lnc_conflicts == 0

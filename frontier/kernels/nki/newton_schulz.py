"""Muon's Newton-Schulz orthogonalisation (NKI 0.3-0.6, Trn2), as `frontier.muon.newton_schulz` computes it:

    X = G (or G^T when G is tall), m x n with m <= n;   X <- X / (||X||_F + 1e-7)
    5 times:  A = X X^T;  B = b A + c A A;  X <- a X + B X          (a, b, c) = (3.4445, -4.7750, 2.0315)
    out = X (or X^T when G was tall), the shape of G, fp32.

G is one fp32 matrix in HBM with min(rows, cols) <= 128 (the short side on the partitions) and any long side n, in
chunks of 128 (contractions over n) and 512 (matmul outputs along n). The coefficients and the 1e-7 are fixed
constants of the method, not per-step values, so they are compile-time constants; nothing here changes per step.

Layout: X is kept twice in SBUF, X [m, n] (rows on partitions) and X^T as chunks [128, m] of the long dim (so X X^T
contracts over n on the partitions); both are updated each iteration with a matmul, so after the initial load no
transpose is needed:
    X'   = P X    (stationary P [m, m]: P is symmetric, so P^T X = P X; moving X [m, <=512])
    X'^T = X^T P  (stationary X [m, 128] chunk; moving P [m, m])
where P = a I + b A + c A^2 folds the `a X` term into the matmul (a I enters PSUM as an identity matmul). Wide G loads
as X (one DMA) and X^T comes from TensorE transposes; tall G loads as the chunks of X^T and X comes from transposes.

Engines:
  TensorE  the initial transposes; per iteration: A = sum over chunks of X^T_k^T X^T_k (ceil(n/128) matmuls into
           one PSUM bank), c A^2 + a I (two matmuls: A^T (cA) and I^T (aI)), X' (ceil(n/512) matmuls),
           X'^T (ceil(n/128) matmuls); once: the ones-matmul that sums the per-partition squares over partitions
           and broadcasts the total to all 128 partitions.
  ScalarE  sum of squares per partition (`activation` square with reduce), sqrt of the total, c A (copy with
           scale c), the PSUM -> SBUF copies of X', the scaling of X^T by 1/norm.
  VectorE  A PSUM -> SBUF, P = b A + (c A^2 + a I) (`scalar_tensor_tensor` reading PSUM), the PSUM -> SBUF copies
           of X'^T, the floor before sqrt, + 1e-7, the reciprocal (never a divide), the scaling of X by 1/norm.
  GpSimd   iota for the identity.
SBUF per partition: X and X' (2 n fp32), X^T and X'^T (2 ceil(n/128) m fp32), a few [m, m] tiles. PSUM: four
banks (A, c A^2 + a I, X' chunk, X'^T chunk) plus one for the transposes and the norm.
HBM: G is read once and the result written once.
"""

import nki
import nki.isa as nisa
import nki.language as nl

NS_A, NS_B, NS_C = 3.4445, -4.7750, 2.0315
NORM_EPS = 1e-7
SQRT_FLOOR = 2.0**-116  # the smallest valid input of ScalarE's sqrt: only an all-zero G reaches it (then X = 0)
CHUNK = 128  # contraction chunks of the long dim (partitions)
OUT_CHUNK = 512  # matmul output chunks along the long dim (one PSUM bank of fp32)


@nki.jit
def newton_schulz(g, steps=5):
    """The orthogonalised G (same shape, fp32) after `steps` Newton-Schulz iterations (module docstring)."""
    rows, cols = g.shape
    tall = rows > cols
    m, n = (cols, rows) if tall else (rows, cols)
    pmax = nl.tile_size.pmax
    assert m <= pmax, f"newton_schulz: the short side {m} must be <= {pmax} (one partition tile)"
    nch = (n + CHUNK - 1) // CHUNK
    widths = [min(CHUNK, n - k * CHUNK) for k in range(nch)]
    out = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.shared_hbm)

    tp = nl.ndarray((pmax, OUT_CHUNK), dtype=nl.float32, buffer=nl.psum)  # transposes, then the norm
    x = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    xt = nl.ndarray((pmax, nch, m), dtype=nl.float32, buffer=nl.sbuf)
    if tall:
        for k in range(nch):
            w = widths[k]
            nisa.dma_copy(dst=xt[0:w, k, :], src=g[k * CHUNK:k * CHUNK + w, :])
            nisa.nc_transpose(dst=tp[0:m, 0:w], data=xt[0:w, k, :], engine=nisa.engine.tensor)
            nisa.tensor_copy(dst=x[:, k * CHUNK:k * CHUNK + w], src=tp[0:m, 0:w])
    else:
        nisa.dma_copy(dst=x, src=g)
        for k in range(nch):
            w = widths[k]
            nisa.nc_transpose(dst=tp[0:w, 0:m], data=x[:, k * CHUNK:k * CHUNK + w],
                              engine=nisa.engine.tensor)
            nisa.tensor_copy(dst=xt[0:w, k, :], src=tp[0:w, 0:m])

    # Frobenius norm: per-partition sums of squares, summed over the m partitions and broadcast to all 128 by a
    # ones-matmul; then 1 / (sqrt(total) + 1e-7) by ScalarE sqrt and VectorE add + reciprocal.
    xn = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)  # X' later; here the squares (discarded)
    ssq = nl.ndarray((m, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=xn, op=nl.square, data=x, reduce_op=nl.add, reduce_res=ssq,
                    reduce_cmd=nisa.reduce_cmd.reset_reduce)
    ones = nl.ndarray((m, pmax), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    nisa.nc_matmul(dst=tp[:, 0:1], stationary=ones, moving=ssq, accumulate=False)
    total = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=total, data=tp[:, 0:1], op0=nl.maximum, operand0=SQRT_FLOOR)
    rnorm = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=rnorm, op=nl.sqrt, data=total)
    nisa.tensor_scalar(dst=rnorm, data=rnorm, op0=nl.add, operand0=NORM_EPS)
    nisa.reciprocal(dst=rnorm, data=rnorm)
    nisa.tensor_scalar(dst=x, data=x, op0=nl.multiply, operand0=rnorm[0:m, :])
    for k in range(nch):
        w = widths[k]
        nisa.activation(dst=xt[0:w, k, :], op=nl.copy, data=xt[0:w, k, :], scale=rnorm[0:w, :])

    # a I as the moving side of an identity matmul: iota gives j - p, equal-to-zero gives I, times a gives a I
    ident = nl.ndarray((m, m), dtype=nl.float32, buffer=nl.sbuf)
    nisa.iota(dst=ident, pattern=[[1, m]], offset=0, channel_multiplier=-1)
    a_ident = nl.ndarray((m, m), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=a_ident, data=ident, op0=nl.equal, operand0=0.0, op1=nl.multiply, operand1=NS_A)
    nisa.tensor_scalar(dst=ident, data=ident, op0=nl.equal, operand0=0.0)

    a_ps = nl.ndarray((m, m), dtype=nl.float32, buffer=nl.psum)
    p_ps = nl.ndarray((m, m), dtype=nl.float32, buffer=nl.psum)
    x_ps = nl.ndarray((m, OUT_CHUNK), dtype=nl.float32, buffer=nl.psum)
    xt_ps = nl.ndarray((pmax, m), dtype=nl.float32, buffer=nl.psum)
    for _ in range(steps):
        for k in range(nch):
            w = widths[k]
            nisa.nc_matmul(dst=a_ps, stationary=xt[0:w, k, :], moving=xt[0:w, k, :], accumulate=k > 0)
        a_sb = nl.ndarray((m, m), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=a_sb, src=a_ps, engine=nisa.engine.vector)
        ca_sb = nl.ndarray((m, m), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=ca_sb, op=nl.copy, data=a_ps, scale=NS_C)
        nisa.nc_matmul(dst=p_ps, stationary=a_sb, moving=ca_sb, accumulate=False)  # A^T (c A) = c A^2
        nisa.nc_matmul(dst=p_ps, stationary=ident, moving=a_ident, accumulate=True)  # + a I
        p_sb = nl.ndarray((m, m), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=p_sb, data=a_sb, op0=nl.multiply, operand0=NS_B, op1=nl.add, operand1=p_ps)
        xn = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
        for j0 in range(0, n, OUT_CHUNK):
            w = min(OUT_CHUNK, n - j0)
            nisa.nc_matmul(dst=x_ps[:, 0:w], stationary=p_sb, moving=x[:, j0:j0 + w], accumulate=False)
            nisa.activation(dst=xn[:, j0:j0 + w], op=nl.copy, data=x_ps[:, 0:w])
        xtn = nl.ndarray((pmax, nch, m), dtype=nl.float32, buffer=nl.sbuf)
        for k in range(nch):
            w = widths[k]
            nisa.nc_matmul(dst=xt_ps[0:w, :], stationary=x[:, k * CHUNK:k * CHUNK + w], moving=p_sb,
                           accumulate=False)
            nisa.tensor_copy(dst=xtn[0:w, k, :], src=xt_ps[0:w, :], engine=nisa.engine.vector)
        x, xt = xn, xtn

    if tall:
        for k in range(nch):
            w = widths[k]
            nisa.dma_copy(dst=out[k * CHUNK:k * CHUNK + w, :], src=xt[0:w, k, :])
    else:
        nisa.dma_copy(dst=out, src=x)
    return out

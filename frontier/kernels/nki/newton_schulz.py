"""Muon's Newton-Schulz orthogonalisation (NKI 0.7, Trn2), as `frontier.optim.muon.newton_schulz` computes it:

    X = G (or G^T when G is tall), m x n with m <= n;   X <- X / (||X||_F + 1e-7)
    5 times:  A = X X^T;  B = b A + c A A;  X <- a X + B X          (a, b, c) = (3.4445, -4.7750, 2.0315)
    out = X (or X^T when G was tall), the shape of G, fp32.

Precision: `matmul_dtype` (compile-time, "bfloat16" by default, or "float32") is the dtype of every matmul operand,
so of X, X^T, A and P as the iteration keeps them in SBUF; TensorE accumulates in fp32 PSUM (bf16 runs TensorE at its
79 TFLOP/s instead of 20). The norm is computed from G in fp32, before X is rounded to the operand dtype.

G is one fp32 matrix in HBM. The short side m is cut into row blocks of 128 (MB = ceil(m / 128) blocks, the last
ragged), the long side n into chunks of 128 (contractions over n) and 512 (matmul outputs along n), and any output
along m into chunks of 512 (one PSUM bank of fp32). The coefficients and the 1e-7 are fixed constants of the method,
not per-step values, so they are compile-time constants; nothing here changes per step.

Layout: X is kept twice in SBUF, as row blocks X_i [<=128, n] (rows on partitions) and as X^T, chunks [128, m] of
the long dim (so X X^T contracts over n on the partitions). With P = a I + b A + c A^2 (symmetric, as A is):
    A_i   = sum_k (X^T_k[:, block i])^T X^T_k           row block i of A, per 512-column chunk (stationary
                                                        X^T_k[:, block i] [128 n, <=128 m], moving X^T_k)
    (A^2)_i = sum_j (A_j[:, block i])^T A_j             A symmetric: A_j[:, block i] is the transpose of A_i[:, block j]
    X'_i  = sum_j (P_j[:, block i])^T X_j               P symmetric likewise (moving X_j [<=128, <=512])
and X'^T is rebuilt from X' by TensorE transposes (nch x MB of them), so only X, X' and X^T are held, not X'^T too.
G loads in its own row layout into fp32 staging (wide G: the row blocks of X; tall G: the chunks of X^T), which gives
the norm; the scaled copy in the operand dtype is the first X (or X^T), and transposes make the other layout.

Engines:
  TensorE  the initial transposes; per iteration: A (MB x ceil(m/512) x ceil(n/128) matmuls), A^2 (MB x ceil(m/512) x
           MB), X' (MB x ceil(n/512) x MB), the nch x MB transposes rebuilding X^T (skipped after the last
           iteration when G is wide); once: the ones-matmuls that sum the per-partition squares over partitions and
           broadcast the total to all 128 partitions.
  ScalarE  sum of squares per partition (`activation` square with reduce), sqrt of the total, c A^2 (copy with
           scale c, reading PSUM), the PSUM -> SBUF copies of X'.
  VectorE  A PSUM -> SBUF, P_i = b A_i + c A^2_i (`scalar_tensor_tensor`) then + a I_i, the PSUM -> SBUF copies of
           the transposes, the floor before sqrt, + 1e-7, the reciprocal (never a divide), the scaled copy of G.
  GpSimd   iota for the identity rows of each block (a I_i), rebuilt per block.
SBUF per partition (operand dtype of s bytes): X and X' (2 MB n s), X^T (ceil(n/128) m s), A and P row blocks
(2 MB m s), a few [128, <=m] tiles, and while loading with bf16 operands the fp32 staging of G (released before
the iterations): at most 146 KiB in bf16, 180 KiB in fp32 for the trn2 model's 2560 x 640 matrices (the interpreter
checks the 212,984-byte budget).
PSUM, every tile a whole 2 KiB bank: five (A, A^2, X', the transposes, the norm).
HBM: G is read once and the result written once.
"""

import nki
import nki.isa as nisa
import nki.language as nl

from .tiles import BANK_BYTES, chunks, operand

NS_A, NS_B, NS_C = 3.4445, -4.7750, 2.0315
NORM_EPS = 1e-7
SQRT_FLOOR = 2.0**-116  # the smallest valid input of ScalarE's sqrt: only an all-zero G reaches it (then X = 0)
CHUNK = 128  # contraction chunks of the long dim (partitions)
OUT_CHUNK = 512  # matmul output chunks along the long dim (one PSUM bank of fp32)


@nki.jit
def newton_schulz(g, steps=5, matmul_dtype="bfloat16"):
    """The orthogonalised G (same shape, fp32) after `steps` Newton-Schulz iterations (module docstring)."""
    rows, cols = g.shape
    tall = rows > cols
    m, n = (cols, rows) if tall else (rows, cols)
    pmax = nl.tile_size.pmax
    mdt, size = operand(matmul_dtype)
    tp_width = BANK_BYTES // size
    kch = chunks(n, CHUNK)  # contraction chunks of the long dim
    nch = len(kch)
    mbl = chunks(m, pmax)  # row blocks of the short dim
    mcols = chunks(m, OUT_CHUNK)  # output chunks along the short dim
    ncols = chunks(n, OUT_CHUNK)  # output chunks along the long dim
    out = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.shared_hbm)

    # PSUM, whole banks: transposes (operand dtype), the norm, A, A^2, X'
    tp = nl.ndarray((pmax, tp_width), dtype=mdt, buffer=nl.psum)
    norm_ps = nl.ndarray((pmax, OUT_CHUNK), dtype=nl.float32, buffer=nl.psum)
    a_ps = nl.ndarray((pmax, OUT_CHUNK), dtype=nl.float32, buffer=nl.psum)
    sq_ps = nl.ndarray((pmax, OUT_CHUNK), dtype=nl.float32, buffer=nl.psum)
    x_ps = nl.ndarray((pmax, OUT_CHUNK), dtype=nl.float32, buffer=nl.psum)

    x = []
    xn = []
    for b in range(len(mbl)):
        x.append(nl.ndarray((mbl[b][1], n), dtype=mdt, buffer=nl.sbuf))
        xn.append(nl.ndarray((mbl[b][1], n), dtype=mdt, buffer=nl.sbuf))
    xt = nl.ndarray((pmax, nch, m), dtype=mdt, buffer=nl.sbuf)
    if tall:
        _load_scaled(g, xt, kch, norm_ps, tall, matmul_dtype == "float32")
        for k in range(nch):
            k0, w = kch[k]
            for b in range(len(mbl)):
                i0, h = mbl[b]
                nisa.nc_transpose(dst=tp[0:h, 0:w], data=xt[0:w, k, i0:i0 + h], engine=nisa.engine.tensor)
                nisa.tensor_copy(dst=x[b][:, k0:k0 + w], src=tp[0:h, 0:w])
    else:
        _load_scaled(g, x, mbl, norm_ps, tall, matmul_dtype == "float32")
        _transpose_all(xt, x, kch, mbl, tp)

    a_sb = []
    p_sb = []
    for b in range(len(mbl)):
        a_sb.append(nl.ndarray((mbl[b][1], m), dtype=mdt, buffer=nl.sbuf))
        p_sb.append(nl.ndarray((mbl[b][1], m), dtype=mdt, buffer=nl.sbuf))
    c_sq = nl.ndarray((pmax, OUT_CHUNK), dtype=nl.float32, buffer=nl.sbuf)  # c A^2 of one chunk
    a_id = nl.ndarray((pmax, m), dtype=nl.float32, buffer=nl.sbuf)  # a I, rows of one block
    for it in range(steps):
        for b in range(len(mbl)):  # A = X X^T, row block b, chunk by chunk of its columns
            i0, h = mbl[b]
            for c0, cw in mcols:
                for k in range(nch):
                    w = kch[k][1]
                    nisa.nc_matmul(dst=a_ps[0:h, 0:cw], stationary=xt[0:w, k, i0:i0 + h],
                                   moving=xt[0:w, k, c0:c0 + cw], accumulate=k > 0)
                nisa.tensor_copy(dst=a_sb[b][:, c0:c0 + cw], src=a_ps[0:h, 0:cw], engine=nisa.engine.vector)
        for b in range(len(mbl)):  # P = b A + c A^2 + a I, row block b
            i0, h = mbl[b]
            for c0, cw in mcols:
                for j in range(len(mbl)):
                    nisa.nc_matmul(dst=sq_ps[0:h, 0:cw], stationary=a_sb[j][:, i0:i0 + h],
                                   moving=a_sb[j][:, c0:c0 + cw], accumulate=j > 0)
                nisa.activation(dst=c_sq[0:h, 0:cw], op=nl.copy, data=sq_ps[0:h, 0:cw], scale=NS_C)
                nisa.scalar_tensor_tensor(dst=p_sb[b][:, c0:c0 + cw], data=a_sb[b][:, c0:c0 + cw], op0=nl.multiply,
                                          operand0=NS_B, op1=nl.add, operand1=c_sq[0:h, 0:cw])
            nisa.iota(dst=a_id[0:h, :], pattern=[[1, m]], offset=-i0, channel_multiplier=-1)  # column - row
            nisa.tensor_scalar(dst=a_id[0:h, :], data=a_id[0:h, :], op0=nl.equal, operand0=0.0, op1=nl.multiply,
                               operand1=NS_A)
            nisa.tensor_tensor(dst=p_sb[b], data1=p_sb[b], data2=a_id[0:h, :], op=nl.add)
        for b in range(len(mbl)):  # X' = P X, row block b, chunk by chunk of the long dim
            i0, h = mbl[b]
            for c0, cw in ncols:
                for j in range(len(mbl)):
                    nisa.nc_matmul(dst=x_ps[0:h, 0:cw], stationary=p_sb[j][:, i0:i0 + h], moving=x[j][:, c0:c0 + cw],
                                   accumulate=j > 0)
                nisa.activation(dst=xn[b][:, c0:c0 + cw], op=nl.copy, data=x_ps[0:h, 0:cw])
        x, xn = xn, x
        if tall or it < steps - 1:
            _transpose_all(xt, x, kch, mbl, tp)

    if tall:
        for k in range(nch):
            k0, w = kch[k]
            nisa.dma_copy(dst=out[k0:k0 + w, :], src=xt[0:w, k, :])  # the DMA widens the operand dtype to fp32
    else:
        for b in range(len(mbl)):
            i0, h = mbl[b]
            nisa.dma_copy(dst=out[i0:i0 + h, :], src=x[b])
    return out


def _load_scaled(g, dst, blocks, norm_ps, tall, fp32):
    """dst (row blocks of X, or the chunks of X^T when G is tall, in the operand dtype) = G / (||G||_F + 1e-7).

    G's rows are loaded in fp32: into dst itself when the operands are fp32, else into staging tiles that end with
    this helper. Frobenius norm: per-partition sums of squares of each tile, summed over partitions and tiles and
    broadcast to all 128 by accumulating ones-matmuls; then 1 / (sqrt(total) + 1e-7) by ScalarE sqrt and VectorE add
    + reciprocal."""
    pmax = nl.tile_size.pmax
    width = g.shape[1]
    ones = nl.ndarray((pmax, pmax), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    ssq = nl.ndarray((pmax, len(blocks)), dtype=nl.float32, buffer=nl.sbuf)
    staged = []
    for b in range(len(blocks)):
        r0, h = blocks[b]
        if fp32:
            g32 = dst[0:h, b, :] if tall else dst[b]
        else:
            g32 = nl.ndarray((h, width), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=g32, src=g[r0:r0 + h, :])
        sq = nl.ndarray((h, width), dtype=nl.float32, buffer=nl.sbuf)  # the squares (discarded)
        nisa.activation(dst=sq, op=nl.square, data=g32, reduce_op=nl.add, reduce_res=ssq[0:h, b:b + 1],
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.nc_matmul(dst=norm_ps[:, 0:1], stationary=ones[0:h, :], moving=ssq[0:h, b:b + 1], accumulate=b > 0)
        staged.append(g32)
    total = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=total, data=norm_ps[:, 0:1], op0=nl.maximum, operand0=SQRT_FLOOR)
    rnorm = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=rnorm, op=nl.sqrt, data=total)
    nisa.tensor_scalar(dst=rnorm, data=rnorm, op0=nl.add, operand0=NORM_EPS)
    nisa.reciprocal(dst=rnorm, data=rnorm)
    for b in range(len(blocks)):
        h = blocks[b][1]
        target = dst[0:h, b, :] if tall else dst[b]
        nisa.tensor_scalar(dst=target, data=staged[b], op0=nl.multiply, operand0=rnorm[0:h, :])


def _transpose_all(xt, x, kch, mbl, tp):
    """X^T chunks from the row blocks of X: xt[0:w, k, block b] = x[b][:, chunk k]^T (TensorE, VectorE copies)."""
    for k in range(len(kch)):
        k0, w = kch[k]
        for b in range(len(mbl)):
            i0, h = mbl[b]
            nisa.nc_transpose(dst=tp[0:w, 0:h], data=x[b][:, k0:k0 + w], engine=nisa.engine.tensor)
            nisa.tensor_copy(dst=xt[0:w, k, i0:i0 + h], src=tp[0:w, 0:h])

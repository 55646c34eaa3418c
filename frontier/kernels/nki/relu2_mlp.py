"""The ReLU^2 MLP of `frontier.model.gpt.MLP`, forward and backward (NKI 0.3-0.6, Trn2), fp32:

    h = x W1^T,  a = relu(h)^2,  y = a W2^T          x [N, D], W1 = c_fc.weight [F, D], W2 = c_proj.weight [D, F]
    dA = dy W2,  dh = 2 relu(h) * dA,  dx = dh W1,  dW1 = dh^T x,  dW2 = dy^T a

The backward RECOMPUTES h from x (nothing is saved by the forward). Saving h would write and read back an [N, F]
fp32 tensor per layer (F = 4 D: four times the residual stream, the largest activation of a block) through HBM, the
resource TensorE work does not compete for, and keep it alive from the forward to the backward; recomputing costs
2 N D F FLOPs, a quarter of the backward's 8 N D F (+17% of forward + backward), on TensorE, which has the headroom,
and keeps the forward's only output y. The pair is then self-contained: mlp_bwd needs (x, W1, W2, dy) only.

Matmuls: `nc_matmul(dst[M, N], stationary[K, M], moving[K, N])` contracts over the partitions (K <= 128), M <= 128,
N <= 512 (one PSUM bank). The feature dims are cut into chunks of 128 (D: KT chunks, F: FT chunks, the last ones
ragged) and PSUM outputs along D into chunks of 512.

mlp_fwd. Weights resident in SBUF, loaded once and transposed on TensorE: W1^T [128 d, KT, F] and W2^T [128 f, FT, D]
(KT F + FT D fp32 per partition: 100 KiB at D = 640, F = 2560; larger models would need F-blocking, asserted).
Per 128-token tile: x [rows, D] by DMA, x^T by KT TensorE transposes; then per F chunk
    h^T [f, rows] = sum_k W1^T[k, f]^T x^T[k]    (stationary W1^T chunk, moving x^T: F on the output partitions)
    a^T = relu(h^T)^2                           (ScalarE relu reading PSUM; GpSimd r * r)
    y [rows, D] += a^T^T W2^T[f]                (stationary a^T [f, rows], moving W2^T [f, <=512]; PSUM accumulates
                                                 over the F chunks)
so the hidden activation is produced directly in the layout the second matmul contracts over: no transposes of it.
VectorE: the PSUM -> SBUF copies of the transposes and of y. HBM: x, W1, W2 read once, y written once.
PSUM: one bank for transposes, one for h^T, ceil(D / 512) for y. PSUM tiles are allocated once and reused in both
kernels (no double buffering: TensorE waits for the engine draining a bank; a tuning step for the hardware).

mlp_bwd(x, w1, w2, dy, pos_block=0). Weight gradients need a sum over all tokens and dx a sum over all of F, and in
fp32 at the model's size neither all the weights with their gradients nor all the tokens fit in SBUF, so the loops
are: token blocks (pos_block tiles of 128 tokens; 0 = as many as fit in ~96 KiB) > F blocks of FB hidden units >
token tiles of the block. Per token block, x, dy, x^T, dy^T and an fp32 dx accumulator stay in SBUF. Per F block,
W1_b [FB, D] (loaded by row chunks), W1_b^T (TensorE transposes) and W2[:, block] stay in SBUF while every tile of the
token block runs:
    h  [rows, FB] = x^T^T W1_b^T        r = relu(h) (ScalarE, from PSUM),  a = r * r (GpSimd)
    dA [rows, FB] = dy^T^T W2_b         dh = (2 r) * dA (VectorE `scalar_tensor_tensor`, reading dA in PSUM)
    dh^T by FB / 128 TensorE transposes (ScalarE copies them out of PSUM)
    dx [rows, D] = sum_s dh^T_s^T W1_b[s]      -> added into the SBUF accumulator (VectorE; ScalarE copy for the
                                                 first F block)
    dW1_b[s] [128, D] += dh[:, s]^T x          dW2_b[k] [128, FB] += dy[:, k]^T a
The weight gradients of the F block accumulate in PSUM over the tiles of the token block, then go to HBM (for a
token block after the first, added to the partial sums read back from HBM). FB is the largest of 512, 256, 128 for
which PSUM holds the transposes (1 bank), h / dA (1, reused), dx (ceil(D/512)), dW1_b (FB/128 ceil(D/512)) and
dW2_b (ceil(KT FB / 512)) in its 8 banks: D <= 1024.
HBM with NB token blocks: x and dy read once, W1 and W2 read NB times, dW1 and dW2 written NB times and read back
NB - 1 times, dx written once; NB = 1 (everything once) whenever the block holds all the tokens (smoke: 512 tokens).
"""

import nki
import nki.isa as nisa
import nki.language as nl

PSUM_BANKS = 8
BANK_FP32 = 512
CACHE_BYTES = 96 * 1024  # SBUF per partition for the token block's cached tiles in mlp_bwd (pos_block=0)
WEIGHT_BYTES = 150 * 1024  # SBUF per partition for mlp_fwd's resident W1^T and W2^T


def _chunks(total, size):
    """[(start, width)] covering range(total) in chunks of `size` (the last one ragged)."""
    return [(s, min(size, total - s)) for s in range(0, total, size)]


def _transpose_in(dst, src, tp):
    """dst[c, p] = src[p, c] (SBUF -> SBUF) through TensorE and a PSUM scratch `tp`; VectorE copies it out."""
    p, c = src.shape[0], src.shape[1]
    nisa.nc_transpose(dst=tp[0:c, 0:p], data=src, engine=nisa.engine.tensor)
    nisa.tensor_copy(dst=dst, src=tp[0:c, 0:p], engine=nisa.engine.vector)


@nki.jit
def mlp_fwd(x, w1, w2):
    """y[N, D] = relu(x W1^T)^2 W2^T (module docstring: resident weights, h^T layout, no hidden transposes)."""
    n, d = x.shape
    f = w1.shape[0]
    assert w1.shape == (f, d) and w2.shape == (d, f), "w1 is [F, D] (c_fc.weight), w2 is [D, F] (c_proj.weight)"
    pmax = nl.tile_size.pmax
    dch, fch, och = _chunks(d, pmax), _chunks(f, pmax), _chunks(d, BANK_FP32)
    kt_n, ft_n = len(dch), len(fch)
    assert (kt_n * f + ft_n * d) * 4 <= WEIGHT_BYTES, "mlp_fwd: W1^T and W2^T do not fit in SBUF (F-blocking needed)"
    y = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    tp = nl.ndarray((pmax, BANK_FP32), dtype=nl.float32, buffer=nl.psum)

    w1t = nl.ndarray((pmax, kt_n, f), dtype=nl.float32, buffer=nl.sbuf)  # w1t[i, k, j] = W1[j, 128 k + i]
    for f0, fw in fch:
        wrow = nl.ndarray((fw, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=wrow, src=w1[f0:f0 + fw, :])
        for k in range(kt_n):
            d0, dk = dch[k]
            _transpose_in(w1t[0:dk, k, f0:f0 + fw], wrow[:, d0:d0 + dk], tp)
    w2t = nl.ndarray((pmax, ft_n, d), dtype=nl.float32, buffer=nl.sbuf)  # w2t[i, j, c] = W2[c, 128 j + i]
    for d0, dk in dch:
        wrow = nl.ndarray((dk, f), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=wrow, src=w2[d0:d0 + dk, :])
        for j in range(ft_n):
            f0, fw = fch[j]
            _transpose_in(w2t[0:fw, j, d0:d0 + dk], wrow[:, f0:f0 + fw], tp)
    del wrow

    h_ps = nl.ndarray((pmax, pmax), dtype=nl.float32, buffer=nl.psum)
    y_ps = nl.ndarray((pmax, d), dtype=nl.float32, buffer=nl.psum)
    for r0, rows in _chunks(n, pmax):
        xt = nl.ndarray((rows, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[r0:r0 + rows, :])
        xT = nl.ndarray((pmax, kt_n, pmax), dtype=nl.float32, buffer=nl.sbuf)
        for k in range(kt_n):
            d0, dk = dch[k]
            _transpose_in(xT[0:dk, k, 0:rows], xt[:, d0:d0 + dk], tp)
        for j in range(ft_n):
            f0, fw = fch[j]
            for k in range(kt_n):
                dk = dch[k][1]
                nisa.nc_matmul(dst=h_ps[0:fw, 0:rows], stationary=w1t[0:dk, k, f0:f0 + fw],
                               moving=xT[0:dk, k, 0:rows], accumulate=k > 0)
            r = nl.ndarray((fw, rows), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=r, op=nl.relu, data=h_ps[0:fw, 0:rows])
            a = nl.ndarray((fw, rows), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=a, data1=r, data2=r, op=nl.multiply, engine=nisa.engine.gpsimd)
            for c0, cw in och:
                nisa.nc_matmul(dst=y_ps[0:rows, c0:c0 + cw], stationary=a, moving=w2t[0:fw, j, c0:c0 + cw],
                               accumulate=j > 0)
        yt = nl.ndarray((rows, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=yt, src=y_ps[0:rows, :], engine=nisa.engine.vector)
        nisa.dma_copy(dst=y[r0:r0 + rows, :], src=yt)
    return y


def _f_block(d):
    """The widest F block (512, 256 or 128 hidden units) whose PSUM tiles fit the 8 banks (module docstring)."""
    c = (d + BANK_FP32 - 1) // BANK_FP32
    kt_n = (d + 127) // 128
    for fb in (512, 256, 128):
        banks = 2 + c + (fb // 128) * c + (kt_n * fb + BANK_FP32 - 1) // BANK_FP32
        if banks <= PSUM_BANKS:
            return fb
    raise AssertionError(f"mlp_bwd: D = {d} leaves no F block that fits PSUM (D <= 1024 supported)")


@nki.jit
def mlp_bwd(x, w1, w2, dy, pos_block=0):
    """(dx [N, D], dW1 [F, D], dW2 [D, F]) of y = relu(x W1^T)^2 W2^T, h recomputed (module docstring)."""
    n, d = x.shape
    f = w1.shape[0]
    assert w1.shape == (f, d) and w2.shape == (d, f) and dy.shape == (n, d)
    pmax = nl.tile_size.pmax
    dch, och = _chunks(d, pmax), _chunks(d, BANK_FP32)
    kt_n = len(dch)
    fb = min(_f_block(d), pmax * ((f + pmax - 1) // pmax))
    subs = fb // pmax
    tiles = _chunks(n, pmax)
    per_tile = (3 * d + 2 * kt_n * pmax) * 4  # x, dy, dx accumulator, x^T, dy^T
    pb = pos_block if pos_block > 0 else max(1, min(len(tiles), CACHE_BYTES // per_tile))
    dx = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    dw1 = nl.ndarray((f, d), dtype=nl.float32, buffer=nl.shared_hbm)
    dw2 = nl.ndarray((d, f), dtype=nl.float32, buffer=nl.shared_hbm)

    tp = nl.ndarray((pmax, BANK_FP32), dtype=nl.float32, buffer=nl.psum)  # transposes
    hd_ps = nl.ndarray((pmax, fb), dtype=nl.float32, buffer=nl.psum)  # h, then dA
    dx_ps = nl.ndarray((pmax, d), dtype=nl.float32, buffer=nl.psum)
    dw1_ps = []
    for s in range(subs):
        dw1_ps.append(nl.ndarray((pmax, d), dtype=nl.float32, buffer=nl.psum))
    dw2_ps = nl.ndarray((pmax, kt_n, fb), dtype=nl.float32, buffer=nl.psum)

    for b0 in range(0, len(tiles), pb):
        block = tiles[b0:b0 + pb]
        first_block = b0 == 0
        nb = len(block)
        xs = nl.ndarray((pmax, nb, d), dtype=nl.float32, buffer=nl.sbuf)
        dys = nl.ndarray((pmax, nb, d), dtype=nl.float32, buffer=nl.sbuf)
        xT = nl.ndarray((pmax, nb, kt_n, pmax), dtype=nl.float32, buffer=nl.sbuf)
        dyT = nl.ndarray((pmax, nb, kt_n, pmax), dtype=nl.float32, buffer=nl.sbuf)
        dxa = nl.ndarray((pmax, nb, d), dtype=nl.float32, buffer=nl.sbuf)
        for t in range(nb):
            r0, rows = block[t]
            nisa.dma_copy(dst=xs[0:rows, t, :], src=x[r0:r0 + rows, :])
            nisa.dma_copy(dst=dys[0:rows, t, :], src=dy[r0:r0 + rows, :])
            for k in range(kt_n):
                d0, dk = dch[k]
                _transpose_in(xT[0:dk, t, k, 0:rows], xs[0:rows, t, d0:d0 + dk], tp)
                _transpose_in(dyT[0:dk, t, k, 0:rows], dys[0:rows, t, d0:d0 + dk], tp)

        for f0 in range(0, f, fb):
            fbw = min(fb, f - f0)
            sch = _chunks(fbw, pmax)
            w1n = nl.ndarray((pmax, subs, d), dtype=nl.float32, buffer=nl.sbuf)  # W1 rows f0 + 128 s + i
            w1bt = nl.ndarray((pmax, kt_n, fb), dtype=nl.float32, buffer=nl.sbuf)  # W1_b^T
            w2b = nl.ndarray((pmax, kt_n, fb), dtype=nl.float32, buffer=nl.sbuf)  # W2[:, f0:f0 + fbw] by d chunks
            for s in range(len(sch)):
                s0, sw = sch[s]
                nisa.dma_copy(dst=w1n[0:sw, s, :], src=w1[f0 + s0:f0 + s0 + sw, :])
                for k in range(kt_n):
                    d0, dk = dch[k]
                    _transpose_in(w1bt[0:dk, k, s0:s0 + sw], w1n[0:sw, s, d0:d0 + dk], tp)
            for k in range(kt_n):
                d0, dk = dch[k]
                nisa.dma_copy(dst=w2b[0:dk, k, 0:fbw], src=w2[d0:d0 + dk, f0:f0 + fbw])

            for t in range(nb):
                r0, rows = block[t]
                acc = t > 0
                for k in range(kt_n):
                    dk = dch[k][1]
                    nisa.nc_matmul(dst=hd_ps[0:rows, 0:fbw], stationary=xT[0:dk, t, k, 0:rows],
                                   moving=w1bt[0:dk, k, 0:fbw], accumulate=k > 0)
                r = nl.ndarray((rows, fbw), dtype=nl.float32, buffer=nl.sbuf)
                nisa.activation(dst=r, op=nl.relu, data=hd_ps[0:rows, 0:fbw])
                a = nl.ndarray((rows, fbw), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_tensor(dst=a, data1=r, data2=r, op=nl.multiply, engine=nisa.engine.gpsimd)
                for k in range(kt_n):
                    dk = dch[k][1]
                    nisa.nc_matmul(dst=hd_ps[0:rows, 0:fbw], stationary=dyT[0:dk, t, k, 0:rows],
                                   moving=w2b[0:dk, k, 0:fbw], accumulate=k > 0)
                dh = nl.ndarray((rows, fbw), dtype=nl.float32, buffer=nl.sbuf)
                nisa.scalar_tensor_tensor(dst=dh, data=r, op0=nl.multiply, operand0=2.0, op1=nl.multiply,
                                          operand1=hd_ps[0:rows, 0:fbw])
                dhT = nl.ndarray((pmax, subs, pmax), dtype=nl.float32, buffer=nl.sbuf)
                for s in range(len(sch)):
                    s0, sw = sch[s]
                    nisa.nc_transpose(dst=tp[0:sw, s * pmax:s * pmax + rows], data=dh[:, s0:s0 + sw],
                                      engine=nisa.engine.tensor)
                    nisa.tensor_copy(dst=dhT[0:sw, s, 0:rows], src=tp[0:sw, s * pmax:s * pmax + rows],
                                     engine=nisa.engine.scalar)
                for c0, cw in och:
                    for s in range(len(sch)):
                        sw = sch[s][1]
                        nisa.nc_matmul(dst=dx_ps[0:rows, c0:c0 + cw], stationary=dhT[0:sw, s, 0:rows],
                                       moving=w1n[0:sw, s, c0:c0 + cw], accumulate=s > 0)
                if f0 == 0:
                    nisa.tensor_copy(dst=dxa[0:rows, t, :], src=dx_ps[0:rows, :], engine=nisa.engine.scalar)
                else:
                    nisa.tensor_tensor(dst=dxa[0:rows, t, :], data1=dxa[0:rows, t, :], data2=dx_ps[0:rows, :],
                                       op=nl.add)
                for s in range(len(sch)):
                    s0, sw = sch[s]
                    for c0, cw in och:
                        nisa.nc_matmul(dst=dw1_ps[s][0:sw, c0:c0 + cw], stationary=dh[:, s0:s0 + sw],
                                       moving=xs[0:rows, t, c0:c0 + cw], accumulate=acc)
                for k in range(kt_n):
                    d0, dk = dch[k]
                    nisa.nc_matmul(dst=dw2_ps[0:dk, k, 0:fbw], stationary=dys[0:rows, t, d0:d0 + dk], moving=a,
                                   accumulate=acc)

            # this F block's weight gradients: PSUM (+ the earlier token blocks' partial sums) -> HBM
            for s in range(len(sch)):
                s0, sw = sch[s]
                g1 = nl.ndarray((sw, d), dtype=nl.float32, buffer=nl.sbuf)
                _flush(g1, dw1_ps[s][0:sw, :], dw1[f0 + s0:f0 + s0 + sw, :], first_block)
            for k in range(kt_n):
                d0, dk = dch[k]
                g2 = nl.ndarray((dk, fbw), dtype=nl.float32, buffer=nl.sbuf)
                _flush(g2, dw2_ps[0:dk, k, 0:fbw], dw2[d0:d0 + dk, f0:f0 + fbw], first_block)

        for t in range(nb):
            r0, rows = block[t]
            nisa.dma_copy(dst=dx[r0:r0 + rows, :], src=dxa[0:rows, t, :])
    return dx, dw1, dw2


def _flush(buf, acc_ps, out, first):
    """out (HBM) = acc_ps (PSUM), plus what out already holds unless `first`; `buf` is an SBUF tile like acc_ps."""
    if first:
        nisa.tensor_copy(dst=buf, src=acc_ps, engine=nisa.engine.vector)
    else:
        nisa.dma_copy(dst=buf, src=out)
        nisa.tensor_tensor(dst=buf, data1=buf, data2=acc_ps, op=nl.add)
    nisa.dma_copy(dst=out, src=buf)

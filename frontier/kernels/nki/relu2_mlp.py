"""The ReLU^2 MLP of `frontier.model.gpt.MLP`, forward and backward (NKI 0.7, Trn2):

    h = x W1^T,  a = relu(h)^2,  y = a W2^T          x [N, D], W1 = c_fc.weight [F, D], W2 = c_proj.weight [D, F]
    dA = dy W2,  dh = 2 relu(h) * dA,  dx = dh W1,  dW1 = dh^T x,  dW2 = dy^T a

Precision: `matmul_dtype` (compile-time: "bfloat16" by default, or "float32") is the dtype of every matmul operand:
x, W1, W2 and dy are DMA'd into SBUF in it (the DMA casts), a and dh are written in it, transposes are made in it.
TensorE multiplies bf16 at 79 TFLOP/s against 20 in fp32 and accumulates in fp32 PSUM either way; everything the
other engines compute (relu, the squares, 2 r dA, the dx accumulator) is fp32, and the outputs are fp32.

The backward RECOMPUTES h from x (nothing is saved by the forward). Saving h would write and read back an [N, F]
tensor per layer (F = 4 D: four times the residual stream, the largest activation of a block) through HBM, the
resource TensorE work does not compete for, and keep it alive from the forward to the backward; recomputing costs
2 N D F FLOPs, a quarter of the backward's 8 N D F (+17% of forward + backward), on TensorE, which has the headroom,
and keeps the forward's only output y. The pair is then self-contained: mlp_bwd needs (x, W1, W2, dy) only.

Matmuls: `nc_matmul(dst[M, N], stationary[K, M], moving[K, N])` contracts over the partitions (K <= 128), M <= 128,
N <= 512 (one PSUM bank). The feature dims are cut into chunks of 128 (D: KT chunks, F: FT chunks, the last ones
ragged) and PSUM outputs along D into chunks of 512. Every PSUM tile is allocated once, as whole 2 KiB banks (so no
output crosses a bank wherever the compiler places it), and reused (no double buffering: TensorE waits for the
engine draining a bank; a tuning step for the hardware).

Compiled loops: the token loop is an `nl.fori_loop` over row offsets (HBM rows addressed by `.ap(scalar_offset=)`),
so the kernel's emitted instructions do not grow with N (at the trn2 shapes, 16,384 tokens, the unrolled forward
would emit ~25,000); the ragged last tile (N % 128) and, backward, a last short token block are emitted after it. At
LNC=2 the loop runs the same trip count on both cores (`tiles.core_blocks`: dynamic control flow that differs between
the cores is undefined) and the core with an extra tile takes it in straight-line code.
The loop's loads of x and dy in the operand dtype ask for software DGE: a runtime address may get hardware DGE, which
moves raw bytes and does not cast.

mlp_fwd(x, w1, w2, matmul_dtype). Weights resident in SBUF, loaded once and transposed on TensorE: W1^T [128 d, KT, F]
and W2^T [128 f, FT, D] (KT F + FT D operands per partition: 50 KiB in bf16 at D = 640, F = 2560; larger models
would need F-blocking, asserted). Per 128-token tile: x [rows, D] by DMA, x^T by KT TensorE transposes; then per F
chunk
    h^T [f, rows] = sum_k W1^T[k, f]^T x^T[k]    (stationary W1^T chunk, moving x^T: F on the output partitions)
    a^T = relu(h^T)^2                           (ScalarE relu reading PSUM; GpSimd r * r, in the operand dtype)
    y [rows, D] += a^T^T W2^T[f]                (stationary a^T [f, rows], moving W2^T [f, <=512]; PSUM accumulates
                                                 over the F chunks)
so the hidden activation is produced directly in the layout the second matmul contracts over: no transposes of it.
VectorE: the PSUM -> SBUF copies of the transposes and of y. HBM: x, W1, W2 read once, y written once.
PSUM: one bank for transposes, one for h^T, ceil(D / 512) for y.

mlp_bwd(x, w1, w2, dy, pos_block=0, matmul_dtype). Weight gradients need a sum over all tokens and dx a sum over all
of F, and at the model's size neither all the weights with their gradients nor all the tokens fit in SBUF, so the
loops are: token blocks (pos_block tiles of 128 tokens; 0 = as many as fit in ~96 KiB, at most 8; the device loop) >
F blocks of FB hidden units > token tiles of the block. Per token block, x, dy, x^T, dy^T (operand dtype) and an fp32
dx accumulator stay in SBUF. Per F block, W1_b [FB, D] (loaded by row chunks), W1_b^T (TensorE transposes) and
W2[:, block] stay in SBUF while every tile of the token block runs:
    h  [rows, FB] = x^T^T W1_b^T        r = relu(h) (ScalarE, from PSUM),  a = r * r (GpSimd)
    dA [rows, FB] = dy^T^T W2_b         dh = (2 r) * dA (VectorE `scalar_tensor_tensor`, reading dA in PSUM)
    dh^T by FB / 128 TensorE transposes (ScalarE copies them out of PSUM)
    dx [rows, D] = sum_s dh^T_s^T W1_b[s]      -> added into the SBUF accumulator (VectorE; ScalarE copy for the
                                                 first F block)
    dW1_b[s] [128, D] += dh[:, s]^T x          dW2_b[k] [128, FB] += dy[:, k]^T a
The weight gradients of the F block accumulate in PSUM over the tiles of the token block, then are added to the
partial sums in HBM (read back, added on VectorE, written): dW1 and dW2 are zeroed in HBM first, so every token block
runs the same code, the device loop's body. FB is the largest of 512, 256, 128 for which PSUM holds the transposes
(1 bank), h / dA (1, reused), dx (ceil(D/512)), dW1_b (FB/128 ceil(D/512)) and dW2_b (ceil(KT FB / 512)) in its 8
banks: D <= 1024.
HBM with NB token blocks: x and dy read once, W1 and W2 read NB times, dW1 and dW2 zeroed, then read and written NB
times, dx written once.

Logical NeuronCores: launched at LNC=2 (`frontier.kernels.toolchain.LNC`), each of the two physical cores takes half
of the 128-token tiles (`nl.program_id`), and writes only its own rows of y and dx. The weight gradients, sums over
all tokens, never see a read-add-write by both cores: each core accumulates its own part (a [2, F, D] and a [2, D, F]
tensor in shared HBM, in place of dW1 and dW2 above), the cores meet at `nisa.core_barrier`, and each then writes half
of the row tiles of dW1 and dW2 as part 0 + part 1. At LNC=1 the kernel is the single-core one above.
"""

import nki
import nki.isa as nisa
import nki.language as nl

from .tiles import (BANK_BYTES, BANK_FP32, PSUM_BANKS, accumulate_into, banks, chunks, core_blocks, core_rows,
                    least_rows, linear_backward, load_mode, operand, sum_parts, tail_blocks, transpose_in, zero_hbm)

CACHE_BYTES = 96 * 1024  # SBUF per partition for the token block's cached tiles in mlp_bwd (pos_block=0)
MAX_BLOCK_TILES = 8  # at most this many token tiles per mlp_bwd block: its body's emitted instructions stay small
WEIGHT_BYTES = 150 * 1024  # SBUF per partition for mlp_fwd's resident W1^T and W2^T


def _rows(t, reg, r0, rows):
    """Rows r0..r0+rows of the 2-D HBM tensor t, counted from the device loop's row `reg` (None: from row 0)."""
    width = t.shape[1]
    return t.ap([[width, rows], [1, width]], offset=r0 * width, scalar_offset=reg)


def _resident_weights(w1, w2, dch, fch, mdt, tp, w1t, w2t):
    """w1t[i, k, j] = W1[j, 128 k + i] and w2t[i, j, c] = W2[c, 128 j + i] in the operand dtype; the row tiles
    staged here end with the helper."""
    d = w1.shape[1]
    f = w1.shape[0]
    for f0, fw in fch:
        wrow = nl.ndarray((fw, d), dtype=mdt, buffer=nl.sbuf)
        nisa.dma_copy(dst=wrow, src=w1[f0:f0 + fw, :])
        for k in range(len(dch)):
            d0, dk = dch[k]
            transpose_in(w1t[0:dk, k, f0:f0 + fw], wrow[:, d0:d0 + dk], tp)
    for d0, dk in dch:
        wrow = nl.ndarray((dk, f), dtype=mdt, buffer=nl.sbuf)
        nisa.dma_copy(dst=wrow, src=w2[d0:d0 + dk, :])
        for j in range(len(fch)):
            f0, fw = fch[j]
            transpose_in(w2t[0:fw, j, d0:d0 + dk], wrow[:, f0:f0 + fw], tp)


@nki.jit
def mlp_fwd(x, w1, w2, matmul_dtype="bfloat16"):
    """y[N, D] = relu(x W1^T)^2 W2^T (module docstring: resident weights, h^T layout, no hidden transposes)."""
    n, d = x.shape
    f = w1.shape[0]
    assert w1.shape == (f, d) and w2.shape == (d, f), "w1 is [F, D] (c_fc.weight), w2 is [D, F] (c_proj.weight)"
    pmax = nl.tile_size.pmax
    mdt, size = operand(matmul_dtype)
    dch, fch, och = chunks(d, pmax), chunks(f, pmax), chunks(d, BANK_FP32)
    kt_n, ft_n = len(dch), len(fch)
    assert (kt_n * f + ft_n * d) * size <= WEIGHT_BYTES, "mlp_fwd: W1^T and W2^T do not fit in SBUF (F-blocking needed)"
    y = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    tp = nl.ndarray((pmax, BANK_BYTES // size), dtype=mdt, buffer=nl.psum)
    h_ps = nl.ndarray((pmax, BANK_FP32), dtype=nl.float32, buffer=nl.psum)
    y_ps = nl.ndarray((pmax, banks(d)), dtype=nl.float32, buffer=nl.psum)

    w1t = nl.ndarray((pmax, kt_n, f), dtype=mdt, buffer=nl.sbuf)
    w2t = nl.ndarray((pmax, ft_n, d), dtype=mdt, buffer=nl.sbuf)
    _resident_weights(w1, w2, dch, fch, mdt, tp, w1t, w2t)

    cores = nl.num_programs()
    r_begin, r_end = core_rows(n, pmax, nl.program_id(0), cores)  # LNC=2: half the tiles each
    full = core_blocks(n, pmax, pmax, cores)  # whole tiles in the loop: the same trip count on every core

    def tile_body(r):
        _fwd_tile(_rows(x, r, 0, pmax), _rows(y, r, 0, pmax), pmax, w1t, w2t, dch, fch, och, mdt, tp, h_ps, y_ps)

    nl.fori_loop(r_begin, r_begin + full * pmax, tile_body, step=pmax)
    for r0, rows in tail_blocks(r_begin + full * pmax, r_end, pmax):
        _fwd_tile(_rows(x, None, r0, rows), _rows(y, None, r0, rows), rows, w1t, w2t, dch, fch, och,
                  mdt, tp, h_ps, y_ps)
    return y


def _fwd_tile(xv, yv, rows, w1t, w2t, dch, fch, och, mdt, tp, h_ps, y_ps):
    """One tile of `rows` tokens: xv and yv are its HBM rows of x and y."""
    pmax = nl.tile_size.pmax
    d = xv.shape[1]
    kt_n = len(dch)
    xt = nl.ndarray((rows, d), dtype=mdt, buffer=nl.sbuf)
    nisa.dma_copy(dst=xt, src=xv, dge_mode=load_mode(mdt, xv.dtype))
    xT = nl.ndarray((pmax, kt_n, pmax), dtype=mdt, buffer=nl.sbuf)
    for k in range(kt_n):
        d0, dk = dch[k]
        transpose_in(xT[0:dk, k, 0:rows], xt[:, d0:d0 + dk], tp)
    for j in range(len(fch)):
        fw = fch[j][1]
        for k in range(kt_n):
            dk = dch[k][1]
            nisa.nc_matmul(dst=h_ps[0:fw, 0:rows], stationary=w1t[0:dk, k, fch[j][0]:fch[j][0] + fw],
                           moving=xT[0:dk, k, 0:rows], accumulate=k > 0)
        r = nl.ndarray((fw, rows), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=r, op=nl.relu, data=h_ps[0:fw, 0:rows])
        a = nl.ndarray((fw, rows), dtype=mdt, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=a, data1=r, data2=r, op=nl.multiply, engine=nisa.engine.gpsimd)
        for c0, cw in och:
            nisa.nc_matmul(dst=y_ps[0:rows, c0:c0 + cw], stationary=a, moving=w2t[0:fw, j, c0:c0 + cw],
                           accumulate=j > 0)
    yt = nl.ndarray((rows, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=yt, src=y_ps[0:rows, 0:d], engine=nisa.engine.vector)
    nisa.dma_copy(dst=yv, src=yt)


def _f_block(d):
    """The widest F block (512, 256 or 128 hidden units) whose PSUM tiles fit the 8 banks (module docstring)."""
    c = (d + BANK_FP32 - 1) // BANK_FP32
    kt_n = (d + 127) // 128
    fb = 0
    for cand in (128, 256, 512):
        if 2 + c + (cand // 128) * c + (kt_n * cand + BANK_FP32 - 1) // BANK_FP32 <= PSUM_BANKS:
            fb = cand
    assert fb > 0, f"mlp_bwd: D = {d} leaves no F block that fits PSUM (D <= 1024 supported)"
    return fb


@nki.jit
def mlp_bwd(x, w1, w2, dy, pos_block=0, matmul_dtype="bfloat16"):
    """(dx [N, D], dW1 [F, D], dW2 [D, F]) of y = relu(x W1^T)^2 W2^T, h recomputed (module docstring); at LNC=2 each
    core takes half the token tiles and sums its weight gradients apart, then each writes half of dW1 and dW2."""
    n, d = x.shape
    f = w1.shape[0]
    assert w1.shape == (f, d) and w2.shape == (d, f) and dy.shape == (n, d)
    pmax = nl.tile_size.pmax
    mdt, size = operand(matmul_dtype)
    kt_n = len(chunks(d, pmax))
    fb = min(_f_block(d), pmax * ((f + pmax - 1) // pmax))
    cores, core = nl.num_programs(), nl.program_id(0)
    r_begin, r_end = core_rows(n, pmax, core, cores)
    per_tile = (2 * d + 2 * kt_n * pmax) * size + d * 4  # x, dy, x^T, dy^T; the fp32 dx accumulator
    ntiles = (least_rows(n, pmax, cores) + pmax - 1) // pmax  # block sizes alike on every core
    pb = pos_block
    if pb == 0:
        pb = max(1, min(ntiles, MAX_BLOCK_TILES, CACHE_BYTES // per_tile))
    dx = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    dw1 = nl.ndarray((f, d), dtype=nl.float32, buffer=nl.shared_hbm)
    dw2 = nl.ndarray((d, f), dtype=nl.float32, buffer=nl.shared_hbm)
    pw1, pw2 = dw1, dw2  # where this core's partial sums accumulate
    if cores > 1:
        part1 = nl.ndarray((cores, f, d), dtype=nl.float32, buffer=nl.shared_hbm)
        part2 = nl.ndarray((cores, d, f), dtype=nl.float32, buffer=nl.shared_hbm)
        pw1, pw2 = part1[core], part2[core]
    zero_hbm(pw1)
    zero_hbm(pw2)

    ps = [nl.ndarray((pmax, BANK_BYTES // size), dtype=mdt, buffer=nl.psum),  # transposes
          nl.ndarray((pmax, BANK_FP32), dtype=nl.float32, buffer=nl.psum),  # h, then dA
          nl.ndarray((pmax, banks(d)), dtype=nl.float32, buffer=nl.psum)]  # dx
    dw1_ps = []
    for s in range(fb // pmax):
        dw1_ps.append(nl.ndarray((pmax, banks(d)), dtype=nl.float32, buffer=nl.psum))
    dw2_ps = nl.ndarray((pmax, banks(kt_n * fb)), dtype=nl.float32, buffer=nl.psum)  # [:, k fb + j]: chunk k
    ps.append(dw1_ps)
    ps.append(dw2_ps)

    block_rows = pb * pmax
    nblocks = core_blocks(n, pmax, block_rows, cores)  # the same trip count on every core
    tiles = []
    for t in range(pb):
        tiles.append((t * pmax, pmax))

    def block_body(b):
        _bwd_block(x, w1, w2, dy, dx, pw1, pw2, b, 0, tiles, fb, mdt, ps)

    nl.fori_loop(r_begin, r_begin + nblocks * block_rows, block_body, step=block_rows)
    for r0, rows in tail_blocks(r_begin + nblocks * block_rows, r_end, block_rows):
        _bwd_block(x, w1, w2, dy, dx, pw1, pw2, None, r0, chunks(rows, pmax), fb, mdt, ps)
    if cores > 1:
        nisa.core_barrier(part1, (0, 1))
        nisa.core_barrier(part2, (0, 1))
        sum_parts(dw1, part1, core, cores)
        sum_parts(dw2, part2, core, cores)
    return dx, dw1, dw2


def _bwd_block(x, w1, w2, dy, dx, dw1, dw2, reg, r0, block, fb, mdt, ps):
    """One token block: `block` lists its tiles (row offset from r0, rows); rows count from the device loop's row
    `reg` (None: from row 0). ps = [transposes, h/dA, dx, dW1 tiles, dW2] PSUM tiles."""
    tp, hd_ps, dx_ps, dw1_ps, dw2_ps = ps[0], ps[1], ps[2], ps[3], ps[4]
    n, d = x.shape
    f = w1.shape[0]
    pmax = nl.tile_size.pmax
    dch = chunks(d, pmax)
    kt_n = len(dch)
    subs = fb // pmax
    nb = len(block)
    xs = nl.ndarray((pmax, nb, d), dtype=mdt, buffer=nl.sbuf)
    dys = nl.ndarray((pmax, nb, d), dtype=mdt, buffer=nl.sbuf)
    xT = nl.ndarray((pmax, nb, kt_n, pmax), dtype=mdt, buffer=nl.sbuf)
    dyT = nl.ndarray((pmax, nb, kt_n, pmax), dtype=mdt, buffer=nl.sbuf)
    dxa = nl.ndarray((pmax, nb, d), dtype=nl.float32, buffer=nl.sbuf)
    for t in range(nb):
        t0, rows = block[t]
        nisa.dma_copy(dst=xs[0:rows, t, :], src=_rows(x, reg, r0 + t0, rows), dge_mode=load_mode(mdt, x.dtype))
        nisa.dma_copy(dst=dys[0:rows, t, :], src=_rows(dy, reg, r0 + t0, rows), dge_mode=load_mode(mdt, dy.dtype))
        for k in range(kt_n):
            d0, dk = dch[k]
            transpose_in(xT[0:dk, t, k, 0:rows], xs[0:rows, t, d0:d0 + dk], tp)
            transpose_in(dyT[0:dk, t, k, 0:rows], dys[0:rows, t, d0:d0 + dk], tp)

    for f0 in range(0, f, fb):
        fbw = min(fb, f - f0)
        sch = chunks(fbw, pmax)
        w1n = nl.ndarray((pmax, subs, d), dtype=mdt, buffer=nl.sbuf)  # W1 rows f0 + 128 s + i
        w1bt = nl.ndarray((pmax, kt_n, fb), dtype=mdt, buffer=nl.sbuf)  # W1_b^T
        w2b = nl.ndarray((pmax, kt_n, fb), dtype=mdt, buffer=nl.sbuf)  # W2[:, f0:f0 + fbw] by d chunks
        for s in range(len(sch)):
            s0, sw = sch[s]
            nisa.dma_copy(dst=w1n[0:sw, s, :], src=w1[f0 + s0:f0 + s0 + sw, :])
            for k in range(kt_n):
                d0, dk = dch[k]
                transpose_in(w1bt[0:dk, k, s0:s0 + sw], w1n[0:sw, s, d0:d0 + dk], tp)
        for k in range(kt_n):
            d0, dk = dch[k]
            nisa.dma_copy(dst=w2b[0:dk, k, 0:fbw], src=w2[d0:d0 + dk, f0:f0 + fbw])

        for t in range(nb):
            rows = block[t][1]
            acc = t > 0
            for k in range(kt_n):
                dk = dch[k][1]
                nisa.nc_matmul(dst=hd_ps[0:rows, 0:fbw], stationary=xT[0:dk, t, k, 0:rows],
                               moving=w1bt[0:dk, k, 0:fbw], accumulate=k > 0)
            r = nl.ndarray((rows, fbw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=r, op=nl.relu, data=hd_ps[0:rows, 0:fbw])
            a = nl.ndarray((rows, fbw), dtype=mdt, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=a, data1=r, data2=r, op=nl.multiply, engine=nisa.engine.gpsimd)
            for k in range(kt_n):
                dk = dch[k][1]
                nisa.nc_matmul(dst=hd_ps[0:rows, 0:fbw], stationary=dyT[0:dk, t, k, 0:rows],
                               moving=w2b[0:dk, k, 0:fbw], accumulate=k > 0)
            dh = nl.ndarray((rows, fbw), dtype=mdt, buffer=nl.sbuf)
            nisa.scalar_tensor_tensor(dst=dh, data=r, op0=nl.multiply, operand0=2.0, op1=nl.multiply,
                                      operand1=hd_ps[0:rows, 0:fbw])
            linear_backward(dh, sch, w1n, xs, t, dxa, f0 == 0, dx_ps, dw1_ps, acc, tp, nisa.engine.scalar)
            for k in range(kt_n):
                d0, dk = dch[k]
                nisa.nc_matmul(dst=dw2_ps[0:dk, k * fb:k * fb + fbw], stationary=dys[0:rows, t, d0:d0 + dk],
                               moving=a, accumulate=acc)

        # this F block's weight gradients: the partial sums in HBM + PSUM -> HBM
        for s in range(len(sch)):
            s0, sw = sch[s]
            accumulate_into(dw1[f0 + s0:f0 + s0 + sw, :], dw1_ps[s][0:sw, 0:d])
        for k in range(kt_n):
            d0, dk = dch[k]
            accumulate_into(dw2[d0:d0 + dk, f0:f0 + fbw], dw2_ps[0:dk, k * fb:k * fb + fbw])

    for t in range(nb):
        t0, rows = block[t]
        nisa.dma_copy(dst=_rows(dx, reg, r0 + t0, rows), src=dxa[0:rows, t, :])


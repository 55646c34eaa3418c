"""What the matmul kernels (head_ce, relu2_mlp, newton_schulz) share: PSUM's banks, chunking, operand dtypes,
TensorE transposes, the token tiles of each core at LNC=2 (compiled loops of the same trip count on every core), the HBM sums the backward kernels end with, and the
backward of a linear layer over one token tile (the head's and the MLP's).

Kernel code like the kernels themselves (NKI 0.7 traces Python, so a kernel may call helpers of another module, as
AWS's nki-library does from `nkilib.core.utils`): it imports `nki` at module level and is imported by the kernels
with a relative import, which `frontier.kernels.interpreter.load` answers with this source bound to the same `nki`.
"""

import nki.isa as nisa
import nki.language as nl

PSUM_BANKS = 8  # PSUM per partition: 8 banks of 2 KiB
BANK_FP32 = 512  # fp32 elements in one bank (a matmul output never crosses one)
BANK_BYTES = 2048


def chunks(total, size):
    """[(start, width)] covering range(total) in chunks of `size` (the last one ragged)."""
    out = []
    for s in range(0, total, size):
        out.append((s, min(size, total - s)))
    return out


def operand(matmul_dtype):
    """(the operand dtype, its bytes) of matmul_dtype "bfloat16" or "float32"."""
    assert matmul_dtype == "bfloat16" or matmul_dtype == "float32", f"matmul_dtype {matmul_dtype}"
    if matmul_dtype == "bfloat16":
        return nl.bfloat16, 2
    return nl.float32, 4


def load_mode(dst_dtype, src_dtype):
    """The DGE mode of a DMA from src_dtype into dst_dtype at a runtime address: software DGE where it converts
    (hardware DGE moves raw bytes, and a runtime address rules out dge_mode=none), the compiler's choice where it
    does not."""
    if dst_dtype == src_dtype:
        return nisa.dge_mode.unknown
    return nisa.dge_mode.swdge


def banks(cols):
    """Columns of fp32 PSUM covering `cols` in whole banks."""
    return BANK_FP32 * ((cols + BANK_FP32 - 1) // BANK_FP32)


def transpose_in(dst, src, tp):
    """dst[c, p] = src[p, c] (SBUF -> SBUF) through TensorE and a PSUM scratch `tp`; VectorE copies it out."""
    p, c = src.shape[0], src.shape[1]
    nisa.nc_transpose(dst=tp[0:c, 0:p], data=src, engine=nisa.engine.tensor)
    nisa.tensor_copy(dst=dst, src=tp[0:c, 0:p], engine=nisa.engine.vector)


def core_rows(n, pmax, core, cores):
    """The rows [begin, end) of the core's share of the token tiles (tile-aligned halves at LNC=2)."""
    ntiles = (n + pmax - 1) // pmax
    t0, t1 = core * ntiles // cores, (core + 1) * ntiles // cores
    return t0 * pmax, min(t1 * pmax, n)


def least_rows(n, pmax, cores):
    """The fewest rows any core's share holds (core_rows): what block sizes are chosen from, alike on every core."""
    least = n
    for c in range(cores):
        b, e = core_rows(n, pmax, c, cores)
        least = min(least, e - b)
    return least


def core_blocks(n, pmax, block_rows, cores):
    """How many whole blocks of block_rows rows every core's compiled token loop runs: the fewest any core's share
    holds, so that the loop's trip count is the same on every core (at LNC=2, dynamic control flow that differs
    between the cores is undefined: the LNC overview); each core's rows after them go to straight-line code
    (`tail_blocks`)."""
    return least_rows(n, pmax, cores) // block_rows


def tail_blocks(r0, r_end, block_rows):
    """[(start, rows)] covering rows r0..r_end in blocks of at most block_rows (the last one ragged)."""
    out = []
    for s, w in chunks(r_end - r0, block_rows):
        out.append((r0 + s, w))
    return out


def sum_parts(out, parts, core, cores):
    """out = sum over c of parts[c] (2-D fp32 HBM), after the barrier: this core writes its share of out's row
    chunks (every core reads every part, each row chunk of out is written by one core)."""
    pmax = nl.tile_size.pmax
    rows, cols = out.shape
    ch = chunks(rows, pmax)
    for i in range(core * len(ch) // cores, (core + 1) * len(ch) // cores):
        r0, rw = ch[i]
        acc = nl.ndarray((rw, cols), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=acc, src=parts[0][r0:r0 + rw, :])
        for c in range(1, cores):
            more = nl.ndarray((rw, cols), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=more, src=parts[c][r0:r0 + rw, :])
            nisa.tensor_tensor(dst=acc, data1=acc, data2=more, op=nl.add)
        nisa.dma_copy(dst=out[r0:r0 + rw, :], src=acc)


def zero_hbm(t):
    """t (a 2-D fp32 HBM tensor) = 0, by DMA from a zeroed SBUF tile (ends with the helper)."""
    pmax = nl.tile_size.pmax
    rows, cols = t.shape
    z = nl.ndarray((pmax, cols), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=z, value=0.0)
    for r0, rw in chunks(rows, pmax):
        nisa.dma_copy(dst=t[r0:r0 + rw, :], src=z[0:rw, :])


def accumulate_into(out, acc_ps):
    """out (HBM, fp32) += acc_ps (PSUM): read back, add on VectorE, write."""
    buf = nl.ndarray(acc_ps.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=buf, src=out)
    nisa.tensor_tensor(dst=buf, data1=buf, data2=acc_ps, op=nl.add)
    nisa.dma_copy(dst=out, src=buf)


def linear_backward(g, sch, wn, xs, t, dxa, first, dx_ps, dw_ps, accumulate, tp, copy_engine):
    """One token tile of a linear layer's backward, over one block of its output columns.

    g (rows, block columns) is the gradient at the layer's output; sch its column chunks of at most pmax; wn
    (pmax, chunks, d) the block's weight rows by chunk; xs[0:rows, t, :] the tile's input. Then
    dxa[0:rows, t, :] = g W (+= unless `first`), through dx_ps, and dw_ps[s] (+)= g[:, chunk s]^T x, accumulating
    in PSUM across tiles when `accumulate`. g's transposes go through tp; copy_engine copies them out of PSUM."""
    pmax = nl.tile_size.pmax
    rows, d = g.shape[0], wn.shape[2]
    och = chunks(d, BANK_FP32)
    gt = nl.ndarray((pmax, wn.shape[1], pmax), dtype=g.dtype, buffer=nl.sbuf)
    for s in range(len(sch)):
        s0, sw = sch[s]
        nisa.nc_transpose(dst=tp[0:sw, s * pmax:s * pmax + rows], data=g[:, s0:s0 + sw], engine=nisa.engine.tensor)
        nisa.tensor_copy(dst=gt[0:sw, s, 0:rows], src=tp[0:sw, s * pmax:s * pmax + rows], engine=copy_engine)
    for c0, cw in och:
        for s in range(len(sch)):
            sw = sch[s][1]
            nisa.nc_matmul(dst=dx_ps[0:rows, c0:c0 + cw], stationary=gt[0:sw, s, 0:rows],
                           moving=wn[0:sw, s, c0:c0 + cw], accumulate=s > 0)
    if first:
        nisa.tensor_copy(dst=dxa[0:rows, t, :], src=dx_ps[0:rows, 0:d], engine=nisa.engine.scalar)
    else:
        nisa.tensor_tensor(dst=dxa[0:rows, t, :], data1=dxa[0:rows, t, :], data2=dx_ps[0:rows, 0:d], op=nl.add)
    for s in range(len(sch)):
        s0, sw = sch[s]
        for c0, cw in och:
            nisa.nc_matmul(dst=dw_ps[s][0:sw, c0:c0 + cw], stationary=g[:, s0:s0 + sw],
                           moving=xs[0:rows, t, c0:c0 + cw], accumulate=accumulate)

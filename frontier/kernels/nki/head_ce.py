"""The output head, logit softcap and cross-entropy of `frontier.model.gpt.GPT`, fused (NKI 0.7, Trn2):

    l = hidden W^T (N x V),  z = cap * tanh(l / cap),  lse = log sum_v exp(z),  loss = lse - z[target]
    backward, with dloss the upstream gradient per position (1/N for a mean):
    g = dloss * (softmax(z) - onehot(target)) * (1 - tanh^2(l / cap)),   dhidden = g W,   dW = g^T hidden

hidden [N, D], W = lm_head.weight [V, D], targets [N] int32 (valid token ids: no ignore_index), lse and dloss [N]
fp32. `cap` is the model's fixed softcap, a compile-time constant; dloss, the only value that changes per step, is an
HBM input. The [N, V] logits never exist in HBM: each [128, <=512] tile is computed into one PSUM bank, consumed,
and recomputed by the backward from hidden, W and the saved lse.

Precision: `matmul_dtype` (compile-time: "bfloat16" by default, or "float32") is the dtype of the matmul operands:
hidden, hidden^T, W and W^T are DMA'd / transposed in it, and the backward's g is written in it; the logits, their
tanh, the online log-sum-exp, p and every reduction are fp32, as are the outputs. The DMAs that load hidden in the
operand dtype at the token loop's runtime addresses ask for software DGE (hardware DGE, which a runtime address may
get, moves raw bytes and does not cast); the int32 targets are DMA'd as they are into an int32 tile and converted to
fp32 by VectorE, exact for the vocabulary ids, which must be below 2^24.

Layout: positions on the partitions (128 per tile, the last N % 128), vocabulary along the free dim. Per-position
values (target, running max, running sum, lse, dloss) are [rows, 1] columns, the per-partition operands of
`activation` (scale, bias) and `tensor_scalar`. Logit tile l [rows, vw] = sum_k hidden^T_k^T W^T_k (stationary
hidden^T [128 d, rows], moving W^T [128 d, vw <= 512], accumulated over the ceil(D / 128) chunks of D); hidden^T and
W^T come from TensorE transposes of row tiles (VectorE copies them out of PSUM). The one-hot is never built apart:
iota (GpSimd) writes the chunk's vocabulary ids along the free dim, and `equal` against the target column selects.

Loops: token blocks (pos_block tiles of 128; 0 = as many as fit the SBUF share of ~96 KiB per partition, at most 8)
> vocabulary chunks > token tiles of the block; a block's hidden^T (and, backward, hidden and an fp32 dhidden
accumulator) stays in SBUF while the chunks of W stream past it, so W is read once per token block and hidden once.
The token-block loop is a compiled loop, `nl.fori_loop`, over row offsets (HBM rows and columns addressed by
`.ap(scalar_offset=)`), so the emitted instructions are one block's, whatever N is. At LNC=2 it runs the same number
of blocks on both cores (`tiles.core_blocks`: dynamic control flow that differs between the cores is undefined), and
a core's rows after them (a short block, or the extra tile of an odd tile count) are emitted after it. Every PSUM tile is allocated once, as whole 2 KiB banks, and reused, so
TensorE waits for the engine draining a bank (no double buffering: a tuning step for the hardware, which the
interpreter does not time).

head_ce_fwd(hidden, w, targets, cap, pos_block=0, vchunk=512, matmul_dtype) -> (loss [N], lse [N]). Online
log-sum-exp over vocabulary chunks of `vchunk` (<= 512, one PSUM bank; smaller chunks only to exercise the online
rescaling on a small vocabulary), kept as nm = -(running max) and s = running sum of exp(z - max):
  ScalarE  t = tanh(l / cap) (reading PSUM); exp(cap t + nm) summed along the row (`activation` with reduce);
           alpha = exp(nm_new - nm_old); the target's t summed out of the masked row (copy with reduce); at the end
           log(s).
  VectorE  max(t) along the row (`tensor_reduce`); nm = min(nm, -cap max(t)) (`tensor_scalar`, two ops);
           s = s alpha + sum (`scalar_tensor_tensor`); masked = (ids == target) * t (`scalar_tensor_tensor`);
           lse = log(s) - nm, loss = lse - cap t_target.
  HBM: hidden and targets read once, W once per token block, loss and lse written once.
  PSUM: one bank for the logit tile, one for the transposes.

head_ce_bwd(hidden, w, targets, lse, dloss, cap, pos_block=0, vchunk=512, matmul_dtype) -> (dhidden [N, D],
dW [V, D]). Per vocabulary chunk of VB columns (VB = 512, 256 or 128, and <= vchunk: the widest for which PSUM holds,
besides the logit tile and the transposes, dhidden [rows, D] (ceil(D / 512) banks) and dW for the chunk's VB / 128
row tiles (ceil(D / 512) banks each); D <= 1536):
  ScalarE  t = tanh(l / cap); p = exp(cap t - lse); w = dloss - dloss t^2 (`tensor_scalar` multiply-add);
           the first chunk's dhidden PSUM -> SBUF copy.
  GpSimd   t^2; g = (p - onehot) * w; iota.
  VectorE  p - onehot (`scalar_tensor_tensor`: (ids == target) then reverse-subtract p); copies of g^T out of PSUM;
           dhidden accumulation in SBUF over the chunks; the dW partial sums.
  TensorE  the logit tile; g^T by VB / 128 transposes; dhidden [rows, D] = sum_s g^T_s^T W_s (stationary g^T [128 v,
           rows], moving W row tile [128 v, <=512]); dW_s [128 v, D] += g[:, s]^T hidden (stationary g [rows, 128 v],
           moving hidden [rows, <=512]), accumulated in PSUM over the token tiles of the block.
  dW is zeroed in HBM first; after a block's last tile each chunk's dW is added to the partial sums read back from
  HBM, so every block runs the same code. HBM with NB token blocks: hidden, targets, lse, dloss read once, W read NB
  times, dW zeroed, then read and written NB times, dhidden written once.

Logical NeuronCores: launched at LNC=2 (`frontier.kernels.toolchain.LNC`), each physical core takes half of the token
tiles (`nl.program_id`) and writes only its own positions' loss, lse, dhidden (and dz). dW, a sum over all
positions, is accumulated per core into its own part of a [2, V, D] shared HBM tensor; after `nisa.core_barrier`
each core writes half of dW's row tiles as part 0 + part 1, so no HBM is read-add-written by both cores.

With a bias (the n-gram mix: `NGramMix` adds a per-(position, vocabulary) bias to the capped logits):
head_ce_bias_fwd(hidden, w, targets, bias, cap, ...) and head_ce_bias_bwd(hidden, w, targets, bias, lse, dloss, cap,
...) take it dense, bias [N, V] fp32 in HBM: each [rows, vw] tile is DMA'd next to its logit tile and z = cap t + bias
replaces cap t before the max / exp (VectorE `scalar_tensor_tensor`; no extra SBUF: the tile lands in a scratch
tile). The backward also writes dz = dloss (softmax(z) - onehot) [N, V], the bias's gradient, tile by tile (the
caller gathers the sparse corrections' gradients from it). Price: N x V fp32 read once per pass and written once by
the backward (512 MiB each at the trn2 worker's 16,384 x 8,192), the HBM traffic the bias-free kernel avoids.
Whether there is a bias is a compile-time flag of the bodies (`has_bias`).
"""

import nki
import nki.isa as nisa
import nki.language as nl

from .tiles import (BANK_BYTES, BANK_FP32, PSUM_BANKS, accumulate_into, banks, chunks, core_blocks, core_rows,
                    least_rows, linear_backward, load_mode, operand, sum_parts, tail_blocks, transpose_in, zero_hbm)

VCHUNK = 512  # forward vocabulary chunk: one PSUM bank of fp32
CACHE_BYTES = 96 * 1024  # SBUF per partition for a token block's cached tiles (pos_block=0)
FP32_EXACT = 2 ** 24  # fp32 holds every integer up to this one: the largest vocabulary the targets' compare allows
MAX_BLOCK_TILES = 8  # at most this many token tiles per block: its body's emitted instructions stay small


def _tile(t, reg, r0, rows, c0, cols):
    """t[r0:r0 + rows, c0:c0 + cols] of a 2-D HBM tensor, rows counted from the device loop's row `reg` (None: 0)."""
    width = t.shape[1]
    return t.ap([[width, rows], [1, cols]], offset=r0 * width + c0, scalar_offset=reg)


def _column(vec, reg, r0, rows):
    """vec[r0:r0 + rows] of a 1-D HBM tensor as [rows, 1] (one element per partition), counted from `reg`."""
    return vec.ap([[1, rows], [1, 1]], offset=r0, scalar_offset=reg)


def _load_w_chunk(w, v0, vw, dch, tp, subs_max, mdt, wn, wt):
    """W rows v0..v0+vw into the row tiles wn [128, subs, D] and transposed into wT [128 d, KT, vw]."""
    pmax = nl.tile_size.pmax
    sch = chunks(vw, pmax)
    for s in range(len(sch)):
        s0, sw = sch[s]
        nisa.dma_copy(dst=wn[0:sw, s, :], src=w[v0 + s0:v0 + s0 + sw, :])
        for k in range(len(dch)):
            d0, dk = dch[k]
            transpose_in(wt[0:dk, k, s0:s0 + sw], wn[0:sw, s, d0:d0 + dk], tp)
    return sch


def _load_w_t(w, v0, vw, dch, tp, subs_max, mdt, wt):
    """wT only (the forward): the row tiles are staged in a tile that ends with this helper."""
    pmax = nl.tile_size.pmax
    wn = nl.ndarray((pmax, subs_max, w.shape[1]), dtype=mdt, buffer=nl.sbuf)
    _load_w_chunk(w, v0, vw, dch, tp, subs_max, mdt, wn, wt)


def _logits(l_ps, ht, t, wt, dch, rows, vw):
    """l_ps[rows, vw] = hidden tile t times W chunk^T, accumulated over the chunks of D."""
    for k in range(len(dch)):
        dk = dch[k][1]
        nisa.nc_matmul(dst=l_ps[0:rows, 0:vw], stationary=ht[0:dk, t, k, 0:rows], moving=wt[0:dk, k, 0:vw],
                       accumulate=k > 0)


def _block_tiles(pos_block, n, per_tile):
    """Tiles per token block: pos_block, or (0) as many as fit CACHE_BYTES, at most MAX_BLOCK_TILES."""
    pmax = nl.tile_size.pmax
    if pos_block > 0:
        return pos_block
    ntiles = (n + pmax - 1) // pmax
    return max(1, min(ntiles, MAX_BLOCK_TILES, CACHE_BYTES // per_tile))


@nki.jit
def head_ce_fwd(hidden, w, targets, cap, pos_block=0, vchunk=VCHUNK, matmul_dtype="bfloat16"):
    """(loss [N], lse [N]) of cross-entropy on cap * tanh(hidden W^T / cap), online over vocabulary chunks."""
    return _forward(hidden, w, targets, None, False, cap, pos_block, vchunk, matmul_dtype)


@nki.jit
def head_ce_bias_fwd(hidden, w, targets, bias, cap, pos_block=0, vchunk=VCHUNK, matmul_dtype="bfloat16"):
    """(loss [N], lse [N]) as head_ce_fwd, of z = cap * tanh(hidden W^T / cap) + bias, bias [N, V] fp32 in HBM."""
    return _forward(hidden, w, targets, bias, True, cap, pos_block, vchunk, matmul_dtype)


def _forward(hidden, w, targets, bias, has_bias, cap, pos_block, vchunk, matmul_dtype):
    """The forward body. Without a bias the online log-sum-exp runs on t = tanh(l / cap) with scale cap; with one,
    each tile's bias is DMA'd into the scratch tile and z = cap t + bias replaces t in place (scale 1): no more SBUF.
    `bias` is only read when has_bias."""
    n, d = hidden.shape
    v = w.shape[0]
    assert w.shape == (v, d) and targets.shape == (n,)
    _check_vocab(v, targets)
    assert 1 <= vchunk and vchunk <= VCHUNK, f"vchunk {vchunk}: one PSUM bank holds at most {VCHUNK} fp32"
    pmax = nl.tile_size.pmax
    mdt, size = operand(matmul_dtype)
    kt_n = len(chunks(d, pmax))
    cores, core = nl.num_programs(), nl.program_id(0)
    r_begin, r_end = core_rows(n, pmax, core, cores)  # at LNC=2 each core takes half the token tiles
    pb = _block_tiles(pos_block, least_rows(n, pmax, cores), kt_n * pmax * size + 8 * 4)  # alike on every core
    loss = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    lse = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    tp = nl.ndarray((pmax, BANK_BYTES // size), dtype=mdt, buffer=nl.psum)
    l_ps = nl.ndarray((pmax, BANK_FP32), dtype=nl.float32, buffer=nl.psum)
    io = [hidden, w, targets, bias, loss, lse]

    block_rows = pb * pmax
    nblocks = core_blocks(n, pmax, block_rows, cores)  # the same trip count on every core
    tiles = chunks(block_rows, pmax)

    def block_body(b):
        _fwd_block(io, has_bias, b, 0, tiles, cap, vchunk, mdt, tp, l_ps)

    nl.fori_loop(r_begin, r_begin + nblocks * block_rows, block_body, step=block_rows)
    for r0, rows in tail_blocks(r_begin + nblocks * block_rows, r_end, block_rows):
        _fwd_block(io, has_bias, None, r0, chunks(rows, pmax), cap, vchunk, mdt, tp, l_ps)
    return loss, lse


def _fwd_block(io, has_bias, reg, r0, block, cap, vchunk, mdt, tp, l_ps):
    """One token block of the forward: `block` lists its tiles (row offset from r0, rows), rows counted from the
    device loop's row `reg` (None: from row 0)."""
    hidden, w, targets, bias, loss, lse = io[0], io[1], io[2], io[3], io[4], io[5]
    zscale = 1.0 if has_bias else cap
    n, d = hidden.shape
    v = w.shape[0]
    pmax = nl.tile_size.pmax
    dch, vch = chunks(d, pmax), chunks(v, vchunk)
    kt_n = len(dch)
    subs_max = (vchunk + pmax - 1) // pmax
    nb = len(block)
    ht = nl.ndarray((pmax, nb, kt_n, pmax), dtype=mdt, buffer=nl.sbuf)  # hidden^T per tile
    tgt = nl.ndarray((pmax, nb), dtype=nl.float32, buffer=nl.sbuf)
    tgt_i = nl.ndarray((pmax, nb), dtype=targets.dtype, buffer=nl.sbuf)
    for t in range(nb):
        t0, rows = block[t]
        _load_transposed(ht, t, _tile(hidden, reg, r0 + t0, rows, 0, d), rows, dch, mdt, tp)
        _load_targets(tgt, tgt_i, t, _column(targets, reg, r0 + t0, rows), rows)
    nms = [nl.ndarray((pmax, nb), dtype=nl.float32, buffer=nl.sbuf),
           nl.ndarray((pmax, nb), dtype=nl.float32, buffer=nl.sbuf)]  # -(running max), ping-pong by chunk
    ssum = nl.ndarray((pmax, nb), dtype=nl.float32, buffer=nl.sbuf)
    tsum = nl.ndarray((pmax, nb), dtype=nl.float32, buffer=nl.sbuf)  # tanh(l / cap) (or z) at the target
    wt = nl.ndarray((pmax, kt_n, subs_max * pmax), dtype=mdt, buffer=nl.sbuf)
    ids = nl.ndarray((pmax, vchunk), dtype=nl.float32, buffer=nl.sbuf)

    for ci in range(len(vch)):
        v0, vw = vch[ci]
        _load_w_t(w, v0, vw, dch, tp, subs_max, mdt, wt)
        nisa.iota(dst=ids[:, 0:vw], pattern=[[1, vw]], offset=v0, channel_multiplier=0)
        for t in range(nb):
            t0, rows = block[t]
            _logits(l_ps, ht, t, wt, dch, rows, vw)
            th = nl.ndarray((rows, vw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=th, op=nl.tanh, data=l_ps[0:rows, 0:vw], scale=1.0 / cap)
            junk = nl.ndarray((rows, vw), dtype=nl.float32, buffer=nl.sbuf)
            if has_bias:  # th <- z = cap th + bias (the bias tile lands in the scratch tile first)
                nisa.dma_copy(dst=junk, src=_tile(bias, reg, r0 + t0, rows, v0, vw))
                nisa.scalar_tensor_tensor(dst=th, data=th, op0=nl.multiply, operand0=cap, op1=nl.add, operand1=junk)
            mx = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=mx, op=nl.maximum, data=th, axis=1)
            nm = nms[ci % 2][0:rows, t:t + 1]
            nm_old = nms[(ci + 1) % 2][0:rows, t:t + 1]
            s_col = ssum[0:rows, t:t + 1]
            t_col = tsum[0:rows, t:t + 1]
            if ci == 0:
                nisa.tensor_scalar(dst=nm, data=mx, op0=nl.multiply, operand0=-zscale)
                nisa.activation(dst=junk, op=nl.exp, data=th, scale=zscale, bias=nm, reduce_op=nl.add,
                                reduce_res=s_col, reduce_cmd=nisa.reduce_cmd.reset_reduce)
            else:
                nisa.tensor_scalar(dst=nm, data=mx, op0=nl.multiply, operand0=-zscale, op1=nl.minimum,
                                   operand1=nm_old)
                part = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.activation(dst=junk, op=nl.exp, data=th, scale=zscale, bias=nm, reduce_op=nl.add,
                                reduce_res=part, reduce_cmd=nisa.reduce_cmd.reset_reduce)
                alpha = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.activation(dst=alpha, op=nl.exp, data=nm_old, scale=-1.0, bias=nm)
                nisa.scalar_tensor_tensor(dst=s_col, data=s_col, op0=nl.multiply, operand0=alpha, op1=nl.add,
                                          operand1=part)
            masked = nl.ndarray((rows, vw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.scalar_tensor_tensor(dst=masked, data=ids[0:rows, 0:vw], op0=nl.equal,
                                      operand0=tgt[0:rows, t:t + 1], op1=nl.multiply, operand1=th)
            if ci == 0:
                nisa.activation(dst=junk, op=nl.copy, data=masked, reduce_op=nl.add, reduce_res=t_col,
                                reduce_cmd=nisa.reduce_cmd.reset_reduce)
            else:
                tpart = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.activation(dst=junk, op=nl.copy, data=masked, reduce_op=nl.add, reduce_res=tpart,
                                reduce_cmd=nisa.reduce_cmd.reset_reduce)
                nisa.tensor_tensor(dst=t_col, data1=t_col, data2=tpart, op=nl.add)

    nm_fin = nms[(len(vch) - 1) % 2]
    for t in range(nb):
        t0, rows = block[t]
        lse_t = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=lse_t, op=nl.log, data=ssum[0:rows, t:t + 1])
        nisa.tensor_tensor(dst=lse_t, data1=lse_t, data2=nm_fin[0:rows, t:t + 1], op=nl.subtract)
        loss_t = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=loss_t, data=tsum[0:rows, t:t + 1], op0=nl.multiply, operand0=-zscale,
                                  op1=nl.add, operand1=lse_t)
        nisa.dma_copy(dst=_column(loss, reg, r0 + t0, rows), src=loss_t)
        nisa.dma_copy(dst=_column(lse, reg, r0 + t0, rows), src=lse_t)


def _load_transposed(ht, t, src, rows, dch, mdt, tp):
    """ht[:, t] = the transpose of the HBM rows `src` in the operand dtype (the row tile ends with the helper)."""
    d = src.shape[1]
    hrow = nl.ndarray((rows, d), dtype=mdt, buffer=nl.sbuf)
    nisa.dma_copy(dst=hrow, src=src, dge_mode=load_mode(mdt, src.dtype))
    for k in range(len(dch)):
        d0, dk = dch[k]
        transpose_in(ht[0:dk, t, k, 0:rows], hrow[:, d0:d0 + dk], tp)


def _load_targets(tgt, tgt_i, t, src, rows):
    """tgt[0:rows, t] = the int32 targets `src` (HBM, [rows, 1]) as fp32: the DMA copies them as they are into the
    int32 tile tgt_i (a DMA at a runtime address does not cast: it may get hardware DGE) and VectorE converts them,
    exactly, token ids being below 2^24 (`_check_vocab`)."""
    nisa.dma_copy(dst=tgt_i[0:rows, t:t + 1], src=src)
    nisa.tensor_copy(dst=tgt[0:rows, t:t + 1], src=tgt_i[0:rows, t:t + 1], engine=nisa.engine.vector)


def _check_vocab(v, targets):
    """The targets are int32 token ids below v, compared in fp32 with iota's ids: exact only below 2^24."""
    assert targets.dtype == nl.int32, f"targets must be int32 token ids, got {targets.dtype}"
    assert v <= FP32_EXACT, f"a vocabulary of {v} ids: fp32 holds integers exactly only up to 2^24 = {FP32_EXACT}"


def _vocab_block(d, vchunk):
    """VB / 128 row tiles per backward vocabulary chunk: PSUM holds l, the transposes, dhidden and dW (docstring)."""
    c = (d + BANK_FP32 - 1) // BANK_FP32
    subs = min(VCHUNK // 128, (PSUM_BANKS - 2 - c) // c, (vchunk + 127) // 128)
    assert subs >= 1, f"head_ce_bwd: D = {d} leaves no PSUM for dW (D <= 1536 supported)"
    return subs


@nki.jit
def head_ce_bwd(hidden, w, targets, lse, dloss, cap, pos_block=0, vchunk=VCHUNK, matmul_dtype="bfloat16"):
    """(dhidden [N, D], dW [V, D]) of sum_n dloss[n] * loss[n], logit tiles recomputed (module docstring)."""
    return _backward(hidden, w, targets, None, False, lse, dloss, cap, pos_block, vchunk, matmul_dtype)


@nki.jit
def head_ce_bias_bwd(hidden, w, targets, bias, lse, dloss, cap, pos_block=0, vchunk=VCHUNK,
                     matmul_dtype="bfloat16"):
    """(dhidden [N, D], dW [V, D], dz [N, V]) for head_ce_bias_fwd: dz = dloss (softmax(z) - onehot) is also the
    gradient of the bias, written tile by tile as it is computed."""
    return _backward(hidden, w, targets, bias, True, lse, dloss, cap, pos_block, vchunk, matmul_dtype)


def _backward(hidden, w, targets, bias, has_bias, lse, dloss, cap, pos_block, vchunk, matmul_dtype):
    """The backward body; with a bias, z = cap t + bias replaces cap t in p = exp(z - lse) (t^2 taken first), and
    dz = (p - onehot) dloss goes to HBM (through the t^2 tile, no longer needed) before g is formed."""
    n, d = hidden.shape
    v = w.shape[0]
    assert w.shape == (v, d) and targets.shape == (n,) and lse.shape == (n,) and dloss.shape == (n,)
    _check_vocab(v, targets)
    assert 1 <= vchunk and vchunk <= VCHUNK, f"vchunk {vchunk}: one PSUM bank holds at most {VCHUNK} fp32"
    pmax = nl.tile_size.pmax
    mdt, size = operand(matmul_dtype)
    subs = _vocab_block(d, vchunk)
    vb = min(subs * pmax, vchunk)
    kt_n = len(chunks(d, pmax))
    cores, core = nl.num_programs(), nl.program_id(0)
    r_begin, r_end = core_rows(n, pmax, core, cores)
    pb = _block_tiles(pos_block, least_rows(n, pmax, cores), (d + kt_n * pmax) * size + d * 4 + 8 * 4)
    dh_out = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    dw_out = nl.ndarray((v, d), dtype=nl.float32, buffer=nl.shared_hbm)
    dz_out = nl.ndarray((n, v), dtype=nl.float32, buffer=nl.shared_hbm) if has_bias else None
    pw = dw_out  # where this core's partial sums of dW accumulate
    if cores > 1:
        parts = nl.ndarray((cores, v, d), dtype=nl.float32, buffer=nl.shared_hbm)
        pw = parts[core]
    zero_hbm(pw)
    ps = [nl.ndarray((pmax, BANK_BYTES // size), dtype=mdt, buffer=nl.psum),  # transposes
          nl.ndarray((pmax, BANK_FP32), dtype=nl.float32, buffer=nl.psum),  # the logit tile
          nl.ndarray((pmax, banks(d)), dtype=nl.float32, buffer=nl.psum)]  # dhidden
    for s in range(subs):
        ps.append(nl.ndarray((pmax, banks(d)), dtype=nl.float32, buffer=nl.psum))  # dW row tile s
    io = [hidden, w, targets, bias, lse, dloss, dh_out, pw, dz_out]

    block_rows = pb * pmax
    nblocks = core_blocks(n, pmax, block_rows, cores)  # the same trip count on every core
    tiles = chunks(block_rows, pmax)

    def block_body(b):
        _bwd_block(io, has_bias, b, 0, tiles, cap, vb, mdt, ps)

    nl.fori_loop(r_begin, r_begin + nblocks * block_rows, block_body, step=block_rows)
    for r0, rows in tail_blocks(r_begin + nblocks * block_rows, r_end, block_rows):
        _bwd_block(io, has_bias, None, r0, chunks(rows, pmax), cap, vb, mdt, ps)
    if cores > 1:
        nisa.core_barrier(parts, (0, 1))
        sum_parts(dw_out, parts, core, cores)
    if has_bias:
        return dh_out, dw_out, dz_out
    return dh_out, dw_out


def _bwd_block(io, has_bias, reg, r0, block, cap, vb, mdt, ps):
    """One token block of the backward (tiles and rows as in _fwd_block); ps = [transposes, logits, dhidden,
    dW row tiles...] PSUM tiles."""
    hidden, w, targets, bias, lse, dloss = io[0], io[1], io[2], io[3], io[4], io[5]
    dh_out, dw_out, dz_out = io[6], io[7], io[8]
    tp, l_ps, dh_ps = ps[0], ps[1], ps[2]
    n, d = hidden.shape
    v = w.shape[0]
    pmax = nl.tile_size.pmax
    dch, vch = chunks(d, pmax), chunks(v, vb)
    kt_n = len(dch)
    subs = (vb + pmax - 1) // pmax
    nb = len(block)
    hs = nl.ndarray((pmax, nb, d), dtype=mdt, buffer=nl.sbuf)
    ht = nl.ndarray((pmax, nb, kt_n, pmax), dtype=mdt, buffer=nl.sbuf)
    dha = nl.ndarray((pmax, nb, d), dtype=nl.float32, buffer=nl.sbuf)
    tgt = nl.ndarray((pmax, nb), dtype=nl.float32, buffer=nl.sbuf)
    tgt_i = nl.ndarray((pmax, nb), dtype=targets.dtype, buffer=nl.sbuf)
    nlse = nl.ndarray((pmax, nb), dtype=nl.float32, buffer=nl.sbuf)  # -lse
    dl = nl.ndarray((pmax, nb), dtype=nl.float32, buffer=nl.sbuf)  # dloss
    ndl = nl.ndarray((pmax, nb), dtype=nl.float32, buffer=nl.sbuf)  # -dloss
    for t in range(nb):
        t0, rows = block[t]
        nisa.dma_copy(dst=hs[0:rows, t, :], src=_tile(hidden, reg, r0 + t0, rows, 0, d),
                      dge_mode=load_mode(mdt, hidden.dtype))
        for k in range(kt_n):
            d0, dk = dch[k]
            transpose_in(ht[0:dk, t, k, 0:rows], hs[0:rows, t, d0:d0 + dk], tp)
        _load_targets(tgt, tgt_i, t, _column(targets, reg, r0 + t0, rows), rows)
        nisa.dma_copy(dst=nlse[0:rows, t:t + 1], src=_column(lse, reg, r0 + t0, rows))
        nisa.dma_copy(dst=dl[0:rows, t:t + 1], src=_column(dloss, reg, r0 + t0, rows))
        nisa.tensor_scalar(dst=nlse[0:rows, t:t + 1], data=nlse[0:rows, t:t + 1], op0=nl.multiply, operand0=-1.0)
        nisa.tensor_scalar(dst=ndl[0:rows, t:t + 1], data=dl[0:rows, t:t + 1], op0=nl.multiply, operand0=-1.0)
    wn = nl.ndarray((pmax, subs, d), dtype=mdt, buffer=nl.sbuf)
    wt = nl.ndarray((pmax, kt_n, subs * pmax), dtype=mdt, buffer=nl.sbuf)
    ids = nl.ndarray((pmax, vb), dtype=nl.float32, buffer=nl.sbuf)

    for ci in range(len(vch)):
        v0, vw = vch[ci]
        sch = _load_w_chunk(w, v0, vw, dch, tp, subs, mdt, wn, wt)
        nisa.iota(dst=ids[:, 0:vw], pattern=[[1, vw]], offset=v0, channel_multiplier=0)
        for t in range(nb):
            t0, rows = block[t]
            _logits(l_ps, ht, t, wt, dch, rows, vw)
            th = nl.ndarray((rows, vw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=th, op=nl.tanh, data=l_ps[0:rows, 0:vw], scale=1.0 / cap)
            t2 = nl.ndarray((rows, vw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=t2, data1=th, data2=th, op=nl.multiply, engine=nisa.engine.gpsimd)
            p = nl.ndarray((rows, vw), dtype=nl.float32, buffer=nl.sbuf)
            if has_bias:  # th <- z = cap t + bias (the bias tile lands in p first), p = exp(z - lse)
                nisa.dma_copy(dst=p, src=_tile(bias, reg, r0 + t0, rows, v0, vw))
                nisa.scalar_tensor_tensor(dst=th, data=th, op0=nl.multiply, operand0=cap, op1=nl.add, operand1=p)
                nisa.activation(dst=p, op=nl.exp, data=th, bias=nlse[0:rows, t:t + 1])
            else:
                nisa.activation(dst=p, op=nl.exp, data=th, scale=cap, bias=nlse[0:rows, t:t + 1])
            wgt = nl.ndarray((rows, vw), dtype=nl.float32, buffer=nl.sbuf)  # dloss * (1 - t^2)
            nisa.tensor_scalar(dst=wgt, data=t2, op0=nl.multiply, operand0=ndl[0:rows, t:t + 1], op1=nl.add,
                               operand1=dl[0:rows, t:t + 1], engine=nisa.engine.scalar)
            e = nl.ndarray((rows, vw), dtype=nl.float32, buffer=nl.sbuf)  # p - onehot
            nisa.scalar_tensor_tensor(dst=e, data=ids[0:rows, 0:vw], op0=nl.equal,
                                      operand0=tgt[0:rows, t:t + 1], op1=nl.subtract, operand1=p, reverse1=True)
            if has_bias:  # dz = (p - onehot) dloss, the bias gradient, through the t^2 tile
                nisa.tensor_scalar(dst=t2, data=e, op0=nl.multiply, operand0=dl[0:rows, t:t + 1])
                nisa.dma_copy(dst=_tile(dz_out, reg, r0 + t0, rows, v0, vw), src=t2)
            g = nl.ndarray((rows, vw), dtype=mdt, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=g, data1=e, data2=wgt, op=nl.multiply, engine=nisa.engine.gpsimd)
            linear_backward(g, sch, wn, hs, t, dha, ci == 0, dh_ps, ps[3:], t > 0, tp, nisa.engine.vector)
        for s in range(len(sch)):
            s0, sw = sch[s]
            accumulate_into(dw_out[v0 + s0:v0 + s0 + sw, :], ps[3 + s][0:sw, 0:d])

    for t in range(nb):
        t0, rows = block[t]
        nisa.dma_copy(dst=_tile(dh_out, reg, r0 + t0, rows, 0, d), src=dha[0:rows, t, :])


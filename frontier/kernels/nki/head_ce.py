"""The output head, logit softcap and cross-entropy of `frontier.model.gpt.GPT`, fused (NKI 0.3-0.6, Trn2), fp32:

    l = hidden W^T (N x V),  z = cap * tanh(l / cap),  lse = log sum_v exp(z),  loss = lse - z[target]
    backward, with dloss the upstream gradient per position (1/N for a mean):
    g = dloss * (softmax(z) - onehot(target)) * (1 - tanh^2(l / cap)),   dhidden = g W,   dW = g^T hidden

hidden [N, D], W = lm_head.weight [V, D], targets [N] int32 (valid token ids: no ignore_index), lse and dloss [N]
fp32. `cap` is the model's fixed softcap, a compile-time constant; dloss, the only value that changes per step, is an
HBM input. The [N, V] logits never exist in HBM: each [128, <=512] tile is computed into one PSUM bank, consumed,
and recomputed by the backward from hidden, W and the saved lse.

Layout: positions on the partitions (128 per tile, the last N % 128), vocabulary along the free dim. Per-position
values (target, running max, running sum, lse, dloss) are [rows, 1] columns, the per-partition operands of
`activation` (scale, bias) and `tensor_scalar`. Logit tile l [rows, vw] = sum_k hidden^T_k^T W^T_k (stationary
hidden^T [128 d, rows], moving W^T [128 d, vw <= 512], accumulated over the ceil(D / 128) chunks of D); hidden^T and
W^T come from TensorE transposes of row tiles (VectorE copies them out of PSUM). The one-hot is never built apart:
iota (GpSimd) writes the chunk's vocabulary ids along the free dim, and `equal` against the target column selects.

Loops: token blocks (pos_block tiles of 128; 0 = as many as fit the SBUF share of ~96 KiB per partition) > vocabulary
chunks > token tiles of the block; a block's hidden^T (and, backward, hidden and an fp32 dhidden accumulator) stays in
SBUF while the chunks of W stream past it, so W is read once per token block and hidden once.

head_ce_fwd(hidden, w, targets, cap, pos_block=0) -> (loss [N], lse [N]). Online log-sum-exp over chunks of 512,
kept as nm = -(running max) and s = running sum of exp(z - max):
  ScalarE  t = tanh(l / cap) (reading PSUM); exp(cap t + nm) summed along the row (`activation` with reduce);
           alpha = exp(nm_new - nm_old); the target's t summed out of the masked row (copy with reduce); at the end
           log(s).
  VectorE  max(t) along the row (`tensor_reduce`); nm = min(nm, -cap max(t)) (`tensor_scalar`, two ops);
           s = s alpha + sum (`scalar_tensor_tensor`); masked = (ids == target) * t (`scalar_tensor_tensor`);
           lse = log(s) - nm, loss = lse - cap t_target.
  HBM: hidden and targets read once, W once per token block, loss and lse written once.
  PSUM: one bank for the logit tile, one for the transposes. Every PSUM tile of both kernels is allocated once and
  reused, so TensorE waits for the engine draining a bank (no double buffering; the forward has 6 banks to spare for
  it, a tuning step for the hardware, which the interpreter does not time).

head_ce_bwd(hidden, w, targets, lse, dloss, cap, pos_block=0) -> (dhidden [N, D], dW [V, D]). Per vocabulary chunk of
VB columns (VB = 512, 256 or 128: the widest for which PSUM holds, besides the logit tile and the transposes,
dhidden [rows, D] (ceil(D / 512) banks) and dW for the chunk's VB / 128 row tiles (ceil(D / 512) banks each);
D <= 1536):
  ScalarE  t = tanh(l / cap); p = exp(cap t - lse); w = dloss - dloss t^2 (`tensor_scalar` multiply-add);
           the first chunk's dhidden PSUM -> SBUF copy.
  GpSimd   t^2; g = (p - onehot) * w; iota.
  VectorE  p - onehot (`scalar_tensor_tensor`: (ids == target) then reverse-subtract p); copies of g^T out of PSUM;
           dhidden accumulation in SBUF over the chunks.
  TensorE  the logit tile; g^T by VB / 128 transposes; dhidden [rows, D] = sum_s g^T_s^T W_s (stationary g^T [128 v,
           rows], moving W row tile [128 v, <=512]); dW_s [128 v, D] += g[:, s]^T hidden (stationary g [rows, 128 v],
           moving hidden [rows, <=512]), accumulated in PSUM over the token tiles of the block.
  dW for a chunk goes to HBM after the block's last tile; for a token block after the first it is added to the partial
  sums read back from HBM. HBM with NB token blocks: hidden, targets, lse, dloss read once, W read NB times, dW written
  NB times and read back NB - 1 times, dhidden written once (NB = 1 at the smoke shapes).

With a bias (the n-gram mix: `NGramMix` adds a per-(position, vocabulary) bias to the capped logits):
head_ce_bias_fwd(hidden, w, targets, bias, cap) and head_ce_bias_bwd(hidden, w, targets, bias, lse, dloss, cap) take
it dense, bias [N, V] fp32 in HBM: each [rows, vw] tile is DMA'd next to its logit tile and z = cap t + bias
replaces cap t before the max / exp (VectorE `scalar_tensor_tensor`; no extra SBUF: the tile lands in a scratch
tile). The backward also writes dz = dloss (softmax(z) - onehot) [N, V], the bias's gradient, tile by tile (the
caller gathers the sparse corrections' gradients from it). Price: N x V fp32 read once per pass and written once by
the backward (2 GiB each at the trn2 shapes), the HBM traffic the bias-free kernel avoids.
"""

import nki
import nki.isa as nisa
import nki.language as nl

PSUM_BANKS = 8
BANK_FP32 = 512
VCHUNK = 512  # forward vocabulary chunk: one PSUM bank of fp32
CACHE_BYTES = 96 * 1024  # SBUF per partition for a token block's cached tiles (pos_block=0)


def _chunks(total, size):
    """[(start, width)] covering range(total) in chunks of `size` (the last one ragged)."""
    return [(s, min(size, total - s)) for s in range(0, total, size)]


def _transpose_in(dst, src, tp):
    """dst[c, p] = src[p, c] (SBUF -> SBUF) through TensorE and a PSUM scratch `tp`; VectorE copies it out."""
    p, c = src.shape[0], src.shape[1]
    nisa.nc_transpose(dst=tp[0:c, 0:p], data=src, engine=nisa.engine.tensor)
    nisa.tensor_copy(dst=dst, src=tp[0:c, 0:p], engine=nisa.engine.vector)


def _load_w_chunk(w, v0, vw, dch, tp, subs_max):
    """W rows v0..v0+vw as row tiles wn [128, subs, D] and transposed wT [128 d, KT, vw] (SBUF)."""
    pmax = nl.tile_size.pmax
    d = w.shape[1]
    wn = nl.ndarray((pmax, subs_max, d), dtype=nl.float32, buffer=nl.sbuf)
    wt = nl.ndarray((pmax, len(dch), subs_max * pmax), dtype=nl.float32, buffer=nl.sbuf)
    sch = _chunks(vw, pmax)
    for s in range(len(sch)):
        s0, sw = sch[s]
        nisa.dma_copy(dst=wn[0:sw, s, :], src=w[v0 + s0:v0 + s0 + sw, :])
        for k in range(len(dch)):
            d0, dk = dch[k]
            _transpose_in(wt[0:dk, k, s0:s0 + sw], wn[0:sw, s, d0:d0 + dk], tp)
    return wn, wt, sch


def _column(vec, r0, rows):
    """The HBM slice vec[r0:r0 + rows] of a 1-D tensor as [rows, 1] (one element per partition)."""
    return vec[r0:r0 + rows].reshape((rows, 1))


def _logits(l_ps, ht, t, wt, dch, rows, vw):
    """l_ps[rows, vw] = hidden tile t times W chunk^T, accumulated over the chunks of D."""
    for k in range(len(dch)):
        dk = dch[k][1]
        nisa.nc_matmul(dst=l_ps[0:rows, 0:vw], stationary=ht[0:dk, t, k, 0:rows], moving=wt[0:dk, k, 0:vw],
                       accumulate=k > 0)


def _block_size(pos_block, ntiles, per_tile):
    return pos_block if pos_block > 0 else max(1, min(ntiles, CACHE_BYTES // per_tile))


@nki.jit
def head_ce_fwd(hidden, w, targets, cap, pos_block=0):
    """(loss [N], lse [N]) of cross-entropy on cap * tanh(hidden W^T / cap), online over vocabulary chunks."""
    return _forward(hidden, w, targets, None, cap, pos_block)


@nki.jit
def head_ce_bias_fwd(hidden, w, targets, bias, cap, pos_block=0):
    """(loss [N], lse [N]) as head_ce_fwd, of z = cap * tanh(hidden W^T / cap) + bias, bias [N, V] fp32 in HBM."""
    return _forward(hidden, w, targets, bias, cap, pos_block)


def _forward(hidden, w, targets, bias, cap, pos_block):
    """The forward body. Without a bias the online log-sum-exp runs on t = tanh(l / cap) with scale cap; with one,
    each tile's bias is DMA'd into the scratch tile and z = cap t + bias replaces t in place (scale 1): no more SBUF."""
    zscale = cap if bias is None else 1.0
    n, d = hidden.shape
    v = w.shape[0]
    assert w.shape == (v, d) and targets.shape == (n,)
    pmax = nl.tile_size.pmax
    dch, vch, tiles = _chunks(d, pmax), _chunks(v, VCHUNK), _chunks(n, pmax)
    kt_n = len(dch)
    pb = _block_size(pos_block, len(tiles), (kt_n * pmax + 8) * 4)
    loss = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    lse = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    tp = nl.ndarray((pmax, BANK_FP32), dtype=nl.float32, buffer=nl.psum)
    l_ps = nl.ndarray((pmax, VCHUNK), dtype=nl.float32, buffer=nl.psum)

    for b0 in range(0, len(tiles), pb):
        block = tiles[b0:b0 + pb]
        nb = len(block)
        ht = nl.ndarray((pmax, nb, kt_n, pmax), dtype=nl.float32, buffer=nl.sbuf)  # hidden^T per tile
        tgt = nl.ndarray((pmax, nb), dtype=nl.float32, buffer=nl.sbuf)
        for t in range(nb):
            r0, rows = block[t]
            hrow = nl.ndarray((rows, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=hrow, src=hidden[r0:r0 + rows, :])
            for k in range(kt_n):
                d0, dk = dch[k]
                _transpose_in(ht[0:dk, t, k, 0:rows], hrow[:, d0:d0 + dk], tp)
            nisa.dma_copy(dst=tgt[0:rows, t:t + 1], src=_column(targets, r0, rows))  # int32 -> fp32 by the DMA
        nms = [nl.ndarray((pmax, nb), dtype=nl.float32, buffer=nl.sbuf),
               nl.ndarray((pmax, nb), dtype=nl.float32, buffer=nl.sbuf)]  # -(running max), ping-pong by chunk
        ssum = nl.ndarray((pmax, nb), dtype=nl.float32, buffer=nl.sbuf)
        tsum = nl.ndarray((pmax, nb), dtype=nl.float32, buffer=nl.sbuf)  # tanh(l / cap) at the target

        for ci in range(len(vch)):
            v0, vw = vch[ci]
            wn, wt, _ = _load_w_chunk(w, v0, vw, dch, tp, VCHUNK // pmax)
            del wn  # the forward needs only W^T
            ids = nl.ndarray((pmax, VCHUNK), dtype=nl.float32, buffer=nl.sbuf)
            nisa.iota(dst=ids[:, 0:vw], pattern=[[1, vw]], offset=v0, channel_multiplier=0)
            for t in range(nb):
                r0, rows = block[t]
                _logits(l_ps, ht, t, wt, dch, rows, vw)
                th = nl.ndarray((rows, vw), dtype=nl.float32, buffer=nl.sbuf)
                nisa.activation(dst=th, op=nl.tanh, data=l_ps[0:rows, 0:vw], scale=1.0 / cap)
                junk = nl.ndarray((rows, vw), dtype=nl.float32, buffer=nl.sbuf)
                if bias is not None:  # th <- z = cap th + bias (the bias tile lands in the scratch tile first)
                    nisa.dma_copy(dst=junk, src=bias[r0:r0 + rows, v0:v0 + vw])
                    nisa.scalar_tensor_tensor(dst=th, data=th, op0=nl.multiply, operand0=cap, op1=nl.add,
                                              operand1=junk)
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
            r0, rows = block[t]
            lse_t = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=lse_t, op=nl.log, data=ssum[0:rows, t:t + 1])
            nisa.tensor_tensor(dst=lse_t, data1=lse_t, data2=nm_fin[0:rows, t:t + 1], op=nl.subtract)
            loss_t = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.scalar_tensor_tensor(dst=loss_t, data=tsum[0:rows, t:t + 1], op0=nl.multiply, operand0=-zscale,
                                      op1=nl.add, operand1=lse_t)
            nisa.dma_copy(dst=_column(loss, r0, rows), src=loss_t)
            nisa.dma_copy(dst=_column(lse, r0, rows), src=lse_t)
    return loss, lse


def _vocab_block(d):
    """VB / 128 row tiles per backward vocabulary chunk: PSUM holds l, the transposes, dhidden and dW (docstring)."""
    c = (d + BANK_FP32 - 1) // BANK_FP32
    subs = min(VCHUNK // 128, (PSUM_BANKS - 2 - c) // c)
    assert subs >= 1, f"head_ce_bwd: D = {d} leaves no PSUM for dW (D <= 1536 supported)"
    return subs


@nki.jit
def head_ce_bwd(hidden, w, targets, lse, dloss, cap, pos_block=0):
    """(dhidden [N, D], dW [V, D]) of sum_n dloss[n] * loss[n], logit tiles recomputed (module docstring)."""
    return _backward(hidden, w, targets, None, lse, dloss, cap, pos_block)


@nki.jit
def head_ce_bias_bwd(hidden, w, targets, bias, lse, dloss, cap, pos_block=0):
    """(dhidden [N, D], dW [V, D], dz [N, V]) for head_ce_bias_fwd: dz = dloss (softmax(z) - onehot) is also the
    gradient of the bias, written tile by tile as it is computed."""
    return _backward(hidden, w, targets, bias, lse, dloss, cap, pos_block)


def _backward(hidden, w, targets, bias, lse, dloss, cap, pos_block):
    """The backward body; with a bias, z = cap t + bias replaces cap t in p = exp(z - lse) (t^2 taken first), and
    dz = (p - onehot) dloss goes to HBM before g = (p - onehot) dloss (1 - t^2) overwrites its tile."""
    n, d = hidden.shape
    v = w.shape[0]
    assert w.shape == (v, d) and targets.shape == (n,) and lse.shape == (n,) and dloss.shape == (n,)
    pmax = nl.tile_size.pmax
    subs = _vocab_block(d)
    vb = subs * pmax
    dch, och, vch, tiles = _chunks(d, pmax), _chunks(d, BANK_FP32), _chunks(v, vb), _chunks(n, pmax)
    kt_n = len(dch)
    pb = _block_size(pos_block, len(tiles), (2 * d + kt_n * pmax + 8) * 4)
    dh_out = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    dw_out = nl.ndarray((v, d), dtype=nl.float32, buffer=nl.shared_hbm)
    dz_out = nl.ndarray((n, v), dtype=nl.float32, buffer=nl.shared_hbm) if bias is not None else None
    tp = nl.ndarray((pmax, BANK_FP32), dtype=nl.float32, buffer=nl.psum)
    l_ps = nl.ndarray((pmax, vb), dtype=nl.float32, buffer=nl.psum)
    dh_ps = nl.ndarray((pmax, d), dtype=nl.float32, buffer=nl.psum)
    dw_ps = []
    for s in range(subs):
        dw_ps.append(nl.ndarray((pmax, d), dtype=nl.float32, buffer=nl.psum))

    for b0 in range(0, len(tiles), pb):
        block = tiles[b0:b0 + pb]
        first_block = b0 == 0
        nb = len(block)
        hs = nl.ndarray((pmax, nb, d), dtype=nl.float32, buffer=nl.sbuf)
        ht = nl.ndarray((pmax, nb, kt_n, pmax), dtype=nl.float32, buffer=nl.sbuf)
        dha = nl.ndarray((pmax, nb, d), dtype=nl.float32, buffer=nl.sbuf)
        tgt = nl.ndarray((pmax, nb), dtype=nl.float32, buffer=nl.sbuf)
        nlse = nl.ndarray((pmax, nb), dtype=nl.float32, buffer=nl.sbuf)  # -lse
        dl = nl.ndarray((pmax, nb), dtype=nl.float32, buffer=nl.sbuf)  # dloss
        ndl = nl.ndarray((pmax, nb), dtype=nl.float32, buffer=nl.sbuf)  # -dloss
        for t in range(nb):
            r0, rows = block[t]
            nisa.dma_copy(dst=hs[0:rows, t, :], src=hidden[r0:r0 + rows, :])
            for k in range(kt_n):
                d0, dk = dch[k]
                _transpose_in(ht[0:dk, t, k, 0:rows], hs[0:rows, t, d0:d0 + dk], tp)
            nisa.dma_copy(dst=tgt[0:rows, t:t + 1], src=_column(targets, r0, rows))  # int32 -> fp32 by the DMA
            nisa.dma_copy(dst=nlse[0:rows, t:t + 1], src=_column(lse, r0, rows))
            nisa.dma_copy(dst=dl[0:rows, t:t + 1], src=_column(dloss, r0, rows))
            nisa.tensor_scalar(dst=nlse[0:rows, t:t + 1], data=nlse[0:rows, t:t + 1], op0=nl.multiply,
                               operand0=-1.0)
            nisa.tensor_scalar(dst=ndl[0:rows, t:t + 1], data=dl[0:rows, t:t + 1], op0=nl.multiply, operand0=-1.0)

        for ci in range(len(vch)):
            v0, vw = vch[ci]
            wn, wt, sch = _load_w_chunk(w, v0, vw, dch, tp, subs)
            ids = nl.ndarray((pmax, vb), dtype=nl.float32, buffer=nl.sbuf)
            nisa.iota(dst=ids[:, 0:vw], pattern=[[1, vw]], offset=v0, channel_multiplier=0)
            for t in range(nb):
                r0, rows = block[t]
                _logits(l_ps, ht, t, wt, dch, rows, vw)
                th = nl.ndarray((rows, vw), dtype=nl.float32, buffer=nl.sbuf)
                nisa.activation(dst=th, op=nl.tanh, data=l_ps[0:rows, 0:vw], scale=1.0 / cap)
                t2 = nl.ndarray((rows, vw), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_tensor(dst=t2, data1=th, data2=th, op=nl.multiply, engine=nisa.engine.gpsimd)
                p = nl.ndarray((rows, vw), dtype=nl.float32, buffer=nl.sbuf)
                if bias is None:
                    nisa.activation(dst=p, op=nl.exp, data=th, scale=cap, bias=nlse[0:rows, t:t + 1])
                else:  # th <- z = cap t + bias (the bias tile lands in p first), p = exp(z - lse)
                    nisa.dma_copy(dst=p, src=bias[r0:r0 + rows, v0:v0 + vw])
                    nisa.scalar_tensor_tensor(dst=th, data=th, op0=nl.multiply, operand0=cap, op1=nl.add, operand1=p)
                    nisa.activation(dst=p, op=nl.exp, data=th, bias=nlse[0:rows, t:t + 1])
                wgt = nl.ndarray((rows, vw), dtype=nl.float32, buffer=nl.sbuf)  # dloss * (1 - t^2)
                nisa.tensor_scalar(dst=wgt, data=t2, op0=nl.multiply, operand0=ndl[0:rows, t:t + 1], op1=nl.add,
                                   operand1=dl[0:rows, t:t + 1], engine=nisa.engine.scalar)
                e = nl.ndarray((rows, vw), dtype=nl.float32, buffer=nl.sbuf)  # p - onehot
                nisa.scalar_tensor_tensor(dst=e, data=ids[0:rows, 0:vw], op0=nl.equal,
                                          operand0=tgt[0:rows, t:t + 1], op1=nl.subtract, operand1=p, reverse1=True)
                g = nl.ndarray((rows, vw), dtype=nl.float32, buffer=nl.sbuf)
                if bias is not None:  # dz = (p - onehot) dloss, the bias gradient
                    nisa.tensor_scalar(dst=g, data=e, op0=nl.multiply, operand0=dl[0:rows, t:t + 1])
                    nisa.dma_copy(dst=dz_out[r0:r0 + rows, v0:v0 + vw], src=g)
                nisa.tensor_tensor(dst=g, data1=e, data2=wgt, op=nl.multiply, engine=nisa.engine.gpsimd)
                gt = nl.ndarray((pmax, subs, pmax), dtype=nl.float32, buffer=nl.sbuf)
                for s in range(len(sch)):
                    s0, sw = sch[s]
                    nisa.nc_transpose(dst=tp[0:sw, s * pmax:s * pmax + rows], data=g[:, s0:s0 + sw],
                                      engine=nisa.engine.tensor)
                    nisa.tensor_copy(dst=gt[0:sw, s, 0:rows], src=tp[0:sw, s * pmax:s * pmax + rows],
                                     engine=nisa.engine.vector)
                for c0, cw in och:
                    for s in range(len(sch)):
                        sw = sch[s][1]
                        nisa.nc_matmul(dst=dh_ps[0:rows, c0:c0 + cw], stationary=gt[0:sw, s, 0:rows],
                                       moving=wn[0:sw, s, c0:c0 + cw], accumulate=s > 0)
                if ci == 0:
                    nisa.tensor_copy(dst=dha[0:rows, t, :], src=dh_ps[0:rows, :], engine=nisa.engine.scalar)
                else:
                    nisa.tensor_tensor(dst=dha[0:rows, t, :], data1=dha[0:rows, t, :], data2=dh_ps[0:rows, :],
                                       op=nl.add)
                for s in range(len(sch)):
                    s0, sw = sch[s]
                    for c0, cw in och:
                        nisa.nc_matmul(dst=dw_ps[s][0:sw, c0:c0 + cw], stationary=g[:, s0:s0 + sw],
                                       moving=hs[0:rows, t, c0:c0 + cw], accumulate=t > 0)
            for s in range(len(sch)):
                s0, sw = sch[s]
                buf = nl.ndarray((sw, d), dtype=nl.float32, buffer=nl.sbuf)
                out = dw_out[v0 + s0:v0 + s0 + sw, :]
                if first_block:
                    nisa.tensor_copy(dst=buf, src=dw_ps[s][0:sw, :], engine=nisa.engine.vector)
                else:
                    nisa.dma_copy(dst=buf, src=out)
                    nisa.tensor_tensor(dst=buf, data1=buf, data2=dw_ps[s][0:sw, :], op=nl.add)
                nisa.dma_copy(dst=out, src=buf)

        for t in range(nb):
            r0, rows = block[t]
            nisa.dma_copy(dst=dh_out[r0:r0 + rows, :], src=dha[0:rows, t, :])
    if bias is not None:
        return dh_out, dw_out, dz_out
    return dh_out, dw_out

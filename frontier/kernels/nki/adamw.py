"""One AdamW step on flat fp32 state (NKI 0.7, Trn2), as torch.optim.AdamW computes it:

    p' = p * decay - step_size * m' / (sqrt(v' * inv_bc2) + eps)
    m' = beta1 * m + (1 - beta1) * g,     v' = beta2 * v + (1 - beta2) * g^2
    decay = 1 - lr * weight_decay,  step_size = lr / (1 - beta1^t),  inv_bc2 = 1 / (1 - beta2^t)

param, grad, m, v are flat [n] fp32 tensors in HBM; the kernel returns new (param, m, v). The per-step values
step_size, inv_bc2 and decay come in as [128, 1] fp32 HBM tensors (`frontier.kernels.nki.adamw_step_scalars`), never
as Python numbers, so the compiled kernel is reused every step; beta1, beta2 and eps are fixed for a run and are
compile-time arguments (eps >= 2^-42: ScalarE's reciprocal is valid on ±[2^-42, 2^42]).

Tiling: the first 128 * (n // 128) elements are viewed as [128, n // 128] (partition p holds a contiguous run) and
walked in column tiles of up to 2,048 fp32 (8 KiB per partition per DMA: above the ~4 KiB that saturates the DMA
engines); the n % 128 remaining elements form one [n % 128, 1] tile. Per tile: 4 DMA loads, 3 DMA stores, and
  ScalarE (4): (1 - beta1) * g; ((1 - beta2)^0.5 * g)^2; sqrt; 1 / (. + eps)   (`activation`, scale/bias folded in)
  VectorE (5): m' and v' (`scalar_tensor_tensor`: state * beta + scaled g); max(v', 2^-116) * inv_bc2 (`tensor_scalar`,
               the floor keeps ScalarE's sqrt inside its valid input range and changes nothing above 1e-17 in the
               denominator); step_size * m' * recip and p * decay - update (`scalar_tensor_tensor`).
SBUF: five [128, 2048] fp32 tiles (40 KiB per partition) per tile step, plus three [128, 1] scalars.
"""

import nki
import nki.isa as nisa
import nki.language as nl

FMAX = 2048  # fp32 elements per partition per tile
SQRT_FLOOR = 2.0**-116  # the smallest valid input of ScalarE's sqrt


def _step_tile(srcs, dsts, rows, cols, scalars, beta1, beta2, eps):
    """One [rows, cols] tile of the update: srcs = [p, g, m, v] views in HBM, dsts = [p', m', v'] views in HBM."""
    step_size = scalars[0][0:rows, :]
    inv_bc2 = scalars[1][0:rows, :]
    decay = scalars[2][0:rows, :]
    pt = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf)
    gt = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf)
    mt = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf)
    vt = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf)
    loaded = [pt, gt, mt, vt]
    for i in range(4):
        nisa.dma_copy(dst=loaded[i], src=srcs[i])
    ws = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=ws, op=nl.copy, data=gt, scale=1.0 - beta1)
    nisa.scalar_tensor_tensor(dst=mt, data=mt, op0=nl.multiply, operand0=beta1, op1=nl.add, operand1=ws)
    nisa.activation(dst=gt, op=nl.square, data=gt, scale=(1.0 - beta2) ** 0.5)
    nisa.scalar_tensor_tensor(dst=vt, data=vt, op0=nl.multiply, operand0=beta2, op1=nl.add, operand1=gt)
    nisa.tensor_scalar(dst=ws, data=vt, op0=nl.maximum, operand0=SQRT_FLOOR, op1=nl.multiply, operand1=inv_bc2)
    nisa.activation(dst=ws, op=nl.sqrt, data=ws)
    nisa.activation(dst=ws, op=nl.reciprocal, data=ws, bias=eps)
    nisa.scalar_tensor_tensor(dst=ws, data=mt, op0=nl.multiply, operand0=step_size, op1=nl.multiply, operand1=ws)
    nisa.scalar_tensor_tensor(dst=pt, data=pt, op0=nl.multiply, operand0=decay, op1=nl.subtract, operand1=ws)
    stored = [pt, mt, vt]
    for i in range(3):
        nisa.dma_copy(dst=dsts[i], src=stored[i])


@nki.jit
def adamw(param, grad, m, v, step_size, inv_bc2, decay, beta1, beta2, eps):
    """(param', m', v') after one AdamW step; per-step values as [128, 1] fp32 HBM tensors (module docstring)."""
    assert len(param.shape) == 1, "flat state: param, grad, m, v are [n]"
    n = param.shape[0]
    pmax = nl.tile_size.pmax
    p_out = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    m_out = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    v_out = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    per_step = [step_size, inv_bc2, decay]
    scalars = []
    for i in range(3):
        tile = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=per_step[i])
        scalars.append(tile)
    flat = [param, grad, m, v, p_out, m_out, v_out]
    cols = n // pmax
    body = cols * pmax
    if cols > 0:
        views = []
        for t in flat:
            views.append(t[0:body].reshape((pmax, cols)))
        starts = range(0, cols, FMAX)
        cores, core = nl.num_programs(), nl.program_id(0)  # LNC=2: each core updates its share of the chunks
        for i in range(core * len(starts) // cores, (core + 1) * len(starts) // cores):
            c0 = starts[i]
            w = min(FMAX, cols - c0)
            tiles = []
            for t in views:
                tiles.append(t[:, c0:c0 + w])
            _step_tile(tiles[0:4], tiles[4:7], pmax, w, scalars, beta1, beta2, eps)
    if n > body and nl.program_id(0) == nl.num_programs() - 1:
        tail = []
        for t in flat:
            tail.append(t[body:n].reshape((n - body, 1)))
        _step_tile(tail[0:4], tail[4:7], n - body, 1, scalars, beta1, beta2, eps)
    return p_out, m_out, v_out

"""The PyTorch reference of every fused op: what each op computes, forward and backward, in plain torch.

These are the `reference` implementation behind the `frontier::` custom ops (`frontier.kernels.ops`), and the
yardstick the NKI kernels are tested against. Shapes are the ops' (see ops.py); nothing here keeps state.

- rmsnorm:  y = x * rsqrt(mean(x^2) + eps) over the last dim (no learned weight; eps None = the dtype's epsilon, as
  `F.rms_norm`); backward dx = rstd * (dy - xhat * mean(dy * xhat)).
- rotary:   per head, x = [x1, x2] -> [x1 cos + x2 sin, x2 cos - x1 sin]; backward: the same rotation with sin
  negated (the transpose of a rotation is the rotation back).
- relu2_mlp: y = relu(x W1^T)^2 W2^T; the forward also returns r = relu(x W1^T) for its backward (the NKI kernel
  recomputes it instead and returns an empty tensor there).
- head_softcap_cross_entropy: l = hidden W^T, z = cap tanh(l / cap) (+ the n-gram bias), loss = logsumexp(z) -
  z[target] per position. What the backward needs of the logits is decided by a stated memory budget,
  KEEP_ELEMENTS: when the (positions, vocabulary) logits fit it (one chunk), the forward returns t = tanh(l / cap)
  and the backward reads it (no second head matmul, no second tanh); when they do not (the gpu and trn2 shapes),
  rows go through in chunks of CHUNK_ELEMENTS // V, forward and backward, the backward recomputing each chunk's
  logits from hidden, W and the saved log-sum-exp.
- newton_schulz: five quintic Newton-Schulz iterations (Muon's orthogonalisation), batched over leading dims.
- adamw_step: one AdamW step in place, computed exactly as `torch.optim.AdamW` computes it on the CPU (its
  single-tensor path), so `frontier.optim.adamw.AdamW` trains bit for bit like torch's.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .bias import LogitBias

NS_COEFFS = (3.4445, -4.7750, 2.0315)
NS_EPS = 1e-7
CHUNK_ELEMENTS = 2**24  # logits held at once by the chunked head + cross-entropy (64 MiB of fp32)
KEEP_ELEMENTS = 2**24  # the head keeps tanh(l / cap) for its backward when the logits have at most this many (fp32)


# ---------------------------------------------------------------------------------------------------- RMSNorm
def _eps(x: torch.Tensor, eps: float | None) -> float:
    return torch.finfo(x.dtype).eps if eps is None else eps


def rmsnorm_fwd(x: torch.Tensor, eps: float | None) -> torch.Tensor:
    return F.rms_norm(x, (x.size(-1),), eps=_eps(x, eps))


def rmsnorm_bwd(x: torch.Tensor, dy: torch.Tensor, eps: float | None) -> torch.Tensor:
    """dx = rstd dy - x rstd^3 mean(dy x): two row reductions (x.x and dy.x as dot products) and two passes over the
    rows (dy rstd, then one fused multiply-add), instead of materialising xhat and its products."""
    xf, dyf = x.float(), dy.float()
    d = x.size(-1)
    rstd = torch.rsqrt(torch.linalg.vecdot(xf, xf).unsqueeze(-1) / d + _eps(x, eps))
    coef = torch.linalg.vecdot(dyf, xf).unsqueeze(-1) * rstd.pow(3) / -d
    return torch.addcmul(dyf * rstd, xf, coef).to(x.dtype)

# ---------------------------------------------------------------------------------------------------- RoPE
def rotary_fwd(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, T, H, hd); cos, sin (T, hd / 2)."""
    T = x.size(1)
    cos, sin = cos[None, :T, None, :].to(x.dtype), sin[None, :T, None, :].to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos + x2 * sin, x2 * cos - x1 * sin], dim=-1)


def rotary_bwd(dy: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return rotary_fwd(dy, cos, -sin)


# ---------------------------------------------------------------------------------------------------- ReLU^2 MLP
def relu2_mlp_fwd(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r = F.relu(F.linear(x, w1))
    return F.linear(r.square(), w2), r


def relu2_mlp_bwd(x, w1, w2, dy, r) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`r` = relu(x W1^T), kept by the forward: d(r^2)/dh = 2 r (0 where h <= 0, as relu's)."""
    a = r.square()
    dh = (dy @ w2).mul_(r).mul_(2)  # (..., F): da 2 r, in place
    x2, dy2, a2, dh2 = (t.reshape(-1, t.size(-1)) for t in (x, dy, a, dh))
    return dh @ w1, dh2.mT @ x2, dy2.mT @ a2

# ---------------------------------------------------------------------------------------------------- head + CE
def _rows_per_chunk(n: int, v: int) -> int:
    return max(1, min(n, CHUNK_ELEMENTS // max(v, 1)))


def _chunk_logits(h, w, cap, r0, r1, bias):
    """(t = tanh(l / cap), z) for rows r0:r1: z = cap t + the bias rows (fp32)."""
    l = (h[r0:r1] @ w.mT).float()
    t = torch.tanh(l / cap)
    return t, LogitBias(*bias).add_to(cap * t, r0, r1)


def keeps_logits(n: int, v: int) -> bool:
    """Whether the head keeps its logits' tanh for the backward: (n, v) within KEEP_ELEMENTS (and one chunk)."""
    return n * v <= min(KEEP_ELEMENTS, CHUNK_ELEMENTS)


def head_ce_fwd(h, w, targets, cap, bias) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-position (loss, lse, kept), fp32, for h (N, D), w (V, D), targets (N,); bias = (row (V,) | None, tokens
    (N, E) | None, values (N, E) | None, dense (N, V) | None). `kept`: t = tanh(l / cap) (N, V) for the backward
    when `keeps_logits(N, V)`, else an empty tensor (the backward recomputes)."""
    n, v = h.size(0), w.size(0)
    if keeps_logits(n, v):
        t, z = _chunk_logits(h, w, cap, 0, n, bias)
        lse = torch.logsumexp(z, -1)
        return lse - z.gather(-1, targets[:, None].long())[:, 0], lse, t
    loss, lse = torch.empty(n, device=h.device), torch.empty(n, device=h.device)
    step = _rows_per_chunk(n, v)
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        _, z = _chunk_logits(h, w, cap, r0, r1, bias)
        lse[r0:r1] = torch.logsumexp(z, -1)
        loss[r0:r1] = lse[r0:r1] - z.gather(-1, targets[r0:r1, None].long())[:, 0]
    return loss, lse, h.new_empty((0,), dtype=torch.float32)


def _biased(t, cap, r0, r1, bias):
    """z for rows r0:r1 from their kept t (as `_chunk_logits` computes it)."""
    return LogitBias(*bias).add_to(cap * t, r0, r1)


def head_ce_bwd(h, w, targets, lse, dloss, cap, bias, kept=None):
    """(dh, dw, d bias row, d bias values): g = dloss (softmax - onehot) is the gradient of z, g (1 - t^2) that of
    l = h W^T. With `kept` (t of every row, from the forward) the logits are not recomputed; else each chunk's are."""
    n, v = h.size(0), w.size(0)
    row, toks, vals, dense = bias
    keep = kept is not None and kept.numel() > 0
    if keep:  # one chunk, from t
        t = kept
        g = torch.exp(_biased(t, cap, 0, n, bias) - lse[:, None])
        g[torch.arange(n, device=h.device), targets.long()] -= 1.0
        g *= dloss[:, None]
        drow = g.sum(0) if row is not None else None
        dvals = g.gather(-1, toks).float() if vals is not None else None
        gl = g.mul_(1 - t.square()).to(h.dtype)
        return gl @ w, (gl.mT @ h).to(w.dtype), drow, dvals
    dh, dw = torch.empty_like(h), torch.zeros(w.shape, dtype=torch.float32, device=w.device)
    drow = torch.zeros(v, device=h.device) if row is not None else None
    dvals = torch.empty(vals.shape, dtype=torch.float32, device=h.device) if vals is not None else None
    step = _rows_per_chunk(n, v)
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        t, z = _chunk_logits(h, w, cap, r0, r1, bias)
        g = torch.exp(z - lse[r0:r1, None])
        g[torch.arange(r1 - r0, device=h.device), targets[r0:r1].long()] -= 1.0
        g *= dloss[r0:r1, None]
        if drow is not None:
            drow += g.sum(0)
        if dvals is not None:
            dvals[r0:r1] = g.gather(-1, toks[r0:r1])
        gl = (g * (1 - t.square())).to(h.dtype)
        dh[r0:r1] = gl @ w
        dw += (gl.mT @ h[r0:r1]).float()
    return dh, dw.to(w.dtype), drow, dvals

# ---------------------------------------------------------------------------------------------------- Muon
def newton_schulz(g: torch.Tensor, steps: int) -> torch.Tensor:
    """An approximation of U V^T for g = U S V^T (singular values pushed towards ~1), in g's dtype; g (..., m, n)."""
    a, b, c = NS_COEFFS
    x = g
    tall = x.size(-2) > x.size(-1)
    if tall:
        x = x.mT
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + NS_EPS)
    for _ in range(steps):  # the fused forms: poly = b gram + c gram^2, x = a x + poly x
        gram = x @ x.mT
        if x.dim() == 3:
            x = torch.baddbmm(x, torch.baddbmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
        elif x.dim() == 2:
            x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
        else:
            x = a * x + (b * gram + c * (gram @ gram)) @ x
    if tall:
        x = x.mT
    return x


# ---------------------------------------------------------------------------------------------------- AdamW
def adamw_step(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step) -> None:
    """In place, as torch.optim.AdamW's single-tensor step (decoupled weight decay, no amsgrad); `step` counts
    from 1."""
    param.mul_(1 - lr * weight_decay)
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    step_size = lr / (1 - beta1**step)
    bias_correction2_sqrt = (1 - beta2**step) ** 0.5
    denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-step_size)

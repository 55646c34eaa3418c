"""The model's NKI kernels (frontier/kernels/nki: rotary, relu2_mlp, head_ce, newton_schulz) run through the
interpreter against PyTorch: the forward against the model's own modules (`Rotary`, `MLP`, `newton_schulz`, and
`F.cross_entropy` of the capped logits as `GPT.forward` computes it), the backward against torch autograd of them.

Shapes: a small one, the smoke profile's (width 64, 2 heads of 32, MLP width 256, vocabulary 512, 8 x 64 tokens; for
Newton-Schulz the smoke model's Muon matrices 64 x 64, 256 x 64 and 64 x 256), one that is a multiple of no tile size
(tokens, widths, vocabulary, long side), and for the blocked kernels one with several token blocks (pos_block=1).

The matmul kernels run in both operand precisions (`matmul_dtype`): "float32", and "bfloat16", the default, what
the kernels run at on Trn2 (fp32 accumulation in PSUM either way). Every output is compared with the same computation
in float64 (`ref64`).

Tolerances (eps32 = 2^-23 ~ 1.2e-7):
- RoPE: exact equality. Every output element is (a * c) + (b * s) or (a * c) - (b * s) with two fp32 products and one
  sum, rounded exactly as torch's elementwise ops round them (the kernel's x * (-sin) is exactly -(x * sin)); the
  autograd backward is the same two products and one sum. Nothing is reordered, so nothing may differ.
- MLP, head + cross-entropy, Newton-Schulz: these are long fp32 sums (over D, F, the vocabulary, the tokens, five
  chained iterations) that the kernel orders differently from torch (128-row chunks accumulated in PSUM, tiles of
  tokens...), so they can only agree to rounding, whose size depends on the shape and the data (cancellation in dW,
  the N-S polynomial amplifying errors by up to a = 3.44 per iteration). The yardstick is torch's own fp32 error:
  with ref64 the same PyTorch computation in float64, the kernel must satisfy
      max |kernel - ref64| <= 4 * max |torch_fp32 - ref64| + eps32 * max |ref64|
  i.e. be as accurate as torch's fp32 implementation within a factor of 4 (the same number of roundings in another
  order gives an error of the same size; measured ratios are <= 1.6), plus one ulp of the largest value so that a
  case where torch happens to be exact does not demand exactness. A bf16 round trip (~4e-3 relative) or a wrong
  term (a missing (1 - tanh^2), a mis-scaled dloss, a stale running max) fails this by orders of magnitude.
- The same kernels with bf16 operands: the yardstick is the reference implementation as it runs on a Neuron device,
  PyTorch under bf16 autocast (`torch.autocast(dtype=bfloat16)`: matmuls in bf16, their outputs rounded to bf16;
  Newton-Schulz in bf16, as Muon's ns_dtype=bf16). The kernel rounds only the operands (fp32 PSUM accumulation, fp32
  elementwise work), so it must be at least as accurate as that within a factor of 2:
      max |kernel_bf16 - ref64| <= 2 * max |torch_bf16 - ref64| + eps32 * max |ref64|
  (measured ratios 0.2 to 1.1). A term missing or mis-scaled is still off by O(1); an fp32 result (no bf16 at all)
  would pass, which the by-hand counts exclude (they check the operand dtype of every matmul).
The max error against the fp32 torch reference is what `MODEL_KERNEL_ERRORS` records per kernel when the tests run.

HBM traffic: each kernel has a test that its counted HBM bytes are its inputs read once and its outputs written once,
or, where the tiling re-reads (RoPE's phase tables; W and the weight-gradient partial sums once per token block in
the blocked backward kernels), exactly the number its docstring states. A by-hand count test per kernel checks the
instructions per engine, DMA transfers, PSUM banks and the operand dtype of every matmul at a one-tile shape.
Where the real nki 0.7 is installed,
one ragged case per kernel also goes through `nki.simulate` and must agree with the interpreter.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from frontier.config import ModelConfig
from frontier.kernels.interpreter import find_real_nki, run
from frontier.kernels.interpreter import load as load_kernels
from frontier.model.gpt import MLP, Rotary
from frontier.optim.muon import newton_schulz as ns_reference

F32 = np.float32
EPS32 = float(np.finfo(F32).eps)
CAP = ModelConfig(vocab_size=512, n_layer=1, n_embd=64, n_head=2, n_kv_head=2).logit_softcap  # 15.0
ROPE_BASE = 10_000.0
# "kernel/output/case" -> (max |kernel - torch fp32|, max |torch fp32|, max |kernel - fp64| / max |torch fp32 - fp64|)
MODEL_KERNEL_ERRORS: dict[str, tuple[float, float, float]] = {}


@pytest.fixture(scope="module")
def rope():
    return load_kernels("frontier.kernels.nki.rotary")


@pytest.fixture(scope="module")
def mlp():
    return load_kernels("frontier.kernels.nki.relu2_mlp")


@pytest.fixture(scope="module")
def ce():
    return load_kernels("frontier.kernels.nki.head_ce")


@pytest.fixture(scope="module")
def ns():
    return load_kernels("frontier.kernels.nki.newton_schulz")


def _rng(seed):
    return np.random.default_rng(seed)


def _as_accurate_as_torch_bf16(got, ref_bf16, ref64, name):
    """The bf16 tolerance of the module docstring."""
    ref_bf16, ref64 = np.asarray(ref_bf16, np.float64), np.asarray(ref64, np.float64)
    assert got.shape == ref64.shape and got.dtype == F32
    torch_err = np.abs(ref_bf16 - ref64).max()
    tol = 2 * torch_err + EPS32 * np.abs(ref64).max()
    err = np.abs(got - ref64).max()
    assert err <= tol, f"{name}: max |kernel - float64| = {err:.3g} > {tol:.3g} (torch bf16 is off by {torch_err:.3g})"


def _as_accurate_as_torch(got, ref32, ref64, name):
    """The fp32 tolerance of the module docstring; records the error against torch fp32."""
    ref32, ref64 = np.asarray(ref32, np.float64), np.asarray(ref64, np.float64)
    assert got.shape == ref64.shape and got.dtype == F32
    torch_err = np.abs(ref32 - ref64).max()
    tol = 4 * torch_err + EPS32 * np.abs(ref64).max()
    err = np.abs(got - ref64).max()
    assert err <= tol, f"{name}: max |kernel - float64| = {err:.3g} > {tol:.3g} (torch fp32 is off by {torch_err:.3g})"
    MODEL_KERNEL_ERRORS[name] = (float(np.abs(got - ref32).max()), float(np.abs(ref32).max()),
                                 float(err / torch_err) if torch_err > 0 else 0.0)


# --------------------------------------------------------------------------------------------- RoPE

ROPE_SHAPES = {  # (batch, T, heads, head_dim)
    "small": (2, 16, 2, 8),
    "smoke": (8, 64, 2, 32),
    "ragged-3x100-h3x10": (3, 100, 3, 10),  # 300 tokens (2 full tiles + 44), T divides neither way with 128
    "trn2-head-T256": (2, 256, 5, 128),  # head_dim 128 as in the trn2 profile; T a multiple of 128
}


def _rope_case(shape, seed=0):
    b, t, h, hd = shape
    rot = Rotary(hd, t, ROPE_BASE)
    x = torch.from_numpy(_rng(seed).standard_normal((b, t, h, hd)).astype(F32))
    dy = torch.from_numpy(_rng(seed + 1).standard_normal((b, t, h, hd)).astype(F32))
    cos = rot.cos[:t].numpy().copy()
    sin = rot.sin[:t].numpy().copy()
    return rot, x, dy, cos, sin


def _rope_reference(rot, x, dy):
    xg = x.clone().requires_grad_()
    y = rot(xg)
    y.backward(dy)
    return y.detach().numpy(), xg.grad.numpy()


@pytest.mark.parametrize("case", ROPE_SHAPES)
def test_rope_forward_and_backward_match_rotary_exactly(rope, case):
    b, t, h, hd = shape = ROPE_SHAPES[case]
    rot, x, dy, cos, sin = _rope_case(shape)
    y_ref, dx_ref = _rope_reference(rot, x, dy)
    y, _ = run(rope.rope_fwd, x.numpy().reshape(b * t, h * hd), cos, sin)
    dx, _ = run(rope.rope_bwd, dy.numpy().reshape(b * t, h * hd), cos, sin)
    np.testing.assert_array_equal(y, y_ref.reshape(b * t, h * hd))
    np.testing.assert_array_equal(dx, dx_ref.reshape(b * t, h * hd))
    MODEL_KERNEL_ERRORS[f"rope/y/{case}"] = (0.0, float(np.abs(y_ref).max()), 0.0)
    MODEL_KERNEL_ERRORS[f"rope/dx/{case}"] = (0.0, float(np.abs(dx_ref).max()), 0.0)


def test_rope_at_lnc2_gives_the_lnc1_result(rope):
    """LNC=2: each core rotates half of the token tiles (its own phase tables); every row as at LNC=1, no race."""
    r = _rng(3)
    x = r.standard_normal((4 * 100, 2 * 16)).astype(F32)  # T = 100: tiles start at several phases
    ang = r.random((100, 8)).astype(F32)
    cos, sin = np.cos(ang), np.sin(ang)
    for kernel in (rope.rope_fwd, rope.rope_bwd):
        one, _ = run(kernel, x, cos, sin)
        two, c = run(kernel, x, cos, sin, lnc=2)
        np.testing.assert_array_equal(one, two)
        assert c.lnc_conflicts == 0 and all(k.dma_transfers > 0 for k in c.per_core)


def test_rope_backward_is_the_rotation_with_sin_negated(rope):
    b, t, h, hd = ROPE_SHAPES["ragged-3x100-h3x10"]
    _, _, dy, cos, sin = _rope_case((b, t, h, hd), seed=3)
    flat = dy.numpy().reshape(b * t, h * hd)
    dx, _ = run(rope.rope_bwd, flat, cos, sin)
    rotated_back, _ = run(rope.rope_fwd, flat, cos, -sin)
    np.testing.assert_array_equal(dx, rotated_back)


def _rope_table_rows(n, t):
    """Table rows the kernel reads from HBM (its docstring): per distinct tile phase r0 % T, min(rows, T)."""
    rows_by_phase = {}
    for r0 in range(0, n, 128):
        rows_by_phase[r0 % t] = max(rows_by_phase.get(r0 % t, 0), min(128, n - r0))
    return sum(min(rows, t) for rows in rows_by_phase.values())


@pytest.mark.parametrize("case", ROPE_SHAPES)
def test_rope_hbm_traffic(rope, case):
    b, t, h, hd = shape = ROPE_SHAPES[case]
    _, x, _, cos, sin = _rope_case(shape)
    n, width = b * t, h * hd
    _, c = run(rope.rope_fwd, x.numpy().reshape(n, width), cos, sin)
    table_rows = _rope_table_rows(n, t)
    if 128 % t == 0 or t % 128 == 0:  # the model's cases: every table row read once, x once
        assert table_rows == t
    assert c.hbm_read_bytes == n * width * 4 + 2 * table_rows * (hd // 2) * 4
    assert c.hbm_write_bytes == n * width * 4
    assert c.peak_psum_banks == 0 and c.matmul_flops == 0


def test_rope_counts_by_hand(rope):
    b, t, h, hd = 2, 64, 2, 32  # one 128-token tile holding two sequences: one phase, its second half copied
    _, x, _, cos, sin = _rope_case((b, t, h, hd))
    n, half = b * t, hd // 2
    _, c = run(rope.rope_fwd, x.numpy().reshape(n, h * hd), cos, sin)
    # cos and sin: rows 0..63 from HBM, then partitions 64..127 copied SBUF -> SBUF; x in, y out
    assert c.dma_transfers == 2 + 2 + 2
    assert c.hbm_read_bytes == n * h * hd * 4 + 2 * t * half * 4
    # ScalarE replicates cos, cos, sin, -sin into each head (4 H); GpSimd the two half products; VectorE x * cc, + sw
    assert c.instructions == {"tensor": 0, "vector": 2, "scalar": 4 * h, "gpsimd": 2}
    assert c.elements["scalar"] == 4 * h * n * half
    assert c.elements["gpsimd"] == 2 * n * h * half and c.elements["vector"] == 2 * n * h * hd


# --------------------------------------------------------------------------------------------- ReLU^2 MLP

MLP_SHAPES = {  # (tokens, width D, mlp_ratio): F = ratio * D
    "small": (16, 32, 4),
    "smoke": (8 * 64, 64, 4),
    "ragged-200x50-F200": (200, 50, 4),
    "trn2-width-130x640-F2560": (130, 640, 4),  # D > 512 (two PSUM banks per row), FB = 128
}


def _mlp_case(tokens, d, ratio, seed=0):
    r = _rng(seed)
    f = ratio * d
    x = r.standard_normal((tokens, d)).astype(F32)
    w1 = (r.uniform(-1, 1, (f, d)) * 3**0.5 / d**0.5).astype(F32)  # c_fc's init: std 1 / sqrt(D)
    w2 = (r.standard_normal((d, f)) * 0.02).astype(F32)  # c_proj starts at 0 in the model; any trained value will do
    dy = r.standard_normal((tokens, d)).astype(F32)
    return x, w1, w2, dy


def _mlp_reference(x, w1, w2, dy, dtype):
    d, f = w2.shape
    module = MLP(ModelConfig(vocab_size=2, n_layer=1, n_embd=d, n_head=1, n_kv_head=1, mlp_ratio=f // d)).to(dtype)
    with torch.no_grad():
        module.c_fc.weight.copy_(torch.from_numpy(w1))
        module.c_proj.weight.copy_(torch.from_numpy(w2))
    xt = torch.from_numpy(x).to(dtype).requires_grad_()
    y = module(xt)
    y.backward(torch.from_numpy(dy).to(dtype))
    return [t.detach().numpy() for t in (y, xt.grad, module.c_fc.weight.grad, module.c_proj.weight.grad)]


def _mlp_reference_bf16(x, w1, w2, dy):
    """The module under bf16 autocast (fp32 weights, bf16 matmuls), as on a Neuron device."""
    d, f = w2.shape
    module = MLP(ModelConfig(vocab_size=2, n_layer=1, n_embd=d, n_head=1, n_kv_head=1, mlp_ratio=f // d))
    with torch.no_grad():
        module.c_fc.weight.copy_(torch.from_numpy(w1))
        module.c_proj.weight.copy_(torch.from_numpy(w2))
    xt = torch.from_numpy(x).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = module(xt)
    y.float().backward(torch.from_numpy(dy))
    return [t.detach().float().numpy() for t in (y, xt.grad, module.c_fc.weight.grad, module.c_proj.weight.grad)]


PRECISIONS = ("float32", "bfloat16")


def _mlp_check(mlp, case, x, w1, w2, dy, precision, lnc=1, **bwd):
    names = ("y", "dx", "dW1", "dW2")
    y, cf = run(mlp.mlp_fwd, x, w1, w2, matmul_dtype=precision, lnc=lnc)
    grads, cb = run(mlp.mlp_bwd, x, w1, w2, dy, matmul_dtype=precision, lnc=lnc, **bwd)
    assert cf.lnc_conflicts == 0 and cb.lnc_conflicts == 0  # at LNC=2: no HBM byte touched by both cores unsynced
    ref64 = _mlp_reference(x, w1, w2, dy, torch.float64)
    if precision == "float32":
        ref = _mlp_reference(x, w1, w2, dy, torch.float32)
        for name, got, r, r64 in zip(names, (y, *grads), ref, ref64):
            _as_accurate_as_torch(got, r, r64, f"mlp/{name}/{case}")
    else:
        ref = _mlp_reference_bf16(x, w1, w2, dy)
        for name, got, r, r64 in zip(names, (y, *grads), ref, ref64):
            _as_accurate_as_torch_bf16(got, r, r64, f"mlp-bf16/{name}/{case}")


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", MLP_SHAPES)
def test_mlp_forward_and_backward_match_torch(mlp, case, precision):
    if case.startswith("trn2") and precision == "float32":
        pytest.skip("the trn2 width runs in the kernels' own precision only (bf16): keeps the suite short")
    _mlp_check(mlp, case, *_mlp_case(*MLP_SHAPES[case]), precision)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_mlp_backward_over_several_token_blocks(mlp, precision):
    """pos_block=1: two 128-token blocks in the device loop and a last block of 44 tokens after it, F = 520 in two F
    blocks (512 + 8): every block adds its weight gradients to the partial sums in HBM; same tolerance."""
    _mlp_check(mlp, "blocks-300x40-F520", *_mlp_case(300, 40, 13, seed=5), precision, pos_block=1)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", ["small", "ragged-200x50-F200", "blocks-300x40-F520"])
def test_mlp_at_lnc2_matches_torch_without_races(mlp, case, precision):
    """LNC=2 (the trn2 launch, frontier.kernels.toolchain.LNC): each physical core takes half the token tiles
    (`small` leaves core 1 none), sums its weight gradients into its own part in shared HBM, and after the barrier
    writes half of dW1 and dW2; same tolerances as LNC=1, and no byte of HBM touched by both cores unsynchronised."""
    if case.startswith("blocks"):
        _mlp_check(mlp, case, *_mlp_case(300, 40, 13, seed=5), precision, lnc=2, pos_block=1)
    else:
        _mlp_check(mlp, case, *_mlp_case(*MLP_SHAPES[case]), precision, lnc=2)


def test_mlp_at_lnc2_gives_lnc1_rows_exactly(mlp):
    """Per-token outputs (y, dx) do not depend on which core computes the token; dW only by the order of one sum."""
    x, w1, w2, dy = _mlp_case(300, 40, 13, seed=5)
    y1, _ = run(mlp.mlp_fwd, x, w1, w2)
    y2, _ = run(mlp.mlp_fwd, x, w1, w2, lnc=2)
    (dx1, a1, b1), _ = run(mlp.mlp_bwd, x, w1, w2, dy, pos_block=1)
    (dx2, a2, b2), c2 = run(mlp.mlp_bwd, x, w1, w2, dy, pos_block=1, lnc=2)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(dx1, dx2)
    for one, two in ((a1, a2), (b1, b2)):
        assert np.abs(one - two).max() <= 1e-6 * np.abs(one).max()
    assert len(c2.per_core) == 2 and all(c.instructions["tensor"] > 0 for c in c2.per_core)


def test_mlp_bwd_ignoring_program_id_at_lnc2_races(mlp, monkeypatch):
    """The defect of a kernel that ignores nl.program_id at LNC=2: both cores run the whole backward and
    read-add-write the same dW1 / dW2 in shared HBM; the interpreter counts the race."""
    from frontier.kernels.interpreter import language

    x, w1, w2, dy = _mlp_case(300, 40, 13, seed=5)
    monkeypatch.setattr(language, "num_programs", lambda axes=0: 1)
    monkeypatch.setattr(language, "program_id", lambda axis=0: 0)
    _, c = run(mlp.mlp_bwd, x, w1, w2, dy, pos_block=1, lnc=2)
    assert c.lnc_conflicts > 0


def test_mlp_hbm_traffic(mlp):
    n, d, ratio = MLP_SHAPES["smoke"]
    x, w1, w2, dy = _mlp_case(n, d, ratio)
    _, c = run(mlp.mlp_fwd, x, w1, w2)
    assert c.hbm_read_bytes == (x.size + w1.size + w2.size) * 4 and c.hbm_write_bytes == x.size * 4
    _, c = run(mlp.mlp_bwd, x, w1, w2, dy)  # all 512 tokens in one block: inputs once, dW zeroed then added once
    weights = (w1.size + w2.size) * 4
    assert c.hbm_read_bytes == (x.size + dy.size) * 4 + weights + weights
    assert c.hbm_write_bytes == x.size * 4 + 2 * weights
    # NB = 3 token blocks: W1 and W2 read 3 times, dW1 and dW2 zeroed, then read back and written 3 times
    x, w1, w2, dy = _mlp_case(300, 40, 13)
    _, c = run(mlp.mlp_bwd, x, w1, w2, dy, pos_block=1)
    weights = (w1.size + w2.size) * 4
    assert c.hbm_read_bytes == (x.size + dy.size) * 4 + 3 * weights + 3 * weights
    assert c.hbm_write_bytes == x.size * 4 + weights + 3 * weights


class _MatmulDtypes:
    """Records the operand dtypes of every nc_matmul / nc_transpose a run issues (wraps the interpreter's isa)."""

    def __init__(self, monkeypatch):
        from frontier.kernels.interpreter import isa

        self.seen = set()
        for name in ("nc_matmul", "nc_transpose"):
            original = getattr(isa, name)

            def wrapped(*args, _original=original, _name=name, **kwargs):
                operands = [kwargs[k] for k in ("stationary", "moving", "data") if k in kwargs]
                self.seen.add((_name, tuple(str(t.dtype) for t in operands)))
                return _original(*args, **kwargs)

            monkeypatch.setattr(isa, name, wrapped)


def test_mlp_counts_by_hand(mlp, monkeypatch):
    n, d, f = 128, 64, 256  # one token tile, one D chunk, two F chunks of 128
    x, w1, w2, dy = _mlp_case(n, d, f // d)
    transpose_flops = 2 * 128 * 64 * 128  # a [128, 64] or [64, 128] data tile: 2 P F P with P the partitions
    dtypes = _MatmulDtypes(monkeypatch)

    _, c = run(mlp.mlp_fwd, x, w1, w2)
    # TensorE: W1^T (2 transposes), W2^T (2), x^T (1); per F chunk h^T (1 matmul) and y (1), each matmul two
    # instructions (LoadStationary, MultiplyMoving)
    assert c.instructions == {"tensor": 5 + 2 * 4, "vector": 5 + 1, "scalar": 2, "gpsimd": 2}
    assert c.matmul_flops == 2 * n * d * f * 2 + 2 * transpose_flops + 2 * (2 * 64 * 128 * 64) + transpose_flops
    assert c.dma_transfers == 2 + 1 + 1 + 1 and c.peak_psum_banks == 3
    assert c.dynamic_loops == 1 and c.static_total == sum(c.instructions.values()) + c.dma_transfers  # one iteration
    assert dtypes.seen == {("nc_matmul", ("bfloat16", "bfloat16")), ("nc_transpose", ("bfloat16",))}

    _, c = run(mlp.mlp_bwd, x, w1, w2, dy)
    # one F block of 256 (2 sub-tiles). TensorE: x^T, dy^T, W1_b^T (2), dh^T (2); h, dA, dx (2), dW1 (2), dW2 (1)
    # ScalarE: relu, the dh^T copies (2), the dx copy; VectorE: the zeroing memsets of dW1, dW2 (2), 4 transpose
    # copies, dh, 3 additions of the dW tiles to their partial sums
    assert c.instructions == {"tensor": 6 + 2 * 7, "vector": 2 + 4 + 1 + 3, "scalar": 4, "gpsimd": 1}
    # h, dA, dx, dW1, dW2: 2 N D F each; transposes: x, dy, W1_b (2) of [128, 64], dh (2) of [128, 128]
    assert c.matmul_flops == 5 * (2 * n * d * f) + 4 * transpose_flops + 2 * (2 * 128 * 128 * 128)
    # zeroing dW1 (2 row tiles) and dW2; x, dy, W1 (2 row tiles), W2; dW1 (2) and dW2 read and written; dx
    assert c.dma_transfers == 3 + 2 + 2 + 1 + 2 * 3 + 1
    assert c.peak_psum_banks == 1 + 1 + 1 + 2 + 1  # transposes, h/dA, dx, dW1 (2 sub-tiles), dW2


# --------------------------------------------------------------------------------------------- head + softcap + CE

CE_SHAPES = {  # (tokens, D, V)
    "small": (16, 32, 100),
    "smoke": (8 * 64, 64, 512),
    "ragged-200x96-V1000": (200, 96, 1000),  # vocabulary chunks 512 + 488, D not a multiple of 128
    "wide-130x600-V300": (130, 600, 300),  # D > 512: dhidden / dW rows span two PSUM banks, VB = 256
    "trn2-130x640-V8192": (130, 640, 8192),  # the competition's width and vocabulary: 16 chunks forward, 32 backward
}


def _ce_case(tokens, d, v, seed=0):
    r = _rng(seed)
    hidden = r.standard_normal((tokens, d)).astype(F32)  # rms-normed in the model: unit scale
    w = (r.standard_normal((v, d)) * 4 / d**0.5).astype(F32)  # logits ~ N(0, 16): the softcap bends many of them
    targets = r.integers(0, v, tokens).astype(np.int32)
    dloss = ((0.5 + r.random(tokens)) / tokens).astype(F32)  # a mean's 1/N, varied per position
    return hidden, w, targets, dloss


def _ce_reference(hidden, w, targets, dloss, dtype, autocast=False):
    """loss, lse, dhidden, dW by torch autograd in `dtype`, or (autocast) fp32 under bf16 autocast as on Neuron."""
    h = torch.from_numpy(hidden).to(dtype).requires_grad_()
    wt = torch.from_numpy(w).to(dtype).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        z = F.linear(h, wt)
        z = CAP * torch.tanh(z / CAP)
        loss = F.cross_entropy(z.to(dtype), torch.from_numpy(targets).long(), reduction="none")
        lse = torch.logsumexp(z.to(dtype), dim=-1)
    loss.backward(torch.from_numpy(dloss).to(dtype))
    return [t.detach().numpy() for t in (loss, lse, h.grad, wt.grad)]


def _ce_check(ce, case, hidden, w, targets, dloss, precision, lnc=1, **kw):
    names = ("loss", "lse", "dhidden", "dW")
    (loss, lse), cf = run(ce.head_ce_fwd, hidden, w, targets, cap=CAP, matmul_dtype=precision, lnc=lnc, **kw)
    (dh, dw), cb = run(ce.head_ce_bwd, hidden, w, targets, lse, dloss, cap=CAP, matmul_dtype=precision, lnc=lnc,
                       **kw)
    assert cf.lnc_conflicts == 0 and cb.lnc_conflicts == 0
    ref64 = _ce_reference(hidden, w, targets, dloss, torch.float64)
    if precision == "float32":
        ref32 = _ce_reference(hidden, w, targets, dloss, torch.float32)
        for name, got, r32, r64 in zip(names, (loss, lse, dh, dw), ref32, ref64):
            _as_accurate_as_torch(got, r32, r64, f"head_ce/{name}/{case}")
    else:
        refb = _ce_reference(hidden, w, targets, dloss, torch.float32, autocast=True)
        for name, got, rb, r64 in zip(names, (loss, lse, dh, dw), refb, ref64):
            _as_accurate_as_torch_bf16(got, rb, r64, f"head_ce-bf16/{name}/{case}")


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", CE_SHAPES)
def test_head_ce_forward_and_backward_match_torch(ce, case, precision):
    if case.startswith("trn2") and precision == "float32":
        pytest.skip("the trn2 width runs in the kernels' own precision only (bf16): keeps the suite short")
    _ce_check(ce, case, *_ce_case(*CE_SHAPES[case]), precision)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_head_ce_over_several_token_blocks(ce, precision):
    """pos_block=1: two blocks in the device loop and a last one of 44 tokens; the backward adds each block's dW to
    the partial sums in HBM."""
    _ce_check(ce, "blocks-300x160-V700", *_ce_case(300, 160, 700, seed=7), precision, pos_block=1)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", ["small", "ragged-200x96-V1000"])
def test_head_ce_at_lnc2_matches_torch_without_races(ce, case, precision):
    """LNC=2: half the token tiles per core, dW summed per core in shared HBM, then half of dW's rows written by each
    core after the barrier; same tolerances, no race."""
    _ce_check(ce, case, *_ce_case(*CE_SHAPES[case]), precision, lnc=2)
    _ce_check(ce, "blocks-300x160-V700", *_ce_case(300, 160, 700, seed=7), precision, lnc=2, pos_block=1)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_head_ce_running_max_rescales(ce, precision):
    """Targets and the largest logits in the last vocabulary chunk, the first chunk's logits far below: the running
    max must move and rescale the sum (a stale max or a missing alpha changes lse by ~cap)."""
    hidden, w, targets, dloss = _ce_case(128, 64, 1100, seed=11)
    w[:512] *= 0.05
    w[1024:] *= 3.0
    targets[:] = 1024 + targets % 76
    _ce_check(ce, "max-in-last-chunk", hidden, w, targets, dloss, precision)


def test_head_ce_hbm_traffic(ce):
    n, d, v = CE_SHAPES["smoke"]
    hidden, w, targets, dloss = _ce_case(n, d, v)
    (_, lse), c = run(ce.head_ce_fwd, hidden, w, targets, cap=CAP)
    assert c.hbm_read_bytes == (hidden.size + w.size + targets.size) * 4  # the [N, V] logits never leave the chip
    assert c.hbm_write_bytes == 2 * n * 4
    _, c = run(ce.head_ce_bwd, hidden, w, targets, lse, dloss, cap=CAP)
    assert c.hbm_read_bytes == (hidden.size + w.size + 3 * n + w.size) * 4  # dW read back once
    assert c.hbm_write_bytes == (hidden.size + 2 * w.size) * 4  # dW zeroed, then written once
    # NB = 3 token blocks: W read 3 times (both passes); backward dW zeroed, then read back and written 3 times
    hidden, w, targets, dloss = _ce_case(300, 160, 700)
    (_, lse), c = run(ce.head_ce_fwd, hidden, w, targets, cap=CAP, pos_block=1)
    assert c.hbm_read_bytes == (hidden.size + 3 * w.size + 300) * 4 and c.hbm_write_bytes == 2 * 300 * 4
    _, c = run(ce.head_ce_bwd, hidden, w, targets, lse, dloss, cap=CAP, pos_block=1)
    assert c.hbm_read_bytes == (hidden.size + 3 * w.size + 3 * 300 + 3 * w.size) * 4
    assert c.hbm_write_bytes == (hidden.size + w.size + 3 * w.size) * 4


def _ce_bias_reference(hidden, w, targets, bias, dloss, dtype):
    """loss, lse, dhidden, dW and dbias of cross-entropy on cap tanh(hidden W^T / cap) + bias (torch autograd)."""
    h = torch.from_numpy(hidden).to(dtype).requires_grad_()
    wt = torch.from_numpy(w).to(dtype).requires_grad_()
    b = torch.from_numpy(bias).to(dtype).requires_grad_()
    z = CAP * torch.tanh(F.linear(h, wt) / CAP) + b
    loss = F.cross_entropy(z, torch.from_numpy(targets).long(), reduction="none")
    lse = torch.logsumexp(z, dim=-1)
    loss.backward(torch.from_numpy(dloss).to(dtype))
    return [t.detach().numpy() for t in (loss, lse, h.grad, wt.grad, b.grad)]


@pytest.mark.parametrize("case", ["smoke", "ragged-200x96-V1000"])
def test_head_ce_with_a_dense_bias_matches_torch(ce, case):
    """The n-gram mix's entry points: z = cap tanh(l / cap) + bias; the backward also returns dz, the bias's
    gradient. The bias is log-probability sized (a few nats, some positions far below the rest)."""
    n, d, v = CE_SHAPES[case]
    hidden, w, targets, dloss = _ce_case(n, d, v)
    bias = (np.log(_rng(3).dirichlet(np.full(v, 0.3), size=n) + 1e-9)).astype(F32)
    (loss, lse), c_f = run(ce.head_ce_bias_fwd, hidden, w, targets, bias, cap=CAP, matmul_dtype="float32")
    (dh, dw, dz), c_b = run(ce.head_ce_bias_bwd, hidden, w, targets, bias, lse, dloss, cap=CAP,
                            matmul_dtype="float32")
    ref32 = _ce_bias_reference(hidden, w, targets, bias, dloss, torch.float32)
    ref64 = _ce_bias_reference(hidden, w, targets, bias, dloss, torch.float64)
    for name, got, r32, r64 in zip(("loss", "lse", "dhidden", "dW", "dbias"), (loss, lse, dh, dw, dz), ref32, ref64):
        _as_accurate_as_torch(got, r32, r64, f"head_ce_bias/{name}/{case}")
    # HBM: the bias is read once per pass; the backward writes dz [N, V] besides dhidden and dW
    assert c_f.hbm_read_bytes == (hidden.size + w.size + targets.size + bias.size) * 4
    assert c_b.hbm_read_bytes == (hidden.size + 2 * w.size + 3 * n + bias.size) * 4
    assert c_b.hbm_write_bytes == (hidden.size + 2 * w.size + bias.size) * 4


def test_head_ce_counts_by_hand(ce, monkeypatch):
    n, d, v = 128, 64, 512  # one token tile, one D chunk, one vocabulary chunk of 4 row tiles
    hidden, w, targets, dloss = _ce_case(n, d, v)
    dtypes = _MatmulDtypes(monkeypatch)
    (_, lse), c = run(ce.head_ce_fwd, hidden, w, targets, cap=CAP)
    # TensorE: hidden^T, W^T (4 transposes), the logit tile (LoadStationary + MultiplyMoving). VectorE: 5 transpose copies, row max, -cap max,
    # (ids == target) * t, lse, loss, the int32 -> fp32 conversion of the targets. ScalarE: tanh, exp + sum (+ read-out),
    # masked copy + sum (+ read-out), log.
    assert c.instructions == {"tensor": 5 + 2, "vector": 11, "scalar": 6, "gpsimd": 1}
    assert c.matmul_flops == 2 * d * n * v + 5 * (2 * 128 * 64 * 128)
    assert c.elements["scalar"] == 3 * n * v + 2 * n + n  # tanh, exp, copy; two read-outs; log
    assert c.dma_transfers == 1 + 1 + 4 + 2 and c.peak_psum_banks == 2
    assert c.dynamic_loops == 1 and dtypes.seen == {("nc_matmul", ("bfloat16", "bfloat16")),
                                                    ("nc_transpose", ("bfloat16",))}

    _, c = run(ce.head_ce_bwd, hidden, w, targets, lse, dloss, cap=CAP)
    # TensorE: transposes of hidden, W (4), g (4); logit tile, dhidden (4 sub-tiles), dW (4): 2 instructions each
    # VectorE: the memset zeroing dW, 9 transpose copies, -lse, -dloss, p - onehot, 4 additions of the dW row tiles to
    # their partial sums, the targets' conversion. ScalarE: tanh, exp, dloss (1 - t^2), the dhidden copy. GpSimd: iota,
    # t^2, g.
    assert c.instructions == {"tensor": 9 + 2 * 9, "vector": 1 + 9 + 2 + 1 + 4 + 1, "scalar": 4, "gpsimd": 3}
    # logits, dhidden, dW: 2 N D V each; transposes: hidden, W (4) of [128, 64], g (4) of [128, 128]
    assert c.matmul_flops == 3 * (2 * n * d * v) + 5 * (2 * 128 * 64 * 128) + 4 * (2 * 128 * 128 * 128)
    # zeroing dW (4 row tiles); hidden, targets, lse, dloss, W (4 row tiles), dW (4) read and written, dhidden
    assert c.dma_transfers == 4 + 4 + 4 + 2 * 4 + 1 and c.peak_psum_banks == 1 + 1 + 1 + 4


# --------------------------------------------------------------------------------------------- Newton-Schulz

NS_SHAPES = {
    "small-16x48": (16, 48),
    "smoke-attn-64x64": (64, 64),
    "smoke-c_fc-256x64": (256, 64),  # tall: X = G^T
    "smoke-c_proj-64x256": (64, 256),
    "ragged-100x600": (100, 600),  # long side: 4 x 128 + 88, output chunks 512 + 88
    "ragged-600x100": (600, 100),
    "full-128x520": (128, 520),
}


def _ns_case(shape, seed=0):
    return (_rng(seed).standard_normal(shape) * 1e-2).astype(F32)  # a momentum-sized gradient


def _ns_check(ns, case, g, precision):
    out, c = run(ns.newton_schulz, g, matmul_dtype=precision)
    ref64 = ns_reference(torch.from_numpy(g).double(), dtype=torch.float64).numpy()
    if precision == "float32":
        _as_accurate_as_torch(out, ns_reference(torch.from_numpy(g)).numpy(), ref64, f"newton_schulz/X/{case}")
    else:
        refb = ns_reference(torch.from_numpy(g), dtype=torch.bfloat16).numpy()
        _as_accurate_as_torch_bf16(out, refb, ref64, f"newton_schulz-bf16/X/{case}")
    return c


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", NS_SHAPES)
def test_newton_schulz_matches_muon(ns, case, precision):
    _ns_check(ns, case, _ns_case(NS_SHAPES[case]), precision)


def test_newton_schulz_of_zero_is_zero(ns):
    """||G|| = 0: the floor before ScalarE's sqrt keeps it in range and X stays 0, as 0 / (0 + 1e-7) in torch."""
    out, _ = run(ns.newton_schulz, np.zeros((32, 96), F32))
    np.testing.assert_array_equal(out, 0.0)


@pytest.mark.parametrize("shape", [(100, 600), (600, 100)], ids=["wide", "tall"])
def test_newton_schulz_hbm_traffic(ns, shape):
    g = _ns_case(shape)
    _, c = run(ns.newton_schulz, g)
    assert c.hbm_read_bytes == g.nbytes and c.hbm_write_bytes == g.nbytes


def test_newton_schulz_counts_by_hand(ns, monkeypatch):
    m, n = 32, 200  # one row block, long side in two chunks (128 + 72), one output chunk each way
    g = _ns_case((m, n))
    dtypes = _MatmulDtypes(monkeypatch)
    _, c = run(ns.newton_schulz, g)
    # TensorE: the ones-matmul, 2 transposes; per iteration A (2 chunks), A^2 (1), X' (1), and (not after the last
    #          iteration: G is wide) the 2 transposes rebuilding X^T; a matmul is 2 instructions (LS, MM).
    # VectorE: memset of the ones, floor, + eps, reciprocal, the scaled copy of G, 2 transpose copies; per iteration
    #          A copy, P = b A + c A^2, a I (equal, times a), P + a I, and (not after the last) 2 transpose copies.
    # ScalarE: squares + sum (+ read-out), sqrt; per iteration c A^2, X' copy. GpSimd: iota per iteration.
    assert c.instructions == {"tensor": 2 * (1 + 5 * 4) + 2 + 4 * 2, "vector": 7 + 5 * 4 + 4 * 2, "scalar": 3 + 5 * 2,
                              "gpsimd": 5}
    per_iteration = 2 * n * m * m + 2 * m * m * m + 2 * m * m * n  # A, A^2, X'
    transposes = 2 * m * n * m  # all chunks of X once (an identity matmul each)
    assert c.matmul_flops == transposes + 2 * m * 128 * 1 + 5 * per_iteration + 4 * transposes
    assert c.dma_transfers == 2 and c.peak_psum_banks == 5  # A, A^2, X', transposes, the norm: whole banks
    # the norm's ones-matmul is fp32 (it sums fp32 squares); every matmul of the iteration is bf16
    assert dtypes.seen == {("nc_matmul", ("float32", "float32")), ("nc_matmul", ("bfloat16", "bfloat16")),
                           ("nc_transpose", ("bfloat16",))}


@pytest.mark.parametrize("shape", [(300, 200), (520, 130)], ids=["two-blocks", "tall-ragged-blocks"])
def test_newton_schulz_short_side_beyond_one_partition_tile(ns, shape):
    """Short sides of more than 128 rows go in row blocks (the trn2 model's 640-wide matrices: `frontier kernels
    --census trn2` runs them at 640 x 640, 2560 x 640 and 640 x 2560)."""
    g = _ns_case(shape)
    for precision in PRECISIONS:
        c = _ns_check(ns, f"{shape[0]}x{shape[1]}", g, precision)
        assert c.hbm_read_bytes == g.nbytes and c.hbm_write_bytes == g.nbytes


# --------------------------------------------------------------------------------------------- nki.simulate


def _sim_cases():
    """kernel -> (module, HBM arrays, compile-time constants in signature order) at one small ragged shape each."""
    b, t, h, hd = ROPE_SHAPES["ragged-3x100-h3x10"]
    _, x, dy, cos, sin = _rope_case((b, t, h, hd))
    x, dy = x.numpy().reshape(b * t, h * hd), dy.numpy().reshape(b * t, h * hd)
    mx, w1, w2, mdy = _mlp_case(*MLP_SHAPES["ragged-200x50-F200"])
    hidden, w, targets, dloss = _ce_case(*CE_SHAPES["ragged-200x96-V1000"])
    lse = _ce_reference(hidden, w, targets, dloss, torch.float32)[1]
    bias = _rng(5).standard_normal((hidden.shape[0], w.shape[0])).astype(F32)
    lse_b = _ce_bias_reference(hidden, w, targets, bias, dloss, torch.float32)[1]
    return {
        "rope_fwd": ("rotary", (x, cos, sin), {}),
        "rope_bwd": ("rotary", (dy, cos, sin), {}),
        "mlp_fwd": ("relu2_mlp", (mx, w1, w2), {}),
        "mlp_bwd": ("relu2_mlp", (mx, w1, w2, mdy), {"pos_block": 0}),
        "head_ce_fwd": ("head_ce", (hidden, w, targets), {"cap": CAP, "pos_block": 0}),
        "head_ce_bwd": ("head_ce", (hidden, w, targets, lse, dloss), {"cap": CAP, "pos_block": 0}),
        "head_ce_bias_fwd": ("head_ce", (hidden, w, targets, bias), {"cap": CAP, "pos_block": 0}),
        "head_ce_bias_bwd": ("head_ce", (hidden, w, targets, bias, lse_b, dloss), {"cap": CAP, "pos_block": 0}),
        "newton_schulz": ("newton_schulz", (_ns_case((100, 600)),), {"steps": 5}),
    }


SIM_KERNELS = ("rope_fwd", "rope_bwd", "mlp_fwd", "mlp_bwd", "head_ce_fwd", "head_ce_bwd", "head_ce_bias_fwd",
               "head_ce_bias_bwd", "newton_schulz")


@pytest.mark.parametrize("kernel", SIM_KERNELS)
def test_interpreter_agrees_with_nki_simulate(kernel, monkeypatch):
    """The same source through the official simulator (only where the real nki 0.7 is installed): outputs agree
    to rtol 1e-5, atol 1e-5 * max (both run the engines' math in fp32 NumPy; the simulator models only sin's
    polynomial, unused here)."""
    nki, why = find_real_nki()
    if nki is None:
        pytest.skip(f"nki.simulate comparison not run: {why}")
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")
    module, arrays, consts = _sim_cases()[kernel]
    interpreted = getattr(load_kernels(f"frontier.kernels.nki.{module}"), kernel)
    ours, _ = run(interpreted, *arrays, **consts)
    real = getattr(importlib.import_module(f"frontier.kernels.nki.{module}"), kernel)
    simulated = nki.simulate(real)(*[a.copy() for a in arrays], *consts.values())  # constants in signature order
    ours = ours if isinstance(ours, tuple) else (ours,)
    simulated = tuple(simulated) if isinstance(simulated, (tuple, list)) else (simulated,)
    assert len(ours) == len(simulated)
    for got, sim in zip(ours, simulated):
        sim = np.asarray(sim)
        np.testing.assert_allclose(got, sim, rtol=1e-5, atol=1e-5 * np.abs(sim).max())


def test_head_ce_targets_are_int32_ids_exact_in_fp32(ce):
    """The targets reach the kernel as int32 token ids, DMA'd into an int32 tile (a DMA at a runtime address does not
    cast) and converted on VectorE; fp32 compares them with the vocabulary ids exactly only below 2^24, so a larger
    vocabulary (or other target dtypes) is refused before anything runs."""
    from frontier.kernels.interpreter import trace
    f32 = np.float32
    big = 2**24 + 1
    with pytest.raises(AssertionError, match="2\\^24"):
        trace(ce.head_ce_fwd, ((128, 1), f32), ((big, 1), f32), ((128,), np.int32), cap=CAP)
    with pytest.raises(AssertionError, match="2\\^24"):
        trace(ce.head_ce_bwd, ((128, 1), f32), ((big, 1), f32), ((128,), np.int32), ((128,), f32), ((128,), f32),
              cap=CAP)
    with pytest.raises(AssertionError, match="int32 token ids"):
        trace(ce.head_ce_fwd, ((128, 8), f32), ((512, 8), f32), ((128,), np.int64), cap=CAP)
    hidden, w, targets, _ = _ce_case(128, 64, 512)
    targets[:4] = [0, 511, 255, 1]  # the vocabulary's ends
    (loss, lse), _ = run(ce.head_ce_fwd, hidden, w, targets, cap=CAP, matmul_dtype="float32")
    z = CAP * np.tanh((hidden.astype(np.float64) @ w.T.astype(np.float64)) / CAP)
    np.testing.assert_allclose(loss, lse - z[np.arange(128), targets], rtol=0, atol=1e-4)


def test_token_loops_run_alike_on_both_cores_at_lnc2(mlp, ce):
    """At LNC=2 the cores' shares differ by a tile when N has an odd number of tiles; the compiled token loops run the
    same trip count on both cores (the LNC overview: differing dynamic control flow is undefined) and the core with
    more rows takes them in straight-line code. Traced over N = 1..9 tiles (whole and ragged) and the default and
    one-tile blocks; run at N = 384 (1 and 2 whole tiles) against LNC=1."""
    from frontier.kernels.interpreter import trace
    f32 = np.float32
    d, f, v = 32, 64, 256
    for n in [128 * k for k in range(1, 10)] + [128 * k + 40 for k in range(0, 9)]:
        trace(mlp.mlp_fwd, ((n, d), f32), ((f, d), f32), ((d, f), f32), lnc=2)
        for pb in (0, 1, 2):
            trace(mlp.mlp_bwd, ((n, d), f32), ((f, d), f32), ((d, f), f32), ((n, d), f32), pos_block=pb, lnc=2)
            trace(ce.head_ce_fwd, ((n, d), f32), ((v, d), f32), ((n,), np.int32), cap=CAP, pos_block=pb, lnc=2)
            trace(ce.head_ce_bwd, ((n, d), f32), ((v, d), f32), ((n,), np.int32), ((n,), f32), ((n,), f32), cap=CAP,
                  pos_block=pb, lnc=2)
    x, w1, w2, dy = _mlp_case(384, 40, 2, seed=3)
    np.testing.assert_array_equal(run(mlp.mlp_fwd, x, w1, w2, lnc=2)[0], run(mlp.mlp_fwd, x, w1, w2)[0])
    (dx1, a1, b1), _ = run(mlp.mlp_bwd, x, w1, w2, dy, pos_block=1)
    (dx2, a2, b2), c2 = run(mlp.mlp_bwd, x, w1, w2, dy, pos_block=1, lnc=2)
    np.testing.assert_array_equal(dx1, dx2)
    for one, two in ((a1, a2), (b1, b2)):
        assert np.abs(one - two).max() <= 1e-6 * np.abs(one).max()
    assert c2.lnc_conflicts == 0
    hidden, w, targets, dloss = _ce_case(384, 64, 512)
    (loss1, lse1), _ = run(ce.head_ce_fwd, hidden, w, targets, cap=CAP, pos_block=1)
    (loss2, lse2), _ = run(ce.head_ce_fwd, hidden, w, targets, cap=CAP, pos_block=1, lnc=2)
    np.testing.assert_array_equal(loss1, loss2)
    np.testing.assert_array_equal(lse1, lse2)
    (dh1, dw1), _ = run(ce.head_ce_bwd, hidden, w, targets, lse1, dloss, cap=CAP, pos_block=1)
    (dh2, dw2), c = run(ce.head_ce_bwd, hidden, w, targets, lse1, dloss, cap=CAP, pos_block=1, lnc=2)
    np.testing.assert_array_equal(dh1, dh2)
    assert np.abs(dw1 - dw2).max() <= 1e-6 * np.abs(dw1).max() and c.lnc_conflicts == 0

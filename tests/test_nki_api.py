"""nki.language.broadcast_to, nki.typing, nki.isa.tensor_tensor_scan, nki.isa.dma_transpose and
nki.isa.nc_matmul(is_transpose=True) in the interpreter, each against its documented semantics (the NKI 0.7 API
reference, nki/api/nki/isa and nki/api/nki/language in aws-neuron-sdk; the migration guide for nki.typing)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from frontier.kernels.interpreter import KernelError, LimitError, UnsupportedError, load, run, trace
from frontier.kernels.interpreter import isa as nisa
from frontier.kernels.interpreter import language as nl

F32 = np.float32
BF16 = ml_dtypes.bfloat16


def _x(*shape, seed=0, dtype=F32):
    return np.random.default_rng(seed).standard_normal(shape).astype(F32).astype(dtype)


def _out(t):
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


# ---------------------------------------------------------------------------------------------------- broadcast_to
def test_broadcast_to_follows_numpy_rules_along_partitions_and_free_dims():
    def kernel(row, col):
        r = nl.broadcast_to(nl.load(row), (128, 64))  # [1, 64] -> [128, 64]: the partition dim from 1
        c = nl.broadcast_to(nl.load(col), (128, 64))  # [128, 1] -> [128, 64]
        s = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=s, data1=r, data2=c, op=nl.multiply)
        return _out(s)

    row, col = _x(1, 64, seed=1), _x(128, 1, seed=2)
    got, counts = run(kernel, row, col)
    np.testing.assert_array_equal(got, row * col)
    assert counts.instructions["vector"] == 3  # two broadcasts, one multiply


def test_broadcast_to_the_same_shape_is_the_tile_itself_and_other_shapes_are_refused():
    def same(x):
        t = nl.load(x)
        assert nl.broadcast_to(t, t.shape) is t
        b = nl.broadcast_to(t, t.shape, dtype=nl.bfloat16)  # a dtype-cast copy
        assert b is not t and b.dtype == nl.bfloat16
        return _out(b)

    x = _x(4, 8)
    got, _ = run(same, x)
    np.testing.assert_array_equal(got, x.astype(BF16))

    def wrong_rank(x):
        nl.broadcast_to(nl.load(x), (4, 8, 2))

    def not_from_one(x):
        nl.broadcast_to(nl.load(x), (4, 16))

    for k in (wrong_rank, not_from_one):
        with pytest.raises(KernelError, match="cannot broadcast"):
            run(k, x)


# ---------------------------------------------------------------------------------------------------- nki.typing
def test_nki_typing_annotations_load_and_run(tmp_path):
    src = tmp_path / "typed.py"
    src.write_text(
        "import nki\nimport nki.language as nl\nimport nki.typing as nt\nfrom nki.typing import tensor\n\n"
        "@nki.jit\ndef double(x: nt.tensor[128, 8]) -> tensor[128, 8]:\n"
        "    t = nl.load(x)\n"
        "    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
        "    nl.store(out, nl.add(t, t))\n"
        "    return out\n")
    mod = load(src)
    assert repr(mod.double.__annotations__["x"]) == "nki.typing.tensor[128, 8]"
    x = _x(128, 8)
    got, _ = run(mod.double, x)
    np.testing.assert_array_equal(got, x + x)


# ---------------------------------------------------------------------------------------------------- scan
def _scan_reference(d0, d1, initial, f0, f1, reverse0=False, reverse1=False):
    """The documented loop, in fp32 steps."""
    d0, d1 = d0.astype(F32), d1.astype(F32)
    out = np.empty_like(d0)
    prev = np.broadcast_to(np.asarray(initial, F32).reshape(-1), d0.shape[:1]).astype(F32)
    for i in range(d0.shape[1]):
        x = f0(prev, d0[:, i]) if reverse0 else f0(d0[:, i], prev)
        prev = (f1(d1[:, i], x) if reverse1 else f1(x, d1[:, i])).astype(F32)
        out[:, i] = prev
    return out


def test_tensor_tensor_scan_is_the_documented_recurrence():
    """op0 = multiply, op1 = add: r[i] = a[i] * r[i-1] + b[i], the linear recurrence of a state-space scan."""
    def kernel(a, b):
        ta, tb = nl.load(a), nl.load(b)
        r = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(dst=r, data0=ta, data1=tb, initial=0.5, op0=nl.multiply, op1=nl.add)
        return _out(r)

    a, b = _x(16, 40, seed=3) * 0.5, _x(16, 40, seed=4)
    got, counts = run(kernel, a, b)
    np.testing.assert_array_equal(got, _scan_reference(a, b, 0.5, np.multiply, np.add))
    assert counts.instructions["vector"] == 1
    # and by hand, one partition: r0 = a0 * 0.5 + b0, r1 = a1 * r0 + b1
    r0 = np.float32(a[0, 0] * np.float32(0.5) + b[0, 0])
    assert got[0, 0] == r0 and got[0, 1] == np.float32(a[0, 1] * r0 + b[0, 1])


def test_tensor_tensor_scan_reversed_operands_and_a_tile_initial():
    """subtract is not commutative: reverse0 / reverse1 swap each operator's operands; initial a [P, 1] tile."""
    def kernel(a, b, init):
        r = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(dst=r, data0=nl.load(a), data1=nl.load(b), initial=nl.load(init),
                                op0=nl.subtract, op1=nl.subtract, reverse0=True, reverse1=True)
        return _out(r)

    a, b, init = _x(8, 12, seed=5), _x(8, 12, seed=6), _x(8, 1, seed=7)
    got, _ = run(kernel, a, b, init)
    want = _scan_reference(a, b, init, np.subtract, np.subtract, reverse0=True, reverse1=True)
    np.testing.assert_array_equal(got, want)  # r[i] = b[i] - (r[i-1] - a[i])
    assert not np.array_equal(got, _scan_reference(a, b, init, np.subtract, np.subtract))


def test_tensor_tensor_scan_refuses_both_inputs_in_psum_and_a_wide_initial():
    def both_psum(a):
        p = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.psum)
        nisa.memset(dst=p, value=0.0)
        r = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(dst=r, data0=p, data1=p, initial=0.0, op0=nl.add, op1=nl.add)

    def wide_initial(a):
        t = nl.load(a)
        r = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(dst=r, data0=t, data1=t, initial=t, op0=nl.add, op1=nl.add)

    with pytest.raises(LimitError, match="cannot both be in PSUM"):
        run(both_psum, _x(8, 4))
    with pytest.raises(KernelError, match="one element per partition"):
        run(wide_initial, _x(8, 4))


# ---------------------------------------------------------------------------------------------------- dma_transpose
@pytest.mark.parametrize("shape,dge", [((16, 64), "hwdge"), ((4, 8, 32), "hwdge"), ((2, 3, 4, 8), "unknown")])
def test_dma_transpose_permutes_as_documented(shape, dge):
    axes = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}[len(shape)]

    def kernel(x):
        dst = nl.ndarray(tuple(x.shape[a] for a in axes), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=dst, src=x, dge_mode=getattr(nisa.dge_mode, dge))
        out = nl.ndarray(dst.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=dst)
        return out

    x = _x(*shape, dtype=BF16)
    got, counts = run(kernel, x)
    np.testing.assert_array_equal(got, np.transpose(x, axes))
    assert counts.dma_transfers == 2


def test_dma_transpose_refusals():
    def with_(dge=nisa.dge_mode.unknown, axes=None, dst_dtype=None, dst_shape=None):
        def kernel(x):
            dst = nl.ndarray(dst_shape or x.shape[::-1], dtype=dst_dtype or x.dtype, buffer=nl.sbuf)
            nisa.dma_transpose(dst=dst, src=x, axes=axes, dge_mode=dge)
        return kernel

    x16 = _x(16, 64, dtype=BF16)
    with pytest.raises(LimitError, match="hardware-DGE transpose"):
        run(with_(nisa.dge_mode.hwdge), _x(32, 64, dtype=BF16))  # 2-D hwdge: 16 rows
    with pytest.raises(LimitError, match="hardware-DGE transpose"):
        run(with_(nisa.dge_mode.hwdge), _x(16, 64))  # a 4-byte dtype
    with pytest.raises(UnsupportedError, match="indirect"):
        run(with_(nisa.dge_mode.swdge), x16)
    with pytest.raises(KernelError, match="supported permutation"):
        run(with_(axes=(0, 1), dst_shape=(16, 64)), x16)
    with pytest.raises(KernelError, match="must equal dst.dtype"):
        run(with_(dst_dtype=nl.float32), x16)
    with pytest.raises(KernelError, match="must be"):
        run(with_(dst_shape=(16, 64)), x16)


# ---------------------------------------------------------------------------------------------------- is_transpose
def _matmul_transpose_kernel(x):
    k, m = x.shape
    t = nl.load(x)
    ident = nl.ndarray((k, k), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=ident, value=0.0)
    for i in range(k):
        nisa.memset(dst=ident[i:i + 1, i:i + 1], value=1.0)
    p = nl.ndarray((m, k), dtype=x.dtype, buffer=nl.psum)
    nisa.nc_matmul(dst=p, stationary=t, moving=ident, is_transpose=True)
    s = nl.ndarray((m, k), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=p)
    return _out(s)


def test_nc_matmul_transpose_mode_is_bit_accurate_with_nan_and_inf():
    x = _x(32, 64, dtype=BF16)
    x[0, 0], x[1, 2], x[3, 4] = np.nan, np.inf, -np.inf
    got, counts = run(_matmul_transpose_kernel, x)
    assert got.dtype == BF16 and got.shape == (64, 32)
    np.testing.assert_array_equal(got.view(np.uint16), x.T.view(np.uint16))  # bit for bit, NaN and Inf carried
    assert counts.instructions["tensor"] == 2  # LoadStationary + MultiplyMoving
    # a plain matmul by the identity would not carry them: NaN * 0 poisons the whole row of products
    with np.errstate(invalid="ignore"):
        assert np.isnan((x.astype(F32).T @ np.eye(32, dtype=F32))[0]).all()


def test_nc_matmul_transpose_mode_refuses_a_moving_tile_that_is_not_the_identity():
    def kernel(x):
        t = nl.load(x)
        p = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=t, moving=t[:, :x.shape[0]], is_transpose=True)

    with pytest.raises(KernelError, match="identity"):
        run(kernel, _x(16, 32, dtype=BF16))
    assert trace(_matmul_transpose_kernel, ((16, 8), BF16)).instructions["tensor"] == 2

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


# ------------------------------------------------- activations, identity, tensor_scalar_reduce, bn_stats, max8, range_select
def test_gelu_apprx_sigmoid_and_silu_dx_are_scalare_functions():
    """nl.gelu_apprx_sigmoid (x sigmoid(1.702 x)) and nl.silu_dx (the derivative of x sigmoid(x)), as nisa.activation
    functions and as nl elementwise calls, each one ScalarE instruction; their own error bound applies (not exact)."""
    def kernel(x, fn):
        t = nl.load(x)
        a = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=a, op=getattr(nl, fn), data=t)
        b = getattr(nl, fn)(t)
        nisa.tensor_tensor(dst=a, data1=a, data2=b, op=nl.subtract)
        return _out(b), _out(a)

    x = np.linspace(-6, 6, 128 * 8, dtype=F32).reshape(128, 8)
    xd = x.astype(np.float64)
    sig = 1 / (1 + np.exp(-xd))
    want = {"gelu_apprx_sigmoid": xd / (1 + np.exp(-1.702 * xd)), "silu_dx": sig * (1 + xd * (1 - sig))}
    for fn, w in want.items():
        (got, diff), c = run(kernel, x, fn=fn)
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
        assert np.all(diff == 0) and c.instructions["scalar"] == 2
    # finite differences of silu agree with silu_dx
    h = 1e-3
    silu = lambda v: v / (1 + np.exp(-v))  # noqa: E731
    np.testing.assert_allclose((silu(xd + h) - silu(xd - h)) / (2 * h), want["silu_dx"], atol=1e-6)


def test_shared_identity_matrix_is_an_sbuf_identity():
    """The page's example: a 128 x 128 fp32 identity equals one loaded from HBM and stores as it is; uint8 by
    default; written into dst when given; n past the partitions refused."""
    def kernel(expected):
        ident = nl.shared_identity_matrix(n=128, dtype=nl.float32)
        eq = nl.equal(ident, nl.load(expected))
        small = nl.shared_identity_matrix(4)
        into = nl.ndarray((8, 8), dtype=nl.bfloat16, buffer=nl.sbuf)
        same = nl.shared_identity_matrix(8, dtype=nl.bfloat16, dst=into)
        assert same is into and small.dtype == nl.uint8 and small.shape == (4, 4)
        return _out(ident), _out(eq), _out(into)

    (ident, eq, into), c = run(kernel, np.eye(128, dtype=F32))
    np.testing.assert_array_equal(ident, np.eye(128))
    assert np.all(eq == 1)
    np.testing.assert_array_equal(into.astype(F32), np.eye(8))
    assert c.dma_transfers >= 3 + 4

    def too_big(x):
        return _out(nl.shared_identity_matrix(129, dtype=nl.float32))

    with pytest.raises(KernelError, match="n = 129"):
        run(too_big, _x(4, 4))


def test_tensor_scalar_reduce_computes_and_reduces_into_vector_registers():
    """dst = data op0 operand0; reduce_res = reduce_op over every free dim, in VectorE's accumulator registers:
    reset_reduce starts from the identity, reduce continues (reduce_res=None keeps the result in the registers),
    load_reduce starts from reduce_init; reduce_res_negate negates the read-out only. reverse0 is not supported."""
    def kernel(x, k, rop):
        t = nl.load(x)
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        neg = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=d, data=t, op0=nl.multiply, operand0=nl.load(k), reduce_op=rop, reduce_res=r)
        nisa.tensor_scalar_reduce(dst=d, data=t, op0=nl.add, operand0=1.0, reduce_op=rop)  # registers only
        nisa.tensor_scalar_reduce(dst=d, data=t, op0=nl.multiply, operand0=2.0, reduce_op=rop, reduce_res=neg,
                                  reduce_cmd=nisa.reduce_cmd.reduce, reduce_res_negate=True)
        return _out(d), _out(r), _out(neg)

    x, k = _x(16, 2, 5, seed=3), _x(16, 1, seed=4)
    xf = x.reshape(16, -1).astype(np.float64)
    for rop, red, comb in ((nl.add, np.sum, np.add), (nl.max, np.max, np.maximum), (nl.min, np.min, np.minimum),
                           (nl.multiply, np.prod, np.multiply)):
        (d, r, neg), c = run(kernel, x, k, rop=rop)
        np.testing.assert_array_equal(d, x * 2)
        np.testing.assert_allclose(r[:, 0], red(xf * k.astype(np.float64), axis=1), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(-neg[:, 0], comb(red(xf + 1, axis=1), red(xf * 2, axis=1)), rtol=1e-5, atol=1e-6)
        assert c.instructions["vector"] == 3

    def loaded(x, init):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=d, data=nl.load(x), op0=nl.abs, operand0=None, reduce_op=nl.add, reduce_res=r,
                                  reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=nl.load(init))
        return _out(r)

    x, init = _x(8, 6, seed=5), _x(8, 1, seed=6)
    np.testing.assert_allclose(run(loaded, x, init)[0][:, 0], init[:, 0] + np.abs(x).sum(axis=1), rtol=1e-6)

    def bad(x, **kw):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=d, data=nl.load(x), op0=nl.add, operand0=1.0, **kw)
        return _out(d)

    with pytest.raises(UnsupportedError, match="reverse0"):
        run(bad, x, reduce_op=nl.add, reverse0=True)
    with pytest.raises(UnsupportedError, match="reduce_op"):
        run(bad, x, reduce_op=nl.subtract)
    with pytest.raises(KernelError, match="reduce_init"):
        run(bad, x, reduce_op=nl.add, reduce_init=1.0)
    with pytest.raises(KernelError, match="at most three free dims"):
        run(bad, _x(2, 2, 2, 2, 2), reduce_op=nl.add)


def test_bn_stats_gives_even_and_odd_count_mean_and_m2():
    """The page's six elements per partition (count, mean, variance x count of the even elements, then of the odd),
    fp32, at most nl.tile_size.bn_stats_fmax = 512 elements; the page's example 2 splits 1024 elements in two."""
    def kernel(x):
        t = nl.load(x)
        f = x.shape[1]
        n = (f + nl.tile_size.bn_stats_fmax - 1) // nl.tile_size.bn_stats_fmax
        stats = nl.ndarray((x.shape[0], 6 * n), dtype=nl.float32, buffer=nl.sbuf)
        for i in range(n):
            w = min(nl.tile_size.bn_stats_fmax, f - i * nl.tile_size.bn_stats_fmax)
            nisa.bn_stats(dst=stats[:, 6 * i:6 * i + 6], data=t[:, i * 512:i * 512 + w])
        return _out(stats)

    assert nl.tile_size.bn_stats_fmax == 512
    for shape in ((128, 128), (128, 1024), (4, 7)):
        x = _x(*shape, seed=7) * 3 + 1
        got, c = run(kernel, x)
        for i in range(got.shape[1] // 6):
            part = x[:, i * 512:(i + 1) * 512].astype(np.float64)
            for j, half in enumerate((part[:, 0::2], part[:, 1::2])):
                s = got[:, 6 * i + 3 * j:6 * i + 3 * j + 3]
                np.testing.assert_array_equal(s[:, 0], half.shape[1])
                np.testing.assert_allclose(s[:, 1], half.mean(axis=1), rtol=1e-5, atol=1e-5)
                np.testing.assert_allclose(s[:, 2], half.var(axis=1) * half.shape[1], rtol=1e-4)
        # mean and variance of the whole row follow from the halves (what bn_aggr does)
        assert c.instructions["vector"] == got.shape[1] // 6

    def too_wide(x):
        stats = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_stats(dst=stats, data=nl.load(x))
        return _out(stats)

    with pytest.raises(LimitError, match="at most 512"):
        run(too_wide, _x(128, 513))


def test_max8_gives_the_eight_largest_in_descending_order():
    """The page's example: [32, 128] values in [0, 1), eight per row, descending; compared in fp32 and cast to dst;
    8 to 16,384 elements per partition."""
    def kernel(x, dtype):
        out = nl.ndarray((x.shape[0], 8), dtype=dtype, buffer=nl.sbuf)
        nisa.max8(dst=out, src=nl.load(x))
        return _out(out)

    x = np.random.default_rng(8).random((32, 128)).astype(F32)
    got, c = run(kernel, x, dtype=nl.float32)
    np.testing.assert_array_equal(got, -np.sort(-x, axis=1)[:, :8])
    assert np.all(np.diff(got, axis=1) <= 0) and c.instructions["vector"] == 1
    got16, _ = run(kernel, x.astype(BF16), dtype=nl.bfloat16)
    np.testing.assert_array_equal(got16, -np.sort(-x.astype(BF16).astype(F32), axis=1)[:, :8].astype(BF16))
    x3 = _x(4, 3, 5, seed=9)  # several free dims: the partition's elements, flattened
    np.testing.assert_array_equal(run(kernel, x3, dtype=nl.float32)[0], -np.sort(-x3.reshape(4, -1), axis=1)[:, :8])
    with pytest.raises(LimitError, match="between 8 and 16,384"):
        run(kernel, _x(4, 7), dtype=nl.float32)


def test_range_select_keeps_the_range_and_reduces_its_max():
    """The page's example: keep on_true where bound0 <= range_start + index < bound1 (comp_op0 greater_equal,
    comp_op1 less), FP32_MIN elsewhere, the row max in reduce_res; chaining keeps the maximum in VectorE's registers
    (the first call without reduce_res, the next with reduce_cmd=reduce). on_false_value other than FP32_MIN, other
    comparisons, or another reduce_op are refused."""
    def kernel(on_true, b0, b1, start):
        t = nl.load(on_true)
        dst = nl.ndarray(on_true.shape, dtype=nl.float32, buffer=nl.sbuf)
        red = nl.ndarray((on_true.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.range_select(dst=dst, on_true_tile=t, comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=nl.load(b0),
                          bound1=nl.load(b1), reduce_res=red, reduce_op=nl.maximum, range_start=start,
                          on_false_value=nisa.FP32_MIN)
        chained = nl.ndarray((on_true.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.range_select(dst=dst, on_true_tile=t, comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=nl.load(b0),
                          bound1=nl.load(b1), range_start=start + 1000)  # nothing selected: the registers hold -max
        nisa.range_select(dst=dst, on_true_tile=t, comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=nl.load(b0),
                          bound1=nl.load(b1), reduce_cmd=nisa.reduce_cmd.reduce, reduce_res=chained, range_start=start)
        return _out(dst), _out(red), _out(chained)

    p, f, start = 8, 64, 10
    x = _x(p, f, seed=10)
    b0 = np.arange(p, dtype=F32).reshape(p, 1) * 4 + 12
    b1 = b0 + 9
    (dst, red, chained), c = run(kernel, x, b0, b1, start=start)
    idx = start + np.arange(f)[None, :]
    mask = (idx >= b0) & (idx < b1)
    want = np.where(mask, x, np.float32(nisa.FP32_MIN))
    np.testing.assert_array_equal(dst, want)
    np.testing.assert_array_equal(red[:, 0], want.max(axis=1))
    np.testing.assert_array_equal(chained[:, 0], want.max(axis=1))
    assert c.instructions["vector"] == 3

    def bad(on_true, b0, b1, **kw):
        dst = nl.ndarray(on_true.shape, dtype=nl.float32, buffer=nl.sbuf)
        args = dict(comp_op0=nl.greater_equal, comp_op1=nl.less)
        args.update(kw)
        nisa.range_select(dst=dst, on_true_tile=nl.load(on_true), bound0=nl.load(b0), bound1=nl.load(b1), **args)
        return _out(dst)

    with pytest.raises(KernelError, match="FP32_MIN"):
        run(bad, x, b0, b1, on_false_value=0.0)
    with pytest.raises(KernelError, match="comparison operators"):
        run(bad, x, b0, b1, comp_op0=nl.not_equal)
    with pytest.raises(UnsupportedError, match="reduce_op must be one of nl.maximum"):
        run(bad, x, b0, b1, reduce_op=nl.add)

"""The NKI interpreter: each Trn2 limit broken by a small kernel and refused with a message naming it, the NaN fill,
the binding of `nki` to the interpreter, and counts computed by hand.

The small kernels here take the interpreter's `nki.language` / `nki.isa` directly (`run` accepts a plain function);
`test_load_binds_nki_only_inside_the_module` checks the `import nki` route that real kernel files take.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from frontier.kernels.interpreter import KernelError, LimitError, UnsupportedError, find_real_nki, load, run
from frontier.kernels.interpreter import isa as nisa
from frontier.kernels.interpreter import language as nl

F32 = np.float32


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(F32)


def _copy_kernel(x):
    """HBM -> SBUF -> HBM, the smallest complete kernel."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def _matmul_kernel(a_t, b, accumulate=False):
    """out[M, N] = a_t[K, M].T @ b[K, N]: two loads, a matmul into PSUM, PSUM -> SBUF on VectorE, one store."""
    (k, m), (_, n) = a_t.shape, b.shape
    a_sb = nl.load(a_t)
    b_sb = nl.load(b)
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=a_sb, moving=b_sb, accumulate=accumulate)
    res = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, res)
    return out


def test_copy_roundtrip_and_counts():
    x = _x(128, 64)
    y, c = run(_copy_kernel, x)
    np.testing.assert_array_equal(y, x)
    nbytes = 128 * 64 * 4
    assert (c.hbm_read_bytes, c.hbm_write_bytes, c.dma_transfers, c.dma_bytes) == (nbytes, nbytes, 2, 2 * nbytes)
    assert sum(c.instructions.values()) == 0 and c.peak_sbuf_bytes == 64 * 4


# ------------------------------------------------------------------------------------------ limits


def test_129_partitions_refused():
    def kernel(x):
        nl.ndarray((129, 4), dtype=nl.float32, buffer=nl.sbuf)

    with pytest.raises(LimitError, match=r"partition dim 129 exceeds the 128 partitions"):
        run(kernel, _x(4, 4))


def test_on_chip_tiles_are_2d():
    with pytest.raises(LimitError, match="at least 2-D"):
        run(lambda x: nl.ndarray((128,), dtype=nl.float32, buffer=nl.sbuf), _x(4))


def test_matmul_moving_513_wide_refused():
    with pytest.raises(LimitError, match=r"moving free size N=513 exceeds 512"):
        run(_matmul_kernel, _x(128, 64), _x(128, 513))


def test_matmul_stationary_129_wide_refused():
    def kernel(a_t, b):  # a [129, 64] dst cannot even be allocated; the matmul refuses M first
        acc = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=nl.load(a_t), moving=nl.load(b))

    with pytest.raises(LimitError, match=r"stationary free size M=129 exceeds 128"):
        run(kernel, _x(128, 129), _x(128, 64))


def test_matmul_matches_numpy_and_counts_by_hand():
    a_t, b = _x(128, 64, seed=1), _x(128, 256, seed=2)
    out, c = run(_matmul_kernel, a_t, b)
    np.testing.assert_allclose(out, a_t.T @ b, rtol=1e-5, atol=1e-4)
    assert c.matmul_flops == 2 * 128 * 64 * 256
    assert c.instructions == {"tensor": 1, "vector": 1, "scalar": 0, "gpsimd": 0}
    assert c.elements["tensor"] == 128 * 256 and c.free_elements["tensor"] == 256  # the moving tile
    assert c.elements["vector"] == 64 * 256  # the PSUM -> SBUF copy
    assert c.hbm_read_bytes == (128 * 64 + 128 * 256) * 4 and c.hbm_write_bytes == 64 * 256 * 4
    assert c.dma_transfers == 3 and c.peak_psum_banks == 1


def test_matmul_dst_must_stay_in_one_psum_bank():
    def kernel(a_t, b):
        a_sb, b_sb = nl.load(a_t), nl.load(b)
        acc = nl.ndarray((64, 1024), dtype=nl.float32, buffer=nl.psum)  # two banks
        nisa.nc_matmul(dst=acc[:, 256:512], stationary=a_sb, moving=b_sb)  # inside bank 0: fine
        nisa.nc_matmul(dst=acc[:, 384:640], stationary=a_sb, moving=b_sb)  # bytes 1536..2559: crosses

    with pytest.raises(LimitError, match="crossing a 2 KiB PSUM bank"):
        run(kernel, _x(128, 64), _x(128, 256))


def test_psum_nine_banks_refused():
    def kernel(x):
        tiles = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(9)]
        return tiles

    with pytest.raises(LimitError, match=r"9 banks exceed the 8 PSUM banks"):
        run(kernel, _x(4, 4))


def test_psum_tile_rebound_in_a_loop_is_released():
    def kernel(x):
        for _ in range(20):  # each iteration's tile replaces the last one
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            nisa.memset(dst=acc, value=0.0)
        return _copy_kernel(x)

    _, c = run(kernel, _x(4, 4))
    assert c.peak_psum_banks == 2  # the new tile is made before the name lets go of the old one


def test_sbuf_overflow_refused_and_release_by_del():
    big = 110_000 // 4  # fp32 per partition: two of these exceed 212,984 B

    def hold(x):
        a = nl.ndarray((128, big), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((128, big), dtype=nl.float32, buffer=nl.sbuf)
        return a, b

    def release(x):
        a = nl.ndarray((128, big), dtype=nl.float32, buffer=nl.sbuf)
        del a
        b = nl.ndarray((128, big), dtype=nl.float32, buffer=nl.sbuf)
        return _copy_kernel(x)

    with pytest.raises(LimitError, match=r"SBUF overflow: .* of the 212,984 B usable per partition"):
        run(hold, _x(4, 4))
    _, c = run(release, _x(4, 4))
    assert c.peak_sbuf_bytes == 110_000 + 4 * 4  # b, and the [4, 4] fp32 tile of the copy


def test_dma_from_psum_refused():
    def via_dma_copy(x):
        acc = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=acc)

    def via_store(x):
        acc = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, acc)

    for kernel in (via_dma_copy, via_store):
        with pytest.raises(LimitError, match="DMA cannot read or write PSUM"):
            run(kernel, _x(4, 4))


def test_gpsimd_never_touches_psum():
    def iota_into_psum(x):
        acc = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.psum)
        nisa.iota(dst=acc, pattern=[[1, 8]])

    def partition_reduce_of_psum(x):
        acc = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.psum)
        res = nl.ndarray((1, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(dst=res, op=nl.add, data=acc)

    def select_from_psum(x):
        acc = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.psum)
        res = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.affine_select(dst=res, pattern=[[1, 8]], channel_multiplier=-1, on_true_tile=acc, on_false_value=0.0,
                           cmp_op=nl.greater_equal)

    for kernel in (iota_into_psum, partition_reduce_of_psum, select_from_psum):
        with pytest.raises(LimitError, match="GpSimd cannot access PSUM"):
            run(kernel, _x(4, 4))


def test_gpsimd_ops_on_sbuf():
    def kernel(x):
        idx = nl.ndarray((4, 6), dtype=nl.float32, buffer=nl.sbuf)
        nisa.iota(dst=idx, pattern=[[1, 6]], offset=1, channel_multiplier=10)  # 10 p + j + 1
        causal = nl.ndarray((4, 6), dtype=nl.float32, buffer=nl.sbuf)  # keep j <= p
        nisa.affine_select(dst=causal, pattern=[[-1, 6]], channel_multiplier=1, on_true_tile=idx,
                           on_false_value=-1.0, cmp_op=nl.greater_equal)
        col = nl.ndarray((1, 6), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(dst=col, op=nl.maximum, data=causal)
        out = nl.ndarray((1, 6), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=col)
        return out

    out, c = run(kernel, _x(4, 4))
    idx = 10 * np.arange(4)[:, None] + np.arange(6)[None, :] + 1
    expected = np.where(np.arange(6)[None, :] <= np.arange(4)[:, None], idx, -1).max(axis=0, keepdims=True)
    np.testing.assert_array_equal(out, expected)
    assert c.instructions["gpsimd"] == 3


def test_uninitialised_accumulation_refused():
    def accumulate_fresh(a_t, b):
        acc = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=nl.load(a_t), moving=nl.load(b), accumulate=True)

    def accumulate_after_memset(a_t, b):
        acc = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.psum)
        nisa.memset(dst=acc, value=0.0)
        nisa.nc_matmul(dst=acc, stationary=nl.load(a_t), moving=nl.load(b), accumulate=True)

    def auto_after_memset(a_t, b):
        acc = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.psum)
        nisa.memset(dst=acc, value=0.0)
        nisa.nc_matmul(dst=acc, stationary=nl.load(a_t), moving=nl.load(b))

    for kernel in (accumulate_fresh, accumulate_after_memset):
        with pytest.raises(LimitError, match="accumulate=True into PSUM that no matmul with accumulate=False"):
            run(kernel, _x(128, 64), _x(128, 64))
    with pytest.raises(LimitError, match="accumulate=None into PSUM partly unwritten or written by a non-matmul"):
        run(auto_after_memset, _x(128, 64), _x(128, 64))


def test_accumulation_over_k_tiles():
    def kernel(a_t, b):  # K = 256 in two tiles: overwrite, then accumulate
        acc = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.psum)
        for i in range(2):
            nisa.nc_matmul(dst=acc, stationary=nl.load(a_t[i * 128:(i + 1) * 128, :]),
                           moving=nl.load(b[i * 128:(i + 1) * 128, :]), accumulate=i > 0)
        res = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        out = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, res)
        return out

    a_t, b = _x(256, 64, seed=3), _x(256, 32, seed=4)
    out, c = run(kernel, a_t, b)
    np.testing.assert_allclose(out, a_t.T @ b, rtol=1e-5, atol=1e-4)
    assert c.matmul_flops == 2 * 256 * 64 * 32


def test_divide_and_mod_refused():
    def high_level(a):
        t = nl.load(a)
        nl.divide(t, t)

    def as_operator(a):
        t = nl.load(a)
        nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.divide)

    def mod(a):
        t = nl.load(a)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.mod, operand0=2.0)

    for kernel in (high_level, as_operator):
        with pytest.raises(UnsupportedError, match="nl.divide does not exist on the hardware"):
            run(kernel, _x(8, 8))
    with pytest.raises(UnsupportedError, match="nl.mod does not exist on the hardware"):
        run(mod, _x(8, 8))


def test_broadcasting_binary_op_refused():
    def kernel(a, b):
        nl.add(nl.load(a), nl.load(b))

    with pytest.raises(UnsupportedError, match=r"broadcasting \(8, 8\) with \(8, 1\) does not exist on the hardware"):
        run(kernel, _x(8, 8), _x(8, 1))


def test_high_level_elementwise_ops():
    def kernel(a, b):
        s = nl.multiply(nl.add(nl.load(a), nl.load(b)), 2.0)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.exp(s))
        return out

    a, b = _x(8, 8, seed=5), _x(8, 8, seed=6)
    out, c = run(kernel, a, b)
    np.testing.assert_allclose(out, np.exp((a + b) * 2), rtol=1e-6)
    assert (c.instructions["vector"], c.instructions["scalar"]) == (2, 1)


def test_new_buffers_are_nan():
    def unwritten(x):
        t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:64, :], src=x)  # half the partitions written
        y = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=y, op=nl.exp, data=t)
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=y)
        return out

    out, _ = run(unwritten, _x(64, 8))
    assert np.isfinite(out[:64]).all() and np.isnan(out[64:]).all()


def test_unset_reduce_registers_are_nan():
    def kernel(x):
        t = nl.load(x)
        s = nl.ndarray((8, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=t, op=nl.copy, data=t, reduce_op=nl.add, reduce_res=s)  # reduce_cmd=idle: no reset
        out = nl.ndarray((8, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, s)
        return out

    out, _ = run(kernel, _x(8, 8))
    assert np.isnan(out).all()


def test_outputs_must_be_shared_hbm():
    def private_hbm_output(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
        nisa.dma_copy(dst=out, src=nl.load(x))
        return out

    with pytest.raises(KernelError, match=r"buffer=nl.shared_hbm"):
        run(private_hbm_output, _x(8, 8))
    with pytest.raises(KernelError, match=r"buffer=nl.shared_hbm"):
        run(lambda x: nl.load(x), _x(8, 8))


def test_activation_input_outside_valid_range_refused():
    def kernel(x):
        t = nl.load(x)
        nisa.activation(dst=t, op=nl.rsqrt, data=t)

    with pytest.raises(LimitError, match=r"nl.rsqrt input .* outside its valid input range"):
        run(kernel, np.zeros((8, 8), F32))


def test_out_of_bounds_slice_refused():
    def kernel(x):
        nl.load(x[100:228, :])

    with pytest.raises(LimitError, match="slice 100:228 out of bounds for dim 0 of size 200"):
        run(kernel, _x(200, 4))


def test_engines_do_not_move_data_across_partitions():
    def kernel(x):
        t = nl.load(x)
        nisa.tensor_tensor(dst=t[0:64, :], data1=t[0:64, :], data2=t[64:128, :], op=nl.add)

    with pytest.raises(LimitError, match="operands cover different partitions"):
        run(kernel, _x(128, 4))


def test_compute_engines_never_read_hbm():
    def kernel(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t, src=x)

    with pytest.raises(LimitError, match="is in HBM; compute engines read and write SBUF/PSUM only"):
        run(kernel, _x(8, 8))


def test_on_chip_views_keep_the_partition_dim():
    def kernel(x):
        t = nl.ndarray((64, 4, 8), dtype=nl.float32, buffer=nl.sbuf)
        assert t[3].shape == (1, 4, 8) and t[:, 0].shape == (64, 8) and t[:, 0, 5].shape == (64, 1)
        assert t[nl.ds(8, 16), 1, :].shape == (16, 8) and t[8:24].p0 == 8
        assert x[3].shape == (8,)  # HBM drops the indexed dim
        with pytest.raises(LimitError, match="cannot be strided"):
            t[0:64:2]
        with pytest.raises(LimitError, match="keep the partition dim"):
            t.reshape((32, 64))
        return _copy_kernel(x)

    run(kernel, _x(16, 8))


# ------------------------------------------------------------------------------------------ binding and detection


KERNEL_SOURCE = '''
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def double(x):
    t = nl.load(x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out
'''


def test_load_binds_nki_only_inside_the_module(tmp_path):
    path = tmp_path / "double_kernel.py"
    path.write_text(KERNEL_SOURCE)
    had_nki = "nki" in sys.modules
    mod = load(path)
    assert ("nki" in sys.modules) == had_nki  # nothing installed globally
    assert not hasattr(mod.nki, "simulate")  # the stand-in never passes for the real package
    x = _x(8, 8)
    out, c = run(mod.double, x)
    np.testing.assert_array_equal(out, 2 * x)
    assert c.instructions["vector"] == 1
    with pytest.raises(KernelError, match="runs through frontier.kernels.interpreter.run"):
        mod.double(x)


def test_find_real_nki_rejects_the_pypi_stub(monkeypatch):
    monkeypatch.setitem(sys.modules, "nki", types.ModuleType("nki"))
    nki, why = find_real_nki()
    assert nki is None and "lacks jit, simulate" in why


def test_find_real_nki_here():
    nki, why = find_real_nki()
    assert (nki is None) == bool(why)

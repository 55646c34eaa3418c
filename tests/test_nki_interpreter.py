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

from frontier.kernels.interpreter import (ActivationError, KernelError, LanguageError, LimitError, UnsupportedError,
                                         approximate_activations, find_real_nki, load, run, trace)
from frontier.kernels.interpreter import isa as nisa
from frontier.kernels.interpreter import language as nl
from frontier.kernels.interpreter.limits import ACTIVATION_ABS_ERROR, ACTIVATION_REL_ERROR

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
    def kernel(x):
        nl.ndarray((128,), dtype=nl.float32, buffer=nl.sbuf)

    with pytest.raises(LimitError, match="at least 2-D"):
        run(kernel, _x(4))


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
    # nc_matmul is two TensorE instructions (LoadStationary of the stationary tile, MultiplyMoving of the moving one)
    assert c.instructions == {"tensor": 2, "vector": 1, "scalar": 0, "gpsimd": 0}
    assert c.elements["tensor"] == 128 * 64 + 128 * 256 and c.free_elements["tensor"] == 64 + 256
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
        tiles = []
        for _ in range(9):
            tiles.append(nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum))
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


def test_sbuf_overflow_refused_and_released_when_a_helper_returns():
    big = 110_000 // 4  # fp32 per partition: two of these exceed 212,984 B

    def hold(x):
        a = nl.ndarray((128, big), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((128, big), dtype=nl.float32, buffer=nl.sbuf)
        return a, b

    def scratch():
        a = nl.ndarray((128, big), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=a, value=0.0)

    def release(x):
        scratch()  # its tile ends with the helper (`del` is not in the NKI language)
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

    def sbuf_output(x):
        return nl.load(x)

    with pytest.raises(KernelError, match=r"buffer=nl.shared_hbm"):
        run(private_hbm_output, _x(8, 8))
    with pytest.raises(KernelError, match=r"buffer=nl.shared_hbm"):
        run(sbuf_output, _x(8, 8))


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


HELPERS_SOURCE = '''
import nki.isa as nisa
import nki.language as nl

LOADS = []  # one list per load: the helpers module is run once however many modules import it


def scaled(t, factor):
    LOADS.append(factor)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=factor)
    return t


def ranged(n):
    return nl.dynamic_range(n)  # removed in NKI 0.7
'''

TILED_SOURCE = '''
import nki
import nki.language as nl

from .helpers import scaled
from . import helpers


@nki.jit
def triple(x):
    t = scaled(nl.load(x), 3.0)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


@nki.jit
def stale(x):
    for i in helpers.ranged(2):
        pass
    return x
'''


def test_a_relative_import_loads_the_helpers_with_the_same_nki(tmp_path):
    (tmp_path / "helpers.py").write_text(HELPERS_SOURCE)
    (tmp_path / "tiled.py").write_text(TILED_SOURCE)
    had_nki = "nki" in sys.modules
    mod = load(tmp_path / "tiled.py")
    assert ("nki" in sys.modules) == had_nki
    assert mod.helpers.scaled is mod.scaled  # both import forms give the one module of this load
    x = _x(8, 8)
    out, c = run(mod.triple, x)
    np.testing.assert_array_equal(out, 3 * x)
    assert c.instructions["vector"] == 1 and mod.helpers.LOADS == [3.0]
    assert load(tmp_path / "tiled.py").helpers is not mod.helpers  # another load, another module


def test_the_language_check_follows_helpers_into_another_module(tmp_path):
    (tmp_path / "helpers.py").write_text(HELPERS_SOURCE)
    (tmp_path / "tiled.py").write_text(TILED_SOURCE)
    mod = load(tmp_path / "tiled.py")
    with pytest.raises(LanguageError, match=r"helpers\.py:\d+ \(ranged\): dynamic-range"):
        run(mod.stale, _x(8, 8))


def test_a_relative_import_of_no_kernel_source_names_the_file(tmp_path):
    (tmp_path / "lonely.py").write_text("import nki\nfrom .missing import thing\n")
    with pytest.raises(ModuleNotFoundError, match=r"relative import of 'missing' names no kernel source"):
        load(tmp_path / "lonely.py")


def test_a_relative_import_beyond_the_package_or_of_everything_is_refused(tmp_path):
    (tmp_path / "climbing.py").write_text("import nki\nfrom ..elsewhere import thing\n")
    with pytest.raises(ImportError, match="beyond its top-level package"):
        load(tmp_path / "climbing.py")
    (tmp_path / "starred.py").write_text("import nki\nfrom . import *\n")
    with pytest.raises(UnsupportedError, match=r"import \*"):
        load(tmp_path / "starred.py")


def test_the_package_kernels_share_one_tiles_module_per_load():
    ce = load("frontier.kernels.nki.head_ce")
    assert ce.chunks.__module__ == "frontier.kernels.nki.tiles" and ce.chunks(300, 128) == [(0, 128), (128, 128),
                                                                                            (256, 44)]


def test_find_real_nki_rejects_the_pypi_stub(monkeypatch):
    monkeypatch.setitem(sys.modules, "nki", types.ModuleType("nki"))
    nki, why = find_real_nki()
    assert nki is None and "lacks jit, simulate" in why


def _fake_nki(version):
    mod = types.ModuleType("nki")
    mod.jit = mod.simulate = lambda f: f
    mod.__version__ = version
    return mod


@pytest.mark.parametrize("version", ["0.6.0", "0.8.0", "0.3.1", "1.7.0"])
def test_find_real_nki_refuses_other_versions_naming_the_supported_one(monkeypatch, version):
    """One toolchain (frontier.kernels.toolchain): an nki that is not 0.7 is refused in one line naming it."""
    monkeypatch.setitem(sys.modules, "nki", _fake_nki(version))
    nki, why = find_real_nki()
    assert nki is None and "\n" not in why
    assert f"version {version}" in why and "NKI 0.7 only" in why and "Neuron SDK 2.33" in why


@pytest.mark.parametrize("version", ["0.7.0", "0.7.2"])
def test_find_real_nki_takes_the_supported_version(monkeypatch, version):
    monkeypatch.setitem(sys.modules, "nki", _fake_nki(version))
    nki, why = find_real_nki()
    assert nki is sys.modules["nki"] and why == ""


def test_find_real_nki_here():
    nki, why = find_real_nki()
    assert (nki is None) == bool(why)


# ------------------------------------------------------------------------------------------ PSUM placement (issue 28.3)


def test_a_matmul_that_could_cross_a_bank_under_tight_packing_is_refused():
    """The alignment of PSUM tiles is undocumented: a 256-byte tile allocated first may put the next tile at byte 256,
    where a full-bank matmul output would straddle two banks. Whole-bank tiles are safe wherever they land."""

    def small_tile_first(a_t, b):
        a_sb, b_sb = nl.load(a_t), nl.load(b)
        small = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.psum)  # 256 B per partition
        nisa.memset(dst=small, value=0.0)
        acc = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.psum)  # placed at byte 256
        nisa.nc_matmul(dst=acc, stationary=a_sb, moving=b_sb)

    def whole_banks(a_t, b):
        a_sb, b_sb = nl.load(a_t), nl.load(b)
        first = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.memset(dst=first, value=0.0)
        acc = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=a_sb, moving=b_sb)
        res = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        out = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, res)
        return out

    with pytest.raises(LimitError, match=r"crossing a 2 KiB PSUM bank boundary under the tightest packing"):
        run(small_tile_first, _x(128, 64), _x(128, 512))
    a_t, b = _x(128, 64, seed=1), _x(128, 512, seed=2)
    out, _ = run(whole_banks, a_t, b)
    np.testing.assert_allclose(out, a_t.T @ b, rtol=1e-5, atol=1e-4)


def test_psum_tiles_are_placed_back_to_back():
    def kernel(x):
        a = nl.ndarray((128, 100), dtype=nl.float32, buffer=nl.psum)
        b = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        assert (a.storage.psum_offset, b.storage.psum_offset) == (0, 400)
        return _copy_kernel(x)

    run(kernel, _x(4, 4))


# ------------------------------------------------------------------------------------------ small items (issue 28.7)


def test_iota_is_integer_arithmetic():
    """nki.isa.iota computes in 32-bit integers and casts to dst's dtype: int32 is exact past 2^24."""
    def kernel(x):
        t = nl.ndarray((2, 4), dtype=nl.int32, buffer=nl.sbuf)
        nisa.iota(dst=t, pattern=[[1, 4]], offset=2**24 + 1, channel_multiplier=4)
        out = nl.ndarray((2, 4), dtype=nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    out, _ = run(kernel, _x(2, 2))
    np.testing.assert_array_equal(out, 2**24 + 1 + np.arange(8).reshape(2, 4))


def test_matmul_perf_mode_takes_the_documented_values():
    assert {e.name: e.value for e in nisa.matmul_perf_mode} == {"none": "none", "double_row": "double_row"}

    def kernel(a_t, b, mode):
        acc = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=nl.load(a_t), moving=nl.load(b), perf_mode=mode)
        return a_t

    run(kernel, _x(128, 64), _x(128, 32), mode=nisa.matmul_perf_mode.none)
    run(kernel, _x(128, 64), _x(128, 32), mode="none")
    with pytest.raises(KernelError, match="perf_mode must be a nisa.matmul_perf_mode"):
        run(kernel, _x(128, 64), _x(128, 32), mode=0)
    with pytest.raises(UnsupportedError, match="perf modes are not in the interpreted subset"):
        run(kernel, _x(128, 64), _x(128, 32), mode=nisa.matmul_perf_mode.double_row)


def test_enum_values_are_the_nki_stubs():
    assert {e.name: e.value for e in nisa.engine} == {"unknown": 0, "tensor": 1, "scalar": 2, "gpsimd": 3, "dma": 4,
                                                      "vector": 5, "sync": 6}
    assert {e.name: e.value for e in nisa.dge_mode} == {"unknown": 0, "swdge": 1, "hwdge": 2, "none": 3}


def test_power_with_a_scalar_exponent_is_refused():
    def scalar_exponent(x):
        nl.power(nl.load(x), 2.0)

    def tile_exponent(x):
        t = nl.load(x)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.power(t, t))
        return out

    with pytest.raises(UnsupportedError, match=r"nl.power\(tile, scalar\): scalar exponents are not supported"):
        run(scalar_exponent, _x(8, 8))
    x = np.abs(_x(8, 8)) + 0.5
    out, c = run(tile_exponent, x)
    np.testing.assert_allclose(out, x**x, rtol=1e-6)
    assert c.instructions["gpsimd"] == 1


def test_nc_transpose_stays_within_one_psum_bank():
    def kernel(x):
        t = nl.load(x)  # [64, 128]
        tp = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)  # two banks
        nisa.nc_transpose(dst=tp[:, 448:512], data=t)  # bytes 1792..2047: inside bank 0
        nisa.nc_transpose(dst=tp[:, 480:544], data=t)  # bytes 1920..2175: crosses into bank 1

    with pytest.raises(LimitError, match=r"nisa.nc_transpose: dst spans PSUM bytes 1920..2175"):
        run(kernel, _x(64, 128))


# ------------------------------------------------------------------------------------------ semantics (issue 28.8)


def test_int32_tensor_tensor_is_exact_on_gpsimd():
    """nisa.tensor_tensor docs: all-int32 operands run on GpSimd in native integer arithmetic, exact for every 32-bit
    value (through fp32, 16777217 + 0 would give 16777216)."""

    def kernel(a, b):
        ta, tb = nl.load(a), nl.load(b)
        res = nl.ndarray(a.shape, dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=res, data1=ta, data2=tb, op=nl.add)
        out = nl.ndarray(a.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        nl.store(out, res)
        return out

    a = np.array([[16_777_217, 2**31 - 2, -(2**31), 123_456_789]], np.int32)
    b = np.array([[0, 1, 0, -987_654_321]], np.int32)
    out, c = run(kernel, a, b)
    np.testing.assert_array_equal(out, a.astype(np.int64) + b)
    assert c.instructions["gpsimd"] == 1 and c.instructions["vector"] == 0


def test_a_kernel_may_write_an_input_and_return_it():
    """The simulator docs: "input arrays are updated in-place if the kernel modified the corresponding HBM tensors"."""

    def kernel(x):
        t = nl.load(x)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=x, src=t)
        return x

    x = _x(8, 8)
    before = x.copy()
    out, _ = run(kernel, x)
    np.testing.assert_array_equal(out, 2 * before)
    np.testing.assert_array_equal(x, 2 * before)  # the caller's array, updated in place


# ------------------------------------------------------------------------------------------ device loops (issue 28.6)


def _doubling_rows(x):
    """out = 2 x, 128 rows per iteration of a device loop over row offsets."""
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)

    def body(r):
        t = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x.ap([[d, 128], [1, d]], offset=0, scalar_offset=r))
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out.ap([[d, 128], [1, d]], offset=0, scalar_offset=r), src=t)

    nl.fori_loop(0, n, body, step=128)
    return out


def _doubling_rows_unrolled(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for r in range(0, n, 128):
        t = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r:r + 128, :])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[r:r + 128, :], src=t)
    return out


def test_a_device_loop_is_emitted_once_and_runs_every_iteration():
    x = _x(5 * 128, 16)
    out, c = run(_doubling_rows, x)
    np.testing.assert_array_equal(out, 2 * x)
    assert c.instructions["vector"] == 5 and c.dma_transfers == 10  # executed: every iteration
    assert c.static_instructions == {"tensor": 0, "vector": 1, "scalar": 0, "gpsimd": 0, "dma": 2}  # emitted: once
    assert c.dynamic_loops == 1
    _, u = run(_doubling_rows_unrolled, x)
    assert u.instructions == c.instructions and u.static_total == 15 and u.dynamic_loops == 0


def test_fori_loop_and_trace():
    def kernel(x):
        n, d = x.shape
        out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)

        def body(r):
            t = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x.ap([[d, 128], [1, d]], offset=0, scalar_offset=r))
            nisa.dma_copy(dst=out.ap([[d, 128], [1, d]], offset=0, scalar_offset=r), src=t)

        nl.fori_loop(0, n, body, step=128)
        return out

    x = _x(3 * 128, 8)
    out, c = run(kernel, x)
    np.testing.assert_array_equal(out, x)
    assert c.dma_transfers == 6 and c.static_total == 2
    t = trace(_doubling_rows, ((40 * 128, 640), np.float32))  # shapes only: the body once, nothing computed
    assert t.static_total == 3 and t.dma_transfers == 2 and t.peak_sbuf_bytes == 640 * 4


def test_a_fori_loop_variable_is_an_nki_scalar():
    """With int bounds the body gets an NkiScalar (nki.language.fori_loop, 2.33): +, - and * on it are traced into
    another scalar (32-bit, wrapping) that a scalar_offset reads; a Python int, index or branch from it is refused,
    and a comparison's result cannot be used. With a register bound it is a VirtualRegister: no arithmetic."""
    def offsets(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)

        def body(i):  # i = 0, 1: rows 128 i .. 128 i + 127 (a scalar_offset counts rows of dim 0)
            t = nl.load(x.ap([[4, 128], [1, 4]], offset=0, scalar_offset=i * 128 - 0))
            nl.store(out.ap([[4, 128], [1, 4]], offset=0, scalar_offset=-(-i) * 64 + i * 64), t)

        nl.fori_loop(0, 2, body)
        return out

    x = _x(256, 4)
    out, _ = run(offsets, x)
    np.testing.assert_array_equal(out, x)

    def slicing(x):
        nl.fori_loop(0, 256, lambda r: nl.load(x[r:r + 128, :]), step=128)

    def condition(x):
        def body(r):
            if r == 0:
                nl.load(x)

        nl.fori_loop(0, 2, body)

    def divides(x):
        nl.fori_loop(0, 2, lambda r: nl.load(x.ap([[4, 128], [1, 4]], offset=0, scalar_offset=r // 2)))

    def register_bound(x):
        nl.fori_loop(0, nisa.register_alloc(2), lambda r: nl.load(x.ap([[4, 128], [1, 4]], offset=0,
                                                                           scalar_offset=r * 128)))

    for kernel, words in ((slicing, "is an NkiScalar"), (condition, "result cannot be used"),
                          (divides, "is an NkiScalar"), (register_bound, "is a device register")):
        with pytest.raises(KernelError, match=words):
            run(kernel, _x(256, 4))
    assert (nl.Scalar(2**31 - 1) + 1)._runtime_value() == -2**31  # 32 bits, wrapping


def test_a_matmul_accumulate_inferred_in_a_compiled_loop_is_the_one_emitted():
    """nc_matmul(accumulate=None) is settled by the compiler where it emits the instruction (first write overwrites,
    later ones accumulate): a compiled loop's body is emitted once, so every iteration does what the first did."""
    def kernel(a):
        ps = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.psum)
        t = nl.load(a)

        def body(i):
            nisa.nc_matmul(dst=ps, stationary=t, moving=t)  # emitted as the first write: it overwrites

        nl.fori_loop(0, 3, body)
        unrolled = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.psum)
        for _ in range(3):  # a Python loop emits three instructions: overwrite, accumulate, accumulate
            nisa.nc_matmul(dst=unrolled, stationary=t, moving=t)
        out = nl.ndarray((1, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        res = nl.ndarray((1, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res[:, 0:1], src=ps)
        nisa.tensor_copy(dst=res[:, 1:2], src=unrolled)
        nl.store(out, res)
        return out

    out, _ = run(kernel, np.ones((1, 1), np.float32))
    np.testing.assert_array_equal(out, [[1.0, 3.0]])


def test_dynamic_range_is_refused_naming_fori_loop():
    """NKI 0.7 removed nl.dynamic_range (migration guide 0.6 -> 0.7); fori_loop replaces it."""
    def kernel(x):
        for r in nl.dynamic_range(0, 256, 128):
            nl.load(x)
        return x

    with pytest.raises(LanguageError, match=r"dynamic_range.*removed in NKI 0\.7.*fori_loop"):
        run(kernel, _x(256, 4))


def test_fori_loop_bounds_fit_32_bits_and_its_body_returns_nothing():
    def wide(x):
        def body(i):
            nl.load(x)

        nl.fori_loop(0, 2**31, body, step=2**30)
        return x

    def returns(x):
        def body(i):
            return i

        nl.fori_loop(0, 2, body)
        return x

    with pytest.raises(KernelError, match="does not fit 32 bits"):
        run(wide, _x(4, 4))
    with pytest.raises(KernelError, match="cannot return a value"):
        run(returns, _x(4, 4))


def test_ap_stays_inside_its_storage():
    def kernel(x):
        nl.load(x.ap([[4, 128], [1, 4]], offset=0, scalar_offset=_reg(200)))

    with pytest.raises(LimitError, match=r"ap: pattern .* reaches element"):
        run(kernel, _x(256, 4))


def _reg(v):
    return nl.Register(v)


# ------------------------------------------------------------------------------------------ activations (issue 28.4)


def _act_kernel(x):
    t = nl.load(x)
    e = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=e, op=nl.exp, data=t)
    c = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=c, op=nl.copy, data=t)
    out_e = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    out_c = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out_e, e)
    nl.store(out_c, c)
    return out_e, out_c


def test_approximate_activations_perturb_within_the_stated_bound():
    x = _x(64, 32)
    x[1] = x[0]  # equal inputs: a fixed polynomial gives equal outputs
    exact = np.exp(x.astype(np.float64))
    (e0, c0), _ = run(_act_kernel, x)
    np.testing.assert_allclose(e0, exact, rtol=1e-6)  # exact by default
    bound = ACTIVATION_REL_ERROR * exact + ACTIVATION_ABS_ERROR
    for mode in ("random", "high", "low"):
        with approximate_activations(ActivationError(mode=mode, seed=3)):
            (e, c), _ = run(_act_kernel, x)
        err = e - exact
        assert (np.abs(err) <= bound + 4 * np.finfo(F32).eps * exact).all()  # + fp32 roundings of exp and result
        np.testing.assert_array_equal(c, x)  # identity is a polynomial: never perturbed
        if mode == "random":
            assert np.abs(err).max() > 0.5 * bound.max() and (err > 0).any() and (err < 0).any()
            np.testing.assert_array_equal(e[1], e[0])
        else:
            sign = 1 if mode == "high" else -1
            np.testing.assert_allclose(err, sign * bound, rtol=1e-4)


# ------------------------------------------------------------------------------------------ LNC=2: two cores, one HBM


def _sum_rows_racy(x):
    """Each core adds its half of x's 128-row tiles into ONE shared [128, d] accumulator (read-add-write)."""
    n, d = x.shape
    acc = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.shared_hbm)
    if nl.program_id(0) == 0:
        z = nl.zeros((128, d), dtype=nl.float32)
        nisa.dma_copy(dst=acc, src=z)
    nisa.core_barrier(acc, (0, 1))
    half = n // nl.num_programs()
    for r in range(nl.program_id(0) * half, (nl.program_id(0) + 1) * half, 128):
        t = nl.load(x[r:r + 128, :])
        cur = nl.load(acc)
        nisa.tensor_tensor(dst=cur, data1=cur, data2=t, op=nl.add)
        nl.store(acc, cur)
    return acc


def _sum_rows_sharded(x):
    """The same sum without a race: a part per core in shared HBM, a barrier, then core 0 adds the parts."""
    n, d = x.shape
    cores, core = nl.num_programs(), nl.program_id(0)
    parts = nl.ndarray((cores, 128, d), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.shared_hbm)
    own = nl.zeros((128, d), dtype=nl.float32)
    half = n // cores
    for r in range(core * half, (core + 1) * half, 128):
        t = nl.load(x[r:r + 128, :])
        nisa.tensor_tensor(dst=own, data1=own, data2=t, op=nl.add)
    nisa.dma_copy(dst=parts[core], src=own)
    nisa.core_barrier(parts, (0, 1))
    if core == 0:
        total = nl.load(parts[0])
        for c in range(1, cores):
            nisa.tensor_tensor(dst=total, data1=total, data2=nl.load(parts[c]), op=nl.add)
        nl.store(acc, total)
    return acc


def test_at_lnc2_a_read_add_write_race_gives_wrong_numbers_and_is_counted():
    x = _x(4 * 128, 8)
    want = x.reshape(4, 128, 8).sum(0)
    racy, c = run(_sum_rows_racy, x, lnc=2)
    assert np.abs(racy - want).max() > 0.1 and c.lnc_conflicts > 0  # one core's updates lost
    good, c = run(_sum_rows_sharded, x, lnc=2)
    np.testing.assert_allclose(good, want, rtol=1e-6, atol=1e-6)
    assert c.lnc_conflicts == 0


def test_lnc_program_ids_and_shared_outputs():
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)  # one tensor for both cores
        n = x.shape[0] // nl.num_programs()
        r0 = nl.program_id(0) * n
        for r in range(r0, r0 + n, 128):
            t = nl.load(x[r:r + 128, :])
            nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=float(nl.program_id(0)))
            nl.store(out[r:r + 128, :], t)
        return out

    x = _x(256, 4)
    one, c1 = run(kernel, x)
    np.testing.assert_array_equal(one, x)
    two, c2 = run(kernel, x, lnc=2)
    np.testing.assert_array_equal(two[:128], x[:128])
    np.testing.assert_array_equal(two[128:], x[128:] + 1)
    assert c2.lnc_conflicts == 0 and len(c2.per_core) == 2 and c2.dma_transfers == 4
    assert trace(kernel, x, lnc=2).static_total == 3  # each core's own program


def test_core_barrier_rules():
    def barrier_at_lnc1(x):
        nisa.core_barrier(x, (0, 1))
        return x

    def one_sided(x):
        if nl.program_id(0) == 0:
            nisa.core_barrier(x, (0, 1))
        return x

    def list_of_cores(x):
        nisa.core_barrier(x, [0, 1])
        return x

    with pytest.raises(KernelError, match="only allowed when LNC is enabled"):
        run(barrier_at_lnc1, _x(4, 4))
    with pytest.raises(KernelError, match="one core reached a barrier the other never reached"):
        run(one_sided, _x(4, 4), lnc=2)
    with pytest.raises(KernelError, match=r"cores must be the tuple \(0, 1\)"):
        run(list_of_cores, _x(4, 4), lnc=2)
    with pytest.raises(UnsupportedError, match="LNC degree 4"):
        run(_copy_kernel, _x(4, 4), lnc=4)


def test_lnc2_cores_must_allocate_the_same_shared_tensors():
    def kernel(x):
        out = nl.ndarray((x.shape[0] + nl.program_id(0), x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
        return out

    with pytest.raises(KernelError, match="must allocate the same shared tensors"):
        run(kernel, _x(4, 4), lnc=2)


def test_lnc2_compiled_loops_run_alike_on_both_cores():
    """LNC overview: dynamic control flow that differs between the cores is undefined. A fori_loop (run or traced) or
    a while_loop whose trip count depends on the core is refused, as is a compiled loop only one core runs; loops of
    equal trip counts, with straight-line code that differs by core, run."""
    def per_core_rows(x, extra):
        n, d = x.shape
        out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
        core = nl.program_id(0)
        start = core * (n // 2)

        def body(r):
            t = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x.ap([[d, 128], [1, d]], offset=0, scalar_offset=r))
            nisa.dma_copy(dst=out.ap([[d, 128], [1, d]], offset=0, scalar_offset=r), src=t)

        stop = start + n // 2 - (128 if core == 0 and extra else 0)
        nl.fori_loop(start, stop, body, step=128)
        if core == 0 and extra:  # core 0's last tile in straight-line code instead
            t = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[stop:stop + 128, :])
            nisa.dma_copy(dst=out[stop:stop + 128, :], src=t)
        return out

    x = _x(512, 4)
    np.testing.assert_array_equal(run(per_core_rows, x, extra=False, lnc=2)[0], x)
    with pytest.raises(KernelError, match="compiled loop 1 differs .*core 0: nl.fori_loop of 1 iterations; core 1: "
                                          "nl.fori_loop of 2 iterations.*LNC overview"):
        run(per_core_rows, x, extra=True, lnc=2)
    with pytest.raises(KernelError, match="compiled loop 1 differs"):
        trace(per_core_rows, x, extra=True, lnc=2)
    run(per_core_rows, x, extra=True, lnc=1)  # one core: nothing to agree with

    def one_core_loops(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        if nl.program_id(0) == 1:
            nl.fori_loop(0, 2, lambda i: None)
        nisa.dma_copy(dst=out, src=t)
        return out

    with pytest.raises(KernelError, match="core 0: no such loop; core 1: nl.fori_loop of 2 iterations"):
        run(one_core_loops, _x(8, 4), lnc=2)

    def countdown(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=out, src=t)
        nl.while_loop(nisa.register_alloc(1 + nl.program_id(0)), _decrement)  # runs 1 + program_id times
        return out

    with pytest.raises(KernelError, match="core 0: nl.while_loop of 1 iterations; core 1: nl.while_loop of 2"):
        run(countdown, _x(8, 4), lnc=2)
    trace(countdown, _x(8, 4), lnc=2)  # a trace cannot know a while_loop's trip count


def _decrement(r):
    """A while_loop body: the next condition register, r - 1 (through a register_store / load round trip)."""
    t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.register_store(t, r)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.subtract, operand0=1.0)
    nxt = nisa.register_alloc(0)
    nisa.register_load(nxt, t)
    return nxt


def test_dge_modes_as_documented():
    """nki-dge: dge_mode=none cannot address a runtime offset; hwdge is triggered by ScalarE or sync only."""
    def copy_rows(x, mode, eng):
        n, d = x.shape
        out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)

        def body(r):
            t = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x.ap([[d, 128], [1, d]], offset=0, scalar_offset=r), dge_mode=mode, engine=eng)
            nisa.dma_copy(dst=out.ap([[d, 128], [1, d]], offset=0, scalar_offset=r), src=t)

        nl.fori_loop(0, n, body, step=128)
        return out

    x = _x(256, 4)
    for mode, eng in ((nisa.dge_mode.unknown, nisa.engine.unknown), (nisa.dge_mode.swdge, nisa.engine.unknown),
                      (nisa.dge_mode.hwdge, nisa.engine.scalar), (nisa.dge_mode.hwdge, nisa.engine.sync)):
        out, _ = run(copy_rows, x, mode=mode, eng=eng)
        np.testing.assert_array_equal(out, x)
    with pytest.raises(LimitError, match="dge_mode=none .* runtime"):
        run(copy_rows, x, mode=nisa.dge_mode.none, eng=nisa.engine.unknown)
    with pytest.raises(KernelError, match="only nisa.engine.scalar or nisa.engine.sync"):
        run(copy_rows, x, mode=nisa.dge_mode.hwdge, eng=nisa.engine.gpsimd)


    def static_none(x):  # a static address takes dge_mode=none
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, dge_mode=nisa.dge_mode.none)
        return _store_like(x, t)

    y = _x(8, 8)
    np.testing.assert_array_equal(run(static_none, y)[0], y)


def test_a_casting_dma_needs_a_dge_mode_that_casts():
    """Migration guide 0.2 -> 0.3: hardware DGE moves raw bytes, so src and dst dtypes must match with
    dge_mode=hwdge; swdge and none cast. The default (the compiler's choice) casts where none is open to it, a static
    address; at a runtime address (none ruled out, nki-dge) hardware DGE cannot be ruled out: refused."""
    def cast_rows(x, mode):
        n, d = x.shape
        out = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)

        def body(r):
            t = nl.ndarray((128, d), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x.ap([[d, 128], [1, d]], offset=0, scalar_offset=r), dge_mode=mode)
            w = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=w, src=t)
            nisa.dma_copy(dst=out.ap([[d, 128], [1, d]], offset=0, scalar_offset=r), src=w)

        nl.fori_loop(0, n, body, step=128)
        return out

    def cast_static(x, mode):
        t = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, dge_mode=mode)
        w = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=w, src=t)
        return _store_like(x, w)

    x = _x(256, 8)
    want = x.astype(nl.bfloat16).astype(F32)
    np.testing.assert_array_equal(run(cast_rows, x, mode=nisa.dge_mode.swdge)[0], want)
    y, want_y = x[:128], want[:128]
    for mode in (nisa.dge_mode.unknown, nisa.dge_mode.swdge, nisa.dge_mode.none):
        np.testing.assert_array_equal(run(cast_static, y, mode=mode)[0], want_y)
    with pytest.raises(KernelError, match="float32 -> bfloat16 .* runtime .* dge_mode=swdge"):
        run(cast_rows, x, mode=nisa.dge_mode.unknown)
    for kernel, a in ((cast_rows, x), (cast_static, y)):
        with pytest.raises(KernelError, match="dge_mode=hwdge: hardware DGE moves raw bytes"):
            run(kernel, a, mode=nisa.dge_mode.hwdge)

    def same_dtype_hwdge(x):  # matching dtypes (a .view-free copy) are fine with hwdge, at a runtime address too
        n, d = x.shape
        out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)

        def body(r):
            t = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x.ap([[d, 128], [1, d]], offset=0, scalar_offset=r), dge_mode=nisa.dge_mode.hwdge)
            nisa.dma_copy(dst=out.ap([[d, 128], [1, d]], offset=0, scalar_offset=r), src=t)

        nl.fori_loop(0, n, body, step=128)
        return out

    np.testing.assert_array_equal(run(same_dtype_hwdge, x)[0], x)

    def load_cast(x):  # nl.load(dtype=) is a DMA in the compiler's mode: a static cast is fine
        w = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=w, src=nl.load(x, dtype=nl.bfloat16))
        return _store_like(x, w)

    np.testing.assert_array_equal(run(load_cast, y)[0], want_y)

    def load_cast_rows(x):
        n, d = x.shape
        out = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)

        def body(r):
            t = nl.load(x.ap([[d, 128], [1, d]], offset=0, scalar_offset=r), dtype=nl.bfloat16)
            w = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=w, src=t)
            nisa.dma_copy(dst=out.ap([[d, 128], [1, d]], offset=0, scalar_offset=r), src=w)

        nl.fori_loop(0, n, body, step=128)
        return out

    with pytest.raises(KernelError, match="nl.load: a float32 -> bfloat16 copy at a runtime"):
        run(load_cast_rows, x)


def test_memset_value_matches_the_dtype():
    """Migration guide 0.2 -> 0.3, strict type matching: 2.0 into an int32 tile is refused, 2 accepted; a float tile
    takes a number (the guide zero-fills a float8 x4 tile with value=0); an integer past the dtype's range does not
    match it either. nl.zeros / nl.ones / nl.full of an integer dtype stay usable."""
    def fill(x, dtype, value):
        t = nl.ndarray(x.shape, dtype=dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=value)
        f = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=f, src=t)
        return _store_like(x, f)

    x = _x(4, 4)
    for dtype, value, want in ((nl.int32, 2, 2.0), (nl.int32, -7, -7.0), (nl.uint8, 255, 255.0),
                               (nl.float32, 2, 2.0), (nl.float32, 0.25, 0.25), (nl.bfloat16, 0, 0.0)):
        np.testing.assert_array_equal(run(fill, x, dtype=dtype, value=value)[0], np.full((4, 4), want, F32))
    with pytest.raises(KernelError, match="value 2.0 into a int32 tile.*integer literal"):
        run(fill, x, dtype=nl.int32, value=2.0)
    with pytest.raises(KernelError, match="does not fit dst's dtype uint8"):
        run(fill, x, dtype=nl.uint8, value=256)
    with pytest.raises(KernelError, match="does not fit dst's dtype uint32"):
        run(fill, x, dtype=nl.uint32, value=-1)
    with pytest.raises(KernelError, match="compile-time number"):
        run(fill, x, dtype=nl.int32, value=True)

    def language_fills(x):
        f = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=f, src=nl.zeros(x.shape, dtype=nl.int32))
        g = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=g, src=nl.ones(x.shape, dtype=nl.int32))
        nisa.tensor_tensor(dst=f, data1=f, data2=g, op=nl.add)
        nisa.tensor_copy(dst=g, src=nl.full(x.shape, 3.0, dtype=nl.int32))
        nisa.tensor_tensor(dst=f, data1=f, data2=g, op=nl.add)
        return _store_like(x, f)

    np.testing.assert_array_equal(run(language_fills, x)[0], np.full((4, 4), 4.0, F32))


def _store_like(x, t):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_language_reductions_transpose_and_matmul():
    """nl.sum / nl.max / nl.min over the last free axes, nl.transpose (TensorE into PSUM), nl.matmul with
    transpose_x=True (x.T @ y into fp32 PSUM); nl.matmul without it is a documented known issue."""
    def kernel(a, b):
        ta, tb = nl.load(a), nl.load(b)
        s, mx, mn = nl.sum(ta, axis=1), nl.max(ta, axis=1, keepdims=True), nl.min(ta, axis=(1,))
        t = nl.transpose(ta)
        prod = nl.matmul(ta, tb, transpose_x=True)
        outs = []
        for tile in (s, mx, mn, t, prod):
            sb = nl.ndarray(tile.shape, dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=sb, src=tile)
            o = nl.ndarray(tile.shape, dtype=nl.float32, buffer=nl.shared_hbm)
            nl.store(o, sb)
            outs.append(o)
        return tuple(outs)

    a, b = _x(64, 32, seed=1), _x(64, 16, seed=2)
    (s, mx, mn, t, prod), _ = run(kernel, a, b)
    np.testing.assert_allclose(s[:, 0], a.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(mx[:, 0], a.max(1))
    np.testing.assert_array_equal(mn[:, 0], a.min(1))
    np.testing.assert_array_equal(t, a.T)
    np.testing.assert_allclose(prod, a.T @ b, rtol=1e-5, atol=1e-4)

    def untransposed(a, b):
        nl.matmul(nl.load(a), nl.load(b))
        return a

    with pytest.raises(UnsupportedError, match="without transpose_x=True"):
        run(untransposed, a, b)


def test_the_lnc_guide_pattern_runs_at_both_degrees():
    """The pattern of the LNC guide (nki/get-started/about/lnc.rst), written here: a [2, 128, 128] input, one tile
    per core when nl.num_programs() is 2, both tiles on one core otherwise; reciprocal on VectorE."""
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        if nl.num_programs() == 1:
            mine = range(x.shape[0])
        else:
            mine = range(nl.program_id(0), nl.program_id(0) + 1)
        for i in mine:
            t = nl.ndarray(x.shape[1:], dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[i])
            r = nl.ndarray(x.shape[1:], dtype=x.dtype, buffer=nl.sbuf)
            nisa.reciprocal(dst=r, data=t)
            nisa.dma_copy(dst=out[i], src=r)
        return out

    x = (np.abs(_x(2, 128, 128)) + 0.5).astype(F32)
    for lnc in (1, 2):
        out, c = run(kernel, x, lnc=lnc)
        np.testing.assert_allclose(out, 1 / x, rtol=1e-6)
        assert c.lnc_conflicts == 0 and c.instructions["vector"] == 2


def test_gelu_is_a_scalare_activation():
    """nl.gelu (exact, erf form) is one of ScalarE's documented activation functions (nki.api.shared)."""
    def kernel(x):
        t = nl.load(x)
        g = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=g, op=nl.gelu, data=t)
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, g)
        return out

    x = _x(8, 16)
    out, c = run(kernel, x)
    import math
    want = np.array([[0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in row] for row in x.astype(np.float64)])
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-7)
    assert c.instructions["scalar"] == 1


def test_while_loop_and_registers():
    """nl.while_loop(init, body): a compiled loop on a register condition (checked before each iteration); registers
    loaded from memory with nisa.register_load, set with register_move, stored with register_store."""
    def kernel(x, count):
        n, d = x.shape
        out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
        z = nl.zeros((n, d), dtype=x.dtype)
        nisa.dma_copy(dst=out, src=z)
        c_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=c_sb, src=count)
        reg = nisa.register_alloc()
        nisa.register_load(reg, c_sb)
        left = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)

        def body(r):
            nisa.register_store(left, r)  # rows left, as a runtime offset: copy row left - 1
            t = nl.ndarray((1, d), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x.ap([[d, 1], [1, d]], offset=-d, scalar_offset=left))
            nisa.dma_copy(dst=out.ap([[d, 1], [1, d]], offset=-d, scalar_offset=left), src=t)
            nisa.tensor_scalar(dst=left, data=left, op0=nl.subtract, operand0=1.0)
            nxt = nisa.register_alloc()
            nisa.register_load(nxt, left)
            return nxt

        nl.while_loop(reg, body)
        return out

    x = _x(6, 4)
    for k in (0, 1, 4):
        out, c = run(kernel, x, np.array([[k]], np.int32))
        want = np.zeros_like(x)
        want[:k] = x[:k]
        np.testing.assert_array_equal(out, want)
        assert c.dynamic_loops == 1
    _, c = run(kernel, x, np.array([[4]], np.int32))
    assert c.static_instructions["dma"] == 2 + 2 and c.dma_transfers == 2 + 2 * 4  # the body emitted once


def test_float_to_int_conversions_are_exact_or_refused():
    """Engines and DMAs convert through fp32; to an integer dtype only exact values are defined here (the public
    docs give no rounding or saturation rule): 3.0 -> 3 passes, 3.7 and 3e9 are refused."""
    def kernel(x):
        t = nl.load(x)
        i = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=i, src=t)
        out = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=i)
        return out

    out, _ = run(kernel, np.array([[3.0, -2.0]], np.float32))
    np.testing.assert_array_equal(out, [[3, -2]])
    for bad in (3.7, 3e9, np.nan):
        with pytest.raises(UnsupportedError, match="rounding and saturation .* undocumented"):
            run(kernel, np.array([[bad, 1.0]], np.float32))


# ------------------------------------------------------------- documented limits, neither stricter nor looser


def test_what_trn3_alone_has_is_refused_on_trn2():
    """abs_max / abs_min (nki.language: "Available only on NeuronCore-v4"), square and relu as tensor_scalar
    operators (release notes: "now accepted as op0 on trn3") and float8_e4m3fn matmul inputs ("Starting
    NeuronCore-v4")."""
    def abs_max(x):
        t = nl.load(x)
        return nl.abs_max(t, t)

    def square_op(x):
        t = nl.load(x)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.square, operand0=None)

    def ocp_fp8(x):
        t = nl.ndarray((4, 4), dtype=nl.float8_e4m3fn, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1.0)
        ps = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=t, moving=t)

    for kernel, error in ((abs_max, UnsupportedError), (square_op, UnsupportedError), (ocp_fp8, LimitError)):
        with pytest.raises(error, match="NeuronCore-v4"):
            run(kernel, _x(4, 4))


def test_dma_engine_only_with_hardware_dge_and_transpose_keeps_its_dtype():
    """dma_copy's `engine` is "Only valid when dge_mode=nisa.dge_mode.hwdge"; a transpose's dst has the data's
    dtype (or fp32, PSUM's)."""
    def dma_engine(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, engine=nisa.engine.gpsimd)

    def dma_hwdge(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, dge_mode=nisa.dge_mode.hwdge, engine=nisa.engine.scalar)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    def transpose_int8(x):
        t = nl.load(x)
        eye = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.iota(dst=eye, pattern=[[1, 4]], offset=0, channel_multiplier=-1)
        nisa.tensor_scalar(dst=eye, data=eye, op0=nl.equal, operand0=0.0)
        ps = nl.ndarray((4, 4), dtype=nl.int8, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=t, moving=eye, is_transpose=True)

    with pytest.raises(KernelError, match="only valid with dge_mode=nisa.dge_mode.hwdge"):
        run(dma_engine, _x(4, 4))
    run(dma_hwdge, _x(4, 4))
    with pytest.raises(KernelError, match="dst dtype int8 must be the stationary tile's"):
        run(transpose_int8, _x(4, 4))


def test_nl_sin_reduces_its_argument_where_the_activation_does_not():
    """nki.language.sin "applies additional instructions to perform range reduction", so it is right beyond
    [-pi, pi]; nisa.activation(op=nl.sin) is refused there (its documented valid range)."""
    def language_sin(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.sin(nl.load(x)))
        return out

    def isa_sin(x):
        t = nl.load(x)
        nisa.activation(dst=t, op=nl.sin, data=t)

    x = np.array([[9.0, -20.0, 3.0, 100.0]], F32)
    out, c = run(language_sin, x)
    np.testing.assert_allclose(out, np.sin(x), atol=ACTIVATION_ABS_ERROR * 10)
    assert c.instructions["vector"] == 1 and c.instructions["scalar"] == 1
    with pytest.raises(LimitError, match="nl.sin input 9.0 outside its valid input range"):
        run(isa_sin, x)

"""`nki.isa` as the interpreter provides it: the instructions below, destination first (`dst=`), in NumPy.

Engines compute in fp32 and cast on output (bf16 via ml_dtypes, round to nearest even); `tensor_tensor` on int32/uint32
operands only runs on GpSimd in exact integer arithmetic, as its docs say. Every instruction checks:
operands are tiles of the right memories (compute engines never touch HBM; DMA never touches PSUM; GpSimd never
touches PSUM; TensorE reads SBUF and writes PSUM), inputs and output cover the same partitions (engines do not move
data across partitions: stricter than the hardware, which allows some offsets), and the sizes agree. Each
instruction is counted on its engine (see counts.py). TensorE writes PSUM within one 2 KiB bank: a matmul or
transpose whose output would cross a bank boundary where the tile lies under the tightest packing (memory.py) is
refused. ScalarE's approximated functions are perturbed when a run asks for it (machine.approximate_activations).
In trace mode (machine.py) every check that does not read values runs and nothing is computed.

The enums carry the values of the NKI stubs (engine: tensor 1, scalar 2, gpsimd 3, dma 4, vector 5, sync 6; dge_mode:
swdge 1, hwdge 2, none 3).

Subset: dma_copy, tensor_copy, memset, nc_matmul, nc_transpose, activation, activation_reduce, tensor_tensor,
tensor_scalar, scalar_tensor_tensor, tensor_reduce, tensor_partition_reduce, tensor_scalar_reduce, range_select,
bn_stats, max8, reciprocal, iota, affine_select.
"""

from __future__ import annotations

import math
from enum import Enum

import ml_dtypes
import numpy as np
import torch

from . import machine
from .errors import KernelError, LimitError, NotInSubsetError, UnsupportedError
from .limits import (ACTIVATION_RANGES, EXACT_ACTIVATIONS, MATMUL_K_MAX, MATMUL_M_MAX, MATMUL_N_MAX,
                     PSUM_BANK_BYTES, TRANSPOSE_TENSOR_MAX, TRANSPOSE_VECTOR_MAX)
from .ops import OPS, TRN3_ONLY, Op
from .tensor import BY_MATMUL, BY_OTHER, NEVER, MemoryRegion, Register, Tensor, is_float

f32 = np.float32


class engine(Enum):
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


class reduce_cmd(Enum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(Enum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(Enum):
    error = 0
    skip = 1


class matmul_perf_mode(Enum):  # string values, as nki.isa.matmul_perf_mode's
    none = "none"
    double_row = "double_row"


_RC = reduce_cmd  # `reduce_cmd` and `engine` are also parameter names below
_ENG = engine

_ENGINE_NAME = {engine.tensor: "tensor", engine.vector: "vector", engine.scalar: "scalar", engine.gpsimd: "gpsimd"}


# ----------------------------------------------------------------------------------------------- helpers

def _tile(t, role: str, op: str, *, psum=True, sbuf=True) -> Tensor:
    if not isinstance(t, Tensor):
        raise KernelError(f"{op}: {role} must be a tensor, got {type(t).__name__}")
    if not t.on_chip:
        raise LimitError(f"{op}: {role} is in HBM; compute engines read and write SBUF/PSUM only (DMA it first)")
    if t.is_psum and not psum:
        raise LimitError(f"{op}: {role} may not be in PSUM")
    if not t.is_psum and not sbuf:
        raise LimitError(f"{op}: {role} must be in PSUM")
    return t


def _no_psum_on_gpsimd(op: str, *tiles) -> None:
    for t in tiles:
        if isinstance(t, Tensor) and t.is_psum:
            raise LimitError(f"{op}: GpSimd cannot access PSUM (copy it to SBUF with nisa.tensor_copy on "
                             "VectorE/ScalarE first)")


def _lanes(op: str, *tiles: Tensor) -> None:
    """Same partitions: engines process lane p of the inputs into lane p of the output."""
    first = tiles[0]
    for t in tiles[1:]:
        if (t.partitions, t.p0) != (first.partitions, first.p0):
            raise LimitError(f"{op}: operands cover different partitions ({first.partitions} from {first.p0} vs "
                             f"{t.partitions} from {t.p0}); engines do not move data across partitions")


def _same_free(op: str, a: Tensor, b: Tensor) -> None:
    if a.free_size != b.free_size:
        raise KernelError(f"{op}: elements per partition differ: {a.shape} vs {b.shape} (no broadcasting: use "
                          "tensor_scalar with a [P, 1] operand)")



def _reduce_res(reduce_res, data, name_):
    """A reduction's result tile, where one is given: [P, 1] on the data's partitions."""
    if reduce_res is not None:
        _tile(reduce_res, "reduce_res", name_)
        _lanes(name_, data, reduce_res)
        if reduce_res.free_size != 1:
            raise KernelError(f"{name_}: reduce_res must be [P, 1], got {reduce_res.shape}")

def _operand(x, data: Tensor, op: str, role: str, fp32: bool = False) -> np.ndarray | np.float32:
    """A compile-time scalar, or a [P, 1] tile (fp32 where the ISA says so) broadcast along the free dims of `data`."""
    if isinstance(x, Tensor):
        _tile(x, role, op)
        _lanes(op, data, x)
        if x.free_size != 1:
            raise KernelError(f"{op}: {role} must be a scalar or a [P, 1] tile, got {x.shape}")
        if fp32 and x.dtype != np.float32:
            raise LimitError(f"{op}: a {role} tile must be fp32, got {x.dtype}")
        return x.read().reshape((x.partitions,) + (1,) * (data.ndim - 1))
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise KernelError(f"{op}: {role} must be a number or a [P, 1] tile, got {type(x).__name__}")
    return f32(x)


def _alu(op, opname: str, role: str = "op") -> Op:
    if not isinstance(op, Op):
        raise KernelError(f"{opname}: {role} must be an nl operator, got {op!r}")
    op.check_hardware()
    if not op.alu:
        raise UnsupportedError(f"{opname}: {op!r} is not an ALU operator of VectorE/GpSimd")
    return op


def _apply(op: Op, data, operand, reverse: bool):
    if op.arity == 1:
        return op.apply(data)
    return op.apply(operand, data) if reverse else op.apply(data, operand)


def _tracing() -> bool:
    return machine.current().trace


def _mark(dst: Tensor, how: int = BY_OTHER) -> None:
    if dst._written is not None:
        dst._written[...] = how


def _traced(*tiles: Tensor | None) -> bool:
    """In a trace: mark the tiles an instruction writes (None: not given) and say so; else False."""
    if not _tracing():
        return False
    for t in tiles:
        if t is not None:
            _mark(t)
    return True


def _write(dst: Tensor, values: np.ndarray, how: int = BY_OTHER) -> None:
    values = np.asarray(values, dtype=f32).reshape(dst.shape)
    if not is_float(dst.dtype):
        _exact_integers(values, dst.dtype)
    with np.errstate(invalid="ignore"):
        dst._np[...] = values.astype(dst.dtype)
    _mark(dst, how)


def _exact_integers(values: np.ndarray, dtype) -> None:
    """An fp32 -> integer conversion is defined here only where it is exact: how the engines round a fraction and
    what they do past the integer range is not in the public docs (nki.api.shared, type casting), so a value that
    is not an integer inside dtype's range is refused rather than given NumPy's truncation and wrap-around."""
    info = np.iinfo(dtype)
    bad = ~np.isfinite(values) | (values != np.round(values)) | (values < info.min) | (values > info.max)
    if bad.any():
        v = values[bad].reshape(-1)[0]
        raise UnsupportedError(f"converting {v!r} to {np.dtype(dtype)}: the hardware's rounding and saturation of a "
                               "non-integral or out-of-range value are undocumented; keep it a float or round it "
                               "exactly first")


def _count(engine_name: str, data: Tensor) -> None:
    machine.current().count(engine_name, data.size, data.free_size)


_PI_BELOW = float(np.nextafter(np.float32(math.pi), np.float32(0)))  # the largest float32 not above pi


def _reduce_angle(dst: Tensor, data: Tensor) -> None:
    """dst = data reduced to [-pi, pi] (x - 2 pi round(x / 2 pi)), the work `nl.sin` does before its ScalarE
    activation ("nki.language.sin applies additional instructions to perform range reduction", NKI API common
    fields), counted as one VectorE instruction; `nisa.activation(op=nl.sin)` alone does none."""
    _count("vector", data)
    if _tracing():
        _mark(dst)
        return
    x = data.read().astype(np.float64)
    _write(dst, np.clip(x - 2 * math.pi * np.round(x / (2 * math.pi)), -_PI_BELOW, _PI_BELOW))


def _within_one_bank(op: str, dst: Tensor) -> None:
    """TensorE writes within one PSUM bank: refuse an output that would cross a bank boundary where its tile lies
    under the tightest packing (memory.py)."""
    first, last = dst.free_byte_span()
    base = dst.storage.psum_offset
    if (base + first) // PSUM_BANK_BYTES != (base + last) // PSUM_BANK_BYTES:
        where = f" (its tile starts at byte {base} of the partition)" if base else ""
        raise LimitError(f"{op}: dst spans PSUM bytes {base + first}..{base + last} of a partition{where}, crossing a "
                         "2 KiB PSUM bank boundary under the tightest packing (TensorE writes within one bank): "
                         "allocate PSUM tiles in whole banks")


def _engine(requested, allowed: tuple[str, ...], default: str, op: str) -> str:
    if requested in (None, engine.unknown):
        return default
    name = _ENGINE_NAME.get(requested)
    if name not in allowed:
        raise UnsupportedError(f"{op}: engine {requested} not allowed (only {', '.join(allowed)})")
    return name


# ----------------------------------------------------------------------------------------------- data movement

def dma_copy(dst, src, priority=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown, engine=engine.unknown,
             name=None):
    """dst = src between HBM and SBUF (any direction); never PSUM. Casts through fp32 when dtypes differ.

    DGE modes (nki/deep-dives/nki-dge.rst): `none` (descriptors precomputed on the host) cannot address a runtime
    offset; with `hwdge` only ScalarE or the sync engine may trigger the descriptor block. A casting copy (src and
    dst dtypes differ) is refused where hardware DGE, which moves raw bytes, is asked for or cannot be ruled out
    (`_casting_dge`)."""
    op = "nisa.dma_copy"
    if not isinstance(dge_mode, globals()["dge_mode"]):
        raise KernelError(f"{op}: dge_mode must be a nisa.dge_mode, got {dge_mode!r}")
    dynamic = any(isinstance(t, Tensor) and t.dynamic for t in (dst, src))
    _casting_dge(op, dst, src, dge_mode, dynamic)
    if dge_mode is globals()["dge_mode"].none and dynamic:
        raise LimitError(f"{op}: dge_mode=none precomputes descriptors on the host and cannot handle a runtime "
                         "(scalar_offset) address: use the default, hwdge or swdge")
    if dge_mode is globals()["dge_mode"].hwdge and engine not in (_ENG.unknown, _ENG.scalar, _ENG.sync):
        raise KernelError(f"{op}: with dge_mode=hwdge only nisa.engine.scalar or nisa.engine.sync may trigger the "
                          f"DMA, got {engine}")
    if dge_mode is not globals()["dge_mode"].hwdge and engine is not _ENG.unknown:  # nki.isa.dma_copy, `engine`
        raise KernelError(f"{op}: engine= chooses who triggers hardware DGE and is only valid with "
                          f"dge_mode=nisa.dge_mode.hwdge (got {dge_mode}): drop it, or pass dge_mode=hwdge")
    _dma(dst, src, op)


def _casting_dge(op: str, dst, src, mode, dynamic: bool) -> None:
    """A DMA that converts dtypes needs a descriptor mode that casts. Hardware DGE moves raw bytes and NKI 0.3+
    refuses it mismatched dtypes (migration guide 0.2 -> 0.3, "dma_copy: dge_mode type matching"); swdge and none
    cast ("use dge_mode.swdge or dge_mode.none if type casting is intended"), and `unknown` (the compiler's choice)
    casts through fp32 as nki.isa.dma_copy describes wherever a casting mode is open to it. A runtime (scalar_offset)
    address rules out none (nki-dge: precomputed descriptors cannot handle dynamic addresses), leaving swdge or
    hwdge, between which the docs do not say the compiler picks by dtype: refused too."""
    if not (isinstance(dst, Tensor) and isinstance(src, Tensor)) or src.dtype == dst.dtype:
        return
    modes = globals()["dge_mode"]
    cast = f"{src.dtype} -> {dst.dtype}"
    if mode is modes.hwdge:
        raise KernelError(f"{op}: a {cast} copy with dge_mode=hwdge: hardware DGE moves raw bytes and needs src and "
                          "dst of one dtype; use dge_mode=swdge (or none, for a static address) to cast, or convert "
                          "on an engine (nisa.tensor_copy)")
    if mode is modes.unknown and dynamic:
        raise KernelError(f"{op}: a {cast} copy at a runtime (scalar_offset) address: the compiler may give it "
                          "hardware DGE, which does not cast (dge_mode=none cannot take a runtime address); copy "
                          "into a tile of src's dtype and convert on an engine (nisa.tensor_copy), or ask for "
                          "dge_mode=swdge")


def _dma(dst, src, op: str) -> None:
    for role, t in (("dst", dst), ("src", src)):
        if not isinstance(t, Tensor):
            raise KernelError(f"{op}: {role} must be a tensor, got {type(t).__name__}")
        if t.is_psum:
            raise LimitError(f"{op}: DMA cannot read or write PSUM ({role} is in PSUM): copy PSUM -> SBUF with "
                             "nisa.tensor_copy first")
    if src.size != dst.size:
        raise KernelError(f"{op}: src {src.shape} and dst {dst.shape} hold different numbers of elements")
    m = machine.current()
    if m.trace:
        pass
    elif src.dtype == dst.dtype:
        dst._np[...] = src._np.reshape(dst.shape)
    else:  # src -> fp32 -> dst (nki.isa.dma_copy), integers included
        _write(dst, src.read())
    if not dst.on_chip:
        dst.storage.dma_written = True
        m.hbm_access(dst, write=True)
    if not src.on_chip:
        m.hbm_access(src, write=False)
    m.counts.dma(src.nbytes, not src.on_chip, dst.nbytes, not dst.on_chip, m.emitting)


_DMA_TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def dma_transpose(dst, src, axes=None, priority=None, dge_mode=dge_mode.unknown, oob_mode=oob_mode.error, name=None):
    """dst = src with its axes permuted, by a DMA (nki.isa.dma_transpose): output axis i is source axis axes[i]; the
    documented permutations are (1, 0), (2, 1, 0) and (3, 1, 2, 0) for 2-, 3- and 4-D tiles (the default by rank).
    dst in SBUF, src in HBM or SBUF, the same dtype. Direct transposes only (dge_mode unknown or hwdge; hwdge with its
    documented limits: a 2-D src of 16 rows, or a 3-/4-D one whose first dim is 1, 2, 4, 8 or 16 with
    src.shape[0] * src.shape[-2] a multiple of 16; src.shape[-1] <= 128; a 2-byte dtype). The indirect (gather)
    transpose of swdge needs vector offsets, outside the interpreted subset."""
    op = "nisa.dma_transpose"
    modes = globals()["dge_mode"]
    if not isinstance(dge_mode, modes):
        raise KernelError(f"{op}: dge_mode must be a nisa.dge_mode, got {dge_mode!r}")
    if dge_mode is modes.swdge:
        raise UnsupportedError(f"{op}: the indirect (swdge) transpose is not in the interpreted subset")
    if dge_mode is modes.none:
        raise KernelError(f"{op}: a direct DMA transpose takes dge_mode unknown or hwdge, got none")
    for role, t in (("dst", dst), ("src", src)):
        if not isinstance(t, Tensor):
            raise KernelError(f"{op}: {role} must be a tensor, got {type(t).__name__}")
        if t.is_psum:
            raise LimitError(f"{op}: DMA cannot read or write PSUM ({role} is in PSUM)")
    if not dst.on_chip:
        raise KernelError(f"{op}: dst must be a tile in SBUF")
    if src.ndim not in _DMA_TRANSPOSE_AXES:
        raise KernelError(f"{op}: src must be a 2-, 3- or 4-D tile, got {src.shape}")
    want = _DMA_TRANSPOSE_AXES[src.ndim]
    axes = want if axes is None else tuple(axes)
    if axes != want:
        raise KernelError(f"{op}: axes {axes} for a {src.ndim}-D tile; the supported permutation is {want}")
    if src.dtype != dst.dtype:
        raise KernelError(f"{op}: src.dtype {src.dtype} must equal dst.dtype {dst.dtype}")
    shape = tuple(src.shape[a] for a in axes)
    if tuple(dst.shape) != shape:
        raise KernelError(f"{op}: dst {dst.shape} must be {shape} (src {src.shape} permuted by {axes})")
    if dge_mode is modes.hwdge:
        s0 = src.shape[0]
        rows_ok = s0 == 16 if src.ndim == 2 else (s0 in (1, 2, 4, 8, 16) and (s0 * src.shape[-2]) % 16 == 0)
        if not rows_ok or src.shape[-1] > 128 or src.dtype.itemsize != 2:
            raise LimitError(f"{op}: a hardware-DGE transpose needs src.shape[0] == 16 (2-D) or in (1, 2, 4, 8, 16) "
                             f"with src.shape[0] * src.shape[-2] % 16 == 0 (3-/4-D), src.shape[-1] <= 128 and a "
                             f"2-byte dtype; got {src.shape} {src.dtype}")
    m = machine.current()
    if not m.trace:
        dst._np[...] = np.transpose(src._np, axes)
        _mark(dst)
    if not src.on_chip:
        m.hbm_access(src, write=False)
    m.counts.dma(src.nbytes, not src.on_chip, dst.nbytes, False, m.emitting)


def core_barrier(data, cores, engine=engine.gpsimd, name=None):
    """Both physical cores of an LNC=2 kernel wait here for each other; HBM written before it is seen after it
    (lnc.py). `data` is the shared HBM tensor synchronised on; only cores=(0, 1) exists (nki.isa.core_barrier)."""
    op = "nisa.core_barrier"
    m = machine.current()
    if m.group is None:
        raise KernelError(f"{op} is only allowed when LNC is enabled (a kernel launched at LNC=2)")
    if tuple(cores) != (0, 1) or isinstance(cores, list):
        raise KernelError(f"{op}: cores must be the tuple (0, 1), got {cores!r}")
    if not isinstance(data, Tensor) or (data.buffer is not MemoryRegion.shared_hbm and not data.storage.input):
        raise KernelError(f"{op}: data must be a tensor in shared HBM, got {data!r}")
    m.count(_engine(engine, ("gpsimd", "vector", "scalar", "tensor"), "gpsimd", op), 0, 0)
    m.group.barrier(m.core)


# ------------------------------------------------------------------------------------- virtual registers (32-bit)
def _int32(v: int, op: str) -> int:
    if not -2**31 <= int(v) < 2**31:
        raise KernelError(f"{op}: {v} does not fit a 32-bit register")
    return int(v)


def _scalar_tensor(t, op: str, role: str) -> Tensor:
    if not isinstance(t, Tensor) or t.size != 1 or t.is_psum:
        raise KernelError(f"{op}: {role} must be a one-element tensor in HBM or SBUF, got {t!r}")
    return t


def register_alloc(x=None):
    """A new virtual register, set to the compile-time int x (0 when None)."""
    return Register(_int32(0 if x is None else x, "nisa.register_alloc"))


def register_move(dst, src):
    """dst = src, a compile-time int or another register."""
    if not isinstance(dst, Register):
        raise KernelError(f"nisa.register_move: dst must be a register, got {type(dst).__name__}")
    dst._value = src._runtime_value() if isinstance(src, Register) else _int32(src, "nisa.register_move")


def register_load(dst, src):
    """dst = the one value of src (HBM or SBUF), as a 32-bit integer."""
    op = "nisa.register_load"
    if not isinstance(dst, Register):
        raise KernelError(f"{op}: dst must be a register, got {type(dst).__name__}")
    src = _scalar_tensor(src, op, "src")
    if not _tracing():
        dst._value = _int32(int(src._np.reshape(-1)[0]), op)


def register_store(dst, src):
    """dst (one element, HBM or SBUF) = the register's value."""
    op = "nisa.register_store"
    dst = _scalar_tensor(dst, op, "dst")
    if not isinstance(src, Register):
        raise KernelError(f"{op}: src must be a register, got {type(src).__name__}")
    if not _tracing():
        dst._np[...] = np.asarray(src._runtime_value()).astype(dst.dtype)
        _mark(dst)
        if not dst.on_chip:
            dst.storage.dma_written = True


def tensor_copy(dst, src, engine=engine.unknown, name=None):
    """dst = src on VectorE (default), ScalarE or GpSimd; same partitions, same elements per partition."""
    op = "nisa.tensor_copy"
    eng = _engine(engine, ("vector", "scalar", "gpsimd"), "vector", op)
    _tile(dst, "dst", op), _tile(src, "src", op)
    if eng == "gpsimd":
        _no_psum_on_gpsimd(op, dst, src)
    _lanes(op, dst, src)
    _same_free(op, dst, src)
    if _tracing():
        _mark(dst)
    elif src.dtype == dst.dtype:
        dst._np[...] = src._np.reshape(dst.shape)
        _mark(dst)
    else:
        _write(dst, src.read())
    _count(eng, src)


def memset(dst, value, engine=engine.unknown, name=None):
    """dst = value (a compile-time constant) on VectorE (default) or GpSimd. The value matches dst's dtype (NKI 0.3+,
    migration guide 0.2 -> 0.3, "memset: strict type matching"): an integer dst takes an integer inside its range
    (2.0 into an int32 tile is refused, as the guide shows); a float dst takes a number (the same guide zero-fills a
    float8 x4 tile with value=0)."""
    op = "nisa.memset"
    eng = _engine(engine, ("vector", "gpsimd"), "vector", op)
    _tile(dst, "dst", op)
    _memset_value(op, dst, value)
    if eng == "gpsimd":
        _no_psum_on_gpsimd(op, dst)
    if _tracing():
        _mark(dst)
    else:
        _write(dst, np.full(dst.shape, value, dtype=f32))
    _count(eng, dst)


def _memset_value(op: str, dst: Tensor, value) -> None:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise KernelError(f"{op}: value must be a compile-time number, got {type(value).__name__}")
    if is_float(dst.dtype):
        return
    if not isinstance(value, (int, np.integer)):
        raise KernelError(f"{op}: value {value!r} into a {dst.dtype} tile: from NKI 0.3 the value must match dst's "
                          "dtype (nothing casts it); pass an integer literal")
    info = np.iinfo(dst.dtype)
    if not info.min <= int(value) <= info.max:
        raise KernelError(f"{op}: value {value} does not fit dst's dtype {dst.dtype} ([{info.min}, {info.max}])")


# ----------------------------------------------------------------------------------------------- TensorE

def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              accumulate=None, tile_position=(), tile_size=(), perf_mode=matmul_perf_mode.none, name=None):
    """dst[M, N] (PSUM, fp32) = stationary[K, M].T @ moving[K, N] (SBUF), K <= 128, M <= 128, N <= 512.

    accumulate=False overwrites, True adds to what a previous matmul left, None overwrites where no matmul wrote
    yet and adds where one did. Adding to PSUM that no matmul wrote (never written, or written by memset/tensor_copy:
    undefined on Trn2) is refused.
    """
    op = "nisa.nc_matmul"
    if perf_mode not in (None, "none", "double_row") and not isinstance(perf_mode, matmul_perf_mode):
        raise KernelError(f"{op}: perf_mode must be a nisa.matmul_perf_mode ('none' or 'double_row'), got "
                          f"{perf_mode!r}")
    if tile_position or tile_size or perf_mode not in (None, "none", matmul_perf_mode.none):
        raise UnsupportedError(f"{op}: tiling mode and perf modes are not in the interpreted subset")
    if is_transpose:
        return _matmul_transpose(dst, stationary, moving, accumulate)
    _tile(stationary, "stationary", op, psum=False)
    _tile(moving, "moving", op, psum=False)
    _tile(dst, "dst", op, sbuf=False)
    k, m, n = stationary.partitions, stationary.free_size, moving.free_size
    if moving.partitions != k or moving.p0 != stationary.p0:
        raise LimitError(f"{op}: stationary and moving must share the contraction partitions (K): "
                         f"{stationary.shape} from {stationary.p0} vs {moving.shape} from {moving.p0}")
    if k > MATMUL_K_MAX:
        raise LimitError(f"{op}: contraction K={k} exceeds {MATMUL_K_MAX} (partitions)")
    if m > MATMUL_M_MAX:
        raise LimitError(f"{op}: stationary free size M={m} exceeds {MATMUL_M_MAX} (gemm_stationary_fmax)")
    if n > MATMUL_N_MAX:
        raise LimitError(f"{op}: moving free size N={n} exceeds {MATMUL_N_MAX} (gemm_moving_fmax: one PSUM bank "
                         "of fp32)")
    if dst.partitions != m or dst.free_size != n:
        raise KernelError(f"{op}: dst {dst.shape} must be [M={m}, N={n}]")
    if dst.dtype != np.float32:
        raise LimitError(f"{op}: dst must be fp32 on Trn2, got {dst.dtype}")
    floats = [t.dtype for t in (stationary, moving)]
    if not all(is_float(d) for d in floats):
        raise UnsupportedError(f"{op}: matmul inputs must be float types, got {floats}")
    if np.dtype(ml_dtypes.float8_e4m3fn) in floats:  # nki.isa.nc_matmul: "Starting NeuronCore-v4, float8_e4m3fn"
        raise LimitError(f"{op}: float8_e4m3fn (OCP FP8) inputs are {TRN3_ONLY}: use float8_e4m3 or float8_e5m2")
    if (np.float32 in floats) and floats[0] != floats[1]:
        raise LimitError(f"{op}: an fp32 input needs an fp32 partner, got {floats}")
    _within_one_bank(op, dst)
    state = dst._written

    def infer() -> bool:  # the compiler's choice, where it emits the instruction (nki.isa.nc_matmul, 2.33)
        if (state == NEVER).all():
            return False
        if (state == BY_MATMUL).all():
            return True
        raise LimitError(f"{op}: accumulate=None into PSUM partly unwritten or written by a non-matmul "
                         "instruction: the accumulation would start from undefined values (pass accumulate=False)")

    if accumulate is None:  # a compiled loop's later iterations run what its first emitted
        accumulate = machine.current().infer_accumulate(infer)
    if accumulate and not (state == BY_MATMUL).all():
        raise LimitError(f"{op}: accumulate=True into PSUM that no matmul with accumulate=False initialised "
                         "(never written, or written by memset/tensor_copy: undefined on Trn2)")
    if _tracing():
        _mark(dst, BY_MATMUL)
    else:
        # bf16/fp16 inputs widen exactly to fp32; their products are exact in fp32 and accumulate in fp32 (PSUM);
        # the caller's autocast (a kernel run inside a bf16 region) must not reach this fp32 product
        with torch.autocast("cpu", enabled=False):
            product = (torch.from_numpy(stationary.read().reshape(k, m)).T
                       @ torch.from_numpy(moving.read().reshape(k, n))).numpy()
        if accumulate:
            product = dst.read().reshape(m, n) + product
        _write(dst, product, BY_MATMUL)
    mach = machine.current()
    # two TensorE instructions per nc_matmul (NeuronCore architecture guide): LoadStationary streams the stationary
    # tile [K, M] in, MultiplyMoving streams the moving tile [K, N] past it into PSUM
    mach.count("tensor", stationary.size, m)
    mach.count("tensor", moving.size, n)
    mach.counts.matmul_flops += 2 * k * m * n


def _matmul_transpose(dst, stationary, moving, accumulate) -> None:
    """nc_matmul(is_transpose=True): TensorE's transpose mode, documented as the stationary tile [K, M] loaded and an
    identity matrix [K, K] as the moving tile, bit-accurate from NeuronCore-v3 (Trn2) on, NaN and Inf included: dst
    [M, K] = stationary.T exactly. A moving tile that is not the identity has no documented result in this mode and is
    refused; so is accumulating (a transpose overwrites: nc_transpose, which is this, exposes no accumulate)."""
    op = "nisa.nc_matmul(is_transpose=True)"
    _tile(stationary, "stationary", op, psum=False)
    _tile(moving, "moving", op, psum=False)
    _tile(dst, "dst", op, sbuf=False)
    k, m = stationary.partitions, stationary.free_size
    if moving.partitions != k or moving.free_size != k or moving.p0 != stationary.p0:
        raise KernelError(f"{op}: moving must be the [K={k}, K={k}] identity on the stationary tile's partitions, "
                          f"got {moving.shape}")
    if k > MATMUL_K_MAX or m > MATMUL_M_MAX:
        raise LimitError(f"{op}: stationary {stationary.shape} exceeds [{MATMUL_K_MAX}, {MATMUL_M_MAX}]")
    if dst.partitions != m or dst.free_size != k:
        raise KernelError(f"{op}: dst {dst.shape} must be [M={m}, K={k}]")
    if accumulate:
        raise KernelError(f"{op}: a transpose overwrites its PSUM tile (accumulate must be False or None)")
    if not is_float(stationary.dtype) or not is_float(moving.dtype):
        raise UnsupportedError(f"{op}: matmul inputs must be float types, got {stationary.dtype}, {moving.dtype}")
    if dst.dtype not in (stationary.dtype, np.float32):  # nc_transpose: "the same data type as that of data"
        raise KernelError(f"{op}: dst dtype {dst.dtype} must be the stationary tile's ({stationary.dtype}) or fp32")
    _within_one_bank(op, dst)
    if not _tracing():
        ident = moving.read().reshape(k, k)
        if not np.array_equal(ident, np.eye(k, dtype=np.float32)):
            raise KernelError(f"{op}: the moving tile must be the identity matrix (transpose mode)")
        values = stationary._np.reshape(k, m).T
        if dst.dtype != stationary.dtype:
            values = values.astype(np.float32)  # bf16/fp16 widen to fp32 exactly; NaN and Inf carried
        dst._np[...] = values.astype(dst.dtype).reshape(dst.shape)
    _mark(dst, BY_MATMUL)
    mach = machine.current()
    mach.count("tensor", stationary.size, m)  # LoadStationary, then the identity streamed past it
    mach.count("tensor", moving.size, k)


def nc_transpose(dst, data, engine=engine.unknown, name=None):
    """dst[F, P] = data[P, F].T: TensorE (SBUF -> PSUM, <= [128, 128]) or VectorE (<= [32, 32])."""
    op = "nisa.nc_transpose"
    eng = _engine(engine, ("tensor", "vector"), "tensor", op)
    _tile(data, "data", op, psum=eng == "vector")
    _tile(dst, "dst", op, sbuf=eng == "vector")
    p, f = data.partitions, data.free_size
    limit = TRANSPOSE_TENSOR_MAX if eng == "tensor" else TRANSPOSE_VECTOR_MAX
    if p > limit or f > limit:
        raise LimitError(f"{op}: [{p}, {f}] exceeds [{limit}, {limit}] on the {eng} engine")
    if dst.partitions != f or dst.free_size != p:
        raise KernelError(f"{op}: dst {dst.shape} must be [{f}, {p}]")
    if dst.dtype != data.dtype:
        raise KernelError(f"{op}: dst dtype {dst.dtype} must equal data dtype {data.dtype}")
    if eng == "tensor":
        _within_one_bank(op, dst)
    if not _tracing():
        dst._np[...] = data._np.reshape(p, f).T.reshape(dst.shape)
    _mark(dst, BY_MATMUL if eng == "tensor" else BY_OTHER)
    mach = machine.current()
    mach.count(eng, data.size, p if eng == "tensor" else f)
    if eng == "tensor":
        mach.counts.matmul_flops += 2 * p * f * p


# ----------------------------------------------------------------------------------------------- ScalarE

def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle,
               name=None):
    """dst = op(data * scale + bias) on ScalarE; scale and bias are constants or [P, 1] tiles (scale fp32).

    With reduce_cmd: reset sets the per-partition reduce registers to 0, reset_reduce sets them to the sum of this
    output along the free dims, reduce adds that sum, idle leaves them. reduce_res (a [P, 1] tile) then receives the
    registers (an extra instruction). Registers never set are NaN. Inputs outside the documented valid range of the
    function (rsqrt [2^-87, 2^97], sqrt, log, reciprocal...) are refused: the engine returns garbage there.
    """
    name_ = "nisa.activation"
    if not isinstance(op, Op):
        raise KernelError(f"{name_}: op must be an nl activation function, got {op!r}")
    op.check_hardware()
    if not op.act:
        raise UnsupportedError(f"{name_}: {op!r} is not a ScalarE activation function")
    _tile(dst, "dst", name_), _tile(data, "data", name_)
    _lanes(name_, dst, data)
    _same_free(name_, dst, data)
    if reduce_op is not None and getattr(reduce_op, "name", None) != "add":
        raise UnsupportedError(f"{name_}: reduce_op must be nl.add, got {reduce_op!r}")
    if reduce_cmd is _RC.load_reduce:
        raise UnsupportedError(f"{name_}: reduce_cmd.load_reduce is not in the interpreted subset")
    if reduce_cmd in (_RC.reduce, _RC.reset_reduce) and reduce_op is None:
        raise KernelError(f"{name_}: reduce_cmd={reduce_cmd.name} needs reduce_op=nl.add")
    _reduce_res(reduce_res, data, name_)
    s = _operand(scale, data, name_, "scale", fp32=True)
    b = f32(0) if bias is None else _operand(bias, data, name_, "bias")
    m = machine.current()
    _count("scalar", data)
    if m.trace:
        _mark(dst)
        if reduce_res is not None:
            _mark(reduce_res)
            m.count("scalar", data.partitions, 1)
        return
    with np.errstate(all="ignore"):
        z = (data.read() * s + b).astype(f32)
    _check_range(op, z, name_)
    out = op.apply(z)
    if op.name not in EXACT_ACTIVATIONS:
        out = m.perturb(out, z, op.name)  # the hardware's approximation error, when the run asks for it
    _write(dst, out)
    lanes = slice(data.p0, data.p0 + data.partitions)
    if reduce_cmd in (_RC.reset, _RC.reset_reduce):
        m.act_regs[lanes] = 0
    if reduce_cmd in (_RC.reduce, _RC.reset_reduce):
        m.act_regs[lanes] += out.reshape(data.partitions, -1).sum(axis=1, dtype=f32)
    if reduce_res is not None:
        _write(reduce_res, m.act_regs[lanes])
        m.count("scalar", data.partitions, 1)


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None):
    """activation(..., reduce_cmd=reset_reduce) with reduce_res."""
    if reduce_op is not None and getattr(reduce_op, "name", None) != "add":  # docs/trainium.md, "Trn2's instructions"
        raise UnsupportedError(f"nisa.activation_reduce: reduce_op {reduce_op!r} is not in the interpreted subset, "
                               "which has nl.add (its page requires nl.add on NeuronCore-v2 only; nisa.activation's "
                               "on every core)")
    activation(dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
               reduce_cmd=_RC.reset_reduce)


def _check_range(op: Op, z: np.ndarray, where: str) -> None:
    if op.name not in ACTIVATION_RANGES:
        return
    lo, hi, symmetric = ACTIVATION_RANGES[op.name]
    v = np.abs(z) if symmetric else z
    bad = ~np.isnan(v) & ((v < lo) | (v > hi))
    if bad.any():
        rng = f"±[{lo:.3g}, {hi:.3g}]" if symmetric else f"[{lo:.3g}, {hi:.3g}]"
        raise LimitError(f"{where}: nl.{op.name} input {float(z[bad].flat[0])!r} outside its valid input range "
                         f"{rng} on ScalarE")


# ----------------------------------------------------------------------------------------------- VectorE / GpSimd

_INT32 = (np.dtype(np.int32), np.dtype(np.uint32))


def tensor_tensor(dst, data1, data2, op, engine=engine.unknown, name=None):
    """dst = data1 op data2 elementwise on VectorE (GpSimd for nl.power); not both inputs in PSUM.

    Arithmetic on float types goes through fp32. When every tile is int32/uint32 the instruction defaults to GpSimd,
    which uses native integer arithmetic, exact for every 32-bit value (results wrap to dst's type); GpSimd cannot
    reach PSUM, so with a PSUM tile it stays on VectorE (fp32), as it does when engine=vector is asked for."""
    name_ = "nisa.tensor_tensor"
    op = _alu(op, name_)
    if op.arity != 2:
        raise KernelError(f"{name_}: {op!r} is not a binary operator")
    for role, t in (("dst", dst), ("data1", data1), ("data2", data2)):
        _tile(t, role, name_)
    ints = all(t.dtype in _INT32 for t in (dst, data1, data2))
    native = ints and engine in (None, _ENG.unknown, _ENG.gpsimd) and not any(t.is_psum for t in (dst, data1, data2))
    if op.name == "power" or native:
        eng = _engine(engine, ("gpsimd",), "gpsimd", name_)
    else:
        eng = _engine(engine, ("vector", "gpsimd"), "vector", name_)
    if data1.is_psum and data2.is_psum:
        raise LimitError(f"{name_}: data1 and data2 cannot both be in PSUM")
    if eng == "gpsimd":
        _no_psum_on_gpsimd(name_, dst, data1, data2)
    _lanes(name_, dst, data1, data2)
    _same_free(name_, data1, data2)
    _same_free(name_, dst, data1)
    _count(eng, data1)
    if _tracing():
        _mark(dst)
    elif native:
        out = op.apply_int(data1._np, data2._np.reshape(data1.shape))
        dst._np[...] = out.astype(dst.dtype).reshape(dst.shape)  # wraps like 32-bit hardware integers
        _mark(dst)
    else:
        _write(dst, op.apply(data1.read(), data2.read().reshape(data1.shape)))


def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, name=None):
    """A scan along each partition's elements on VectorE (nki.isa.tensor_tensor_scan):
    r[0] = op1(op0(data0[0], initial), data1[0]), r[i] = op1(op0(data0[i], r[i-1]), data1[i]); reverse0 makes data0
    op0's right operand, reverse1 makes data1 op1's left one. `initial` a compile-time scalar or a [P, 1] tile; data0
    and data1 the same partitions and elements per partition, not both in PSUM; computed in fp32, each step's result
    rounded to fp32, cast to dst's dtype."""
    name_ = "nisa.tensor_tensor_scan"
    op0, op1 = _alu(op0, name_, "op0"), _alu(op1, name_, "op1")
    for o in (op0, op1):
        if o.arity != 2:
            raise KernelError(f"{name_}: {o!r} is not a binary operator")
    for role, t in (("dst", dst), ("data0", data0), ("data1", data1)):
        _tile(t, role, name_)
    if data0.is_psum and data1.is_psum:
        raise LimitError(f"{name_}: data0 and data1 cannot both be in PSUM")
    _lanes(name_, dst, data0, data1)
    _same_free(name_, data0, data1)
    _same_free(name_, dst, data0)
    if isinstance(initial, Tensor):
        _tile(initial, "initial", name_)
        _lanes(name_, data0, initial)
        if initial.free_size != 1:
            raise KernelError(f"{name_}: initial must hold one element per partition, got {initial.shape}")
    _count("vector", data0)
    if _tracing():
        _mark(dst)
        return
    p = data0.partitions
    a, b = data0.read().reshape(p, -1), data1.read().reshape(p, -1)
    prev = (initial.read().reshape(p) if isinstance(initial, Tensor)
            else np.full(p, np.float32(initial), dtype=np.float32))
    out = np.empty_like(a)
    for i in range(a.shape[1]):
        x = op0.apply(prev, a[:, i]) if reverse0 else op0.apply(a[:, i], prev)
        prev = op1.apply(b[:, i], x) if reverse1 else op1.apply(x, b[:, i])
        out[:, i] = prev
    _write(dst, out)


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                  engine=engine.unknown, name=None):
    """dst = (data op0 operand0) op1 operand1 with scalar or [P, 1] operands; VectorE by default, ScalarE only for
    multiply[+add] / add, GpSimd for rsqrt."""
    name_ = "nisa.tensor_scalar"
    ops_ = [_alu(op0, name_, "op0")] + ([_alu(op1, name_, "op1")] if op1 is not None else [])
    if any(o.name in ("square", "relu") for o in ops_):  # NKI release notes: accepted as op0 "on trn3"
        raise UnsupportedError(f"{name_}: nl.square and nl.relu as its operators are {TRN3_ONLY}: on Trn2 use "
                               "nisa.activation (ScalarE) or nisa.tensor_tensor")
    if any(o.name == "rsqrt" for o in ops_):
        eng = _engine(engine, ("gpsimd",), "gpsimd", name_)
    else:
        eng = _engine(engine, ("vector", "scalar"), "vector", name_)  # GpSimd: rsqrt only (the docs)
    if eng == "scalar" and [o.name for o in ops_] not in (["multiply", "add"], ["multiply"], ["add"]):
        raise UnsupportedError(f"{name_}: on ScalarE only multiply(+add) or add, got {ops_}")
    _tile(dst, "dst", name_), _tile(data, "data", name_)
    if eng == "gpsimd":
        _no_psum_on_gpsimd(name_, dst, data, operand0, operand1)
    _lanes(name_, dst, data)
    _same_free(name_, dst, data)
    _count(eng, data)
    if _tracing():
        for operand, role in ((operand0, "operand0"), (operand1, "operand1")):
            if isinstance(operand, Tensor):
                _operand(operand, data, name_, role, fp32=True)
        _mark(dst)
        return
    out = data.read()
    for o, operand, reverse, role in ((ops_[0], operand0, reverse0, "operand0"),
                                      *(((ops_[1], operand1, reverse1, "operand1"),) if op1 is not None else ())):
        if o.arity == 1:
            if operand not in (None, 0, 0.0):
                raise KernelError(f"{name_}: {role} must be None or 0 for the unary {o!r}")
            out = o.apply(out)
        else:
            out = _apply(o, out, _operand(operand, data, name_, role, fp32=True), reverse)
    _write(dst, out)


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, name=None):
    """dst = (data op0 operand0) op1 operand1 on VectorE: operand0 a scalar or [P, 1] tile, operand1 like data."""
    name_ = "nisa.scalar_tensor_tensor"
    o0, o1 = _alu(op0, name_, "op0"), _alu(op1, name_, "op1")
    if o0.arity != 2 or o1.arity != 2:
        raise KernelError(f"{name_}: op0 and op1 must be binary operators")
    for role, t in (("dst", dst), ("data", data), ("operand1", operand1)):
        _tile(t, role, name_)
    if data.is_psum and operand1.is_psum:
        raise LimitError(f"{name_}: data and operand1 cannot both be in PSUM")
    _lanes(name_, dst, data, operand1)
    _same_free(name_, data, operand1)
    _same_free(name_, dst, data)
    op0v = _operand(operand0, data, name_, "operand0")
    _count("vector", data)
    if _tracing():
        _mark(dst)
        return
    tmp = _apply(o0, data.read(), op0v, reverse0)
    _write(dst, _apply(o1, tmp, operand1.read().reshape(data.shape), reverse1))


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name=None):
    """Reduce the last free axes of data on VectorE (never the partition axis); optional negation."""
    name_ = "nisa.tensor_reduce"
    op = _alu(op, name_)
    if op.reduce is None:
        raise UnsupportedError(f"{name_}: {op!r} is not a reduction operator in the interpreted subset")
    _tile(dst, "dst", name_), _tile(data, "data", name_)
    _lanes(name_, dst, data)
    axes = sorted({a % data.ndim for a in ((axis,) if isinstance(axis, int) else tuple(axis))})
    if not axes or axes[0] == 0:
        raise LimitError(f"{name_}: cannot reduce the partition axis 0 (use a ones-matmul or tensor_partition_reduce)")
    if axes != list(range(axes[0], data.ndim)):
        raise UnsupportedError(f"{name_}: axes {axes} must be the last contiguous free axes of {data.shape}")
    kept = [n for i, n in enumerate(data.shape) if i not in axes]
    if dst.free_size != math.prod(kept[1:]):
        raise KernelError(f"{name_}: dst {dst.shape} does not hold the reduction of {data.shape} over {axes}")
    _count("vector", data)
    if _tracing():
        _mark(dst)
        return
    out = op.reduce(data.read(), axis=tuple(axes), keepdims=True)
    if negate:
        out = -out
    _write(dst, out)


def tensor_partition_reduce(dst, op, data, name=None):
    """Reduce across partitions on GpSimd: dst[1, F] = op over p of data[p, F]. Never PSUM."""
    name_ = "nisa.tensor_partition_reduce"
    op = _alu(op, name_)
    if op.reduce is None:
        raise UnsupportedError(f"{name_}: {op!r} is not a reduction operator in the interpreted subset")
    _tile(dst, "dst", name_), _tile(data, "data", name_)
    _no_psum_on_gpsimd(name_, dst, data)
    if dst.partitions != 1 or dst.free_size != data.free_size:
        raise KernelError(f"{name_}: dst {dst.shape} must be [1, {data.free_size}]")
    _count("gpsimd", data)
    if _tracing():
        _mark(dst)
        return
    _write(dst, op.reduce(data.read().reshape(data.partitions, -1), axis=0, keepdims=True))


def reciprocal(dst, data, name=None):
    """dst = 1 / data on VectorE (more precise than ScalarE's, ~8x slower on wide tiles)."""
    name_ = "nisa.reciprocal"
    _tile(dst, "dst", name_), _tile(data, "data", name_)
    _lanes(name_, dst, data)
    _same_free(name_, dst, data)
    _count("vector", data)
    if _tracing():
        _mark(dst)
        return
    _write(dst, OPS["reciprocal"].apply(data.read()))


_REDUCE_IDENTITY = {"add": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}


def _reduce_op(op, name_: str, allowed: tuple[str, ...]) -> Op:
    """A reduction operator: an nl ALU operator, or nl.max / nl.min (the names the pages use) for maximum / minimum."""
    if callable(op) and not isinstance(op, Op) and getattr(op, "__name__", None) in ("max", "min"):
        op = OPS["maximum" if op.__name__ == "max" else "minimum"]
    if not isinstance(op, Op) or op.name not in allowed:
        raise UnsupportedError(f"{name_}: reduce_op must be one of {', '.join('nl.' + a for a in allowed)}, got {op!r}")
    return op


def _vector_accumulate(name_: str, partial: np.ndarray | None, lanes: slice, op: Op, cmd, init=None) -> None:
    """VectorE's accumulator registers (machine.vec_regs) under reduce_cmd: reset sets them to op's identity, reduce
    folds `partial` into them, reset_reduce does both, load_reduce loads `init` and folds, idle leaves them."""
    m = machine.current()
    if cmd in (_RC.reset, _RC.reset_reduce):
        m.vec_regs[lanes] = _REDUCE_IDENTITY[op.name]
    elif cmd is _RC.load_reduce:
        m.vec_regs[lanes] = init
    if cmd in (_RC.reduce, _RC.reset_reduce, _RC.load_reduce):
        m.vec_regs[lanes] = op.apply(m.vec_regs[lanes], partial)


def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res=None, reverse0=False,
                         reduce_cmd=reduce_cmd.reset_reduce, reduce_init=None, reduce_res_negate=False, name=None):
    """dst = data op0 operand0 (nisa.tensor_scalar with one operator) on VectorE, and the result reduced over all
    its free dims by reduce_op (nl.add, nl.multiply, nl.max, nl.min) into VectorE's accumulator registers
    (nki.isa.tensor_scalar_reduce): reset_reduce (default) starts from reduce_op's identity, reduce continues,
    load_reduce starts from reduce_init (a number or an fp32 [P, 1] tile, given only then). reduce_res ([P, 1]; None
    keeps the result in the registers) receives the registers, negated with reduce_res_negate (the registers are
    not). reverse0 is documented as not supported yet: refused. At most three free dims."""
    name_ = "nisa.tensor_scalar_reduce"
    o0 = _alu(op0, name_, "op0")
    rop = _reduce_op(reduce_op, name_, ("add", "multiply", "maximum", "minimum"))
    if reverse0:
        raise UnsupportedError(f"{name_}: reverse0=True is documented as not supported yet")
    if reduce_cmd not in (_RC.reset_reduce, _RC.reduce, _RC.load_reduce):
        raise KernelError(f"{name_}: reduce_cmd must be reset_reduce, reduce or load_reduce, got {reduce_cmd}")
    if (reduce_init is not None) != (reduce_cmd is _RC.load_reduce):
        raise KernelError(f"{name_}: reduce_init is given with reduce_cmd=load_reduce, and only then")
    _tile(dst, "dst", name_), _tile(data, "data", name_)
    _lanes(name_, dst, data)
    _same_free(name_, dst, data)
    if data.ndim > 4 or dst.ndim > 4:
        raise KernelError(f"{name_}: data and dst have at most three free dims, got {data.shape} and {dst.shape}")
    _reduce_res(reduce_res, data, name_)
    if o0.arity == 1 and operand0 not in (None, 0, 0.0):
        raise KernelError(f"{name_}: operand0 must be None or 0 for the unary {o0!r}")
    _count("vector", data)
    if _traced(dst, reduce_res):
        return
    x = data.read()
    out = o0.apply(x) if o0.arity == 1 else o0.apply(x, _operand(operand0, data, name_, "operand0", fp32=True))
    _write(dst, out)
    p = data.partitions
    lanes = slice(data.p0, data.p0 + p)
    init = None
    if reduce_cmd is _RC.load_reduce:
        init = (_operand(reduce_init, data, name_, "reduce_init", fp32=True).reshape(p)
                if isinstance(reduce_init, Tensor) else f32(reduce_init))
    partial = rop.reduce(np.asarray(out, f32).reshape(p, -1), axis=1).astype(f32)
    _vector_accumulate(name_, partial, lanes, rop, reduce_cmd, init)
    if reduce_res is not None:
        regs = machine.current().vec_regs[lanes]
        _write(reduce_res, -regs if reduce_res_negate else regs)


_RANGE_CMP = ("equal", "less", "less_equal", "greater", "greater_equal")
FP32_MIN = float(-np.finfo(np.float32).max)  # -3.4028235e+38, range_select's only on_false_value


def range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd.reset_reduce,
                 reduce_res=None, reduce_op=None, range_start=0, on_false_value=FP32_MIN, name=None):
    """dst = on_true_tile where comp_op0(i, bound0) and comp_op1(i, bound1), else FP32_MIN, on VectorE
    (nki.isa.range_select, NeuronCore-v3+): i = range_start + the element's index along the flattened free dims,
    compared in fp32 with the fp32 [P, 1] bounds (i below 2^24). The row maximum (reduce_op nl.maximum, the only one)
    goes into VectorE's accumulator registers under reduce_cmd (reset_reduce by default; load_reduce, which needs an
    initial value this instruction has no parameter for, is refused) and to reduce_res ([P, 1]) when given.
    on_false_value must be FP32_MIN (a hardware constraint); on_true_tile a float tile."""
    name_ = "nisa.range_select"
    cmps = [_alu(c, name_, role) for c, role in ((comp_op0, "comp_op0"), (comp_op1, "comp_op1"))]
    if any(c.name not in _RANGE_CMP for c in cmps):
        raise KernelError(f"{name_}: comparison operators must be among {', '.join('nl.' + c for c in _RANGE_CMP)}, "
                          f"got {cmps}")
    rop = _reduce_op(OPS["maximum"] if reduce_op is None else reduce_op, name_, ("maximum",))
    if reduce_cmd is _RC.load_reduce:
        raise UnsupportedError(f"{name_}: reduce_cmd=load_reduce has no initial value to load here")
    if f32(on_false_value) != f32(FP32_MIN):
        raise KernelError(f"{name_}: on_false_value must be FP32_MIN ({FP32_MIN}) on the hardware, got "
                          f"{on_false_value!r}")
    if isinstance(range_start, bool) or not isinstance(range_start, (int, np.integer)):
        raise KernelError(f"{name_}: range_start must be a compile-time int, got {range_start!r}")
    _tile(dst, "dst", name_), _tile(on_true_tile, "on_true_tile", name_)
    if not is_float(on_true_tile.dtype):
        raise KernelError(f"{name_}: on_true_tile must be a float tile, got {on_true_tile.dtype}")
    _lanes(name_, dst, on_true_tile)
    _same_free(name_, dst, on_true_tile)
    for role, b in (("bound0", bound0), ("bound1", bound1)):
        if not isinstance(b, Tensor) or b.free_size != 1 or b.dtype != np.float32:
            raise KernelError(f"{name_}: {role} must be an fp32 tile with one element per partition, got {b!r}")
        _tile(b, role, name_)
        _lanes(name_, on_true_tile, b)
    _reduce_res(reduce_res, on_true_tile, name_)
    f = on_true_tile.free_size
    if not (-2**24 <= range_start and range_start + f - 1 <= 2**24):
        raise KernelError(f"{name_}: range_start + free index must stay within 2^24 in magnitude (compared in fp32), "
                          f"got {range_start}..{range_start + f - 1}")
    _count("vector", on_true_tile)
    if _traced(dst, reduce_res):
        return
    p = on_true_tile.partitions
    idx = (range_start + np.arange(f, dtype=np.float64)).astype(f32)[None, :]
    b0, b1 = bound0.read().reshape(p, 1), bound1.read().reshape(p, 1)
    mask = (cmps[0].apply(idx, b0) != 0) & (cmps[1].apply(idx, b1) != 0)
    out = np.where(mask, on_true_tile.read().reshape(p, f), f32(FP32_MIN)).astype(f32)
    _write(dst, out)
    lanes = slice(on_true_tile.p0, on_true_tile.p0 + p)
    _vector_accumulate(name_, out.max(axis=1), lanes, rop, reduce_cmd)
    if reduce_res is not None:
        _write(reduce_res, machine.current().vec_regs[lanes])


BN_STATS_FMAX = 512  # nl.tile_size.bn_stats_fmax


def bn_stats(dst, data, name=None):
    """Per partition, on VectorE in fp32 (nki.isa.bn_stats): dst's 6 elements are the count, mean and variance x
    count (the sum of squared deviations) of the even-indexed elements of data's (flattened) free dims, then the same
    of the odd-indexed ones; at most 512 elements per partition (nl.tile_size.bn_stats_fmax). A half without elements
    (one element in all) gives count 0 and, as the pages do not say, mean and variance 0."""
    name_ = "nisa.bn_stats"
    _tile(dst, "dst", name_), _tile(data, "data", name_)
    _lanes(name_, dst, data)
    if data.free_size > BN_STATS_FMAX:
        raise LimitError(f"{name_}: data has {data.free_size} elements per partition, at most {BN_STATS_FMAX} "
                         "(nl.tile_size.bn_stats_fmax): run bn_stats per 512-element tile and aggregate")
    if dst.free_size != 6:
        raise KernelError(f"{name_}: dst must hold 6 elements per partition, got {dst.shape}")
    _count("vector", data)
    if _tracing():
        _mark(dst)
        return
    x = data.read().reshape(data.partitions, -1).astype(f32)
    cols = []
    for half in (x[:, 0::2], x[:, 1::2]):
        k = half.shape[1]
        mean = half.mean(axis=1, dtype=f32) if k else np.zeros(len(x), f32)
        m2 = ((half - mean[:, None]) ** 2).sum(axis=1, dtype=f32) if k else np.zeros(len(x), f32)
        cols += [np.full(len(x), k, f32), mean, m2]
    _write(dst, np.stack(cols, axis=1))


def max8(dst, src, name=None):
    """dst[p, 0:8] = the 8 largest values of src's partition p, in descending order, compared in fp32 and cast to
    dst's dtype, on VectorE (nki.isa.max8): 8 to 16,384 elements per partition, src at most four free dims, dst
    [P, 8] (at most two free dims)."""
    name_ = "nisa.max8"
    _tile(dst, "dst", name_), _tile(src, "src", name_)
    _lanes(name_, dst, src)
    if not 8 <= src.free_size <= 16384:
        raise LimitError(f"{name_}: src has {src.free_size} elements per partition, between 8 and 16,384 allowed")
    if src.ndim > 5 or dst.ndim > 3 or dst.free_size != 8:
        raise KernelError(f"{name_}: src at most 5-D and dst [P, 8] (at most 3-D), got {src.shape} and {dst.shape}")
    _count("vector", src)
    if _tracing():
        _mark(dst)
        return
    x = src.read().reshape(src.partitions, -1).astype(f32)
    _write(dst, -np.sort(-x, axis=1)[:, :8])


def _affine(dst: Tensor, pattern, offset: int, channel_multiplier: int, name_: str) -> np.ndarray:
    pattern = [tuple(int(v) for v in p) for p in pattern]
    if not 1 <= len(pattern) <= 4 or any(len(p) != 2 for p in pattern):
        raise KernelError(f"{name_}: pattern must be 1 to 4 [step, num] pairs, got {pattern}")
    nums = [num for _, num in pattern]
    if math.prod(nums) != dst.free_size:
        raise KernelError(f"{name_}: pattern covers {math.prod(nums)} elements, dst has {dst.free_size} per partition")
    values = np.full((dst.partitions, *nums), offset, dtype=np.int64)
    values += (np.arange(dst.partitions) * channel_multiplier).reshape(-1, *([1] * len(nums)))
    for i, (step, num) in enumerate(pattern):
        shape = [1] * (len(nums) + 1)
        shape[i + 1] = num
        values += (np.arange(num) * step).reshape(shape)
    return values.reshape(dst.partitions, -1)


def iota(dst, pattern, offset=0, channel_multiplier=0, name=None):
    """dst[p, ...] = offset + p * channel_multiplier + sum(i_k * step_k) on GpSimd, into SBUF."""
    name_ = "nisa.iota"
    _tile(dst, "dst", name_)
    _no_psum_on_gpsimd(name_, dst)
    values = _affine(dst, pattern, offset, channel_multiplier, name_)
    _count("gpsimd", dst)
    if _tracing():
        _mark(dst)
        return
    # computed in 32-bit integer arithmetic, then cast to dst's dtype (nki.isa.iota): an integer dst is exact
    values = values.astype(np.int64)
    values = ((values + 2**31) % 2**32 - 2**31).astype(np.int32)
    if is_float(dst.dtype):
        _write(dst, values.astype(f32))
    else:
        dst._np[...] = values.reshape(dst.shape).astype(dst.dtype)
        _mark(dst)


def affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=None, offset=0,
                  name=None):
    """dst = on_true_tile where cmp_op(affine value, 0) else on_false_value, on GpSimd, SBUF only."""
    name_ = "nisa.affine_select"
    _tile(dst, "dst", name_), _tile(on_true_tile, "on_true_tile", name_)
    _no_psum_on_gpsimd(name_, dst, on_true_tile)
    _lanes(name_, dst, on_true_tile)
    _same_free(name_, dst, on_true_tile)
    cmp_op = _alu(OPS["equal"] if cmp_op is None else cmp_op, name_, "cmp_op")
    affine = _affine(dst, pattern, offset, channel_multiplier, name_)
    _count("gpsimd", dst)
    if _tracing():
        _mark(dst)
        return
    pred = cmp_op.apply(affine.astype(f32), f32(0)) != 0
    values = on_true_tile.read().reshape(dst.partitions, -1)
    _write(dst, np.where(pred, values, f32(on_false_value)))


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    raise NotInSubsetError(f"nki.isa.{name} is not in the interpreted subset")

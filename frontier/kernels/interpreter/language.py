"""`nki.language` as the interpreter provides it.

Subset: dtypes (float32, bfloat16, float16, float8_*, int8..uint32, bool_), buffers (sbuf, psum, hbm = private_hbm,
shared_hbm), tile_size, ndarray / zeros / full / ones (on-chip; HBM only through ndarray), load / store, ds,
affine_range / sequential_range / static_range (= range: unrolled), fori_loop (compiled loops, below),
the operators of ops.py, called as values for `op=` or as elementwise functions, nl.sum / max / min, nl.transpose,
nl.matmul(transpose_x=True), nl.broadcast_to, nl.shared_identity_matrix. The elementwise calls take tiles of
one shape, or a tile and a number: broadcasting two tiles of different shapes does not exist on the hardware and is
refused, as are nl.divide, nl.mod and nl.fmod, and nl.power with a scalar exponent (a known issue of NKI 0.3/0.4:
"nl.power(tile, scalar) is not supported").

Compiled loops (NKI 0.7: nki/deep-dives/nki-loops.rst, nki.language.fori_loop): `nl.fori_loop(lower, upper,
body, step=1)` is not unrolled: the compiler emits its body once, and the hardware repeats it. The body receives the
loop variable, a device value: an NkiScalar (`tensor.Scalar`: `+`, `-`, `*` traced into another 32-bit scalar) with
int bounds, a VirtualRegister (`Register`: no arithmetic) when a bound is one; no Python int, index or truth value
from either, only use as a runtime offset, `tensor.ap(..., scalar_offset=i)`, or a bound. It returns nothing (loop
state lives in SBUF/HBM), and the bounds must fit 32 bits. What the compiler settles as it emits, an
`nc_matmul(accumulate=None)`'s flag, every iteration takes from the first (`Machine.infer_accumulate`). The
interpreter runs the body once per iteration, counting its
instructions as emitted only in the first (counts.py); in trace mode it runs the body once. `nl.dynamic_range`,
deprecated in NKI 0.6, was removed in 0.7 (the 0.6 -> 0.7 migration guide): calling it raises, naming fori_loop.
`affine_range` / `sequential_range` / `static_range` are Python's `range` in 0.7 (deprecated aliases): unrolled.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from . import isa, machine
from .errors import KernelError, LimitError, NotInSubsetError, UnsupportedError
from .limits import PMAX, PSUM_BANK_BYTES, PSUM_BANK_FP32, PSUM_BANKS, SBUF_BYTES_PER_PARTITION
from .ops import Op, make_ops
from .tensor import DynSlice, MemoryRegion, Register, Scalar, Tensor, is_float

# dtypes (NumPy dtypes; bf16 and fp8 from ml_dtypes)
float32 = np.dtype(np.float32)
float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3) if hasattr(ml_dtypes, "float8_e4m3") else None
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
int8, int16, int32 = np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32)
uint8, uint16, uint32 = np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32)
bool_ = np.dtype(np.uint8)

# buffers
sbuf = MemoryRegion.sbuf
psum = MemoryRegion.psum
private_hbm = MemoryRegion.private_hbm
hbm = MemoryRegion.private_hbm
shared_hbm = MemoryRegion.shared_hbm


class _TileSize:
    pmax = PMAX
    psum_fmax = PSUM_BANK_FP32
    psum_bank_fmax = PSUM_BANK_FP32
    psum_bank_fmax_bytes = PSUM_BANK_BYTES
    psum_num_banks = PSUM_BANKS
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    bn_stats_fmax = isa.BN_STATS_FMAX
    sbuf_fmax_bytes = SBUF_BYTES_PER_PARTITION
    total_available_sbuf_size = SBUF_BYTES_PER_PARTITION


tile_size = _TileSize()

class NKIObject:
    """The base of user-defined classes in kernel code (NKI language guide, class support; subset.py checks it)."""


class LanguageOp(Op):
    """An operator as `nki.language` exposes it: a value for the `op=` fields of `nki.isa`, and callable as the
    high-level elementwise function (`nl.exp(t)`, `nl.add(a, b)`)."""

    def __call__(self, *args, dtype=None):
        return elementwise(self, args, dtype)


globals().update(make_ops(LanguageOp))  # nl.add, nl.multiply, nl.exp, ..., nl.divide (refused when used)


def _buffer(buffer) -> MemoryRegion:
    if not isinstance(buffer, MemoryRegion):
        raise KernelError(f"buffer must be one of nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm, got {buffer!r}")
    return buffer


def ndarray(shape, dtype, buffer=sbuf, name="", address=None):
    """A new tensor, uninitialised: filled with NaN (integers: 4) so that reading it before writing shows."""
    if address is not None:
        raise UnsupportedError("nl.ndarray(address=...) is not in the interpreted subset")
    return machine.current().allocate(shape, dtype, _buffer(buffer), name)


def full(shape, fill_value, dtype, buffer=sbuf, name=""):
    """A new on-chip tensor set to fill_value (a memset on VectorE)."""
    if not _buffer(buffer).on_chip:
        raise UnsupportedError("nl.full/zeros/ones in HBM are not in the interpreted subset")
    t = ndarray(shape, dtype, buffer, name)
    if not is_float(t.dtype) and isinstance(fill_value, (float, np.floating)) and float(fill_value).is_integer():
        fill_value = int(fill_value)  # nl.full's value is not memset's: an integral float fills an integer tensor
    isa.memset(t, fill_value)
    return t


def zeros(shape, dtype, buffer=sbuf, name=""):
    return full(shape, 0.0, dtype, buffer, name)


def ones(shape, dtype, buffer=sbuf, name=""):
    return full(shape, 1.0, dtype, buffer, name)


def load(src, dtype=None):
    """A new SBUF tile with the values of the HBM tensor src (one DMA)."""
    if not isinstance(src, Tensor) or src.on_chip:
        raise LimitError(f"nl.load reads HBM, got {src!r}")
    tile = ndarray(src.shape, dtype or src.dtype, sbuf)
    isa._casting_dge("nl.load", tile, src, isa.dge_mode.unknown, src.dynamic)  # the compiler's DGE mode
    isa._dma(tile, src, "nl.load")
    return tile


def store(dst, value):
    """dst (HBM) = value (an SBUF tile; PSUM cannot be DMA'd)."""
    if not isinstance(dst, Tensor) or dst.on_chip:
        raise LimitError(f"nl.store writes HBM, got {dst!r}")
    isa._casting_dge("nl.store", dst, value, isa.dge_mode.unknown,
                     dst.dynamic or isinstance(value, Tensor) and value.dynamic)
    isa._dma(dst, value, "nl.store")


def ds(start, size):
    return DynSlice(int(start), int(size))


def affine_range(start, stop=None, step=1):
    return range(start, stop, step) if stop is not None else range(start)


sequential_range = static_range = affine_range


def _bound(v, what: str) -> int:
    if isinstance(v, (Register, Scalar)):
        return v._value
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise KernelError(f"{what} must be an int or a register, got {type(v).__name__}")
    return int(v)


def _device_loop(values: range, variable):
    """Yield the iterations of a device loop (module docstring): emitted once, run once per value, as `variable`."""
    m = machine.current()
    if m.emitting:
        m.counts.dynamic_loops += 1
    m.loops.append(("nl.fori_loop", len(values)))
    replaying, start = False, m.inferred_at
    try:
        for k, v in enumerate(values):
            if k == 1:
                if m.trace:
                    return
                m.replay += 1
                replaying = True
            m.inferred_at = start  # every iteration runs the one emitted body
            yield variable(v)
    finally:
        if replaying:
            m.replay -= 1


def _loop_range(start, stop, step, what: str) -> range:
    if isinstance(step, Register) or isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 1:
        raise KernelError(f"{what}: the step must be a positive compile-time int, got {step!r}")
    return range(_bound(start, f"{what} start"), _bound(stop, f"{what} stop"), int(step))


def program_id(axis=0):
    """This physical core's index in an LNC=2 launch (0 or 1), 0 at LNC=1: a compile-time int (lnc.py)."""
    if axis != 0:
        raise KernelError(f"nl.program_id({axis}): an LNC launch has one axis (0)")
    return machine.current().core


def num_programs(axes=0):
    """The launch's LNC degree (1 or 2): how many physical cores run this kernel."""
    if axes not in (0, None):
        raise KernelError(f"nl.num_programs({axes}): an LNC launch has one axis (0)")
    return machine.current().lnc


def program_ndim():
    return 1 if machine.current().lnc > 1 else 0


INT32 = (-2**31, 2**31 - 1)


def fori_loop(lower, upper, body_fun, step=1):
    """nl.fori_loop: body_fun(i) for i in range(lower, upper, step) as a compiled loop; body_fun returns nothing."""
    if not callable(body_fun):
        raise KernelError(f"nl.fori_loop: body_fun must be a function of the loop variable, got "
                          f"{type(body_fun).__name__}")
    values = _loop_range(lower, upper, step, "nl.fori_loop")
    for v in (values.start, values.stop):
        if not INT32[0] <= v <= INT32[1]:
            raise KernelError(f"nl.fori_loop: bound {v} does not fit 32 bits (the loop's compare-and-branch has no "
                              "64-bit form)")
    # the body's value: an NkiScalar, or a VirtualRegister when a bound is one (nki.language.fori_loop, 2.33)
    variable = Register if isinstance(lower, Register) or isinstance(upper, Register) else Scalar
    for i in _device_loop(values, variable):
        if body_fun(i) is not None:
            raise KernelError("nl.fori_loop: the body function cannot return a value (keep loop state in SBUF/HBM)")


def while_loop(init, body_fun):
    """nl.while_loop: while the register's value is nonzero, r = body_fun(r) (a register), as a compiled loop: the
    body is emitted once and checked before each iteration (the loop may not run at all)."""
    if not isinstance(init, Register):
        raise KernelError(f"nl.while_loop: init must be a register (nisa.register_alloc), got {type(init).__name__}")
    if not callable(body_fun):
        raise KernelError("nl.while_loop: body_fun must be a function of the condition register")
    m = machine.current()
    if m.emitting:
        m.counts.dynamic_loops += 1
    r, k, start = init, 0, m.inferred_at
    try:
        while m.trace and k == 0 or not m.trace and r._runtime_value() != 0:
            if k == 1:
                m.replay += 1
            m.inferred_at = start  # every iteration runs the one emitted body
            r = body_fun(Register(r._runtime_value()))
            if not isinstance(r, Register):
                raise KernelError("nl.while_loop: body_fun must return the next condition register")
            k += 1
    finally:
        if k > 1:
            m.replay -= 1
        m.loops.append(("nl.while_loop", None if m.trace else k))


def elementwise(op: Op, args: tuple, dtype=None) -> Tensor:
    """The high-level `nl.<op>(x[, y], dtype=None)`: a new SBUF tile (VectorE; ScalarE for activation functions)."""
    op.check_hardware()
    if len(args) != op.arity:
        raise KernelError(f"nl.{op.name} takes {op.arity} argument(s), got {len(args)}")
    tiles = [a for a in args if isinstance(a, Tensor)]
    if not tiles:
        raise KernelError(f"nl.{op.name} needs a tile argument")
    if op.name == "power" and len(tiles) < 2:
        raise UnsupportedError("nl.power(tile, scalar): scalar exponents are not supported (NKI known issues); pass "
                               "the exponent as a tile of the same shape")
    x = tiles[0]
    if any(t.shape != x.shape for t in tiles[1:]):
        raise UnsupportedError(f"nl.{op.name}: broadcasting {tiles[0].shape} with {tiles[1].shape} does not exist "
                               "on the hardware (use nisa.tensor_scalar with a [P, 1] operand)")
    out = ndarray(x.shape, dtype or x.dtype, sbuf)
    if op.arity == 1:
        if op.act:
            if op.name == "sin":  # nl.sin reduces its argument to [-pi, pi] first; the ISA activation does not
                reduced = ndarray(x.shape, x.dtype, sbuf)
                isa._reduce_angle(reduced, x)
                x = reduced
            isa.activation(out, op, x)
        else:
            isa.tensor_scalar(out, x, op, None)
    elif len(tiles) == 2:
        isa.tensor_tensor(out, args[0], args[1], op)
    else:
        scalar = args[1] if args[0] is x else args[0]
        isa.tensor_scalar(out, x, op, scalar, reverse0=args[0] is not x)
    return out


def _reduce(op_name: str, x, axis, dtype, keepdims):
    """nl.sum / nl.max / nl.min: a VectorE reduction over the last contiguous free axes into a new SBUF tile (on-chip
    tiles stay 2-D: reducing every free axis keeps a size-1 one)."""
    if not isinstance(x, Tensor):
        raise KernelError(f"nl.{op_name}: x must be a tile, got {type(x).__name__}")
    axes = sorted({a % x.ndim for a in ((axis,) if isinstance(axis, int) else tuple(axis))})
    shape = [1 if i in axes else n for i, n in enumerate(x.shape)] if keepdims else \
        [n for i, n in enumerate(x.shape) if i not in axes]
    if len(shape) < 2:
        shape = shape + [1]
    out = ndarray(tuple(shape), dtype or x.dtype, sbuf)
    isa.tensor_reduce(out, globals()[{"sum": "add", "max": "maximum", "min": "minimum"}[op_name]], x, axis,
                      keepdims=keepdims)
    return out


def sum(x, axis, dtype=None, keepdims=False):  # noqa: A001  (nl.sum)
    return _reduce("sum", x, axis, dtype, keepdims)


def max(x, axis, dtype=None, keepdims=False):  # noqa: A001
    return _reduce("max", x, axis, dtype, keepdims)


def min(x, axis, dtype=None, keepdims=False):  # noqa: A001
    return _reduce("min", x, axis, dtype, keepdims)


def broadcast_to(x, shape, dtype=None):
    """nl.broadcast_to (experimental in NKI 0.7): x (SBUF or PSUM) broadcast to `shape` by NumPy's rules, the same
    rank, each dim equal or broadcast from 1 (the partition dim included: [1, F] -> [P, F]); x itself when the shape
    is already x's and no other dtype is asked for, else a new SBUF tile. How the compiler lowers it is not
    documented; it is counted as one VectorE instruction over the output."""
    if not isinstance(x, Tensor) or not x.on_chip:
        raise KernelError(f"nl.broadcast_to takes a tile in SBUF or PSUM, got {x!r}")
    shape = tuple(int(s) for s in shape)
    if len(shape) != x.ndim or any(a != b and a != 1 for a, b in zip(x.shape, shape)):
        raise KernelError(f"nl.broadcast_to: {x.shape} cannot broadcast to {shape} (same rank; each dim equal or 1)")
    if shape == tuple(x.shape) and (dtype is None or np.dtype(dtype) == x.dtype):
        return x
    out = ndarray(shape, dtype or x.dtype, sbuf)
    m = machine.current()
    m.count("vector", out.size, out.free_size)
    if not m.trace:
        isa._write(out, np.broadcast_to(x.read(), shape))
    else:
        isa._mark(out)
    return out


def shared_identity_matrix(n, dtype=uint8, dst=None):
    """nl.shared_identity_matrix: an [n, n] identity tile in SBUF of `dtype` (uint8 by default), n <= 128; written
    into `dst` (an SBUF [n, n] tile of that dtype) when given. The compiler keeps one such constant per dtype and
    loads it (nki.language.shared_identity_matrix; shared_constant: embedded in the binary, in HBM at load time):
    counted as one DMA from HBM of its bytes."""
    n = int(n)
    if not 1 <= n <= PMAX:
        raise KernelError(f"nl.shared_identity_matrix: n = {n} must be 1..{PMAX} (the rows are partitions)")
    if dst is None:
        dst = ndarray((n, n), dtype, sbuf)
    elif (not isinstance(dst, Tensor) or dst.buffer is not MemoryRegion.sbuf or tuple(dst.shape) != (n, n)
          or dst.dtype != np.dtype(dtype)):
        raise KernelError(f"nl.shared_identity_matrix: dst must be an SBUF [{n}, {n}] tile of {np.dtype(dtype)}, got "
                          f"{dst!r}")
    m = machine.current()
    if not m.trace:
        dst._np[...] = np.eye(n, dtype=dst.dtype)
    isa._mark(dst)
    m.counts.dma(dst.nbytes, True, dst.nbytes, False, m.emitting)
    return dst


def transpose(x, dtype=None):
    """nl.transpose: a 2-D tile with partitions and free dim swapped, on TensorE into PSUM."""
    if not isinstance(x, Tensor) or x.ndim != 2:
        raise KernelError(f"nl.transpose takes a 2-D tile, got {x!r}")
    out = ndarray((x.shape[1], x.shape[0]), dtype or x.dtype, psum)
    isa.nc_transpose(out, x, engine=isa.engine.tensor)
    return out


def matmul(x, y, transpose_x=False):
    """nl.matmul(x, y, transpose_x=True): x.T @ y into a new fp32 PSUM tile (one nc_matmul, x stationary). Without
    transpose_x it fails on the hardware (a known issue carried from NKI 0.4): refused."""
    if not transpose_x:
        raise UnsupportedError("nl.matmul(x, y) without transpose_x=True is not supported (NKI known issue): "
                               "arrange x as [K, M] and pass transpose_x=True")
    out = ndarray((x.shape[1], y.shape[1]), float32, psum)
    isa.nc_matmul(out, x, y)
    return out


REMOVED = {
    "dynamic_range": "nl.dynamic_range was removed in NKI 0.7 (Neuron SDK 2.33; deprecated in 0.6): write the loop as "
                     "nl.fori_loop(lower, upper, body, step=step), body(i) using i as a runtime offset",
}


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    if name in REMOVED:
        raise NotInSubsetError(REMOVED[name])
    raise NotInSubsetError(f"nki.language.{name} is not in the interpreted subset")

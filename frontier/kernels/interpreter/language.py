"""`nki.language` as the interpreter provides it.

Subset: dtypes (float32, bfloat16, float16, float8_*, int8..uint32, bool_), buffers (sbuf, psum, hbm = private_hbm,
shared_hbm), tile_size, ndarray / zeros / full / ones (on-chip; HBM only through ndarray), load / store, ds,
affine_range / sequential_range / static_range (= range), the operators of ops.py, called as values for `op=` or as
elementwise functions. The elementwise calls take tiles of one shape, or a tile and a number: broadcasting two tiles
of different shapes does not exist on the hardware and is refused, as are nl.divide, nl.mod and nl.fmod.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from . import isa, machine
from .errors import KernelError, LimitError, NotInSubsetError, UnsupportedError
from .limits import PMAX, PSUM_BANK_BYTES, PSUM_BANK_FP32, PSUM_BANKS, SBUF_BYTES_PER_PARTITION
from .ops import OPS, Op
from .tensor import DynSlice, MemoryRegion, Tensor

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
    sbuf_fmax_bytes = SBUF_BYTES_PER_PARTITION
    total_available_sbuf_size = SBUF_BYTES_PER_PARTITION


tile_size = _TileSize()

globals().update(OPS)  # nl.add, nl.multiply, nl.exp, ..., nl.divide (refused when used)


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
    isa._dma(tile, src, "nl.load")
    return tile


def store(dst, value):
    """dst (HBM) = value (an SBUF tile; PSUM cannot be DMA'd)."""
    if not isinstance(dst, Tensor) or dst.on_chip:
        raise LimitError(f"nl.store writes HBM, got {dst!r}")
    isa._dma(dst, value, "nl.store")


def ds(start, size):
    return DynSlice(int(start), int(size))


def affine_range(start, stop=None, step=1):
    return range(start, stop, step) if stop is not None else range(start)


sequential_range = static_range = affine_range


def elementwise(op: Op, args: tuple, dtype=None) -> Tensor:
    """The high-level `nl.<op>(x[, y], dtype=None)`: a new SBUF tile (VectorE; ScalarE for activation functions)."""
    op.check_hardware()
    if len(args) != op.arity:
        raise KernelError(f"nl.{op.name} takes {op.arity} argument(s), got {len(args)}")
    tiles = [a for a in args if isinstance(a, Tensor)]
    if not tiles:
        raise KernelError(f"nl.{op.name} needs a tile argument")
    x = tiles[0]
    if any(t.shape != x.shape for t in tiles[1:]):
        raise UnsupportedError(f"nl.{op.name}: broadcasting {tiles[0].shape} with {tiles[1].shape} does not exist "
                               "on the hardware (use nisa.tensor_scalar with a [P, 1] operand)")
    out = ndarray(x.shape, dtype or x.dtype, sbuf)
    if op.arity == 1:
        if op.act:
            isa.activation(out, op, x)
        else:
            isa.tensor_scalar(out, x, op, None)
    elif len(tiles) == 2:
        isa.tensor_tensor(out, args[0], args[1], op)
    else:
        scalar = args[1] if args[0] is x else args[0]
        isa.tensor_scalar(out, x, op, scalar, reverse0=args[0] is not x)
    return out


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    raise NotInSubsetError(f"nki.language.{name} is not in the interpreted subset")

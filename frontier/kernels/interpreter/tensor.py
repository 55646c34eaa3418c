"""Tensors of the interpreter: a storage (one allocation, NumPy-backed) and views of it.

A `Tensor` is what a kernel holds: `nl.ndarray` returns one over a fresh `Storage`; indexing (`t[a:b, :]`, `nl.ds`)
and `reshape` return views that share the storage, as in NKI. On-chip tensors (SBUF, PSUM) keep dim 0 as the
partition dim: it is never dropped or strided, integer indexing on it keeps a size-1 dim, and a view that would be
under 2-D keeps a trailing size-1 dim. HBM tensors drop integer-indexed dims. Slices must lie inside the tensor
(NumPy would silently clip them; the hardware would read out of bounds), and steps are positive.

New storage is filled with NaN (floats) or 4 (integers), as the official simulator does, so reading memory that was
never written shows up as NaN in the result. PSUM storage also records, per element, what last wrote it (nothing, a
matmul, or another instruction) so that accumulating into PSUM that no matmul started is refused, and its byte offset
in a partition under the tightest packing (memory.py).

`Tensor.ap(pattern, offset, scalar_offset, indirect_dim)` is the raw access pattern of the NKI docs
(deep-dives/nki-aps.rst): [step, num] pairs over the storage itself (not composable with the view it is called on), a
start offset in elements, and a runtime `scalar_offset` (a dynamic loop's register, or a (1, 1) int32 SBUF tile)
that moves the start by scalar_offset * prod(storage shape[indirect_dim + 1:]). It is how a kernel addresses HBM rows
from a dynamic loop's variable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import ml_dtypes
import numpy as np

from .errors import KernelError, LimitError, UnsupportedError

# what last wrote a PSUM element
NEVER, BY_MATMUL, BY_OTHER = 0, 1, 2

_ML_FLOATS = {np.dtype(getattr(ml_dtypes, n)) for n in ("bfloat16", "float8_e4m3", "float8_e4m3fn", "float8_e5m2")
              if hasattr(ml_dtypes, n)}


class MemoryRegion(Enum):
    sbuf = "sbuf"
    psum = "psum"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"

    @property
    def on_chip(self) -> bool:
        return self in (MemoryRegion.sbuf, MemoryRegion.psum)


def is_float(dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype in _ML_FLOATS


@dataclass(frozen=True)
class DynSlice:
    """`nl.ds(start, size)`: the slice start:start+size."""

    start: int
    size: int


class Storage:
    """One allocation. The interpreter's memory accounting watches its lifetime (see memory.py).

    `input`: an HBM tensor the kernel was called with; `dma_written`: a DMA wrote into it (inputs a kernel writes
    are copied back to the caller's arrays, as the simulator does); `psum_offset`: bytes from the start of a
    partition's PSUM under the tightest packing (memory.py)."""

    __slots__ = ("array", "buffer", "written", "name", "input", "dma_written", "psum_offset", "__weakref__")

    def __init__(self, shape: tuple[int, ...], dtype, buffer: MemoryRegion, name: str = "", fill: bool = True):
        dtype = np.dtype(dtype)
        if fill:
            self.array = np.full(shape, np.nan if is_float(dtype) else 4, dtype=dtype)
        else:  # trace mode and inputs: the values are never read before being set (or never at all)
            self.array = np.empty(shape, dtype=dtype)
        self.buffer = buffer
        self.written = np.zeros(shape, np.uint8) if buffer is MemoryRegion.psum else None
        self.name = name
        self.input = False
        self.dma_written = False
        self.psum_offset = 0

    @property
    def bytes_per_partition(self) -> int:
        return math.prod(self.array.shape[1:]) * self.array.itemsize


class Tensor:
    """A view of a storage: the `NkiTensor` subset kernels use (shape, dtype, buffer, indexing, reshape)."""

    __slots__ = ("storage", "_np", "_written", "p0", "dynamic")

    def __init__(self, storage: Storage, data: np.ndarray, written: np.ndarray | None, p0: int = 0,
                 dynamic: bool = False):
        self.dynamic = dynamic  # addressed at run time (an access pattern with a scalar_offset)
        self.storage = storage
        self._np = data  # a NumPy view of storage.array
        self._written = written  # the same view of storage.written (PSUM only)
        self.p0 = p0  # first partition of this view (on-chip)

    @classmethod
    def whole(cls, storage: Storage) -> "Tensor":
        return cls(storage, storage.array[...], None if storage.written is None else storage.written[...])

    # --- what kernels read
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._np.shape)

    @property
    def dtype(self):
        return self._np.dtype

    @property
    def buffer(self) -> MemoryRegion:
        return self.storage.buffer

    @property
    def ndim(self) -> int:
        return self._np.ndim

    @property
    def size(self) -> int:
        return int(self._np.size)

    # --- what the interpreter reads
    @property
    def on_chip(self) -> bool:
        return self.buffer.on_chip

    @property
    def is_psum(self) -> bool:
        return self.buffer is MemoryRegion.psum

    @property
    def partitions(self) -> int:
        return self.shape[0]

    @property
    def free_size(self) -> int:
        """Elements per partition."""
        return math.prod(self.shape[1:])

    @property
    def nbytes(self) -> int:
        return self.size * self._np.itemsize

    def free_byte_span(self) -> tuple[int, int]:
        """First and last byte this view touches inside one partition's row of the storage (on-chip)."""
        base = self.storage.array
        start = (self._np.__array_interface__["data"][0] - base.__array_interface__["data"][0]
                 - self.p0 * base.strides[0])
        extent = sum((n - 1) * s for n, s in zip(self._np.shape[1:], self._np.strides[1:]))
        return start, start + extent + self._np.itemsize - 1

    def read(self) -> np.ndarray:
        """The values as float32 (engines compute in fp32)."""
        return self._np.astype(np.float32)

    # --- views
    def __getitem__(self, key) -> "Tensor":
        key = _normalize(key, self.shape, self.on_chip)
        data = self._np[key]
        written = None if self._written is None else self._written[key]
        p0 = self.p0
        if self.on_chip:
            p0 += key[0].start
            while data.ndim < 2:  # on-chip views stay >= 2-D: keep a trailing size-1 dim
                data = data[..., None]
                written = None if written is None else written[..., None]
        elif data.ndim == 0:
            data = data[None]
        return Tensor(self.storage, data, written, p0, self.dynamic)

    def ap(self, pattern, offset=None, scalar_offset=None, vector_offset=None, indirect_dim=0, dtype=None) -> "Tensor":
        """The raw access pattern over this tensor's storage (module docstring). `offset` None keeps this view's
        start; steps are in elements and must be positive; the whole pattern must lie inside the storage."""
        if vector_offset is not None or dtype is not None:
            raise UnsupportedError("Tensor.ap(vector_offset=..., dtype=...) is not in the interpreted subset")
        base = self.storage.array
        pattern = [tuple(int(v) for v in p) for p in pattern]
        if not pattern or any(len(p) != 2 or p[0] < 1 or p[1] < 1 for p in pattern):
            raise KernelError(f"ap: pattern must be [step, num] pairs with positive steps and counts, got {pattern}")
        start = self._element_offset() if offset is None else int(offset)
        if scalar_offset is not None:
            if not 0 <= indirect_dim < base.ndim:
                raise KernelError(f"ap: indirect_dim {indirect_dim} is not a dim of the storage {base.shape}")
            start += _runtime_index(scalar_offset) * math.prod(base.shape[indirect_dim + 1:])
        last = start + sum((num - 1) * step for step, num in pattern)
        if start < 0 or last >= base.size:
            raise LimitError(f"ap: pattern {pattern} from element {start} reaches element {last} of a storage of "
                             f"{base.size} ({base.shape})")
        p0 = 0
        if self.on_chip:
            free = base.size // base.shape[0]
            if pattern[0][0] != free:
                raise LimitError(f"ap: the partition step of an on-chip access pattern must be the storage's free "
                                 f"size {free}, got {pattern[0][0]}")
            p0 = start // free
            if (start % free) + sum((num - 1) * step for step, num in pattern[1:]) >= free:
                raise LimitError(f"ap: pattern {pattern} from element {start} runs past the end of a partition")
        shape = tuple(num for _, num in pattern)
        strides = tuple(step * base.itemsize for step, _ in pattern)
        data = np.lib.stride_tricks.as_strided(base.reshape(-1)[start:], shape, strides)
        written = None
        if self.storage.written is not None:
            written = np.lib.stride_tricks.as_strided(self.storage.written.reshape(-1)[start:], shape,
                                                      tuple(step for step, _ in pattern))
        if self.on_chip and data.ndim < 2:
            data, written = data[..., None], None if written is None else written[..., None]
        return Tensor(self.storage, data, written, p0, dynamic=scalar_offset is not None)

    def _element_offset(self) -> int:
        base = self.storage.array
        return (self._np.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // base.itemsize

    def reshape(self, shape) -> "Tensor":
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        if math.prod(shape) != self.size:
            raise KernelError(f"reshape: {self.shape} has {self.size} elements, {shape} has {math.prod(shape)}")
        if self.on_chip and shape[0] != self.shape[0]:
            raise LimitError(f"reshape of an on-chip tensor must keep the partition dim: {self.shape} -> {shape}")
        try:
            data = _view_as(self._np, shape)
            written = None if self._written is None else _view_as(self._written, shape)
        except (ValueError, AttributeError) as e:
            raise UnsupportedError(f"reshape {self.shape} -> {shape} needs a contiguous view") from e
        return Tensor(self.storage, data, written, self.p0, self.dynamic)

    def __setitem__(self, key, value):
        raise UnsupportedError("assigning into a tensor is not in the interpreted subset: use nisa.tensor_copy, "
                               "nisa.dma_copy or nl.store")

    def __iter__(self):
        raise TypeError("an NKI tensor is not iterable")

    def __repr__(self) -> str:
        name = f" {self.storage.name!r}" if self.storage.name else ""
        return f"<Tensor{name} {self.shape} {self.dtype} {self.buffer.value}>"


class Register:
    """A device register: the variable of a compiled loop. Its value exists only at run time on the device, so the
    kernel may not compute with it in Python; it is read as a runtime offset (`tensor.ap(scalar_offset=reg)`)."""

    __slots__ = ("_value",)

    def __init__(self, value: int):
        self._value = int(value)

    def _runtime_value(self) -> int:
        return self._value

    def _refuse(self, *args):
        raise KernelError("a compiled loop's variable is a device register, not a Python int: no arithmetic, "
                          "comparison, truth value or indexing with it at specialization time; read it as a runtime "
                          "offset, tensor.ap(pattern, offset=..., scalar_offset=register)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __floordiv__ = __rfloordiv__ = _refuse
    __mod__ = __rmod__ = __truediv__ = __rtruediv__ = __neg__ = __pow__ = _refuse
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __index__ = __int__ = __float__ = _refuse
    __hash__ = None

    def __repr__(self) -> str:
        return "<Register (a compiled loop's variable)>"


def _wrap32(v: int) -> int:
    return (int(v) + 2**31) % 2**32 - 2**31


class Scalar:
    """An NkiScalar: one 32-bit integer computed on the device, what a `nl.fori_loop` with int bounds hands its body
    (nki.language.fori_loop, 2.33: "i is a NkiScalar unless either lower or upper is a VirtualRegister"). Arithmetic
    on it is traced, not evaluated at specialization time: `+`, `-` (binary and unary) and `*` with an int or another
    scalar give a new scalar, wrapping at 32 bits (nki.isa.NkiScalar); it is read as a runtime offset
    (`tensor.ap(..., scalar_offset=i)`) or bounds another `fori_loop`. A comparison is traced but its result cannot be
    used; a Python int, truth value or index made from it does not exist at specialization time, and neither do `//`,
    `%`, `/` or `**`. Its arithmetic is not counted as instructions."""

    __slots__ = ("_value",)

    def __init__(self, value: int):
        self._value = _wrap32(value)

    def _runtime_value(self) -> int:
        return self._value

    @staticmethod
    def _operand(other) -> int:
        if isinstance(other, Scalar):
            return other._value
        if isinstance(other, (int, np.integer)) and not isinstance(other, (bool, np.bool_)):
            return int(other)
        raise KernelError(f"an NkiScalar's arithmetic takes an int or another NkiScalar, got {type(other).__name__}")

    def __add__(self, other):
        return Scalar(self._value + self._operand(other))

    def __sub__(self, other):
        return Scalar(self._value - self._operand(other))

    def __rsub__(self, other):
        return Scalar(self._operand(other) - self._value)

    def __mul__(self, other):
        return Scalar(self._value * self._operand(other))

    def __neg__(self):
        return Scalar(-self._value)

    __radd__, __rmul__ = __add__, __mul__

    def _compare(self, other):
        self._operand(other)
        return _Unusable()

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _compare
    __hash__ = None

    def _refuse(self, *args):
        raise KernelError("a compiled loop's variable is an NkiScalar, a value on the device: +, - and * on it give "
                          "another (32-bit); no Python int, truth value, index, //, %, / or ** from it at "
                          "specialization time: read it as a runtime offset, tensor.ap(pattern, offset=..., "
                          "scalar_offset=i)")

    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __truediv__ = __rtruediv__ = __pow__ = __rpow__ = _refuse
    __bool__ = __index__ = __int__ = __float__ = _refuse

    def __repr__(self) -> str:
        return "<NkiScalar (a compiled loop's variable)>"


class _Unusable:
    """A comparison of NkiScalars: traced by NKI, but its result cannot be used (nki.isa.NkiScalar)."""

    __slots__ = ()

    def _refuse(self, *args):
        raise KernelError("a comparison of NkiScalars is traced, but its result cannot be used (nki.isa.NkiScalar): "
                          "no branch or value on it at specialization time")

    __bool__ = __index__ = __int__ = __float__ = __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = _refuse
    __rmul__ = __neg__ = _runtime_value = _refuse
    __hash__ = None


def _runtime_index(value) -> int:
    """The value of a runtime index: a dynamic loop's register, or a (1, 1) integer SBUF tile."""
    if hasattr(value, "_runtime_value"):
        return value._runtime_value()
    if isinstance(value, Tensor):
        if value.buffer is not MemoryRegion.sbuf or value.size != 1 or is_float(value.dtype):
            raise KernelError(f"a scalar_offset tile must be a (1, 1) integer SBUF tile, got {value!r}")
        return int(value._np.reshape(-1)[0])
    raise KernelError(f"scalar_offset must be a register (a dynamic loop's variable) or a (1, 1) SBUF tile, got "
                      f"{type(value).__name__}: a compile-time offset goes in offset=")


def _view_as(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """`a` reshaped without copying (raises when the layout does not allow it)."""
    try:
        return np.reshape(a, shape, copy=False)
    except TypeError:  # NumPy < 2.1 has no copy=
        v = a.view()
        v.shape = shape
        return v


def _normalize(key, shape: tuple[int, ...], on_chip: bool) -> tuple:
    """A NumPy basic-indexing key for `shape`, checked against the bounds; on-chip dim 0 stays a slice."""
    key = key if isinstance(key, tuple) else (key,)
    if sum(k is Ellipsis for k in key) > 1:
        raise KernelError("at most one ... in an index")
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - len(key) + 1) + key[i + 1:]
    if len(key) > len(shape):
        raise KernelError(f"too many indices ({len(key)}) for a tensor of shape {shape}")
    key = key + (slice(None),) * (len(shape) - len(key))
    out = []
    for d, (k, n) in enumerate(zip(key, shape)):
        if isinstance(k, DynSlice):
            k = slice(k.start, k.start + k.size)
        if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            i = int(k) + n if k < 0 else int(k)
            if not 0 <= i < n:
                raise LimitError(f"index {k} out of bounds for dim {d} of size {n}")
            out.append(slice(i, i + 1) if on_chip and d == 0 else i)
        elif isinstance(k, slice):
            step = 1 if k.step is None else int(k.step)
            start = 0 if k.start is None else int(k.start) + (n if k.start < 0 else 0)
            stop = n if k.stop is None else int(k.stop) + (n if k.stop < 0 else 0)
            if step < 1:
                raise UnsupportedError(f"slice step {step}: only positive steps")
            if not 0 <= start < stop <= n:
                raise LimitError(f"slice {start}:{stop} out of bounds for dim {d} of size {n}")
            if on_chip and d == 0 and step != 1:
                raise LimitError("the partition dim of an on-chip tensor cannot be strided")
            out.append(slice(start, stop, step))
        else:
            raise UnsupportedError(f"index {k!r} is not in the interpreted subset (ints, slices, ..., nl.ds)")
    return tuple(out)

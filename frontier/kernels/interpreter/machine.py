"""The state of one interpreted kernel call: memory accounting, counts, ScalarE's reduce registers.

`run` enters a `Machine`; the `nki.language`/`nki.isa` stand-ins find it with `current()`. One call at a time per
thread of execution (a context variable).
"""

from __future__ import annotations

from contextvars import ContextVar

import numpy as np

from .counts import Counts
from .errors import KernelError
from .limits import PMAX
from .memory import Memory
from .tensor import MemoryRegion, Storage, Tensor

_current: ContextVar["Machine | None"] = ContextVar("nki_interpreter_machine", default=None)


class Machine:
    def __init__(self):
        self.counts = Counts()
        self.memory = Memory(self.counts)
        # ScalarE keeps one fp32 accumulation register per partition across activation instructions; unknown at start
        self.act_regs = np.full(PMAX, np.nan, np.float32)
        self._token = None

    def allocate(self, shape, dtype, buffer: MemoryRegion, name: str = "") -> Tensor:
        shape = tuple(int(s) for s in shape)
        if any(s < 1 for s in shape) or not shape:
            raise KernelError(f"tensor {name!r}: shape {shape} must have positive sizes")
        storage = Storage(shape, dtype, buffer, name)
        self.memory.allocate(storage)
        return Tensor.whole(storage)

    def hbm_input(self, array: np.ndarray, name: str) -> Tensor:
        storage = Storage(array.shape, array.dtype, MemoryRegion.private_hbm, name)
        storage.array[...] = array
        return Tensor.whole(storage)

    def __enter__(self) -> "Machine":
        if _current.get() is not None:
            raise KernelError("an interpreted kernel is already running: kernels do not nest")
        self._token = _current.set(self)
        return self

    def __exit__(self, *exc) -> None:
        _current.reset(self._token)


def current() -> Machine:
    m = _current.get()
    if m is None:
        raise KernelError("nki.language / nki.isa called outside frontier.kernels.interpreter.run")
    return m

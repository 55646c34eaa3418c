"""The state of one interpreted kernel call: memory accounting, counts, ScalarE's reduce registers, loop state.

`run` enters a `Machine`; the `nki.language`/`nki.isa` stand-ins find it with `current()`. One call at a time per
thread of execution (a context variable).

Two modes besides the plain one:
- trace (`Machine(trace=True)`, `loader.trace`): the kernel is specialized but nothing is computed. Every check
  that does not depend on values runs (shapes, memories, engines, partitions, PSUM banks and capacity, SBUF
  capacity, accumulation state), every instruction is counted, and a compiled loop runs its body once: the static
  instruction count of a kernel at full size in a fraction of a second.
- approximate activations (`approximate_activations(...)`, a context manager around `run`): ScalarE's
  transcendental functions return values perturbed within the stated bound of `limits.ACTIVATION_ERROR`, as the
  hardware's piecewise-polynomial approximations may, so that a test shows its tolerance absorbs them.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np
import torch

from .counts import Counts
from .errors import KernelError
from .limits import ACTIVATION_ABS_ERROR, ACTIVATION_REL_ERROR, PMAX
from .memory import Memory
from .tensor import MemoryRegion, Storage, Tensor

_current: ContextVar["Machine | None"] = ContextVar("nki_interpreter_machine", default=None)


@dataclass(frozen=True)
class ActivationError:
    """How ScalarE's approximated functions err in a run: f~(x) = f(x) * (1 + d(x)) + e(x), |d| <= rel, |e| <= abs.

    The error is a function of the function and its input, as a fixed polynomial's is: equal inputs give equal
    outputs on every partition and in every instruction. mode "random": d(x) and e(x) pseudo-random in their bounds
    (a hash of the input's fp32 bits, the function and the seed); "high" / "low": every output at +bound / -bound
    (the extreme one-sided patterns)."""

    rel: float = ACTIVATION_REL_ERROR
    abs: float = ACTIVATION_ABS_ERROR
    mode: str = "random"
    seed: int = 0

    def __post_init__(self):
        if self.mode not in ("random", "high", "low"):
            raise ValueError(f"ActivationError.mode must be random, high or low, got {self.mode!r}")


_activation_error: ContextVar["ActivationError | None"] = ContextVar("nki_activation_error", default=None)


@contextmanager
def approximate_activations(error: ActivationError | None = None):
    """Runs inside the block perturb ScalarE's transcendental outputs within `error` (default: the stated bound)."""
    token = _activation_error.set(error or ActivationError())
    try:
        yield
    finally:
        _activation_error.reset(token)


class Machine:
    """One physical NeuronCore's state in a kernel call: `core` is its program id; `group` the LNC=2 call's shared
    HBM and turns (lnc.py), None at LNC=1."""

    def __init__(self, trace: bool = False, core: int = 0, group=None):
        self.trace = trace
        self.core = core
        self.group = group
        self.lnc = 1 if group is None else group.lnc
        self.counts = Counts()
        self.memory = Memory(self.counts)
        # ScalarE keeps one fp32 accumulation register per partition across activation instructions; unknown at start
        self.act_regs = np.full(PMAX, np.nan, np.float32)
        # VectorE's accumulator registers, shared by its accumulating instructions (tensor_scalar_reduce,
        # range_select: nki.isa.tensor_scalar_reduce); unknown at start
        self.vec_regs = np.full(PMAX, np.nan, np.float32)
        self.replay = 0  # > 0 inside a compiled loop's second and later iterations: nothing is emitted again
        # What the compiler settled when it emitted each `nc_matmul(accumulate=None)`, in emission order, and where
        # the run stands in that list: a compiled loop's later iterations run the emitted body, so they read the
        # first iteration's choices (each iteration of `nl.fori_loop` / `nl.while_loop` rewinds to the loop's start).
        self.inferred: list[bool] = []
        self.inferred_at = 0
        # The compiled loops this core ran, in order: (API, trip count; None where a trace cannot know it). At LNC=2
        # both cores' lists must agree (lnc.Group.check_loops).
        self.loops: list[tuple[str, int | None]] = []
        self.activation_error = _activation_error.get()
        self._token = None

    @property
    def emitting(self) -> bool:
        return self.replay == 0

    def infer_accumulate(self, decide) -> bool:
        """An `accumulate=None` matmul's flag: `decide()` where the instruction is emitted, else the flag emitted."""
        if self.emitting:
            self.inferred[self.inferred_at:] = [decide()]
        flag = self.inferred[self.inferred_at]
        self.inferred_at += 1
        return flag

    def count(self, engine: str, elements: int, free_elements: int) -> None:
        self.counts.instruction(engine, elements, free_elements, self.emitting)

    def allocate(self, shape, dtype, buffer: MemoryRegion, name: str = "") -> Tensor:
        shape = tuple(int(s) for s in shape)
        if any(s < 1 for s in shape) or not shape:
            raise KernelError(f"tensor {name!r}: shape {shape} must have positive sizes")
        if buffer is MemoryRegion.shared_hbm and self.group is not None:
            return Tensor.whole(self.group.shared_storage(self.core, shape, dtype, name))
        storage = Storage(shape, dtype, buffer, name, fill=not self.trace)
        self.memory.allocate(storage)
        return Tensor.whole(storage)

    def hbm_input(self, array: np.ndarray, name: str) -> Tensor:
        storage = Storage(array.shape, array.dtype, MemoryRegion.private_hbm, name, fill=False)
        if not self.trace:
            storage.array[...] = array
        storage.input = True
        if self.group is not None:
            self.group.add_input(storage)
        return Tensor.whole(storage)

    def hbm_access(self, view: Tensor, write: bool) -> None:
        """A DMA read or wrote the HBM view: at LNC=2 the other core must not touch it in the same epoch."""
        if self.group is not None:
            self.group.access(view, write)

    def perturb(self, values: np.ndarray, inputs: np.ndarray, function: str) -> np.ndarray:
        """An approximated function's exact outputs on `inputs` (fp32), perturbed within the run's ActivationError."""
        e = self.activation_error
        if e is None:
            return values
        if e.mode == "random":
            d = e.rel * _unit(inputs, f"{function}/rel/{e.seed}")
            a = e.abs * _unit(inputs, f"{function}/abs/{e.seed}")
        else:
            sign = 1.0 if e.mode == "high" else -1.0
            d, a = sign * e.rel, sign * e.abs
        with np.errstate(all="ignore"):
            return (values.astype(np.float64) * (1 + d) + a).astype(np.float32)

    def __enter__(self) -> "Machine":
        if _current.get() is not None:
            raise KernelError("an interpreted kernel is already running: kernels do not nest")
        self._token = _current.set(self)
        # the tiles' matmuls (<= 128 x 128 x 512) are fastest on one thread; on a busy machine a thread pool made
        # them 8x slower (isa.nc_matmul multiplies with torch)
        self._threads = torch.get_num_threads()
        torch.set_num_threads(1)
        return self

    def __exit__(self, *exc) -> None:
        torch.set_num_threads(self._threads)
        _current.reset(self._token)


def _unit(x: np.ndarray, salt: str) -> np.ndarray:
    """A value in [-1, 1] per element, a fixed pseudo-random function of the fp32 bits of x and of `salt`."""
    h = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    h ^= np.uint64(sum(ord(c) * 131**i for i, c in enumerate(salt)) % 2**32)
    for mult in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9):  # splitmix-style mixing
        h = (h * np.uint64(mult)) & np.uint64(2**64 - 1)
        h ^= h >> np.uint64(29)
    return (h >> np.uint64(11)).astype(np.float64) / 2.0**52 - 1.0


def current() -> Machine:
    m = _current.get()
    if m is None:
        raise KernelError("nki.language / nki.isa called outside frontier.kernels.interpreter.run")
    return m

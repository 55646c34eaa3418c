"""Loading an unmodified kernel module with the interpreter's `nki`, and running one kernel call.

A kernel module does `import nki`, `import nki.language as nl`, `import nki.isa as nisa` at module level. `load`
executes its source in a fresh module whose builtins carry an `__import__` that answers those three names with the
interpreter's stand-ins and passes every other import through. Nothing is put into `sys.modules`, so other code's
detection of the real `nki` is not fooled; the kernel module itself is not registered either.

The stand-in `nki` has `jit` (and the `language` and `isa` submodules) but no `simulate`: it never passes for the
real package.
"""

from __future__ import annotations

import builtins
import functools
import importlib.util
import types
from pathlib import Path

import numpy as np

from . import isa, language
from .counts import Counts
from .errors import KernelError, UnsupportedError
from .machine import Machine
from .tensor import MemoryRegion, Tensor


class Kernel:
    """What the stand-in `nki.jit` returns: the function, to be run by `run`."""

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        raise KernelError(f"interpreted kernel {self.fn.__name__} runs through "
                          "frontier.kernels.interpreter.run(kernel, *arrays, **scalars)")

    def __getitem__(self, lnc):
        if lnc != 1:
            raise UnsupportedError("only LNC=1 (one NeuronCore per kernel) is interpreted")
        return self


def jit(fn=None, **kwargs):
    return Kernel(fn) if fn is not None else (lambda f: Kernel(f))


NKI = types.ModuleType("nki", "The interpreter's stand-in for nki (bound only inside modules loaded by `load`).")
NKI.jit = jit
NKI.language = language
NKI.isa = isa
NKI.__version__ = "interpreter"
_SUBMODULES = {"nki": NKI, "nki.language": language, "nki.isa": isa}


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0 and (name == "nki" or name.startswith("nki.")):
        if name not in _SUBMODULES:
            raise UnsupportedError(f"{name} is not in the interpreted subset (nki, nki.language, nki.isa)")
        return _SUBMODULES[name] if fromlist else NKI
    return builtins.__import__(name, globals, locals, fromlist, level)


def load(target: str | Path) -> types.ModuleType:
    """Execute a kernel module (a dotted module name or a .py path) with the interpreter's nki bound."""
    path = Path(target) if str(target).endswith(".py") else None
    name = path.stem if path else str(target)
    if path is None:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError(f"no kernel module {name}")
        path = Path(spec.origin)
    module = types.ModuleType(name)
    module.__file__ = str(path)
    module.__builtins__ = {**vars(builtins), "__import__": _import}
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    return module


def run(kernel, *arrays: np.ndarray, **scalars) -> tuple[object, Counts]:
    """Run one kernel call on NumPy arrays (each an HBM input, copied) with compile-time `scalars`.

    Returns (outputs, counts): outputs mirror what the kernel returns (one array, or a tuple of arrays), each a copy
    of an `nl.ndarray(..., buffer=nl.shared_hbm)` the kernel allocated and filled.
    """
    fn = kernel.fn if isinstance(kernel, Kernel) else kernel
    for i, a in enumerate(arrays):
        if not isinstance(a, np.ndarray):
            raise TypeError(f"argument {i} must be a NumPy array (compile-time values go in as keywords), "
                            f"got {type(a).__name__}")
    with Machine() as m:
        args = [m.hbm_input(a, f"arg{i}") for i, a in enumerate(arrays)]
        result = fn(*args, **scalars)
        outputs = _outputs(result)
        del args, result
    return outputs, m.counts


def _outputs(result):
    if isinstance(result, (tuple, list)):
        return tuple(_outputs(r) for r in result)
    if not isinstance(result, Tensor):
        raise KernelError(f"a kernel returns tensors, got {type(result).__name__}")
    if result.buffer is not MemoryRegion.shared_hbm:
        raise KernelError(f"kernel output {result!r} must be allocated with nl.ndarray(..., buffer=nl.shared_hbm) "
                          f"(got {result.buffer.value}; nl.hbm outputs fail to compile from NKI 0.3)")
    return np.array(result._np, copy=True)

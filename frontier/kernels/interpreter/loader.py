"""Loading an unmodified kernel module with the interpreter's `nki`, and running (or tracing) one kernel call.

A kernel module does `import nki`, `import nki.language as nl`, `import nki.isa as nisa` at module level. `load`
executes its source in a fresh module whose builtins carry an `__import__` that answers those names with the
interpreter's stand-ins and passes every other import through. Nothing is put into `sys.modules`, so other code's
detection of the real `nki` is not fooled; the kernel module itself is not registered either.

A relative import (`from .tiles import chunks`, `from . import tiles`) names kernel code beside the module, which
imports `nki` as the kernel does: it is loaded the same way, from the file the import names relative to the kernel's
own file, with the same `nki`, once per `load` (a module imported twice within one load is one module).

The stand-in `nki` has `jit` (and the `language` and `isa` submodules) but no `simulate`: it never passes for the
real package. `load(target, nki=module)` binds another top-level `nki` instead (one that provides `jit`, as the tests'
stand-in for torch-neuronx's does), while `nki.language` and `nki.isa` stay the interpreter's.

`run` checks the kernel's source against the documented NKI language first (`subset.check_kernel`: the kernel and
every helper it calls), then runs it on copies of the input arrays. As in the official simulator, an input the kernel
wrote into (by DMA) is copied back into the caller's array, and a kernel may return an input it wrote.
`trace` specializes a kernel on shapes alone and returns its Counts (machine.py: nothing computed, a compiled loop's
body run once): the static instruction count at full size, fast.
"""

from __future__ import annotations

import builtins
import functools
import importlib.util
import types
from pathlib import Path

import numpy as np

from . import isa, language, nki_typing
from .counts import Counts
from .errors import KernelError, UnsupportedError
from .lnc import Group
from .machine import Machine
from .subset import KERNEL_SOURCE, check_kernel
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
        """`kernel[lnc]`: the launch at an LNC degree (1 or 2), to give to `run` / `trace`."""
        return Launch(self, lnc)


class Launch:
    """A kernel at an explicit LNC degree (`kernel[2]`): `run(kernel[2], ...)` runs both physical cores."""

    def __init__(self, kernel: Kernel, lnc):
        if isinstance(lnc, bool) or lnc not in (1, 2):
            raise UnsupportedError(f"LNC degree {lnc!r}: the Neuron SDK supports 1 or 2")
        self.kernel, self.lnc = kernel, int(lnc)

    def __call__(self, *args, **kwargs):
        return self.kernel(*args, **kwargs)


def jit(fn=None, **kwargs):
    return Kernel(fn) if fn is not None else (lambda f: Kernel(f))


NKI = types.ModuleType("nki", "The interpreter's stand-in for nki (bound only inside modules loaded by `load`).")
NKI.jit = jit
NKI.language = language
NKI.isa = isa
NKI.typing = nki_typing
NKI.__version__ = "interpreter"
_SUBMODULES = {"nki.language": language, "nki.isa": isa, "nki.typing": nki_typing}


def _importer(top, folder: Path, name: str, loaded: dict):
    """An `__import__` answering nki, nki.language, nki.isa and nki.typing with `top` and the interpreter's
    submodules, and a relative import with the kernel source it names in `folder` (the importing file's), loaded with
    `top` too and kept in `loaded` (path -> module) for the rest of the load."""
    package = types.SimpleNamespace(language=language, isa=isa, typing=nki_typing)  # `import nki.isa as nisa` walks it

    def _import(name_, globals=None, locals=None, fromlist=(), level=0):
        if level > 0:
            return _relative(name_, fromlist, level)
        if name_ == "nki" or name_.startswith("nki."):
            if name_ == "nki":
                return top
            if name_ not in _SUBMODULES:
                raise UnsupportedError(f"{name_} is not in the interpreted subset "
                                       "(nki, nki.language, nki.isa, nki.typing)")
            return _SUBMODULES[name_] if fromlist else package
        return builtins.__import__(name_, globals, locals, fromlist, level)

    def _relative(name_, fromlist, level):
        base, pkg = folder, name.rpartition(".")[0]
        if level > (pkg.count(".") + 1 if pkg else 1):  # a path target has its own folder to reach, no more
            raise ImportError(f"{name}: a relative import {'.' * level}{name_} beyond its top-level package")
        for _ in range(level - 1):
            base, pkg = base.parent, pkg.rpartition(".")[0]
        if name_:  # from .tiles import chunks: the module itself
            return _module(base, pkg, name_)
        if "*" in fromlist:
            raise UnsupportedError(f"{name}: `from {'.' * level} import *` (import the kernel module by name)")
        return types.SimpleNamespace(**{m: _module(base, pkg, m) for m in fromlist})  # from . import tiles

    def _module(base: Path, pkg: str, dotted: str):
        path = base.joinpath(*dotted.split(".")).with_suffix(".py")
        if not path.is_file():
            raise ModuleNotFoundError(f"{name}: its relative import of {dotted!r} names no kernel source ({path}); "
                                      "the interpreter answers relative imports of kernel modules (.py files) only")
        key = path.resolve()
        return loaded[key] if key in loaded else _load(path, f"{pkg}.{dotted}" if pkg else dotted, top, loaded)

    return _import


def load(target: str | Path, nki: types.ModuleType | None = None) -> types.ModuleType:
    """Execute a kernel module (a dotted module name or a .py path) with the interpreter's nki bound (or `nki`)."""
    path = Path(target) if str(target).endswith(".py") else None
    name = path.stem if path else str(target)
    if path is None:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError(f"no kernel module {name}")
        path = Path(spec.origin)
    return _load(path, name, nki or NKI, {})


def _load(path: Path, name: str, top: types.ModuleType, loaded: dict) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = str(path)
    module.__builtins__ = {**vars(builtins), "__import__": _importer(top, path.parent, name, loaded)}
    setattr(module, KERNEL_SOURCE, True)  # the language check follows `module.helper(...)` calls into it
    loaded[path.resolve()] = module  # before it runs, so an import cycle finds it part-run, as Python's import does
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec", dont_inherit=True), module.__dict__)
    return module


def _function(kernel):
    kernel = kernel.kernel if isinstance(kernel, Launch) else kernel
    fn = kernel.fn if isinstance(kernel, Kernel) else getattr(kernel, "__wrapped__", kernel)
    if not callable(fn):
        raise TypeError(f"not a kernel: {kernel!r}")
    return fn


def _check_arguments(fn, scalars: dict) -> None:
    for k, v in scalars.items():
        if isinstance(v, list):
            raise KernelError(f"{fn.__name__}({k}=...): a list is not a kernel argument (NKI 0.3: pass a tuple)")


def _degree(kernel, lnc) -> int:
    if isinstance(kernel, Launch):
        if lnc is not None and lnc != kernel.lnc:
            raise KernelError(f"run({kernel.kernel.fn.__name__}[{kernel.lnc}], lnc={lnc}): two LNC degrees")
        return kernel.lnc
    lnc = 1 if lnc is None else lnc
    if isinstance(lnc, bool) or lnc not in (1, 2):
        raise UnsupportedError(f"LNC degree {lnc!r}: the Neuron SDK supports 1 or 2")
    return lnc


def run(kernel, *arrays: np.ndarray, lnc: int | None = None, **scalars) -> tuple[object, Counts]:
    """Run one kernel call on NumPy arrays (each an HBM input) with compile-time `scalars`, at LNC degree `lnc`
    (1, or 2: both physical cores of a logical core sharing HBM, lnc.py; `kernel[2]` says the same).

    Returns (outputs, counts): outputs mirror what the kernel returns (one array, or a tuple of arrays), each a copy
    of an `nl.ndarray(..., buffer=nl.shared_hbm)` the kernel allocated and filled, or of an input it wrote. Inputs the
    kernel wrote into are updated in the caller's arrays. At LNC=2 the counts are both cores' (`Counts.combine`)."""
    fn = _function(kernel)
    degree = _degree(kernel, lnc)
    check_kernel(fn)
    _check_arguments(fn, scalars)
    for i, a in enumerate(arrays):
        if not isinstance(a, np.ndarray):
            raise TypeError(f"argument {i} must be a NumPy array (compile-time values go in as keywords), "
                            f"got {type(a).__name__}")
    if degree > 1:
        return _run_cores(fn, arrays, scalars, degree, trace=False)
    with Machine() as m:
        args = [m.hbm_input(a, f"arg{i}") for i, a in enumerate(arrays)]
        result = fn(*args, **scalars)
        outputs = _outputs(result)
        for a, t in zip(arrays, args):
            if t.storage.dma_written:
                np.copyto(a, t.storage.array)
        del args, result
    return outputs, m.counts


def trace(kernel, *inputs, lnc: int | None = None, **scalars) -> Counts:
    """Specialize one kernel call on its inputs' shapes and dtypes alone (arrays, or (shape, dtype) pairs) and return
    what it counted: instructions emitted and executed-once, memory peaks, with every shape and memory check run."""
    fn = _function(kernel)
    degree = _degree(kernel, lnc)
    check_kernel(fn)
    _check_arguments(fn, scalars)
    arrays = []
    for a in inputs:
        shape, dtype = (a.shape, a.dtype) if isinstance(a, np.ndarray) else a
        arrays.append(np.empty(shape, dtype))
    if degree > 1:
        return _run_cores(fn, arrays, scalars, degree, trace=True)[1]
    with Machine(trace=True) as m:
        args = [m.hbm_input(a, f"arg{i}") for i, a in enumerate(arrays)]
        result = fn(*args, **scalars)
        _outputs(result, copy=False)
        del args, result
    return m.counts


def _run_cores(fn, arrays, scalars, degree: int, trace: bool):
    """One call on `degree` physical cores sharing HBM (lnc.py): (outputs, combined counts)."""
    group = Group(degree, trace)
    machines = [Machine(trace=trace, core=c, group=group) for c in range(degree)]
    inputs = [machines[0].hbm_input(a, f"arg{i}") for i, a in enumerate(arrays)]

    def body(m):
        def program():
            with m:
                return fn(*[Tensor.whole(t.storage) for t in inputs], **scalars)
        return program

    results = group.run([body(m) for m in machines])
    group.check_loops([m.loops for m in machines])
    first = _storages(results[0])
    for c, r in enumerate(results[1:], 1):
        if _storages(r) != first:
            raise KernelError(f"{fn.__name__}: core {c} returns other tensors than core 0 (at LNC=2 both cores' "
                              "programs return the same shared outputs)")
    outputs = _outputs(results[0], copy=not trace)
    if not trace:
        for a, t in zip(arrays, inputs):
            if t.storage.dma_written:
                np.copyto(a, t.storage.array)
    counts = Counts.combine([m.counts for m in machines])
    counts.lnc_conflicts = group.conflicts
    return outputs, counts


def _storages(result):
    if isinstance(result, (tuple, list)):
        return tuple(_storages(r) for r in result)
    return id(result.storage) if isinstance(result, Tensor) else result


def _outputs(result, copy: bool = True):
    if isinstance(result, (tuple, list)):
        return tuple(_outputs(r, copy) for r in result)
    if not isinstance(result, Tensor):
        raise KernelError(f"a kernel returns tensors, got {type(result).__name__}")
    if result.buffer is not MemoryRegion.shared_hbm and not result.storage.input:
        raise KernelError(f"kernel output {result!r} must be allocated with nl.ndarray(..., buffer=nl.shared_hbm) "
                          f"(got {result.buffer.value}; nl.hbm outputs fail to compile from NKI 0.3) or be an input "
                          "the kernel wrote")
    return np.array(result._np, copy=True) if copy else None

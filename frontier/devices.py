"""The device layer: which backend runs, how (dtype policy, compile backend, per-step sync), and why not others.

Backends:
- `cpu`: fp32, Inductor for torch.compile; glibc's allocator tuned for a training loop (`tune_malloc`: big tensors
  come from the heap and stay mapped between steps instead of an mmap and munmap each), recorded in `describe()`;
  under ATEN_CPU_CAPABILITY, Inductor's cache kept apart for that kernel set (`compile_cache_apart`).
- `cuda`: bf16 autocast over fp32 master weights, TF32 allowed, fused AdamW, Inductor.
- `neuron-native`: TorchNeuron (torch-neuronx >= 2.13, device "neuron"), bf16 autocast over fp32 masters,
  `torch.compile(backend="neuron")`.
- `neuron-xla`: torch-neuronx <= 2.9 over torch_xla (device from `torch_xla.device()`), one `torch_xla.sync()`
  per step, no torch.compile.

The Neuron packages are never imported at module load, and a successful import proves nothing (PyPI holds empty
stubs with the same names): a path counts as present only when the modules offer what it needs.
"""

from __future__ import annotations

import importlib
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch

from .errors import UserError

DEVICES = ("auto", "cpu", "cuda", "neuron")
NEURON_INDEX = "https://pip.repos.neuron.amazonaws.com"


@dataclass(frozen=True)
class NeuronProbe:
    path: str | None  # "native", "xla" or None
    reason: str  # why no path is usable (empty when one is)
    versions: dict = field(default_factory=dict)


def optional_import(name: str, missing: str):
    """An optional package: (the module, "") when `name` imports, else (None, why not): `missing` when the module
    itself is not installed, else the import's own error (a broken install can raise anything, or miss a module of
    its own)."""
    try:
        return importlib.import_module(name), ""
    except ModuleNotFoundError as e:
        if e.name == name:
            return None, missing
        return None, f"`import {name}` failed: {e!r}"
    except Exception as e:  # a broken install is "not available", with the reason
        return None, f"`import {name}` failed: {e!r}"


def _major_minor(version: str) -> tuple[int, int]:
    parts = version.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return (0, 0)


def probe_neuron() -> NeuronProbe:
    """Which Neuron path the installed packages offer, judged by what they contain."""
    tnx, why = optional_import("torch_neuronx", "torch-neuronx is not installed")
    if tnx is None:
        return NeuronProbe(None, f"{why}; install torch-neuronx from the Neuron pip index {NEURON_INDEX}")
    version = getattr(tnx, "__version__", None)
    if not isinstance(version, str):
        return NeuronProbe(
            None,
            "the installed torch_neuronx has no __version__: it is the empty PyPI stub, not the Neuron SDK; "
            f"install torch-neuronx from {NEURON_INDEX}",
        )
    versions = {"torch_neuronx": version}
    if _major_minor(version) >= (2, 13):  # native TorchNeuron (PrivateUse1 device "neuron")
        module = getattr(torch, "neuron", None)
        is_available = getattr(module, "is_available", None)
        if not callable(is_available):
            return NeuronProbe(None, f"torch-neuronx {version} did not register the 'neuron' device (torch.neuron is missing)", versions)
        if not is_available():
            return NeuronProbe(None, f"torch-neuronx {version} is installed but sees no NeuronCore (is this a Trn2 instance?)", versions)
        return NeuronProbe("native", "", versions)
    xla, why = optional_import("torch_xla", "torch_xla is not installed")
    if xla is None:
        return NeuronProbe(None, f"torch-neuronx {version} is the XLA flavour but torch_xla does not import ({why})", versions)
    versions["torch_xla"] = getattr(xla, "__version__", "unknown")
    if not (callable(getattr(xla, "device", None)) and callable(getattr(xla, "sync", None))):
        return NeuronProbe(None, f"torch_xla {versions['torch_xla']} lacks torch_xla.device()/torch_xla.sync()", versions)
    return NeuronProbe("xla", "", versions)


# glibc's mallopt parameters (malloc.h) and what the CPU device sets them to: a step allocates and frees the same
# tens of MiB of tensors every step; by default each block over the (dynamic) mmap threshold is mmapped and unmapped
# each time (page faults and zeroing every step), and freed heap tops are trimmed back to the system.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -3, -4
MALLOC_SETTINGS = {"M_MMAP_MAX": (M_MMAP_MAX, 0), "M_TRIM_THRESHOLD": (M_TRIM_THRESHOLD, 2**30)}
_MALLOC_STATE: dict | None = None  # what tune_malloc did in this process


def tune_malloc() -> dict:
    """Apply MALLOC_SETTINGS through glibc's mallopt (once per process); what was applied, or why not, for the run
    record. Not a knob: it changes how fast a step runs, not what is trained."""
    global _MALLOC_STATE
    if _MALLOC_STATE is not None:
        return _MALLOC_STATE
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError) as e:  # not glibc (musl, macOS): nothing to tune
        _MALLOC_STATE = {"applied": False, "why": f"no glibc mallopt ({type(e).__name__}: {e})"}
        return _MALLOC_STATE
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    applied = {key: value for key, (param, value) in MALLOC_SETTINGS.items() if mallopt(param, value) == 1}
    _MALLOC_STATE = {"applied": True, "mallopt": applied} if applied else {"applied": False, "why": "mallopt refused"}
    return _MALLOC_STATE


# The values ATEN_CPU_CAPABILITY takes (torch's aten/src/ATen/native/DispatchStub.cpp, compute_cpu_capability).
CPU_CAPABILITIES = ("default", "avx2", "avx512", "vsx", "zvector", "sve256")


def compile_cache_apart() -> str | None:
    """Where ATEN_CPU_CAPABILITY holds torch's CPU kernels back (a stand-in for an older CPU, `records.ISA_CAPS`) and
    Inductor's cache folder (TORCHINDUCTOR_CACHE_DIR) is unset or its default, point it at a folder of the kernel
    set's own (the default folder and `-avx2`, ...) and return that; None otherwise (a folder the user named stays
    theirs). Inductor's on-disk cache is not kept apart by the variable: a compiled run under `avx2` that found the
    machine's own compiled kernels there lost its loss to NaN at the first step (docs/log.md). Processes started from
    this one inherit both variables, so they agree; one that inherited a moved folder without the capability (its
    machine's own kernels) is sent back to the default. Not a knob: it changes where compiled kernels are kept, not
    what is trained."""
    import os

    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:  # an older torch, before cache_dir_utils: beside the other runtime helpers
        try:
            from torch._inductor.runtime.runtime_utils import default_cache_dir
        except ImportError:
            return None

    default = os.path.abspath(default_cache_dir())
    capability, named = os.environ.get("ATEN_CPU_CAPABILITY"), os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not capability:
        if named is not None and os.path.abspath(named) in {f"{default}-{c}" for c in CPU_CAPABILITIES}:
            del os.environ["TORCHINDUCTOR_CACHE_DIR"]  # a folder this function made for a kernel set not in force
        return None
    apart = f"{default}-{capability.lower()}"
    if named is not None and os.path.abspath(named) not in (default, apart):  # a folder the user chose: theirs
        return None
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = apart
    return apart


@dataclass
class DeviceInfo:
    kind: str  # cpu | cuda | neuron
    backend: str  # cpu | cuda | neuron-native | neuron-xla
    device: torch.device
    dtype_policy: str
    compile_backend: str | None  # None: this backend cannot torch.compile
    versions: dict
    malloc: dict | None = None  # the CPU device's allocator settings (`tune_malloc`); None elsewhere
    compile_cache: str | None = None  # Inductor's cache, where `compile_cache_apart` moved it; None: torch's own

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        return torch.bfloat16 if self.dtype_policy.startswith("bf16") else None

    def autocast(self):
        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    @property
    def fused_optimizer(self) -> bool:
        return self.backend == "cuda"

    @property
    def newton_schulz_dtype(self) -> torch.dtype:
        return torch.bfloat16 if self.autocast_dtype is not None else torch.float32

    def step_end(self) -> None:
        """What must happen after every optimiser step: run the XLA graph, or wait for the GPU (for the clock)."""
        if self.backend == "neuron-xla":
            importlib.import_module("torch_xla").sync()
        elif self.backend == "cuda":
            torch.cuda.synchronize(self.device)

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "backend": self.backend,
            "device": str(self.device),
            "dtype_policy": self.dtype_policy,
            "compile_backend": self.compile_backend,
            "versions": self.versions,
            **({"malloc": self.malloc} if self.malloc is not None else {}),
            **({"compile_cache": self.compile_cache} if self.compile_cache is not None else {}),
        }


def _cpu() -> DeviceInfo:
    return DeviceInfo("cpu", "cpu", torch.device("cpu"), "fp32", "inductor", {"torch": torch.__version__},
                      malloc=tune_malloc(), compile_cache=compile_cache_apart())


def _cuda() -> DeviceInfo:
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    return DeviceInfo(
        "cuda", "cuda", torch.device("cuda"), "bf16 autocast, fp32 master weights", "inductor",
        {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0)},
    )


def _neuron(probe: NeuronProbe) -> DeviceInfo:
    versions = {"torch": torch.__version__, **probe.versions}
    if probe.path == "native":
        return DeviceInfo("neuron", "neuron-native", torch.device("neuron"), "bf16 autocast, fp32 master weights", "neuron", versions)
    xla = importlib.import_module("torch_xla")
    return DeviceInfo("neuron", "neuron-xla", torch.device(xla.device()), "bf16 autocast, fp32 master weights", None, versions)


def as_device(device: "DeviceInfo | str") -> DeviceInfo:
    """A `DeviceInfo` as the package's functions take it: one already selected, or a name for `select_device`."""
    return device if isinstance(device, DeviceInfo) else select_device(device)


def select_device(requested: str = "auto") -> DeviceInfo:
    """The backend for `--device`: auto prefers Neuron, then CUDA, then the CPU."""
    if requested not in DEVICES:
        raise UserError(f"unknown device {requested!r}", f"choose one of {', '.join(DEVICES)}")
    if requested == "cpu":
        return _cpu()
    if requested == "cuda":
        if not torch.cuda.is_available():
            raise UserError("--device cuda but torch sees no CUDA GPU", f"use --device cpu (torch {torch.__version__}, cuda {torch.version.cuda})")
        return _cuda()
    if requested == "neuron":
        probe = probe_neuron()
        if probe.path is None:
            raise UserError(f"--device neuron is not usable: {probe.reason}", "see the README's Trainium section")
        return _neuron(probe)
    probe = probe_neuron()
    if probe.path is not None:
        return _neuron(probe)
    if torch.cuda.is_available():
        return _cuda()
    return _cpu()

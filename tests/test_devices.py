"""Device selection, with CUDA and Neuron faked at their boundary (torch.cuda, sys.modules, torch's device registry)."""

import sys
import types

import pytest
import torch

from frontier import devices
from frontier.devices import probe_neuron, select_device
from frontier.errors import UserError


@pytest.fixture
def no_neuron(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_neuronx", None)  # `import torch_neuronx` raises ImportError
    monkeypatch.setitem(sys.modules, "torch_xla", None)


def test_cpu_and_describe():
    d = select_device("cpu")
    assert (d.kind, d.backend, d.dtype_policy, d.compile_backend) == ("cpu", "cpu", "fp32", "inductor")
    assert set(d.describe()) == {"kind", "backend", "device", "dtype_policy", "compile_backend", "versions", "malloc"}
    assert d.describe()["versions"]["torch"] == torch.__version__


def test_auto_without_accelerators_is_cpu(no_neuron, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert select_device("auto").backend == "cpu"
    assert "not installed" in probe_neuron().reason


def test_cuda_requested_but_absent_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(UserError, match="sees no CUDA GPU"):
        select_device("cuda")


def test_fake_cuda_gets_bf16_fused_and_inductor(no_neuron, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Fake GPU")
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        d = select_device("auto")
        assert d.backend == "cuda" and d.autocast_dtype == torch.bfloat16 and d.fused_optimizer
        assert d.newton_schulz_dtype == torch.bfloat16 and d.compile_backend == "inductor"
        assert d.versions["gpu"] == "Fake GPU" and torch.backends.cuda.matmul.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def test_neuron_pypi_stub_is_not_neuron(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_neuronx", types.ModuleType("torch_neuronx"))  # the empty stub
    probe = probe_neuron()
    assert probe.path is None and "stub" in probe.reason
    with pytest.raises(UserError, match="stub"):
        select_device("neuron")


FAKE_NATIVE = """
import json, sys, types, torch
tnx = types.ModuleType("torch_neuronx"); tnx.__version__ = "2.14.3.0.1"
sys.modules["torch_neuronx"] = tnx
neuron = types.ModuleType("torch.neuron"); neuron.is_available = lambda: {available}
torch.neuron = neuron
torch.utils.rename_privateuse1_backend("neuron")  # what the real torch-neuronx does on import
from frontier.devices import select_device
from frontier.errors import UserError
try:
    d = select_device("auto")
    print(json.dumps(dict(d.describe(), autocast=str(d.autocast_dtype), type=d.device.type)))
except UserError as e:
    print(json.dumps({{"error": str(e)}}))
"""


def _fake_native(available: bool) -> dict:
    # In a fresh interpreter: renaming torch's PrivateUse1 device is process-wide and cannot be undone.
    import json
    import subprocess

    out = subprocess.run([sys.executable, "-c", FAKE_NATIVE.format(available=available)], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_fake_native_neuron():
    d = _fake_native(True)
    assert (d["kind"], d["backend"], d["compile_backend"], d["type"]) == ("neuron", "neuron-native", "neuron", "neuron")
    assert d["autocast"] == "torch.bfloat16" and d["versions"]["torch_neuronx"] == "2.14.3.0.1"


def test_native_neuron_without_cores_falls_back_to_what_auto_finds():
    d = _fake_native(False)
    assert d.get("backend") in ("cpu", "cuda")  # auto: the Neuron path is unusable, so it is not chosen


def test_fake_xla_neuron_syncs_every_step(monkeypatch):
    tnx = types.ModuleType("torch_neuronx")
    tnx.__version__ = "2.9.0.2.11"
    xla = types.ModuleType("torch_xla")
    xla.__version__ = "2.9.0"
    synced = []
    xla.device = lambda: "cpu"  # stands in for the XLA device
    xla.sync = lambda: synced.append(1)
    monkeypatch.setitem(sys.modules, "torch_neuronx", tnx)
    monkeypatch.setitem(sys.modules, "torch_xla", xla)
    d = select_device("neuron")
    assert d.backend == "neuron-xla" and d.compile_backend is None
    d.step_end()
    d.step_end()
    assert synced == [1, 1]


def test_xla_flavour_without_torch_xla_says_so(monkeypatch):
    tnx = types.ModuleType("torch_neuronx")
    tnx.__version__ = "2.9.0.2.11"
    monkeypatch.setitem(sys.modules, "torch_neuronx", tnx)
    monkeypatch.setitem(sys.modules, "torch_xla", None)
    probe = probe_neuron()
    assert probe.path is None and "torch_xla does not import" in probe.reason


def test_unknown_device():
    with pytest.raises(UserError, match="unknown device"):
        select_device("tpu")


def test_the_cpu_device_tunes_glibc_malloc_once_and_records_it(monkeypatch):
    import ctypes

    from frontier import devices

    seen = []

    class FakeLibc:
        def __init__(self, *a, **k):
            self.mallopt = self

        def __call__(self, param, value):
            seen.append((param, value))
            return 1

    monkeypatch.setattr(devices, "_MALLOC_STATE", None)
    monkeypatch.setattr(ctypes, "CDLL", FakeLibc)
    info = devices.select_device("cpu")
    devices.select_device("cpu")  # once per process
    assert seen == [(devices.M_MMAP_MAX, 0), (devices.M_TRIM_THRESHOLD, 2**30)]
    assert info.describe()["malloc"] == {"applied": True, "mallopt": {"M_MMAP_MAX": 0, "M_TRIM_THRESHOLD": 2**30}}


def test_malloc_is_tuned_only_for_the_cpu(monkeypatch):
    from frontier import devices

    def refuse():
        raise AssertionError("tune_malloc called off the CPU")

    monkeypatch.setattr(devices, "tune_malloc", refuse)
    monkeypatch.setattr(devices.torch.cuda, "get_device_name", lambda *a: "a GPU")
    monkeypatch.setattr(devices.torch.backends.cuda, "matmul", types.SimpleNamespace())  # _cuda's TF32 switches
    monkeypatch.setattr(devices.torch.backends, "cudnn", types.SimpleNamespace())
    info = devices._cuda()
    assert "malloc" not in info.describe() and info.malloc is None
    with pytest.raises(AssertionError, match="off the CPU"):
        devices._cpu()


def test_an_optional_import_says_why_it_is_missing(tmp_path, monkeypatch):
    from frontier.devices import optional_import

    assert optional_import("json", "no json") == (sys.modules["json"], "")
    assert optional_import("frontier_no_such_package", "not here") == (None, "not here")
    (tmp_path / "frontier_broken_package.py").write_text("import frontier_no_such_dependency\n")
    (tmp_path / "frontier_raising_package.py").write_text("raise RuntimeError('a broken install')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module, why = optional_import("frontier_broken_package", "not here")  # installed, but its own import fails
    assert module is None and why.startswith("`import frontier_broken_package` failed: ModuleNotFoundError")
    module, why = optional_import("frontier_raising_package", "not here")
    assert module is None and "RuntimeError('a broken install')" in why


def test_a_held_back_kernel_set_compiles_into_a_cache_of_its_own(monkeypatch, tmp_path):
    """Inductor's on-disk cache is not kept apart by ATEN_CPU_CAPABILITY: under it the CPU device moves the default
    cache to a folder of that kernel set's own, and leaves a folder the user named alone."""
    import os

    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    from frontier import devices

    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", os.path.abspath(default_cache_dir()))
    assert devices.compile_cache_apart() is None  # the machine's own kernels: torch's own cache
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "AVX2")
    moved = devices.compile_cache_apart()
    assert moved == os.path.abspath(default_cache_dir()) + "-avx2" == os.environ["TORCHINDUCTOR_CACHE_DIR"]
    assert devices.select_device("cpu").describe()["compile_cache"] == moved
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    assert devices.compile_cache_apart() is None and os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    assert devices.compile_cache_apart() == os.path.abspath(default_cache_dir()) + "-avx2"
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")  # a child that inherited the moved folder, not the kernel set
    assert devices.compile_cache_apart() is None and "TORCHINDUCTOR_CACHE_DIR" not in os.environ
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", os.path.abspath(default_cache_dir()) + "-mine")  # not one of ours
    assert devices.compile_cache_apart() is None and os.environ["TORCHINDUCTOR_CACHE_DIR"].endswith("-mine")

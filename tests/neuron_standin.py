"""A stand-in Neuron host inside one Python process: what `frontier` sees on a Trn2 instance, run on this CPU.

`install()` makes this process look like a Trn2 host with native TorchNeuron, built from the suite's stand-ins:

- the device: `frontier.devices.select_device("auto")` and `("neuron")` return a native-Neuron `DeviceInfo` (bf16
  autocast over fp32 masters, the "neuron" compile backend) whose tensors live on the CPU;
- the compiler: a Dynamo backend named "neuron" (the name torch-neuronx registers) that runs each graph AOTAutograd
  hands it, forward and backward, as neuronx-cc would compile it;
- the kernels: `--kernels nki` through the stand-in toolchain of tests/test_neuron_registration.py (an `nki_op` built on
  `torch.library.custom_op`, an `nki.jit` whose kernels run in the project's interpreter), launched at Trn2's LNC=2,
  and `frontier.kernels.availability("nki")` saying they run on the Neuron device (not on the CPU device).

Used by tests/test_notebooks_trn2.py, which installs it in each papermill kernel through an IPython start-up file, so
that a chapter executed at the `trn2-dry` profile meets a Neuron host where the real one would be. What it cannot
show (neuronx-cc, the real nki_op, the NeuronCore's numbers) is in docs/trainium.md.
"""

from __future__ import annotations

BACKEND = "neuron"
NAMESPACE = "frontier_nki_standin"
VERSIONS = {"torch_neuronx": "stand-in (tests/neuron_standin.py)"}


def device():
    import torch

    from frontier.devices import DeviceInfo

    return DeviceInfo("neuron", "neuron-native", torch.device("cpu"), "bf16 autocast, fp32 master weights", BACKEND,
                      {"torch": torch.__version__, **VERSIONS})


def install() -> None:
    """Make this process a stand-in Neuron host (once; a second call changes nothing)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends import registry
    from torch._dynamo.backends.common import aot_autograd

    from frontier import devices, kernels
    from frontier.kernels import neuron as neuron_module
    from frontier.kernels.neuron import NeuronKernels, Toolchain

    if getattr(devices, "_standin_installed", False):
        return
    from test_neuron_registration import standin_kernel, standin_nki_op

    standin = NeuronKernels(Toolchain(standin_nki_op, standin_kernel, "stand-in"), namespace=NAMESPACE)
    neuron_module._default = lambda: standin
    devices.probe_neuron = lambda: devices.NeuronProbe("native", "", dict(VERSIONS))
    devices._neuron = lambda probe: device()
    real_availability = kernels.availability

    def availability(impl, device=None):  # nki runs on the (stand-in) NeuronCore; elsewhere the real answer
        on_neuron = device is None or getattr(device, "backend", None) == "neuron-native"
        return "" if impl == "nki" and on_neuron else real_availability(impl, device)

    kernels.availability = availability

    def run_graph(gm, example_inputs):
        return make_boxed_func(gm.forward)

    if BACKEND not in registry._COMPILER_FNS:
        registry._BACKENDS[BACKEND] = None
        registry._COMPILER_FNS[BACKEND] = aot_autograd(fw_compiler=run_graph, bw_compiler=run_graph)
    devices._standin_installed = True

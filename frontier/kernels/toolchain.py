"""The one Neuron toolchain the kernels are written for, named here and nowhere else.

Neuron SDK 2.33 ships NKI 0.7.0 and native TorchNeuron (torch-neuronx 2.13.3 for PyTorch 2.13, 2.14.3 for PyTorch
2.14), the first release with a public `nki_op` (Neuron 2.33.0 release notes; the NKI migration guide's table of NKI
versions and SDKs). NKI 0.7 changed how kernels are specialized (traced by Python), removed `nl.dynamic_range` and
validates the Logical NeuronCore degree against the compiler's; the kernels, the interpreter's language check and its
loops follow 0.7's rules, so another NKI release is refused (`interpreter.find_real_nki`) rather than trusted.
"""

NEURON_SDK = "2.33"
NKI_VERSION = (0, 7)
TORCH_NEURONX = ("2.13", "2.14")  # the native package families of SDK 2.33 (2.13.3.x, 2.14.3.x)

# The Logical NeuronCore degree every kernel is launched at (`kernel[LNC](...)`, frontier.kernels.neuron): neuronx-cc
# compiles for LNC=2 on Trn2 by default and, from NKI 0.7, refuses a kernel of another degree (NCC_EVRF066); the trn2
# profile's four processes per chip are the chip's four logical cores of two. The kernels shard their work by
# nl.program_id (docs/trainium.md).
LNC = 2

NKI = ".".join(str(v) for v in NKI_VERSION)
NAME = f"Neuron SDK {NEURON_SDK} (NKI {NKI}, torch-neuronx {' or '.join(TORCH_NEURONX)})"

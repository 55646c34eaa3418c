"""Trn2 (NeuronCore-v3) limits the interpreter enforces, from the public Neuron docs (shared/reference/nki.md).

Each check is at least as strict as the hardware: where a figure is uncertain the interpreter takes the smaller.
"""

from __future__ import annotations

PMAX = 128  # partitions: dim 0 of every SBUF/PSUM tile
SBUF_BYTES_PER_PARTITION = 212_984  # usable SBUF per partition (of 192-224 KiB physical)
PSUM_BANKS = 8  # PSUM banks per partition
PSUM_BANK_BYTES = 2048  # one bank: 512 fp32 per partition
PSUM_BANK_FP32 = PSUM_BANK_BYTES // 4
MATMUL_K_MAX = PMAX  # contraction (partition dim of stationary and moving)
MATMUL_M_MAX = 128  # stationary free size = dst partitions
MATMUL_N_MAX = 512  # moving free size = dst free size (one PSUM bank of fp32)
TRANSPOSE_TENSOR_MAX = 128  # nc_transpose on TensorE: [128, 128]
TRANSPOSE_VECTOR_MAX = 32  # nc_transpose on VectorE: [32, 32]

# ScalarE activation functions with a limited valid input range (outside it the engine returns garbage):
# name -> (low, high, symmetric) where symmetric means |x| must lie in [low, high].
ACTIVATION_RANGES = {
    "log": (2.0**-64, 2.0**64, False),
    "sqrt": (2.0**-116, 2.0**118, False),
    "rsqrt": (2.0**-87, 2.0**97, False),
    "reciprocal": (2.0**-42, 2.0**42, True),
    "sin": (-3.141592653589793, 3.141592653589793, False),
    "arctan": (-3.141592653589793 / 2, 3.141592653589793 / 2, False),
}

# ScalarE's activation functions are "approximated with piece-wise polynomials" (nki/api/nki.api.shared.rst); the
# docs state no accuracy. The one documented figure for how far the hardware may stand from exact NumPy is the
# simulator guide's comparison of a simulated and a hardware result, `assert_close(sim, hw, rtol=1e-2, atol=1e-5)`
# (nki/guides/nki_simulator.rst). We take it as the bound on every approximated function's output,
#     |f_hw(x) - f(x)| <= 1e-2 |f(x)| + 1e-5,
# which is conservative: the docs apply it to a whole kernel's result, we apply it to each instruction. The tests'
# tolerances must absorb it (`approximate_activations` perturbs outputs within it).
ACTIVATION_REL_ERROR = 1e-2
ACTIVATION_ABS_ERROR = 1e-5
# Identity, square, relu, abs and sign are polynomials of degree <= 2 on each piece: an approximation by piecewise
# polynomials reproduces them exactly [an inference], so they are not perturbed. Every other function is.
EXACT_ACTIVATIONS = frozenset({"copy", "square", "relu", "abs", "sign"})

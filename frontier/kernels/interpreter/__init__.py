"""A NumPy interpreter of the NKI subset our kernels use: run a kernel off-hardware, strictly, and count its work.

    from frontier.kernels.interpreter import load, run, trace
    rms = load("frontier.kernels.nki.rmsnorm")          # the unmodified source, with this nki bound
    y, counts = run(rms.rmsnorm_fwd, x, eps=1e-6)       # arrays in, outputs + Counts out
    counts = trace(rms.rmsnorm_fwd, ((16384, 640), np.float32), eps=1e-6)   # shapes only: instruction counts
    y, counts = run(rms.rmsnorm_fwd, x, eps=1e-6, lnc=2)  # both physical cores of an LNC=2 logical core (lnc.py)

It is stricter than the hardware, never more lenient: the kernel's source is checked against the documented NKI
language before it runs (subset.py); partitions <= 128, matmul K/M <= 128 and N <= 512 into fp32 PSUM within one
bank under the tightest packing, <= 8 PSUM banks and <= 212,984 SBUF bytes per partition alive (memory.py states the
rules), no DMA to or from PSUM, GpSimd never touches PSUM, operators the hardware lacks (nl.divide...) refused, new
buffers filled with NaN, accumulation into PSUM no matmul started refused, ScalarE inputs outside a function's valid
range refused, compiled loops' variables usable only as runtime offsets, and at LNC=2 HBM touched by both cores between
two barriers counted as a race (and given the values a race can give). Every violation raises a `KernelError` naming
the rule. bf16 operands are stored as ml_dtypes.bfloat16 (round to nearest even at every cast). It does not model
timing or engine concurrency; ScalarE's polynomial approximations are exact unless a run asks for them to be
perturbed within the stated bound (`approximate_activations`, limits.ACTIVATION_REL_ERROR).

Modules: errors, limits (the Trn2 figures), tensor (storage, views, access patterns), memory (allocation rules),
counts (work and emitted instructions, the instruction budget), machine (one core's state and modes), lnc (two
cores sharing HBM), ops (operators), language (nki.language, compiled loops), isa (nki.isa), subset (the language
check of NKI 0.7's rules), loader (load, run, trace), real (finding the real nki of the supported toolchain).
"""

from .counts import ENGINES, STATIC_INSTRUCTION_LIMIT, Counts
from .errors import KernelError, LanguageError, LimitError, UnsupportedError
from .loader import load, run, trace
from .machine import ActivationError, approximate_activations
from .real import find_real_nki
from .subset import RULES, Violation, check_kernel, check_module, violations

__all__ = ["ActivationError", "Counts", "ENGINES", "KernelError", "LanguageError", "LimitError", "RULES",
           "STATIC_INSTRUCTION_LIMIT", "UnsupportedError", "Violation", "approximate_activations", "check_kernel",
           "check_module", "find_real_nki", "load", "run", "trace", "violations"]

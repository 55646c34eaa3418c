"""A NumPy interpreter of the NKI subset our kernels use: run a kernel off-hardware, strictly, and count its work.

    from frontier.kernels.interpreter import load, run
    rms = load("frontier.kernels.nki.rmsnorm")          # the unmodified source, with this nki bound
    y, counts = run(rms.rmsnorm_fwd, x, eps=1e-6)       # arrays in, outputs + Counts out

It is stricter than the hardware, never more lenient: partitions <= 128, matmul K/M <= 128 and N <= 512 into one
fp32 PSUM bank, <= 8 PSUM banks and <= 212,984 SBUF bytes per partition alive (memory.py states the lifetime rule),
no DMA to or from PSUM, GpSimd never touches PSUM, operators the hardware lacks (nl.divide...) refused, new buffers
filled with NaN, accumulation into PSUM no matmul started refused, ScalarE inputs outside a function's valid range
refused. Every violation raises a `KernelError` naming the limit. It does not model timing, engine concurrency,
ScalarE's polynomial approximations or memory fragmentation.

Modules: errors, limits (the Trn2 figures), tensor (storage and views), memory (allocation rule), counts, machine
(one call's state), ops (operators), language (nki.language), isa (nki.isa), loader (load, run), real (detecting
the real nki for nki.simulate).
"""

from .counts import ENGINES, Counts
from .errors import KernelError, LimitError, UnsupportedError
from .loader import load, run
from .real import find_real_nki

__all__ = ["Counts", "ENGINES", "KernelError", "LimitError", "UnsupportedError", "find_real_nki", "load", "run"]

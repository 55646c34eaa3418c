"""Finding the real `nki` of the supported toolchain (`frontier.kernels.toolchain`: NKI 0.7, Neuron SDK 2.33), to
check kernels against `nki.simulate` and to compile them.

PyPI's `nki` is an empty placeholder, so importing is not enough: the module must offer `jit` and `simulate` and
report the supported version. Another release is refused with one line naming the supported one: the kernels are
written to NKI 0.7's rules (compiled loops, the Logical NeuronCore degree check), which older releases lack and a
newer one may change.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re

from ...devices import optional_import
from ..toolchain import NAME, NKI, NKI_VERSION

INSTALL = f"install {NAME} from AWS's Neuron pip index"


def find_real_nki():
    """(the nki module, "") when the real nki of the supported version is installed, else (None, why not)."""
    nki, why = optional_import("nki", f"the real `nki` {NKI} is not installed ({INSTALL})")
    if nki is None:
        return None, why
    missing = [a for a in ("jit", "simulate") if not hasattr(nki, a)]
    if missing:
        return None, f"the installed `nki` lacks {', '.join(missing)} (PyPI's empty placeholder?); {INSTALL}"
    version = getattr(nki, "__version__", None)
    if version is None:
        try:
            version = importlib.metadata.version("nki")
        except importlib.metadata.PackageNotFoundError:
            return None, f"the installed `nki` reports no version; {INSTALL}"
    m = re.match(r"(\d+)\.(\d+)", str(version))
    if not m or (int(m[1]), int(m[2])) != NKI_VERSION:
        return None, f"the installed `nki` is version {version}; the kernels support NKI {NKI} only ({INSTALL})"
    return nki, ""

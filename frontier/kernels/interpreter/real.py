"""Finding the real `nki` (>= 0.3, with `jit` and `simulate`), to check kernels against `nki.simulate` too.

PyPI's `nki` is an empty placeholder, so importing is not enough: the module must offer `jit` and `simulate` and
report a version >= 0.3.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re


def find_real_nki():
    """(the nki module, "") when the real nki >= 0.3 is installed, else (None, why not)."""
    try:
        nki = importlib.import_module("nki")
    except ModuleNotFoundError as e:
        if e.name != "nki":
            return None, f"`import nki` failed: {e!r}"
        return None, "the real `nki` (>= 0.3, from AWS's Neuron pip index) is not installed"
    except Exception as e:  # a broken install is "not available", with the reason
        return None, f"`import nki` failed: {e!r}"
    missing = [a for a in ("jit", "simulate") if not hasattr(nki, a)]
    if missing:
        return None, f"the installed `nki` lacks {', '.join(missing)} (PyPI's empty placeholder?)"
    version = getattr(nki, "__version__", None)
    if version is None:
        try:
            version = importlib.metadata.version("nki")
        except importlib.metadata.PackageNotFoundError:
            return None, "the installed `nki` reports no version"
    m = re.match(r"(\d+)\.(\d+)", str(version))
    if not m or (int(m[1]), int(m[2])) < (0, 3):
        return None, f"the installed `nki` is version {version}; the kernels need >= 0.3"
    return nki, ""

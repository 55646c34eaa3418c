"""The errors the interpreter raises: a broken hardware limit, or something the hardware (or this subset) lacks."""

from __future__ import annotations


class KernelError(Exception):
    """A kernel did something the interpreter refuses; the message names the rule."""


class LimitError(KernelError):
    """A Trn2 limit is broken (partitions, PSUM banks, SBUF bytes, matmul tile sizes, memory kinds...)."""


class UnsupportedError(KernelError):
    """An operation that does not exist on the hardware (nl.divide...) or is outside the interpreted subset."""


class NotInSubsetError(UnsupportedError, AttributeError):
    """An `nl.*` / `nisa.*` name the interpreter does not provide (also an AttributeError, so hasattr() works)."""


class LanguageError(UnsupportedError):
    """Kernel source outside the documented NKI language (the static check of `subset.py`); names rule and line."""

"""`nki.typing` as the interpreter provides it: `nt.tensor[shape]`, the annotation NKI 0.7 added for a kernel's
tensor parameters (`def k(X: nt.tensor[128, 512]): ...`; the 0.6 -> 0.7 migration guide, "nki.typing module").

The guide documents the annotation as declaring the expected shape and states no check of it, so the interpreter
records the shape and does not enforce it: annotations change nothing about how a kernel runs.
"""

from __future__ import annotations


class TensorAnnotation:
    """What `tensor[d0, d1, ...]` evaluates to: the declared shape (ints, or whatever the kernel wrote)."""

    def __init__(self, shape: tuple):
        self.shape = shape

    def __repr__(self) -> str:
        return f"nki.typing.tensor[{', '.join(str(d) for d in self.shape)}]"

    def __eq__(self, other) -> bool:
        return isinstance(other, TensorAnnotation) and other.shape == self.shape

    def __hash__(self) -> int:
        return hash(self.shape)


class tensor:  # noqa: N801  (nki.typing.tensor)
    """`tensor[128, 512]`: the annotation of a tensor parameter of that shape."""

    def __class_getitem__(cls, shape) -> TensorAnnotation:
        return TensorAnnotation(shape if isinstance(shape, tuple) else (shape,))

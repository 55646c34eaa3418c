"""The head's logit bias (the n-gram mix's, `frontier.model.ngram`), in the parts the fused head takes."""

from __future__ import annotations

from typing import NamedTuple, Optional

import torch


class LogitBias(NamedTuple):
    """Added to the capped logits z (N, V) before the softmax; every part optional: `row` (V,) for every position,
    `tokens` (N, E) and `values` (N, E) corrections scattered at those tokens (a training batch's sparse form),
    `dense` (N, V) (evaluation)."""

    row: Optional[torch.Tensor] = None
    tokens: Optional[torch.Tensor] = None
    values: Optional[torch.Tensor] = None
    dense: Optional[torch.Tensor] = None

    def add_to(self, z: torch.Tensor, r0: int = 0, r1: int | None = None) -> torch.Tensor:
        """z + the bias of rows r0:r1 (z holds those rows; default all of them)."""
        r1 = z.size(0) + r0 if r1 is None else r1
        if self.row is not None:
            z = z + self.row
        if self.tokens is not None:
            z = z.scatter_add(-1, self.tokens[r0:r1], self.values[r0:r1].to(z.dtype))
        if self.dense is not None:
            z = z + self.dense[r0:r1]
        return z

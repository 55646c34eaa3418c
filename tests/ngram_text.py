"""Helpers the n-gram tests share: a small token stream with repeats, and one context length alone in the mix."""

import numpy as np
import torch

V = 12  # the tests' vocabulary
BASE = [1, 2, 3, 4, 5, 2, 3, 6, 7, 1, 2, 3, 4, 8]


def text(n: int, seed: int, repeat: float) -> list[int]:
    """n tokens: BASE with probability `repeat`, else 5 random tokens, until there are enough."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        out += BASE if rng.random() < repeat else list(rng.integers(0, V, size=5))
    return out[:n]


def only_length(m, k: int) -> None:
    """Context length k alone in the mixture of `m` (an NGramMix): pi one-hot."""
    with torch.no_grad():
        m.mix_logits.fill_(-1e4)
        m.mix_logits[k] = 0

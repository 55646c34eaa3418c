"""How the n-gram tables address their contexts: the 64-bit hash of a context, its bucket at each length, the
fingerprint check bits keep per bucket, and the packed layout of a slot (token << 32 | count) and of a context
(types << 32 | total). The torch functions and their NumPy twins give the same integers bit for bit (int64
arithmetic wraps alike)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

HASH_STEP = 1_000_003
HASH_MIX = -7046029254386353131  # 0x9E3779B97F4A7C15 as a signed 64-bit integer (wrapping multiplication)
FP_MIX = (-4658895280553007687, -7723592293110705685)  # splitmix64's multipliers, as signed 64-bit integers


def _bucket(h: torch.Tensor, log2: int) -> torch.Tensor:
    return ((h * HASH_MIX) >> (64 - log2)) & ((1 << log2) - 1)


def _fingerprint(h: torch.Tensor, bits: int) -> torch.Tensor:
    """`bits` bits of hash `h` mixed a second way (splitmix64's finaliser; the bucket takes the top bits of another
    product), in [1, 2**bits): 0 marks an empty bucket, so a mix that ends in 0 becomes 1."""
    z = h * FP_MIX[0]
    z = (z ^ ((z >> 27) & ((1 << 37) - 1))) * FP_MIX[1]  # (z >> n) & mask: a logical shift of a signed integer
    z = z ^ ((z >> 31) & ((1 << 33) - 1))
    fp = z & ((1 << bits) - 1)
    return torch.where(fp == 0, torch.ones_like(fp), fp)


def context_hashes(x: torch.Tensor, max_order: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Hashes of the contexts of length 2..K ending at each position: (K-1, B, T), and which exist (K-1, 1, T)."""
    x = x.long()
    B, T = x.shape
    h = x + 1
    hashes, valid = [], []
    pos = torch.arange(T, device=x.device)
    for k in range(2, max_order + 1):
        older = F.pad(x[:, : T - (k - 1)], (k - 1, 0)) if k - 1 < T else torch.zeros_like(x)
        h = h * HASH_STEP + older + 1
        hashes.append(h)
        valid.append((pos >= k - 1)[None])
    return torch.stack(hashes), torch.stack(valid)


LOW = (1 << 32) - 1  # packed tables: a slot is (token << 32) | count, a context is (types << 32) | total


def unpack_slots(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens, counts) of packed slots; an empty slot has token -1 and count 0."""
    return packed >> 32, packed & LOW


def _bucket_np(h: np.ndarray, log2: int) -> np.ndarray:
    """`_bucket` in NumPy (int64 arithmetic wraps alike)."""
    return ((h * np.int64(HASH_MIX)) >> np.int64(64 - log2)) & np.int64((1 << log2) - 1)


def _fingerprint_np(h: np.ndarray, bits: int) -> np.ndarray:
    """`_fingerprint` in NumPy."""
    z = h * np.int64(FP_MIX[0])
    z = (z ^ ((z >> 27) & ((1 << 37) - 1))) * np.int64(FP_MIX[1])
    z = z ^ ((z >> 31) & ((1 << 33) - 1))
    fp = z & ((1 << bits) - 1)
    fp[fp == 0] = 1
    return fp

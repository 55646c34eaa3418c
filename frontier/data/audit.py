"""The near-duplicate audit of the held-out splits: which validation and test documents share much of their text
with the training split, by word shingles.

A document's shingles are the hashes of its runs of `SHINGLE_WORDS` consecutive words (words: the text split at
whitespace; a word's hash is its CRC-32, a run's the polynomial of its words' hashes modulo 2**64, so the audit
is the same on every machine and Python). A held-out document's overlap is the share of its distinct shingles
that occur anywhere in the training split; at `NEAR_DUPLICATE_SHARE` or more it is a near-duplicate and goes to
the training split. Those moves can make other held-out documents near-duplicates of the moved ones, so the
check repeats against the moved documents until nothing moves. Documents of fewer than `SHINGLE_WORDS` words
have no shingles and an overlap of 0.

Only the held-out shingles are kept in memory (the training documents stream past them), so the audit of a
large corpus costs memory in proportion to its held-out splits.
"""

from __future__ import annotations

import zlib
from typing import Callable, Iterable

import numpy as np

SHINGLE_WORDS = 13
# A fifth of a document's 13-word runs already in the training text: a copied section, or a document assembled
# from the same template. On the docstrings corpus, 0.5 moved 13 of 297 held-out documents and left xz at 1.375 bpb
# on test given the training text; 0.2 moved 29 and xz reached 1.451 (docs/corpus.md, the corpus-candidates record).
NEAR_DUPLICATE_SHARE = 0.2
_MULT = np.uint64(1099511628211)  # the FNV-1a 64-bit prime: odd, so every word's hash counts


def shingles(text: str, n: int = SHINGLE_WORDS, cache: dict | None = None) -> np.ndarray:
    """The distinct shingles of `text` (runs of `n` words), sorted, uint64; empty for fewer than `n` words."""
    words = text.split()
    if len(words) < n:
        return np.zeros(0, dtype=np.uint64)
    if cache is None:
        cache = {}
    ids = np.empty(len(words), dtype=np.uint64)
    for i, w in enumerate(words):
        h = cache.get(w)
        if h is None:
            h = cache[w] = zlib.crc32(w.encode("utf-8")) + 1
        ids[i] = h
    m = len(words) - n + 1
    out = np.zeros(m, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):
            out = out * _MULT + ids[j : j + m]
    return np.unique(out)


class Audit:
    """The held-out documents' shingles, and which of them the training split holds.

    `add_heldout(key, text)` each held-out document, then `scan(text)` each training document, then
    `shares()` gives each held-out document's overlap."""

    def __init__(self, n: int = SHINGLE_WORDS):
        self.n, self._cache = n, {}
        self._keys: list = []
        self._doc_shingles: list[np.ndarray] = []
        self._all: np.ndarray | None = None
        self._seen: np.ndarray | None = None

    def add_heldout(self, key, text: str) -> None:
        self._keys.append(key)
        self._doc_shingles.append(shingles(text, self.n, self._cache))
        self._all = None

    def _ready(self) -> None:
        if self._all is None:
            parts = self._doc_shingles or [np.zeros(0, dtype=np.uint64)]
            self._all = np.unique(np.concatenate(parts))
            self._seen = np.zeros(len(self._all), dtype=bool)

    def _mark(self, s: np.ndarray) -> None:
        if len(s) == 0 or len(self._all) == 0:
            return
        idx = np.searchsorted(self._all, s)
        idx[idx == len(self._all)] = 0
        hit = self._all[idx] == s
        self._seen[idx[hit]] = True

    def scan(self, text: str) -> None:
        """Mark the held-out shingles that this training document holds."""
        self._ready()
        self._mark(shingles(text, self.n, self._cache))

    def shares(self) -> dict:
        """Each held-out document's overlap with what was scanned: {key: share of its shingles marked}."""
        self._ready()
        out = {}
        for key, s in zip(self._keys, self._doc_shingles):
            out[key] = float(self._seen[np.searchsorted(self._all, s)].mean()) if len(s) else 0.0
        return out

    def move(self, threshold: float = NEAR_DUPLICATE_SHARE) -> tuple[dict, list]:
        """The overlaps (before any move) and the keys of the near-duplicates, in the order found: those at
        `threshold` or more, then, round after round, those that reach it against the documents moved before."""
        self._ready()
        first = self.shares()
        moved, current = [], dict(first)
        staying = dict(zip(self._keys, self._doc_shingles))
        while True:
            now = [k for k in staying if current[k] >= threshold]
            if not now:
                return first, moved
            for k in now:
                moved.append(k)
                self._mark(staying.pop(k))
            current = self.shares()


def summary(shares: Iterable[float]) -> dict:
    """Median, 90th percentile and maximum of overlaps, and how many are over one half (None for none)."""
    a = np.asarray(list(shares), dtype=float)
    if len(a) == 0:
        return {"documents": 0}
    return {"documents": int(len(a)), "median": round(float(np.median(a)), 4),
            "p90": round(float(np.quantile(a, 0.9)), 4), "max": round(float(a.max()), 4),
            "over_half": int((a >= 0.5).sum()), "any": int((a > 0).sum())}


def audit_splits(splits: list[str], heldout_text: Callable[[int], str], train_texts: Iterable[str],
                 threshold: float = NEAR_DUPLICATE_SHARE, n: int = SHINGLE_WORDS) -> tuple[list[int], dict]:
    """Audit the held-out documents (indices i with `splits[i]` "val" or "test", text `heldout_text(i)`) against
    the training documents `train_texts`: the indices that leave for the training split, and the audit's record
    (method, threshold, overlaps before and after per split, the moves per split)."""
    audit = Audit(n)
    held = [i for i, s in enumerate(splits) if s in ("val", "test")]
    for i in held:
        audit.add_heldout(i, heldout_text(i))
    for text in train_texts:
        audit.scan(text)
    before, moved = audit.move(threshold)
    gone = set(moved)
    after = audit.shares()
    names = sorted({splits[i] for i in held})
    record = {
        "method": f"{n}-word shingles (CRC-32 words, polynomial hash mod 2**64); a held-out document whose "
                  f"distinct shingles are {threshold:g} or more in the training split moves to it, repeated "
                  f"against the moved documents until none moves",
        "shingle_words": n,
        "threshold": threshold,
        "before": {s: summary(before[i] for i in held if splits[i] == s) for s in names},
        "moved_to_train": {s: sum(1 for i in moved if splits[i] == s) for s in names},
        "after": {s: summary(after[i] for i in held if splits[i] == s and i not in gone) for s in names},
    }
    return moved, record

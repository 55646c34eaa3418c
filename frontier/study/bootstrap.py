"""What the validation split's few documents leave uncertain: a bootstrap over documents.

A run's val_bpb is total bits / total bytes over the documents of the validation split (the embedded corpus's:
67 KB in 19 documents). Other documents of the same kind would give another number, and with so few documents
that spread can be as large as the gains the book measures. The bootstrap estimates it from the run's own scores:
it draws as many documents as the split has, with replacement, from the split's documents (each document whole,
with its bits and its bytes), and computes bits summed / bytes summed over the draw; repeated `n` times, the
draws' values give an interval. Nothing is re-evaluated: the per-document bits and bytes are the run record's
`val_by_document` (`frontier.train.bpb.evaluate_bpb`).

What it measures: how much val_bpb depends on which documents happen to be in the split. It says nothing about
the run-to-run noise of training (seeds: `frontier.study.compare`), and it treats the documents as independent
draws, which documents from one source are only roughly.

Two runs scored on the same documents are compared by `paired_bootstrap_bpb`: each draw picks one set of
documents and takes both runs' bpb on it, so the documents' own difficulty, which both runs share, cancels in
the difference.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError

RESAMPLES = 10_000  # draws of documents per bootstrap
LEVEL = 0.95  # the share of draws inside the percentile interval


def per_document(scores: dict) -> tuple[np.ndarray, np.ndarray]:
    """(bits, bytes) per validation document, from a run record (its `val_by_document`) or from a
    `val_by_document` itself ({"bits": [...], "bytes": [...]}). A record without them: a one-line `UserError`."""
    doc = scores.get("val_by_document", scores if "bits" in scores else None)
    if doc is None:
        where = scores.get("run_dir") or scores.get("label") or "this run"
        raise UserError(f"the run record of {where!r} keeps no per-document scores (val_by_document)",
                        "train it again with the current code (its record card gives the command): older records "
                        "keep only the totals")
    bits, nbytes = np.asarray(doc["bits"], dtype=np.float64), np.asarray(doc["bytes"], dtype=np.float64)
    if bits.shape != nbytes.shape or bits.ndim != 1 or len(bits) == 0:
        raise UserError("per-document scores need one bits and one bytes entry per document",
                        "pass a run record's val_by_document as it was written")
    return bits, nbytes


def document_draws(n_documents: int, n: int, seed: int) -> np.ndarray:
    """`n` draws of `n_documents` document indices each, with replacement, (n, n_documents)."""
    return np.random.default_rng(seed).integers(0, n_documents, size=(n, n_documents))


def _interval(values: np.ndarray, level: float) -> tuple[float, float]:
    low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def bootstrap_bpb(per_doc: dict, n: int = RESAMPLES, seed: int = 0, level: float = LEVEL) -> dict:
    """val_bpb and how much it depends on the split's documents. Resampled: the validation documents, whole
    (each with its bits and bytes), as many as the split has, with replacement, `n` times from `seed`; each draw's
    bpb is its bits summed / its bytes summed. `per_doc`: a run record or its `val_by_document`.

    Returns `bpb` (all documents once: the run's val_bpb), `mean` (over the draws), `low` and `high` (the
    percentile interval holding `level` of the draws), `level`, `resamples` (n), `documents`, `seed`."""
    bits, nbytes = per_document(per_doc)
    draws = document_draws(len(bits), n, seed)
    bpb = bits[draws].sum(axis=1) / nbytes[draws].sum(axis=1)
    low, high = _interval(bpb, level)
    return {"bpb": float(bits.sum() / nbytes.sum()), "mean": float(bpb.mean()), "low": low, "high": high,
            "level": level, "resamples": n, "documents": len(bits), "seed": seed}


def paired_bootstrap_bpb(a: dict, b: dict, n: int = RESAMPLES, seed: int = 0, level: float = LEVEL) -> dict:
    """The difference bpb(a) - bpb(b) of two runs scored on the same documents, and how much it depends on the
    split's documents. Resampled: the validation documents, jointly for both runs (one draw of document indices,
    with replacement, as many as the split has, read in both runs' scores), `n` times from `seed`; each draw's
    difference is a's bits summed / bytes summed minus b's over the same documents. `a`, `b`: run records or their
    `val_by_document`; documents whose bytes differ between them (another split, tokenizer or convention) are a
    one-line `UserError`.

    Returns `difference` (all documents once: val_bpb(a) - val_bpb(b)), `mean` (over the draws), `low` and
    `high` (the percentile interval holding `level` of the draws), `level`, `resamples`, `documents`, `seed`."""
    bits_a, bytes_a = per_document(a)
    bits_b, bytes_b = per_document(b)
    if not np.array_equal(bytes_a, bytes_b):
        raise UserError(f"the two runs were not scored on the same documents ({len(bytes_a)} and {len(bytes_b)} "
                        "documents, bytes per document differ)", "pair runs evaluated on one validation split with "
                        "one bpb convention")
    draws = document_draws(len(bits_a), n, seed)
    nbytes = bytes_a[draws].sum(axis=1)
    diff = bits_a[draws].sum(axis=1) / nbytes - bits_b[draws].sum(axis=1) / nbytes
    low, high = _interval(diff, level)
    total = bytes_a.sum()
    return {"difference": float(bits_a.sum() / total - bits_b.sum() / total), "mean": float(diff.mean()),
            "low": low, "high": high, "level": level, "resamples": n, "documents": len(bits_a), "seed": seed}

"""Bits per byte on the whole validation split.

    val_bpb = total nats / (ln 2 * total bytes)

Every target token of the validation stream is scored exactly once (non-overlapping windows, the last partial
window included). Two conventions decide which positions and bytes count:

- `nanochat` (the competition's, the default): each token id stands for a fixed number of bytes (0 for special
  tokens); positions whose target is special (BOS) are left out of both sums. With a lossless tokenizer the byte
  total equals the UTF-8 length of the validation documents exactly.
- `parameter-golf`: BOS targets count in the nats with 0 bytes, and a leading space counts one byte except
  right after a special token. Its byte total can be smaller than the text's (one byte per document that
  starts with a space).

A run's score also keeps its bits and bytes per validation document (`evaluate_bpb_by_document`, `val_by_document`,
the score's convention), split from the same scoring pass: the validation stream is documents, each BOS and then
its tokens, and a target counts in the document of the token before it (so a BOS target, which ends a document,
counts in the document it ends; under `nanochat` it carries neither bits nor bytes). Summed, they are the
totals: sum(bits) / sum(bytes) = val_bpb. What the split's few documents leave uncertain is
`frontier.study.bootstrap`'s. (`evaluate_bpb` itself is left as it was: `frontier.study.replay` checks that the
scoring functions are those of a record's commit.)

Adaptive evaluation (`evaluate_bpb_adaptive`, `frontier eval --adaptive`) is not the competition's score: it
scores the same windows in order and, after scoring each, counts it into the n-gram tables, as a compressor
adapts to what it has coded. It is reported as `val_bpb_adaptive`, the like-for-like comparison with xz or PPMd.
"""

from __future__ import annotations

import math
from contextlib import nullcontext

import numpy as np
import torch

from ..data.loader import eval_windows
from ..data.tokenizer import Tokenizer
from ..errors import UserError

CONVENTIONS = ("nanochat", "parameter-golf")


def bits_per_byte(total_nats: float, total_bytes: int) -> float:
    return total_nats / (math.log(2) * total_bytes)


def scored_bytes(tok: Tokenizer, inputs: np.ndarray, targets: np.ndarray, convention: str):
    """(mask of scored positions, bytes per position) for one window under `convention`."""
    base = tok.token_bytes[targets]
    if convention == "nanochat":
        mask = ~tok.is_special[targets]
        return mask, np.where(mask, base, 0)
    if convention == "parameter-golf":
        after_special = tok.is_special[inputs] & tok.leading_space[targets]
        return np.ones_like(targets, dtype=bool), base - after_special.astype(base.dtype)
    raise ValueError(f"unknown bpb convention {convention!r}; choose one of {CONVENTIONS}")


@torch.no_grad()
def evaluate_bpb(model, tokens: np.ndarray, tok: Tokenizer, seq_len: int, batch_size: int,
                 device: torch.device | str = "cpu", convention: str = "nanochat", autocast=None) -> dict:
    """Score `model` on the token stream `tokens`; both conventions, `convention` first."""
    sums = {c: {"nats": 0.0, "bytes": 0, "tokens": 0} for c in CONVENTIONS}
    was_training = model.training
    model.eval()
    try:
        for w in eval_windows(tokens, seq_len, batch_size):
            with autocast or nullcontext():
                nats = model(w.inputs.to(device), w.targets.to(device), reduction="none")
            nats = nats.double().cpu().numpy()
            x, y = w.inputs.numpy(), w.targets.numpy()
            for c in CONVENTIONS:
                mask, nbytes = scored_bytes(tok, x, y, c)
                sums[c]["nats"] += float(nats[mask].sum())
                sums[c]["bytes"] += int(nbytes.sum())
                sums[c]["tokens"] += int(mask.sum())
    finally:
        model.train(was_training)
    by = {
        c: {
            "val_bpb": bits_per_byte(s["nats"], s["bytes"]),
            "val_loss": s["nats"] / s["tokens"],
            "val_tokens": s["tokens"],
            "val_bytes": s["bytes"],
        }
        for c, s in sums.items()
    }
    return {**by[convention], "bpb_convention": convention, "by_convention": by}


class KeepScores(torch.nn.Module):
    """`model`, which keeps the per-position nats of every batch of windows it scores, in order (`nats`), as float64
    NumPy arrays: what `evaluate_bpb` summed, for splitting by document afterwards."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model, self.nats = model, []
        self.training = model.training  # evaluate_bpb puts back the mode it found: the model's own

    def forward(self, idx: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
        nats = self.model(idx, targets, reduction=reduction)
        self.nats.append(nats.detach().double().cpu().numpy())
        return nats


def evaluate_bpb_by_document(model, tokens: np.ndarray, tok: Tokenizer, seq_len: int, batch_size: int,
                             device: torch.device | str = "cpu", convention: str = "nanochat", autocast=None) -> dict:
    """`evaluate_bpb` (its score, unchanged), and from the same pass its bits and bytes per document under
    `convention`: `val_by_document` = {"bits": [...], "bytes": [...]}, one entry per document in stream order."""
    kept = KeepScores(model)
    score = evaluate_bpb(kept, tokens, tok, seq_len, batch_size, device, convention, autocast)
    return {**score, "val_by_document": split_by_document(kept.nats, tokens, tok, seq_len, batch_size, convention)}


def split_by_document(nats: list[np.ndarray], tokens: np.ndarray, tok: Tokenizer, seq_len: int, batch_size: int,
                      convention: str) -> dict:
    """The scored nats of `eval_windows(tokens, seq_len, batch_size)` (one array per batch of windows, in order) as
    bits and bytes per document: a target counts in the document of its input token (`document_of_position`), its
    bytes and whether it counts at all as `scored_bytes` says under `convention`."""
    docs = document_of_position(tokens, tok.bos_id)
    n_docs = int(docs[-1]) + 1
    doc_nats, doc_bytes = np.zeros(n_docs), np.zeros(n_docs, dtype=np.int64)
    windows = zip(nats, eval_windows(tokens, seq_len, batch_size), eval_windows(docs, seq_len, batch_size), strict=True)
    for n, w, d in windows:
        mask, nbytes = scored_bytes(tok, w.inputs.numpy(), w.targets.numpy(), convention)
        doc = d.inputs.numpy()[mask]
        doc_nats += np.bincount(doc, weights=n[mask], minlength=n_docs)
        doc_bytes += np.bincount(doc, weights=nbytes[mask], minlength=n_docs).astype(np.int64)
    return {"bits": (doc_nats / math.log(2)).tolist(), "bytes": doc_bytes.tolist()}


def document_of_position(tokens: np.ndarray, bos_id: int) -> np.ndarray:
    """The document (0, 1, ...) each position of a token stream lies in: a document starts at each BOS; positions
    before the first BOS (a stream that does not start with one) count in document 0."""
    return np.maximum(np.cumsum(np.asarray(tokens) == bos_id) - 1, 0)


@torch.no_grad()
def evaluate_bpb_adaptive(model, tokens: np.ndarray, tok: Tokenizer, seq_len: int, batch_size: int = 1,
                          device: torch.device | str = "cpu", convention: str = "nanochat", autocast=None) -> dict:
    """Adaptive evaluation, not the competition's score: `evaluate_bpb` itself (its windows, in order, `batch_size`
    at a time; 1: window by window) of a model that, after scoring each batch of windows, counts it into the n-gram
    tables of every fold (evaluation reads their average), so that each window sees the counts of all windows
    before its batch (not those of earlier positions in its own window). The tables hold again what they held
    before when it returns. Returns `val_bpb_adaptive`, `val_loss_adaptive`, `val_tokens`, `val_bytes`,
    `bpb_convention` and `by_convention` (with the same names); never a `val_bpb`. A model without n-gram tables:
    a `UserError`."""
    ngram = getattr(model, "ngram", None)
    if ngram is None:
        raise UserError("adaptive evaluation counts validation windows into the n-gram tables, and this model has "
                        "none", "use it with a run of an n-gram recipe (ngram, ngram-only, ...), or drop --adaptive")
    with ngram.counts_kept():
        score = evaluate_bpb(CountAfterScoring(model), tokens, tok, seq_len, batch_size, device, convention, autocast)
    return {**_adaptive_names({k: v for k, v in score.items() if k != "by_convention"}),
            "by_convention": {c: _adaptive_names(s) for c, s in score["by_convention"].items()}}


class CountAfterScoring(torch.nn.Module):
    """`model`, which after scoring a batch of windows counts its (context, next token) pairs into the tables
    evaluation reads (`NGramMix.observe_evaluated`; adaptive evaluation): the losses it returns were computed
    before the counting."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, idx: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
        nats = self.model(idx, targets, reduction=reduction)
        self.model.ngram.observe_evaluated(idx, targets)
        return nats


def _adaptive_names(score: dict) -> dict:
    """`val_bpb` and `val_loss` renamed `val_bpb_adaptive` and `val_loss_adaptive`; the rest as it is."""
    return {(k + "_adaptive" if k in ("val_bpb", "val_loss") else k): v for k, v in score.items()}


@torch.no_grad()
def score_text(model, tok: Tokenizer, text: str, seq_len: int = 256, device="cpu") -> dict:
    """Token by token, how one piece of text is scored: its bytes, and its nats under `model` (None: uniform).

    The text is scored as the start of a document (BOS, then its tokens), in windows of `seq_len` as in the
    validation stream.
    """
    ids = tok.encode_document(text)
    if model is None:
        nats = np.full(len(ids) - 1, math.log(tok.vocab_size))
    else:
        was_training = model.training
        model.eval()
        parts = [model(w.inputs.to(device), w.targets.to(device), reduction="none").flatten()
                 for w in eval_windows(np.array(ids), seq_len, batch_size=1)]
        nats = torch.cat(parts).double().cpu().numpy()
        model.train(was_training)
    rows = []
    for t, n in zip(ids[1:], nats):
        rows.append({
            "token": int(t),
            "text": repr(tok.decode([t]))[1:-1].replace(" ", "\u2423") if not tok.is_special[t] else tok.piece(t),
            "bytes": int(tok.token_bytes[t]),
            "nats": float(n),
            "bits": float(n) / math.log(2),
        })
    total_nats, total_bytes = float(nats.sum()), int(sum(r["bytes"] for r in rows))
    return {"rows": rows, "nats": total_nats, "bytes": total_bytes, "utf8_bytes": len(text.encode("utf-8")),
            "bpb": bits_per_byte(total_nats, total_bytes)}

"""The count model alone (`frontier.model.ngram.exact`) against PPMd on the same held-out bytes, static and adaptive.

    frontier count-model --profile cpu            # a bench record under runs/bench/cpu/

What it does, in the order a reader checks it:
1. Counting: the exact context ids of the training split (`context_ids`, every length 1..K+1) and its counts per
   length, timed (tokens a second: what a run would pay to count).
2. Folds by document: every training document goes to one of `folds` folds (document i to fold i mod folds); the
   escapes are fitted on the positions of the first `fit_folds` folds, each reading the counts of every other fold
   as its static part and its own fold's earlier positions as its adaptive part (the regime a held-out split is
   coded in). Nothing is fitted on validation or test.
3. Scoring: validation and test, each as one stream after the training text, static (the training counts alone:
   the competition's kind of score) and adaptive (every token scored, then counted, as a compressor codes), for
   the longest context lengths `orders` (tokens), in bits per byte under the nanochat convention (BOS targets left
   out), the same bytes `frontier.study.compressors` scores.
4. Beside it, the newest compressor record of the same data (`frontier compressors`): PPMd is a compressor, an
   adaptive coder, and compares with the adaptive column.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from ..data.dataset import Dataset
from ..model.ngram.exact import context_ids, document_starts, evidence, fit_chain, nats_to_bpb

ORDERS = (2, 3, 4, 6, 8, 12, 16)  # the longest context lengths scored, in tokens (2.2 bytes a token on docstrings)
FOLDS = 20  # each fold of the docstrings corpus's training split is about the size of its held-out splits
FIT_FOLDS = 4  # the folds whose positions the escapes are fitted on
FIT_STEPS = 300


def _count_cost(train: np.ndarray, bos: int, levels: int) -> dict:
    """Seconds to build the training split's context ids and counts for `levels` lengths, and tokens a second."""
    t0 = time.perf_counter()
    starts = document_starts(train, bos)
    ids, sizes = context_ids(train, starts, levels)
    for g in ids:
        np.bincount(g[g >= 0])
    s = time.perf_counter() - t0
    return {"tokens": int(len(train)), "levels": levels, "seconds": s, "tokens_per_s": len(train) / s,
            "contexts": sizes, "torch_threads": torch.get_num_threads()}


def count_model_scores(dataset: Dataset, orders=ORDERS, folds: int = FOLDS, fit_folds: int = FIT_FOLDS,
                       steps: int = FIT_STEPS, seed: int = 0, log=print) -> dict:
    """The count model alone on validation and test (where the data has one), static and adaptive, for each longest
    context length in `orders`; with what counting costs. Returns the record's body."""
    tok = dataset.tokenizer
    bos, V, K = tok.bos_id, tok.vocab_size, max(orders)
    train = np.concatenate([np.asarray(s, dtype=np.int64) for s in dataset.train_tokens()])
    splits = ["val", "test"] if dataset.has_test else ["val"]
    held = {s: np.asarray(dataset.heldout_tokens(s), dtype=np.int64) for s in splits}
    cost = _count_cost(train, bos, K + 1)
    log(f"counting: {cost['tokens']:,} tokens, {K + 1} lengths, {cost['seconds']:.1f} s "
        f"({cost['tokens_per_s'] / 1e6:.2f}M tokens/s)")
    x = np.concatenate([train] + [held[s] for s in splits])
    starts = document_starts(x, bos)
    ids, sizes = context_ids(x, starts, K + 1)
    n_train = len(train)
    doc = np.cumsum(train == bos) - 1
    fold = doc % folds
    fit_pos = np.flatnonzero((fold < fit_folds)[:-1])  # a training position predicting a training token
    segments, positions, where = [fold[fit_pos]], [fit_pos], {}
    at = n_train
    for i, s in enumerate(splits):
        p = np.arange(at, at + len(held[s]) - 1)
        where[s] = (sum(len(q) for q in positions), len(p))
        positions.append(p)
        segments.append(np.full(len(p), folds + i))
        at += len(held[s])
    positions, segments = np.concatenate(positions), np.concatenate(segments)
    t0 = time.perf_counter()
    counted = np.arange(len(x)) < n_train
    ev = evidence(x, starts, ids, sizes, counted, positions, segments, bos, V, K).tensors()
    log(f"evidence at {len(positions):,} positions: {time.perf_counter() - t0:.1f} s")
    targets = x[positions + 1]
    scored = torch.as_tensor(~tok.is_special[targets])
    nbytes = torch.as_tensor(tok.token_bytes[targets], dtype=torch.float64)
    fit = slice(0, len(fit_pos))

    def part(sl, k):
        return {n: (v[:k, sl] if v.dim() == 2 else v[sl]) for n, v in ev.items()}

    rows = []
    for k in orders:
        row = {"order": k}
        for adaptive in (False, True):
            t0 = time.perf_counter()
            chain = fit_chain(part(fit, k), k, V, adaptive, steps=steps, seed=seed, weights=scored[fit])
            fit_s = time.perf_counter() - t0
            name = "adaptive" if adaptive else "static"
            with torch.no_grad():
                for s in splits:
                    a, m = where[s]
                    sl = slice(a, a + m)
                    p = chain(part(sl, k), adaptive)
                    keep = scored[sl]
                    nats = float(-torch.log(p[keep].double()).sum())
                    row[f"{s}_bpb_{name}"] = nats_to_bpb(nats, int(nbytes[sl][keep].sum()))
                    row[f"{s}_bytes"] = int(nbytes[sl][keep].sum())
            row[f"fit_s_{name}"] = fit_s
            row[f"escapes_{name}"] = {"w": chain.w.detach().tolist(), "b": chain.b.detach().tolist(),
                                      "recent": chain.recent.detach().exp().tolist()}
        log(f"order {k:>2}: " + "  ".join(f"{s} {row[f'{s}_bpb_static']:.4f} static, {row[f'{s}_bpb_adaptive']:.4f} "
                                          "adaptive" for s in splits))
        rows.append(row)
    return {"counting": cost, "folds": folds, "fit_folds": fit_folds, "fit_positions": int(len(fit_pos)),
            "fit_steps": steps, "seed": seed, "rows": rows}


def run_count_model_bench(dataset: Dataset, profile: str, out: str | Path, command: list[str] | None = None,
                          orders=ORDERS, log=print) -> dict:
    """`count_model_scores` on `dataset`, with the newest compressor record of the same data beside it, kept as a
    bench record (kind "count-model") under `out`; returns it."""
    from .bench_records import bench_record, new_record_path, newest_record

    path = new_record_path(out, "count-model", [profile])
    body = count_model_scores(dataset, orders, log=log)
    comp = newest_record(out, "compressors", match=lambda r: r["arguments"]["manifest_hash"] == dataset.manifest_hash)
    body["compressors"] = None if comp is None else {"record": comp["path"], "rows": comp["rows"]}
    if comp is None:
        log("no compressor record of this data beside it: `frontier compressors` makes one")
    arguments = {"profile": profile, "data": str(dataset.folder), "manifest_hash": dataset.manifest_hash,
                 "orders": list(orders)}
    return bench_record("count-model", arguments, command, f"{__name__}.run_count_model_bench",
                        {"profile": profile, **body}, path, cpu=True)

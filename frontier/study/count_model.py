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


def count_model_probs(dataset: Dataset, orders=ORDERS, folds: int = FOLDS, fit_folds: int = FIT_FOLDS,
                      steps: int = FIT_STEPS, seed: int = 0, log=print):
    """The count model's probability of every held-out target (validation, and test where the data has one; in
    stream order, targets 1..n-1 of `heldout_tokens(split)`), static and adaptive, for each longest context length in
    `orders`; with the evidence of the longest length (`deepest`, for a mixer to read), which positions are scored
    and their bytes, and what counting costs. Returns (probs {order: {split: {"static", "adaptive": tensor}}},
    info {split: {"scored", "bytes", "deepest"}}, fits {order: {...}}, cost)."""
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
        where[s] = slice(sum(len(q) for q in positions), sum(len(q) for q in positions) + len(p))
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

    probs, fits = {}, {}
    for k in orders:
        probs[k], fits[k] = {s: {} for s in splits}, {}
        for adaptive in (False, True):
            t0 = time.perf_counter()
            chain = fit_chain(part(fit, k), k, V, adaptive, steps=steps, seed=seed, weights=scored[fit])
            name = "adaptive" if adaptive else "static"
            fits[k][name] = {"fit_s": time.perf_counter() - t0, "w": chain.w.detach().tolist(),
                             "b": chain.b.detach().tolist(), "recent": chain.recent.detach().exp().tolist()}
            with torch.no_grad():
                for s in splits:
                    probs[k][s][name] = chain(part(where[s], k), adaptive)
    info = {s: {"scored": scored[where[s]], "bytes": nbytes[where[s]], "evidence": part(where[s], K)} for s in splits}
    return probs, info, fits, cost


def bpb_of(p: torch.Tensor, scored: torch.Tensor, nbytes: torch.Tensor) -> float:
    """Bits per byte of the targets' probabilities `p` over the scored positions."""
    return nats_to_bpb(float(-torch.log(p[scored].double()).sum()), int(nbytes[scored].sum()))


def count_model_scores(dataset: Dataset, orders=ORDERS, folds: int = FOLDS, fit_folds: int = FIT_FOLDS,
                       steps: int = FIT_STEPS, seed: int = 0, log=print) -> dict:
    """The count model alone on validation and test (where the data has one), static and adaptive, for each longest
    context length in `orders`; with what counting costs. Returns the record's body."""
    probs, info, fits, cost = count_model_probs(dataset, orders, folds, fit_folds, steps, seed, log)
    rows = []
    for k in orders:
        row = {"order": k}
        for s, by in probs[k].items():
            for name, p in by.items():
                row[f"{s}_bpb_{name}"] = bpb_of(p, info[s]["scored"], info[s]["bytes"])
            row[f"{s}_bytes"] = int(info[s]["bytes"][info[s]["scored"]].sum())
        for name, f in fits[k].items():
            row[f"fit_s_{name}"] = f["fit_s"]
            row[f"escapes_{name}"] = {n: f[n] for n in ("w", "b", "recent")}
        log(f"order {k:>2}: " + "  ".join(f"{s} {row[f'{s}_bpb_static']:.4f} static, {row[f'{s}_bpb_adaptive']:.4f} "
                                          "adaptive" for s in probs[k]))
        rows.append(row)
    return {"counting": cost, "folds": folds, "fit_folds": fit_folds, "steps": steps, "seed": seed, "rows": rows}


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


def network_probs(run_dir: str | Path, dataset: Dataset, split: str) -> torch.Tensor:
    """A trained run's probability of every target of a held-out split (stream order), from its checkpoint, scored
    in the windows its config evaluates in (`frontier.train.bpb.evaluate_bpb`)."""
    from ..train.bpb import KeepScores, evaluate_bpb
    from ..train.checkpoint import load_run_model

    model, cfg = load_run_model(run_dir)
    kept = KeepScores(model)
    evaluate_bpb(kept, dataset.heldout_tokens(split), dataset.tokenizer, cfg.train.seq_len,
                 cfg.train.eval_batch_size)
    return torch.exp(-torch.as_tensor(np.concatenate([n.ravel() for n in kept.nats])))


def _mix_features(ev: dict, adaptive: bool) -> torch.Tensor:
    """What the mixing weight reads at each position: the deepest context length with counts (as a share of K), its
    count and share of new continuations, whether it is deterministic; never the target."""
    a = 1.0 if adaptive else 0.0
    n = ev["Ns"] + a * ev["Ne"]
    t = ev["Ts"] + a * ev["Te"]
    K = n.size(0)
    depth = (n > 0).sum(0)
    at = (depth - 1).clamp_min(0)[None]
    nd, td = n.gather(0, at)[0], t.gather(0, at)[0]
    return torch.stack([torch.ones_like(nd), depth / K, torch.log1p(nd) / 8, td / nd.clamp_min(1),
                        (td == 1).float()], -1)


def mix_screen(run_dir: str | Path, dataset: Dataset, order: int = 16, steps: int = 300, log=print) -> dict:
    """A trained run's network mixed at evaluation with the count model, p = l p_net + (1 - l) p_count, the weight
    l = sigmoid(theta . f) from the count model's evidence at the deepest length (`_mix_features`), theta fitted on
    validation (a choice: it reads validation) and reported on test; static and adaptive. A screen: one run."""
    probs, info, fits, cost = count_model_probs(dataset, (order,), log=log)
    splits = list(info)
    net = {s: network_probs(run_dir, dataset, s) for s in splits}
    body = {"run": str(run_dir), "order": order, "counting": cost, "rows": []}
    for name in ("static", "adaptive"):
        feats = {s: _mix_features(info[s]["evidence"], name == "adaptive") for s in splits}
        theta = torch.zeros(feats["val"].size(1), requires_grad=True)
        opt = torch.optim.Adam([theta], lr=0.05)
        sc, pn, pc = info["val"]["scored"], net["val"], probs[order]["val"][name]
        for _ in range(steps):
            lam = torch.sigmoid(feats["val"] @ theta)
            loss = -torch.log(lam * pn + (1 - lam) * pc)[sc].mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        row = {"scoring": name, "theta": theta.detach().tolist()}
        for s in splits:
            sc, nb = info[s]["scored"], info[s]["bytes"]
            pn, pc = net[s], probs[order][s][name]
            with torch.no_grad():
                lam = torch.sigmoid(feats[s] @ theta)
                row[f"{s}_bpb_network"] = bpb_of(pn, sc, nb)
                row[f"{s}_bpb_count"] = bpb_of(pc, sc, nb)
                row[f"{s}_bpb_half"] = bpb_of(0.5 * pn + 0.5 * pc, sc, nb)
                row[f"{s}_bpb_mix"] = bpb_of(lam * pn + (1 - lam) * pc, sc, nb)
        log(f"{name}: " + "  ".join(f"{s}: network {row[f'{s}_bpb_network']:.4f} count {row[f'{s}_bpb_count']:.4f} "
                                    f"half {row[f'{s}_bpb_half']:.4f} mix {row[f'{s}_bpb_mix']:.4f}" for s in splits))
        body["rows"].append(row)
    return body


def run_counting_bench(dataset: Dataset, profile: str, out: str | Path, command: list[str] | None = None,
                       order: int = max(ORDERS), rounds: int = 3, log=print) -> dict:
    """What counting the training split costs the count model (its context ids and counts for `order` + 1 lengths),
    `rounds` times in one process: seconds and tokens a second, each round and the median, as a bench record (kind
    "count-model-counting"). Meant for a machine with nothing else running: the record cannot tell."""
    from .bench_records import bench_record, new_record_path

    path = new_record_path(out, "count-model-counting", [profile])
    train = np.concatenate([np.asarray(s, dtype=np.int64) for s in dataset.train_tokens()])
    runs = []
    for i in range(rounds):
        runs.append(_count_cost(train, dataset.tokenizer.bos_id, order + 1))
        log(f"round {i + 1}: {runs[-1]['seconds']:.2f} s, {runs[-1]['tokens_per_s'] / 1e6:.2f}M tokens/s")
    median = sorted(r["tokens_per_s"] for r in runs)[len(runs) // 2]
    log(f"median {median / 1e6:.2f}M tokens/s over {rounds} rounds ({len(train):,} tokens, {order + 1} lengths)")
    arguments = {"profile": profile, "data": str(dataset.folder), "manifest_hash": dataset.manifest_hash,
                 "order": order, "rounds": rounds}
    return bench_record("count-model-counting", arguments, command, f"{__name__}.run_counting_bench",
                        {"profile": profile, "rounds": runs, "median_tokens_per_s": median}, path, cpu=True)


def run_mix_screen(run_dir: str | Path, dataset: Dataset, profile: str, out: str | Path,
                   command: list[str] | None = None, order: int = max(ORDERS), log=print) -> dict:
    """`mix_screen` kept as a bench record (kind "count-model-mix") under `out`; returns it."""
    from .. import records
    from .bench_records import bench_record, new_record_path

    path = new_record_path(out, "count-model-mix", [profile])
    body = mix_screen(run_dir, dataset, order, log=log)
    rec = records.load_record(run_dir)
    body["network"] = {k: rec.get(k) for k in ("recipe", "seed", "steps", "epochs", "val_bpb", "test_bpb", "code")}
    arguments = {"profile": profile, "run": str(run_dir), "data": str(dataset.folder),
                 "manifest_hash": dataset.manifest_hash, "order": order}
    return bench_record("count-model-mix", arguments, command, f"{__name__}.run_mix_screen", {"profile": profile,
                        **body}, path, cpu=True)

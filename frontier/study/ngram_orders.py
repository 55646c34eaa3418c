"""`frontier ngram-orders`: the n-gram model alone against its longest context, for several kinds of tables.

For each variant (a set of `NGramConfig` changes on a recipe's n-gram model, e.g. check bits on, another
smoothing, all of the text) the train shards are counted into fresh tables once (`count_tokens`, as a run counts
them), then the validation split is scored by the distribution of the longest context alone for each length k
(`ORDERS`, those up to K): the mixture one-hot at k, so P_mix = P_k, which backs off through every shorter length by the
interpolated smoothing (`frontier.model.ngram`). Nothing is learned, so the curve shows the tables and the smoothing, not
a mixture fitted to them: a proper back-off makes it fall (or stay flat) as k grows, and where it rises the longer
contexts hurt (false hits, thin counts). "Half of the text" is what evaluation reads with two folds (the average of
the folds' distributions, each counted from half of the split); "all" is one table set counted from every window
(`folds=1`, the tables `eval_counts="all"` adds). Bits per byte by `frontier.train.bpb.evaluate_bpb`, both conventions
recorded; the result is a bench record (kind `ngram-orders`) with the tables' memory, counting seconds and
false-hit rate (`false_hit_rate`) of each variant.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import torch

from ..data.dataset import Dataset, profile_dataset
from ..errors import UserError
from ..model.ngram import NGramOnly, false_hit_rate, shard_batches
from ..profiles import get_profile
from ..recipes import resolve
from ..train.bpb import evaluate_bpb

from . import bench_records

# The chapter's grid, each a set of changes to the recipe's n-gram model: the three smoothings without and with
# check bits; all of the text (one table set) at the folds' memory and at twice the buckets (the memory of two folds);
# more continuations per token (a dense bigram table at 1,024 = the cpu vocabulary) and per hashed context.
_AMC = dict(smoothing="absolute-modified", check_bits=31)
DEFAULT_VARIANTS: dict[str, dict] = {
    "witten-bell": dict(smoothing="witten-bell"),
    "absolute": dict(smoothing="absolute"),
    "absolute-modified": dict(smoothing="absolute-modified"),
    "witten-bell+check": dict(smoothing="witten-bell", check_bits=31),
    "absolute+check": dict(smoothing="absolute", check_bits=31),
    "absolute-modified+check": _AMC,
    "absolute-modified+check+all": dict(_AMC, folds=1),
    "absolute-modified+check+all+2x buckets": dict(_AMC, folds=1, buckets_log2="+1"),
    "absolute-modified+check+short 256": dict(_AMC, slots_short=256),
    "absolute-modified+check+short 1024": dict(_AMC, slots_short=1024),
    "absolute-modified+check+short 1024+slots 8": dict(_AMC, slots_short=1024, slots=8),
    "absolute-modified+check+short 1024+slots 16": dict(_AMC, slots_short=1024, slots=16),
}
# A string "+N" for a size means N more than the recipe's at this profile (buckets_log2 "+1": twice the buckets).


def _apply(ng, changes: dict):
    changes = {k: (getattr(ng, k) + int(v[1:]) if isinstance(v, str) and v.startswith("+") else v)
               for k, v in changes.items()}
    return dataclasses.replace(ng, **changes)


ORDERS = (0, 1, 2, 3, 4, 6, 8, 12, 16)  # the lengths scored by default (those up to the model's K)


class LongestContext(torch.nn.Module):
    """Scores by P_k alone (the mixture one-hot at k) of an n-gram model's tables: -log P_k(target), read from the
    distribution itself (not through the bias, whose log floor is -inf where every escape is 0)."""

    def __init__(self, ngram, k: int):
        super().__init__()
        self.ngram, self.k = ngram, k

    def forward(self, idx, targets, reduction="none"):
        with torch.no_grad():
            self.ngram.mix_logits.fill_(-torch.inf)
            self.ngram.mix_logits[self.k] = 0
        p = self.ngram.distribution(idx).gather(-1, targets[..., None])[..., 0]
        nats = -torch.log(p)
        return nats if reduction == "none" else nats.mean()


@torch.no_grad()
def run_order_curve(profile: str = "cpu", recipe: str = "ngram-only", variants: dict[str, dict] | None = None,
                    orders: list[int] | None = None, data: str | Path | Dataset | None = None, log=print,
                    out: str | Path | None = None, command: list[str] | None = None) -> dict:
    """Score every variant's longest-context distribution at each length in `orders` (default `ORDERS`); see the module
    docstring. `variants`: name -> NGramConfig changes (default `DEFAULT_VARIANTS`). `out`: a folder or a new .json
    file for the record (`result["path"]`; None: none written)."""
    variants = DEFAULT_VARIANTS if variants is None else variants
    prof = get_profile(profile)
    base = resolve(recipe, prof)
    if base.model.ngram is None:
        raise UserError(f"recipe {recipe!r} has no n-gram model", "pass a recipe with one, e.g. --recipe ngram-only")
    arguments = {"profile": prof.name, "recipe": recipe, "variants": variants, "orders": orders,
                 "data": None if isinstance(data, Dataset) else data}
    path = bench_records.new_record_path(out, "ngram-orders", [recipe]) if out is not None else None
    dataset = data if isinstance(data, Dataset) else (Dataset(data) if data else profile_dataset(prof, log=log))
    cfg = resolve(recipe, prof, vocab_size=dataset.vocab_size)
    K = cfg.model.ngram.max_order
    orders = [k for k in ORDERS if k <= K] if orders is None else orders
    if any(not 0 <= k <= K for k in orders):
        raise UserError(f"orders {orders} go outside 0..{K}", f"pass context lengths between 0 and {K}")
    seq_len, V = cfg.train.seq_len, cfg.model.vocab_size
    rows = []
    for name, changes in variants.items():
        ng = _apply(cfg.model.ngram, changes)
        model = NGramOnly(ng, V).eval()
        counting_s = model.ngram.count_tokens(dataset.train_tokens(), seq_len)
        t0 = time.perf_counter()
        scores = []
        for k in orders:
            s = evaluate_bpb(LongestContext(model.ngram, k), dataset.val_tokens(), dataset.tokenizer, seq_len,
                             cfg.train.eval_batch_size, "cpu", cfg.train.bpb_convention)
            scores.append({"order": k, "val_bpb": s["val_bpb"], "by_convention": s["by_convention"]})
        fh = false_hit_rate(model.ngram, shard_batches(dataset.train_tokens(), seq_len, ng.folds),
                            dataset.val_tokens(), seq_len)
        best = min(scores, key=lambda r: r["val_bpb"])
        rows.append({"variant": name, "changes": changes, "ngram": dataclasses.asdict(ng), "counting_s": counting_s,
                     "scoring_s": time.perf_counter() - t0, "table_mib": model.ngram.table_mib(),
                     "false_hits": fh, "scores": scores, "best_order": best["order"], "best_val_bpb": best["val_bpb"]})
        log(f"ngram-orders: {name}: best {best['val_bpb']:.4f} at length {best['order']}, at {orders[-1]} "
            f"{scores[-1]['val_bpb']:.4f}; false hits {fh['false_hit_rate']:.4f}; {counting_s:.1f}s counting")
    return bench_records.bench_record(
        "ngram-orders", arguments, command, f"{__name__}.run_order_curve",
        {"profile": prof.name, "recipe": recipe, "vocab_size": V, "seq_len": seq_len, "orders": orders,
         "data": {"folder": str(dataset.folder), "manifest_hash": dataset.manifest_hash}, "rows": rows},
        path, cpu=True)


def format_order_curve(result: dict) -> str:
    orders = result["orders"]
    shown = [k for k in orders if k in (0, 1, 2, 3, 4, 6, 8, 12, 16) or k == orders[-1]]
    lines = [f"n-gram alone, longest context k only (profile {result['profile']}, recipe {result['recipe']}); "
             f"val_bpb at k = {', '.join(map(str, shown))}",
             f"{'variant':<34}" + "".join(f"{k:>8}" for k in shown) + f"{'best':>8}{'false hits':>12}"]
    for r in result["rows"]:
        by = {s["order"]: s["val_bpb"] for s in r["scores"]}
        fh = r["false_hits"].get("false_hit_rate")
        lines.append(f"{r['variant']:<34}" + "".join(f"{by[k]:>8.4f}" for k in shown)
                     + f"{r['best_val_bpb']:>8.4f}" + (f"{fh:>12.4f}" if fh is not None else f"{'-':>12}"))
    return "\n".join(lines)

"""`frontier bench-ngram`: how fast the n-gram tables count, the NumPy counting against the torch one, side by side.

What is timed: counting a profile's train shards into fresh tables of a recipe's n-gram config (the `ngram`
recipe by default; `check_bits` to override its check bits), window by window as the trainer's up-front counting
cuts them (`shard_batches`, `windows_per_call` windows per call, window i in fold i mod folds), on the CPU:

- `numpy`: `NGramMix.count_tokens`, which counts tables on the CPU in NumPy (`_observe_np`), each fold on a thread
  of its own (up to the CPU count);
- `numpy-serial`: the same, one thread (`threads=1`): the folds one after another;
- `torch`: `NGramMix._observe_torch`, the torch counting (one `torch.unique` per table group, slot replacement
  re-ranked every round), which counts tables that live on an accelerator.

The variants alternate, numpy numpy-serial torch numpy ..., `repeats` rounds, each into fresh tables (allocating them is
not timed), so that a machine that speeds up or slows down affects both alike; `ratio` is numpy's median tokens/s
over torch's. After the first round every buffer of the variants' tables is compared (`identical`: the NumPy
counting is a drop-in, not a different counting). The result is a bench record (`frontier.study.bench`, kind
`bench-ngram`), with torch's thread count (the torch variant runs on torch's thread pool, the NumPy one on one
thread).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from pathlib import Path

import torch

from ..data.dataset import Dataset, profile_dataset
from ..errors import UserError
from ..model.ngram import NGramMix, shard_batches
from ..profiles import get_profile
from ..recipes import resolve

from . import bench_records

VARIANTS = ("numpy", "numpy-serial", "torch")


def _count(fn, shards, seq_len: int, folds: int, windows_per_call: int) -> float:
    """Seconds to count `shards` with `fn` (an observe of fresh tables), cutting the batches included."""
    t0 = time.perf_counter()
    for x, y, f in shard_batches(shards, seq_len, folds, windows_per_call):
        fn(x, y, f)
    return time.perf_counter() - t0


def same_tables(a: NGramMix, b: NGramMix) -> bool:
    """Whether every buffer of two n-gram models is equal, bit for bit."""
    ba, bb = dict(a.named_buffers()), dict(b.named_buffers())
    return ba.keys() == bb.keys() and all(torch.equal(ba[k], bb[k]) for k in ba)


def run_ngram_bench(profile: str = "cpu", recipe: str = "ngram", check_bits: int | None = None, repeats: int = 3,
                    windows_per_call: int = 128, data: str | None = None, variants=VARIANTS, log=print,
                    out: str | Path | None = None, command: list[str] | None = None) -> dict:
    """Time the counting of `profile`'s train shards (its embedded corpus, or `data`) by each of `variants`, in
    alternation (see the module's docstring). `out`: as for `frontier.study.bench.run_bench` (a folder or a new .json
    file); `result["path"]` is the record written (None without `out`)."""
    variants = tuple(variants)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        raise UserError(f"unknown counting variant(s) {', '.join(unknown) or '(none)'}",
                        f"choose from {', '.join(VARIANTS)}")
    arguments = {"profile": profile, "recipe": recipe, "check_bits": check_bits, "repeats": repeats,
                 "windows_per_call": windows_per_call, "data": data, "variants": list(variants)}
    path = bench_records.new_record_path(out, "bench-ngram", [recipe] + ([f"bits{check_bits}"] if check_bits else [])) \
        if out is not None else None
    prof = get_profile(profile)
    if resolve(recipe, prof).model.ngram is None:
        raise UserError(f"recipe {recipe!r} has no n-gram model", "pass a recipe with one, e.g. --recipe ngram")
    dataset = Dataset(data) if data else profile_dataset(prof, log=log)
    cfg = resolve(recipe, prof, vocab_size=dataset.vocab_size)  # the model takes the data's vocabulary
    ng = cfg.model.ngram if check_bits is None else dataclasses.replace(cfg.model.ngram, check_bits=check_bits)
    shards, seq_len, V = dataset.train_tokens(), cfg.train.seq_len, cfg.model.vocab_size
    seconds = {v: [] for v in variants}
    cpu_seconds = {v: [] for v in variants}  # the process's CPU time (every thread's): what load does not stretch
    load_before = os.getloadavg()
    identical, tokens, table_mib = None, 0, 0.0
    for r in range(repeats):
        models = {}
        for v in variants:
            m = NGramMix(ng, V)
            cpu0 = time.process_time()
            if v == "torch":
                seconds[v].append(_count(m._observe_torch, shards, seq_len, ng.folds, windows_per_call))
            else:
                threads = 1 if v == "numpy-serial" else None
                seconds[v].append(m.count_tokens(shards, seq_len, windows_per_call, threads=threads))
            cpu_seconds[v].append(time.process_time() - cpu0)
            models[v], tokens, table_mib = m, int(m.counted.sum()), m.table_mib()
        if r == 0 and len(variants) > 1:
            first = models[variants[0]]
            identical = all(same_tables(first, m) for m in models.values())
        log(f"bench-ngram: round {r + 1}/{repeats}: " + ", ".join(f"{v} {seconds[v][-1]:.2f}s" for v in variants))
    rows = []
    for v in variants:
        rates = [tokens / s for s in seconds[v]]
        rows.append({"variant": v, "seconds": seconds[v], "cpu_seconds": cpu_seconds[v], "tokens_per_s": rates,
                     "tokens_per_s_min": min(rates), "tokens_per_s_median": statistics.median(rates),
                     "tokens_per_s_max": max(rates)})
    base = rows[-1]["tokens_per_s_median"]  # the last variant (torch, when both run) is the reference
    for row in rows:
        row["ratio"] = row["tokens_per_s_median"] / base
    return bench_records.bench_record(
        "bench-ngram", arguments, command, f"{__name__}.run_ngram_bench",
        {"profile": prof.name, "recipe": recipe, "ngram": dataclasses.asdict(ng), "vocab_size": V, "seq_len": seq_len,
         "windows_per_call": windows_per_call, "tokens": tokens, "table_mib": table_mib,
         "torch_threads": torch.get_num_threads(), "repeats": repeats, "rows": rows, "identical": identical,
         "load_average_1min": {"before": load_before[0], "after": os.getloadavg()[0]}},
        path, cpu=True)


def format_ngram_bench(result: dict) -> str:
    ng = result["ngram"]
    lines = [f"n-gram counting, profile {result['profile']} ({result['tokens']:,} train tokens, vocabulary "
             f"{result['vocab_size']}, contexts up to {ng['max_order']}, check bits {ng['check_bits']}, "
             f"{result['windows_per_call']} windows of {result['seq_len']} per call, {result['table_mib']:.0f} MiB "
             f"of tables); {result['repeats']} alternating rounds, torch threads {result['torch_threads']}; "
             f"ratio = median / {result['rows'][-1]['variant']}'s median",
             f"{'variant':<10}{'tok/s min':>12}{'median':>12}{'max':>12}{'ratio':>8}"]
    for r in result["rows"]:
        lines.append(f"{r['variant']:<10}{r['tokens_per_s_min']:>12,.0f}{r['tokens_per_s_median']:>12,.0f}"
                     f"{r['tokens_per_s_max']:>12,.0f}{r['ratio']:>7.2f}x")
    if result["identical"] is not None:
        lines.append(f"tables identical, every buffer: {'yes' if result['identical'] else 'NO'}")
    return "\n".join(lines)

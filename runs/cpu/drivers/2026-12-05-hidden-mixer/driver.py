"""The n-gram mix's tables and mixers at the final recipe's steps (cpu profile, docstrings corpus, 389 steps: what
the budget buys `ngram`), paired by seed with the ladder's `ngram` runs at equal steps: the better tables with the
global mixing (`ngram-tables`), mixed from their counts (`ngram-ctx`), and the network's hidden state weighing the
context lengths and the bias scale per position, over the recipe's tables (`ngram-hidden`) and the better ones
(`ngram-tables-hidden`). Screen: seeds 0 and 1; `python driver.py confirm RECIPE`: seeds 2-4; `python driver.py
alone`: the n-gram model alone with the recipe's tables and with the better ones (`ngram-only`, `ngram-only-tables`),
seed 0, at the same steps: whether the better tables are better on this corpus at all; `python driver.py buckets`:
`ngram` and `ngram-tables` with the gpu profile's table sizes (2^20 buckets per context length, 2^28 bits of the
seen set, against the cpu profile's 2^18 and 2^24, sized for the embedded corpus's 650k tokens), seed 0;
`python driver.py buckets-confirm`: `ngram` at those sizes, seeds 1-4; `python driver.py buckets-more`: `ngram` at 2^22
buckets (all 16 context lengths, and lengths up to 8), seed 0; `python driver.py tables-confirm`: `ngram-tables` at
2^20 buckets, seeds 1-4.
Two one-thread workers (`frontier.study.workers`), run from a clean checkout of the commit named in each record.
"""
import sys

from frontier.profiles import get_profile
from frontier.recipes import ngram_label
from frontier.study import experiments as ex
from frontier.study.workers import one_thread_jobs

P = get_profile("cpu")
STEPS = 389  # `ngram`'s steps at the profile's budget (the ladder's runs/cpu/docstrings/ngram/s*)
RECIPES = ["ngram-hidden", "ngram-tables-hidden", "ngram-tables", "ngram-ctx"]


BIG = {"buckets_log2": 20, "seen_log2": 28}


def job(what):
    recipe, seed, *ngram = what
    ngram = ngram[0] if ngram else None
    label = f"{ngram_label(recipe, ngram) if ngram else recipe}-{STEPS}steps"
    rec = ex.run(recipe, P, seed=seed, steps=STEPS, ngram=ngram, label=label, log=print)
    return f"{label} s{seed}: {rec['steps']} steps, val_bpb {rec['val_bpb']:.4f}, test_bpb {rec['test_bpb']:.4f}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["confirm"]:
        jobs = [(sys.argv[2], s) for s in (2, 3, 4)]
    elif sys.argv[1:2] == ["buckets"]:
        jobs = [("ngram-tables", 0, BIG), ("ngram", 0, BIG)]
    elif sys.argv[1:2] == ["buckets-confirm"]:
        jobs = [("ngram", s, BIG) for s in (1, 2, 3, 4)]
    elif sys.argv[1:2] == ["buckets-more"]:
        jobs = [("ngram", 0, {"buckets_log2": 22, "seen_log2": 28}),
                ("ngram", 0, {"buckets_log2": 22, "seen_log2": 28, "max_order": 8})]
    elif sys.argv[1:2] == ["tables-confirm"]:
        jobs = [("ngram-tables", s, BIG) for s in (1, 2, 3, 4)]
    elif sys.argv[1:2] == ["alone"]:
        jobs = [("ngram-only", 0), ("ngram-only-tables", 0)]
    else:
        jobs = [(r, s) for s in (0, 1) for r in RECIPES]
    for line in one_thread_jobs(job, jobs, workers=2):
        print(line, flush=True)

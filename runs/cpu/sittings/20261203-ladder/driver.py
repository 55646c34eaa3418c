# Issue 25/26 sitting (2026-12-03, third session): the ladder at the cpu profile (180 s reference clock), seeds 0-2,
# every rung interleaved seed by seed with the leave-one-out variant of the final recipe that is not a rung
# (ngram without its bigram table), from one pinned commit on an otherwise idle machine (torch's 2 threads).
# `judge` (no training) writes the ladder record and the budget-stage sweep records by reusing these runs.
import sys
from frontier.profiles import get_profile
from frontier.recipes import get_recipe
from frontier.study import ladder
from frontier.study import experiments as ex
from frontier.study.sweep import Variant, run_sweep, format_sweep

P = get_profile("cpu")
SEEDS = (0, 1, 2)
final = Variant("ngram (final)", "ngram")
no_bigram = Variant("- bigram table", get_recipe("ngram").derive(
    "ngram-no-bigram", "the final recipe without its hashed bigram table (leave-one-out)", bigram=False))
no_ngram = Variant("- n-gram mix (= bigram)", "bigram")
average = Variant("+ weight average (= ema)", "ema")
rungs = [r.recipe for r in ladder.LADDER if r.recipe]
if sys.argv[1:] != ["judge"]:
    for seed in SEEDS:
        for recipe in rungs:
            ex.run(recipe, P, seed=seed, root="runs", reuse=False)
        no_bigram.run(P, seed, None, "runs")
results = ladder.run_ladder(P, len(SEEDS), root="runs")
rows = ladder.ladder_rows(results)
print(ladder.format_ladder(rows), flush=True)
print("ladder record:", ladder.write_ladder_record(rows, P.name, "embedded", root="runs",
      extra={"command": ["frontier", "ladder", "--profile", "cpu", "--corpus", "embedded", "--seeds", "3"]}))
rec = run_sweep("ablation-final-budget", final, [no_ngram, no_bigram, average], profile="cpu", seeds=SEEDS,
                steps=None, root="runs")
print(format_sweep(rec), flush=True)

"""The n-gram tables' reach at equal budget: `ngram-long` (contexts up to 32 tokens) and `ngram-wide` (2^22 buckets
a context length), each the final recipe (`ngram-momentum`) with one change the equal-steps screen kept
(runs/cpu/drivers/2026-12-05-ngram-reach/), at the cpu profile's 180 reference s: each buys its steps from its own
committed cost (its step, and its counting of the training split, charged by the token), seeds 0-4, paired by seed
with the final's ladder runs. Kept at equal budget only at p < 0.01 over the five (`frontier.study.compare.keep`).
`python driver.py [RECIPE ...]`: train (default both); `python driver.py judge`: each against the final, by the rule.
Two one-thread workers (`frontier.study.workers`), run from a clean checkout of the commit named in each record.
"""
import sys

from frontier.profiles import get_profile
from frontier.study import experiments as ex
from frontier.study.workers import one_thread_jobs

P = get_profile("cpu")
RECIPES = ["ngram-long", "ngram-wide"]


def job(what):
    recipe, seed = what
    rec = ex.run(recipe, P, seed=seed, log=print)  # under runs/cpu/docstrings/RECIPE/, as a ladder rung's
    n = rec.get("ngram") or {}
    return (f"{recipe} s{seed}: {rec['steps']} steps ({rec['epochs']:.3f} epoch), val_bpb {rec['val_bpb']:.4f}, "
            f"test_bpb {rec['test_bpb']:.4f}; counting {n.get('counting_s', 0):.1f} s wall")


def judge():
    from frontier.records import REPO, load_record
    from frontier.recipes import resolve
    from frontier.study.compare import Group, keep, p_text, paired_test

    def finished(folder, recipe, ngram=None):  # each seed's finished run of the current config (its hash)
        digest = resolve(recipe, P, ngram=ngram).digest()
        recs = [load_record(d) for d in sorted((REPO / "runs" / "cpu" / "docstrings" / folder).glob("s*"))]
        return [r for r in sorted(recs, key=lambda r: r["seed"])
                if r.get("status") == "finished" and r.get("config_hash") == digest]

    def group(name, recs, key):
        return Group(name, tuple(r[key] for r in recs), (), tuple(r["seed"] for r in recs))

    base = finished("ngram-momentum", "ngram-momentum")
    screened = {"ngram-long": {"max_order": 32}, "ngram-wide": {"buckets_log2": 22}}  # the equal-steps screen's
    for recipe in RECIPES:
        var = finished(recipe, recipe)
        ngram = screened[recipe]
        folder = "ngram-momentum" + "".join(f"-{k}{v}" for k, v in ngram.items()) + "-375steps"
        at_steps = finished(folder, "ngram-momentum", ngram)
        if not var or not at_steps:
            print(f"{recipe}: {len(var)} runs at the budget, {len(at_steps)} at 375 steps")
            continue
        for key in ("val_bpb", "test_bpb"):
            d_steps = paired_test(group("final", base, key), group(recipe, at_steps, key))
            d_budget = paired_test(group("final", base, key), group(recipe, var, key))
            print(f"{recipe} over the final, {key}: at 375 steps {-d_steps.delta:+.4f} ({p_text(d_steps.p)}, "
                  f"{d_steps.pairs} seeds); at the budget {-d_budget.delta:+.4f} ({p_text(d_budget.p)}, "
                  f"{d_budget.pairs} seeds), {[r['steps'] for r in var]} vs {[r['steps'] for r in base]} steps, "
                  f"{[round(r['epochs'], 3) for r in var]} epoch")
            if key == "val_bpb":
                print("  the rule:", keep((-d_steps.delta, d_steps.p, d_steps.pairs),
                                          (-d_budget.delta, d_budget.p, d_budget.pairs)))


if __name__ == "__main__":
    if sys.argv[1:2] == ["judge"]:
        judge()
        sys.exit(0)
    recipes = sys.argv[1:] or RECIPES
    for line in one_thread_jobs(job, [(r, s) for s in range(5) for r in recipes], workers=2):
        print(line, flush=True)

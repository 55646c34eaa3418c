"""`ngram-wide` (the final with four times the n-gram buckets, kept by the rule at equal steps and at equal budget)
taken apart at equal steps (cpu profile, docstrings corpus), as the final was
(runs/cpu/drivers/2026-12-05-final-leave-one-out/): it and it without the bigram table, without the n-gram mix, and
without everything (the baseline's 400-step runs, reused), at 400 steps, seeds 0-4, paired by seed. The runs it
needs before `ngram-wide` can become the final; whatever seeds finish are kept, and a later run of this driver
trains only what is missing (finished runs are reused). Jobs go seed by seed to two one-thread workers
(`frontier.study.workers`); `python driver.py judge` trains nothing and writes the sweep record from the runs that
exist (`frontier.study.ablation.run_ablation`, each run replayed).
"""
import sys

from frontier.profiles import get_profile
from frontier.study import ablation
from frontier.study.workers import one_thread_jobs

P = get_profile("cpu")
CORPUS = P.corpus
STEPS = ablation.EQUAL_STEPS[P.name]
SEEDS = range(5)
RECIPE = "ngram-wide"  # kept by the rule (docs/log.md); the final once its rung is in the ladder record
REMOVES = ["bigram", "ngram", "all"]
base, removed = ablation.variants(RECIPE, REMOVES, STEPS)
VARIANTS = [base, *[v for v in removed if not v.same_runs(base)]]


def job(what):
    name, seed = what
    from frontier.data.dataset import profile_dataset

    data = profile_dataset(P, log=lambda *a: None)
    v = next(v for v in VARIANTS if v.name == name)
    rec = v.run(P, seed, STEPS, "runs", data, print, CORPUS)
    return f"{name} s{seed}: {rec['steps']} steps, val_bpb {rec['val_bpb']:.4f}, test_bpb {rec.get('test_bpb')}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["judge"]:
        from frontier.study.sweep import format_sweep

        sweep = ablation.run_ablation(RECIPE, P, seeds=SEEDS, steps=STEPS, removes=REMOVES)
        print(format_sweep(sweep), "\nsweep record:", sweep["path"], flush=True)
        sys.exit(0)
    jobs = [(v.name, s) for s in SEEDS for v in VARIANTS]
    for line in one_thread_jobs(job, jobs, workers=2):
        print(line, flush=True)

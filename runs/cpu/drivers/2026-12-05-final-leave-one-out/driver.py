"""The final recipe taken apart at equal steps (cpu profile, docstrings corpus): `ngram-momentum` and it without each
part at 400 steps (`frontier ablate --recipe final --steps 400`: the bigram table, the n-gram mix, everything), seeds
0-4, paired by seed. The chapter's leave-one-out is of `ema` (the final's parts with the weight average); this one is
of the final itself, whose momentum warm-up stays in every variant (an optimiser setting, measured by its own rung).
Jobs go seed by seed to two one-thread workers (`frontier.study.workers`); `python driver.py judge` trains nothing
and writes the sweep record from the runs that exist (`frontier.study.ablation.run_ablation`, each run replayed).
"""
import sys

from frontier.profiles import get_profile
from frontier.recipes import get_recipe
from frontier.study import ablation
from frontier.study.workers import one_thread_jobs

P = get_profile("cpu")
CORPUS = P.corpus
STEPS = ablation.EQUAL_STEPS[P.name]
SEEDS = range(5)
FINAL = get_recipe("final").name
REMOVES = ["bigram", "ngram", "all"]
base, removed = ablation.variants(FINAL, REMOVES, STEPS)
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

        sweep = ablation.run_ablation(FINAL, P, seeds=SEEDS, steps=STEPS, removes=REMOVES)
        print(format_sweep(sweep), "\nsweep record:", sweep["path"], flush=True)
        sys.exit(0)
    jobs = [(v.name, s) for s in SEEDS for v in VARIANTS]
    for line in one_thread_jobs(job, jobs, workers=2):
        print(line, flush=True)

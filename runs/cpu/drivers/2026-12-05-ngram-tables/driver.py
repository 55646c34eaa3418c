"""The final recipe (`ngram`) and the weight average (`ema`) at the cpu profile's budget (180 reference s, the steps
rule at the committed table's cost) with the profile's n-gram tables sized for the docstrings corpus (2^20 buckets,
2^28 seen bits; docs/log.md), seeds 0-4, seed by seed, on two one-thread workers (`frontier.study.workers`): the
ladder's two n-gram rungs on the new tables, which `frontier ladder` then reuses. Run from a clean checkout of the
commit named in each record. `python driver.py RECIPE [SEED ...]`: one recipe's seeds only (default 0-4).
"""
import sys

from frontier.profiles import get_profile
from frontier.study import experiments as ex
from frontier.study.workers import one_thread_jobs

P = get_profile("cpu")


def job(what):
    recipe, seed = what
    rec = ex.run(recipe, P, seed=seed, log=print)  # under runs/cpu/docstrings/RECIPE/, as the ladder's
    return (f"{recipe} s{seed}: {rec['steps']} steps ({rec['epochs']:.3f} epoch), val_bpb {rec['val_bpb']:.4f}, "
            f"test_bpb {rec['test_bpb']:.4f}")


if __name__ == "__main__":
    recipes = sys.argv[1:2] or ["ngram", "ema"]
    seeds = [int(a) for a in sys.argv[2:]] or range(5)
    for line in one_thread_jobs(job, [(r, s) for s in seeds for r in recipes], workers=2):
        print(line, flush=True)

"""The final recipe's schedules at the steps the budget buys it (cpu profile, docstrings corpus, `ngram` at the
profile's 180 reference s): the warm-down's share, Muon's learning rate and its momentum warm-up, one change at a
time. The optimiser's settings do not change what a step costs (`frontier.train.cost.SPEED_NEUTRAL`), so each
variant buys `ngram`'s own 389 steps and pairs by seed with `ngram`'s ladder runs at equal steps and equal budget at
once. Screen: seeds 0 and 1; `python driver.py confirm KEY VALUE`: seeds 2-4 for a setting that beat `ngram` on both.
Two one-thread workers (`frontier.study.workers`), run from a clean checkout of the commit named in each record.
"""
import sys

from frontier.profiles import get_profile
from frontier.recipes import settings_label
from frontier.study import experiments as ex
from frontier.study.workers import one_thread_jobs

P = get_profile("cpu")
SETTINGS = [{"warmdown_frac": 0.3}, {"warmdown_frac": 0.7}, {"matrix_lr": 0.03}, {"matrix_lr": 0.014},
            {"muon_momentum_warmup_frac": 0.3}]  # the recipe: 0.5, 0.02, and 300 steps (77% of 389)


def job(what):
    optim, seed = what
    rec = ex.run("ngram", P, seed=seed, optim=optim, label=settings_label("ngram", optim=optim), log=print)
    return f"{optim} s{seed}: {rec['steps']} steps, val_bpb {rec['val_bpb']:.4f}, test_bpb {rec['test_bpb']:.4f}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["confirm"]:
        key, value = sys.argv[2], float(sys.argv[3])
        jobs = [({key: value}, s) for s in (2, 3, 4)]
    else:
        jobs = [(o, s) for s in (0, 1) for o in SETTINGS]
    for line in one_thread_jobs(job, jobs, workers=2):
        print(line, flush=True)

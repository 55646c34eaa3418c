"""The weight average's start and half-life at this run length (cpu profile, docstrings corpus, `ema` at 400 steps,
equal steps): each setting evaluated as the average alone (mix 1.0), so that a run's record holds both the average's
score (`val_bpb_ema`) and its own live weights' (`val_bpb_live`), paired exactly (the average never changes the
training). The recipe's own setting (start 0.5, half-life 0.05, mix 0.6) is `runs/cpu/docstrings/ema-400steps/`.
Screen: seeds 0 and 1; `python driver.py confirm START HL`: seeds 2-4 for the setting validation picks.
Two one-thread workers (`frontier.study.workers`), run from a clean checkout of the commit named in each record.
"""
import sys

from frontier.config import EMAConfig
from frontier.profiles import get_profile
from frontier.recipes import ema_label
from frontier.study import experiments as ex
from frontier.study.workers import one_thread_jobs

P = get_profile("cpu")
STEPS = 400
SETTINGS = [(0.5, 0.01), (0.5, 0.02), (0.5, 0.1), (0.5, 0.2), (0.75, 0.02), (0.75, 0.05)]


def job(what):
    (start, hl), seed = what
    e = EMAConfig(start_frac=start, half_life_frac=hl, every=1, mix=1.0)
    rec = ex.run("ema", P, seed=seed, steps=STEPS, ema=e, label=f"{ema_label(e)}-{STEPS}steps", log=print)
    return (f"start {start:g} hl {hl:g} s{seed}: {rec['steps']} steps, live {rec['val_bpb_live']:.4f}, "
            f"ema {rec['val_bpb_ema']:.4f}, ema-live {rec['val_bpb_ema'] - rec['val_bpb_live']:+.4f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["confirm"]:
        jobs = [((float(sys.argv[2]), float(sys.argv[3])), s) for s in (2, 3, 4)]
    else:
        jobs = [(st, s) for s in (0, 1) for st in SETTINGS]
    for line in one_thread_jobs(job, jobs, workers=2):
        print(line, flush=True)

"""The runs the book's cpu chapters train beyond the ladder's, on the n-gram tables sized for the docstrings corpus
(2^20 buckets, 2^28 seen bits): chapter 06's EMA screen (`EMA_SCREEN["cpu"]`, seeds 0-1, 400 steps, scored as the
average alone), its noise pair (`ngram`, 30 steps, twice), and chapter 05's `ngram` at 400 steps (seed 0, kept with
its checkpoint, which the chapter loads). The same calls the chapters make (`Chapter.run`), on two one-thread workers
(`frontier.study.workers`): step-limited runs do not depend on the threads, so the chapters reuse them after a replay.
Run from a clean checkout of the commit named in each record.
"""
from frontier.config import EMAConfig
from frontier.profiles import get_profile
from frontier.recipes import ema_label
from frontier.study import experiments as ex
from frontier.study.workers import one_thread_jobs

P = get_profile("cpu")
STEPS = 400


def job(what):
    kind, arg, seed = what
    if kind == "screen":
        e = EMAConfig(start_frac=arg[0], half_life_frac=arg[1], every=1, mix=1.0)
        rec = ex.run("ema", P, seed=seed, steps=STEPS, ema=e, label=f"{ema_label(e)}-{STEPS}steps", log=print)
    elif kind == "noise":
        rec = ex.run("ngram", P, seed=seed, steps=30, label=f"noise-30steps-{arg}", log=print)
    else:
        rec = ex.run("ngram", P, seed=seed, steps=STEPS, label=f"ngram-{STEPS}steps", need_checkpoint=True, log=print)
    return f"{kind} {arg} s{seed}: {rec['steps']} steps, val_bpb {rec['val_bpb']:.4f}"


if __name__ == "__main__":
    jobs = ([("ngram", STEPS, 0)] + [("noise", k, 0) for k in "ab"]
            + [("screen", x, s) for x in ex.EMA_SCREEN["cpu"] for s in range(2)])
    for line in one_thread_jobs(job, jobs, workers=2):
        print(line, flush=True)

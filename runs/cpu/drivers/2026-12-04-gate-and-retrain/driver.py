"""What the docstrings ladder left unfinished, and two of its runs trained again on another machine of the same kind.

At 400 steps (the leave-one-out of `ema`, `runs/cpu/drivers/2026-12-04-docstrings-ladder/`): gated attention on top
of `ema` for seeds 3 and 4 (its seeds 0-2 exist), and the baseline at 400 steps for seed 4 (its seeds 0-3 exist), so
that both have five seeds. Then two ladder runs trained again, whole, by `frontier retrain` on this machine (the
ladder's runs were trained on another host by one-thread workers): `ngram` seed 0 (compiled) at one thread, as its
record was, and `baseline` seed 1 (eager) at two threads, another thread count than its record's. Two one-thread
workers (`frontier.study.workers`); the retrain at two threads runs alone after them.
"""
import sys

from frontier.profiles import get_profile
from frontier.recipes import get_recipe
from frontier.study.ablation import variants
from frontier.study.sweep import Variant
from frontier.study.workers import one_thread_jobs

P = get_profile("cpu")
STEPS = 400
base, removed = variants(get_recipe("ema"), None, STEPS)
AT_STEPS = {v.name: v for v in [*removed, Variant("+ gated attention (= gate)", "gate")]}
JOBS = [("+ gated attention (= gate)", 3), ("+ gated attention (= gate)", 4), ("- everything (= baseline)", 4),
        ("retrain", "ngram/s0")]
ALONE = ("retrain", "baseline/s1")  # two threads, after the workers


def job(what):
    name, seed = what
    if name == "retrain":
        from frontier.study.retrain import format_retrain, retrain

        return format_retrain(retrain(f"runs/cpu/docstrings/{seed}", f"runs/cpu/docstrings/retrained/{seed}",
                                      log=lambda *a: None))
    from frontier.data.dataset import profile_dataset

    data = profile_dataset(P, log=lambda *a: None)
    rec = AT_STEPS[name].run(P, seed, STEPS, "runs", data, print, P.corpus)
    return f"{name} s{seed}: {rec['steps']} steps, val_bpb {rec['val_bpb']:.4f}, test_bpb {rec.get('test_bpb')}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["alone"]:
        print(job(ALONE), flush=True)
    else:
        for line in one_thread_jobs(job, JOBS, workers=2):
            print(line, flush=True)

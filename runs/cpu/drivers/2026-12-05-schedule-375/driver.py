"""The final recipe's schedules again, on the corpus-sized n-gram tables (cpu profile, docstrings corpus, `ngram` at
the profile's 180 reference s: 375 steps). The screen on the tables before (389 steps,
runs/cpu/drivers/2026-12-05-schedule-screen/) found no setting better than the recipe on both seeds; its nearest
(the warm-down over 70% of the run) is tried again beside points it did not try: the warm-down over 60%, Muon's rate
0.025, Muon's momentum warmed up over the whole run (the recipe: 300 steps, 80% of 375), and the embeddings' Adam
rate 0.3 (the recipe: 0.2). The optimiser's settings do not change what a step costs
(`frontier.train.cost.SPEED_NEUTRAL`), so each variant buys `ngram`'s own 375 steps and pairs by seed with `ngram`'s
ladder runs at equal steps and equal budget at once. Screen: seeds 0 and 1; `python driver.py confirm KEY VALUE [KEY VALUE ...]`:
seeds 2-4 for a setting that beat `ngram` on both; `python driver.py judge`: each setting against `ngram`, paired.
Two one-thread workers (`frontier.study.workers`), run from a clean checkout of the commit named in each record.
"""
import sys

from frontier.profiles import get_profile
from frontier.recipes import settings_label
from frontier.study import experiments as ex
from frontier.study.workers import one_thread_jobs

P = get_profile("cpu")
SETTINGS = [{"warmdown_frac": 0.7}, {"warmdown_frac": 0.6}, {"matrix_lr": 0.025},
            {"muon_momentum_warmup_frac": 1.0}, {"embed_lr": 0.3}]  # the recipe: 0.5, 0.5, 0.02, 300 steps, 0.2


def job(what):
    optim, seed = what
    rec = ex.run("ngram", P, seed=seed, optim=optim, label=settings_label("ngram", optim=optim), log=print)
    return f"{optim} s{seed}: {rec['steps']} steps, val_bpb {rec['val_bpb']:.4f}, test_bpb {rec['test_bpb']:.4f}"


def judge():
    from frontier.records import REPO, load_record
    from frontier.recipes import resolve
    from frontier.study.compare import p_text, paired_gain

    def finished(label, optim=None):  # each seed's finished run of the current config (its hash)
        digest = resolve("ngram", P, optim=optim).digest()
        recs = [load_record(d) for d in sorted((REPO / "runs" / "cpu" / "docstrings" / label).glob("s*"))]
        return {r["seed"]: r for r in recs if r.get("status") == "finished" and r.get("config_hash") == digest}

    base = finished("ngram")
    for optim in SETTINGS:
        var = finished(settings_label("ngram", optim=optim), optim)
        seeds = sorted(set(base) & set(var) & set(range(5)))
        if not seeds:
            continue
        b, v = [base[s] for s in seeds], [var[s] for s in seeds]
        gain, p, n = paired_gain(b, v, "val_bpb")
        print(f"{optim} minus ngram, val_bpb, seeds {seeds}: "
              + " / ".join(f"{y['val_bpb'] - x['val_bpb']:+.4f}" for x, y in zip(b, v))
              + (f"; mean gain {gain:+.4f} ({p_text(p)})" if n > 1 else "") + f"; {v[0]['steps']} steps")


if __name__ == "__main__":
    if sys.argv[1:2] == ["judge"]:
        judge()
        sys.exit(0)
    if sys.argv[1:2] == ["confirm"]:
        pairs = list(zip(sys.argv[2::2], map(float, sys.argv[3::2])))  # KEY VALUE [KEY VALUE ...]
        jobs = [({key: value}, s) for s in (2, 3, 4) for key, value in pairs]
    else:
        jobs = [(o, s) for s in (0, 1) for o in SETTINGS]
    for line in one_thread_jobs(job, jobs, workers=2):
        print(line, flush=True)

"""The final recipe (`ngram-momentum`) with evaluation reading n-gram tables counted from the whole training split
(`eval_counts="all"`) instead of the average of the two folds' tables, each counted from half of it (cpu profile,
docstrings corpus). Training is unchanged (each batch still reads the other fold's tables); only what the scored
mixture reads changes, and the counting of one more table set is charged. Judged at equal steps first: 375 steps,
the final's own at the budget, paired by seed with the final's ladder runs (`runs/cpu/docstrings/ngram-momentum/`).
Plan, stated before any run: seeds 0 and 1; seeds 2-4 only if better on both; kept at equal steps only at p < 0.01
over the five; then its cost is benched and it is judged at equal budget.
`python driver.py [SEED ...]`: train those seeds (default 0 1); `python driver.py judge`: paired against the final.
Two one-thread workers (`frontier.study.workers`), run from a clean checkout of the commit named in each record.
"""
import sys

from frontier.profiles import get_profile
from frontier.recipes import ngram_label
from frontier.study import experiments as ex
from frontier.study.workers import one_thread_jobs

P = get_profile("cpu")
RECIPE, STEPS, NGRAM = "ngram-momentum", 375, {"eval_counts": "all"}
LABEL = ngram_label(RECIPE, NGRAM) + f"-{STEPS}steps"


def job(seed):
    rec = ex.run(RECIPE, P, seed=seed, steps=STEPS, ngram=NGRAM, label=LABEL, log=print)
    return (f"{LABEL} s{seed}: {rec['steps']} steps ({rec['epochs']:.3f} epoch), val_bpb {rec['val_bpb']:.4f}, "
            f"test_bpb {rec['test_bpb']:.4f}")


def judge():
    from frontier.records import REPO, load_record
    from frontier.recipes import resolve
    from frontier.study.compare import p_text, paired_gain

    def finished(label, ngram=None):  # each seed's finished run of the current config (its hash)
        digest = resolve(RECIPE, P, ngram=ngram).digest()
        recs = [load_record(d) for d in sorted((REPO / "runs" / "cpu" / "docstrings" / label).glob("s*"))]
        return {r["seed"]: r for r in recs if r.get("status") == "finished" and r.get("config_hash") == digest}

    base, var = finished(RECIPE), finished(LABEL, NGRAM)
    seeds = sorted(set(base) & set(var))
    b, v = [base[s] for s in seeds], [var[s] for s in seeds]
    for key in ("val_bpb", "test_bpb"):
        line = " / ".join(f"{y[key] - x[key]:+.4f}" for x, y in zip(b, v))
        gain, p, n = paired_gain(b, v, key)
        print(f"eval_counts all minus the final, {key}, seeds {seeds}: {line}"
              + (f"; mean gain {gain:+.4f} ({p_text(p)})" if n > 1 else "")
              + f"; steps {[x['steps'] for x in b]} / {[y['steps'] for y in v]}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["judge"]:
        judge()
        sys.exit(0)
    seeds = [int(a) for a in sys.argv[1:]] or [0, 1]
    for line in one_thread_jobs(job, seeds, workers=2):
        print(line, flush=True)

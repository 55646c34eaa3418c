"""The final's n-gram tables wider still: 2^23 buckets a context length against the final's 2^22 (cpu profile,
docstrings corpus).

The final (`ngram-wide`) counts contexts of 1 to 16 tokens into 2^22 buckets a context length; 49% of the
validation contexts its tables never counted still read another context's counts (92.5% at 2^20, where four times
the room gained +0.0065 at equal steps). Screened here: twice the room again (`buckets_log2` 23, about 10.6 GB of
tables, so one worker at a time). Judged at equal steps first: 385 steps, the final's own at the budget, paired by
seed with the final's ladder runs (`runs/cpu/docstrings/ngram-wide/`). Plan, stated before any run: seeds 0 and 1;
better on both goes to seeds 2-4 (`python driver.py confirm`), is kept at equal steps only at p < 0.01 over the five,
and then needs its cost benched and its budget runs before it can enter a recipe.
`python driver.py`: the screen; `python driver.py judge`: against the final, paired by seed.
One one-thread worker (`frontier.study.workers`), run from a clean checkout of the commit named in each record.
"""
import sys

from frontier.profiles import get_profile
from frontier.recipes import ngram_label
from frontier.study import experiments as ex
from frontier.study.workers import one_thread_jobs

P = get_profile("cpu")
RECIPE, STEPS = "ngram-wide", 385
NGRAM = {"buckets_log2": 23}  # the final's: the profile's 20 + 2


def label():
    return ngram_label(RECIPE, NGRAM) + f"-{STEPS}steps"


def job(seed):
    rec = ex.run(RECIPE, P, seed=seed, steps=STEPS, ngram=NGRAM, label=label(), log=print)
    n = rec.get("ngram") or {}
    hits = (n.get("false_hits") or {}).get("false_hit_rate")
    return (f"{label()} s{seed}: {rec['steps']} steps ({rec['epochs']:.3f} epoch), val_bpb {rec['val_bpb']:.4f}, "
            f"test_bpb {rec['test_bpb']:.4f}; tables {n.get('table_mib', 0):,.0f} MiB, counting "
            f"{n.get('counting_s', 0):.1f} s, false hits {hits}, step median {rec.get('step_s_median') or 0:.3f} s")


def judge():
    from frontier.records import REPO, load_record
    from frontier.recipes import resolve
    from frontier.study.compare import p_text, paired_gain

    def finished(folder, ngram=None):  # each seed's finished run of the current config (its hash)
        digest = resolve(RECIPE, P, ngram=ngram).digest()
        recs = [load_record(d) for d in sorted((REPO / "runs" / "cpu" / "docstrings" / folder).glob("s*"))]
        return {r["seed"]: r for r in recs if r.get("status") == "finished" and r.get("config_hash") == digest}

    base, var = finished(RECIPE), finished(label(), NGRAM)
    seeds = sorted(set(base) & set(var))
    b, v = [base[s] for s in seeds], [var[s] for s in seeds]
    for key in ("val_bpb", "test_bpb"):
        gain, p, n = paired_gain(b, v, key)
        print(f"{NGRAM} minus the final, {key}, seeds {seeds}: "
              + " / ".join(f"{y[key] - x[key]:+.4f}" for x, y in zip(b, v))
              + (f"; mean gain {gain:+.4f} ({p_text(p)})" if n > 1 else "")
              + f"; steps {sorted({x['steps'] for x in b + v})}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["judge"]:
        judge()
        sys.exit(0)
    seeds = (2, 3, 4) if sys.argv[1:2] == ["confirm"] else (0, 1)
    for line in one_thread_jobs(job, list(seeds), workers=1):
        print(line, flush=True)

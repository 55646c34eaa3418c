"""How far the final recipe's n-gram tables reach: longer contexts and more buckets (cpu profile, docstrings corpus).

The final (`ngram-momentum`) counts contexts of 1 to 16 tokens into 2^20 hashed buckets per context length, and
92.5% of the validation contexts its tables never counted read another context's counts (its runs'
`ngram.false_hits`). On the templated docstrings text the long contexts carry the mix (tables cut to 8 tokens were
worse: docs/log.md, the corpus-sized tables). Screened here, one change at a time: contexts up to 24 and up to 32
tokens (more table sets, more counting), and 2^22 buckets a context length (four times the room).
Judged at equal steps first: 375 steps, the final's own at the budget, paired by seed with the final's ladder runs
(`runs/cpu/docstrings/ngram-momentum/`). Plan, stated before any run: seeds 0 and 1; a setting better on both goes
to seeds 2-4 (`python driver.py confirm N`, N its index in SETTINGS), is kept at equal steps only at p < 0.01 over
the five, and then needs its cost benched and its budget runs before it can enter a recipe.
`python driver.py`: the screen; `python driver.py judge`: each setting against the final, paired by seed.
Two one-thread workers (`frontier.study.workers`), run from a clean checkout of the commit named in each record.
"""
import sys

from frontier.profiles import get_profile
from frontier.recipes import ngram_label
from frontier.study import experiments as ex
from frontier.study.workers import one_thread_jobs

P = get_profile("cpu")
RECIPE, STEPS = "ngram-momentum", 375
SETTINGS = [{"max_order": 24}, {"max_order": 32}, {"buckets_log2": 22}]  # the profile's: 16 and 2^20


def label(ngram):
    return ngram_label(RECIPE, ngram) + f"-{STEPS}steps"


def job(what):
    ngram, seed = what
    rec = ex.run(RECIPE, P, seed=seed, steps=STEPS, ngram=ngram, label=label(ngram), log=print)
    n = rec.get("ngram") or {}
    return (f"{label(ngram)} s{seed}: {rec['steps']} steps ({rec['epochs']:.3f} epoch), val_bpb {rec['val_bpb']:.4f}, "
            f"test_bpb {rec['test_bpb']:.4f}; tables {n.get('table_mib', 0):,.0f} MiB, counting "
            f"{n.get('counting_s', 0):.1f} s, step median {rec.get('step_s_median') or 0:.3f} s")


def judge():
    from frontier.records import REPO, load_record
    from frontier.recipes import resolve
    from frontier.study.compare import p_text, paired_gain

    def finished(folder, ngram=None):  # each seed's finished run of the current config (its hash)
        digest = resolve(RECIPE, P, ngram=ngram).digest()
        recs = [load_record(d) for d in sorted((REPO / "runs" / "cpu" / "docstrings" / folder).glob("s*"))]
        return {r["seed"]: r for r in recs if r.get("status") == "finished" and r.get("config_hash") == digest}

    base = finished(RECIPE)
    for ngram in SETTINGS:
        var = finished(label(ngram), ngram)
        seeds = sorted(set(base) & set(var))
        if not seeds:
            continue
        b, v = [base[s] for s in seeds], [var[s] for s in seeds]
        for key in ("val_bpb", "test_bpb"):
            gain, p, n = paired_gain(b, v, key)
            print(f"{ngram} minus the final, {key}, seeds {seeds}: "
                  + " / ".join(f"{y[key] - x[key]:+.4f}" for x, y in zip(b, v))
                  + (f"; mean gain {gain:+.4f} ({p_text(p)})" if n > 1 else "")
                  + f"; steps {sorted({x['steps'] for x in b + v})}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["judge"]:
        judge()
        sys.exit(0)
    if sys.argv[1:2] == ["confirm"]:
        jobs = [(SETTINGS[int(i)], s) for s in (2, 3, 4) for i in sys.argv[2:]]
    else:
        jobs = [(o, s) for o in SETTINGS for s in (0, 1)]
    for line in one_thread_jobs(job, jobs, workers=2):
        print(line, flush=True)

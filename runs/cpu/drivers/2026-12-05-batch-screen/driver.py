"""The final recipe's batch size at the budget (cpu profile, docstrings corpus, `ngram` at the profile's 180 reference
s): half and double the profile's 16 sequences a step (`frontier.study.experiments.BATCH_SWEEPS`). A step's cost moves
with its tokens, so each size buys its own steps from the committed cost table (`frontier bench --costs --batches`)
and is judged at equal budget, paired by seed with `ngram`'s ladder runs. Screen: seeds 0 and 1;
`python driver.py confirm BATCH`: seeds 2-4 for a size that beat `ngram` on both (`screen BATCH`: seeds 0 and 1 of
another size, after its cost is in the table). `replicate BATCH`: a size whose five seeds missed p < 0.01 trained on
fresh seeds 5-9 beside `ngram`'s own, the replication judged on those seeds alone (`judge-replication BATCH`), so
that the first look is not re-tested with more seeds added. Two one-thread workers (`frontier.study.workers`), run
from a clean checkout of the commit named in each record.
"""
import sys

from frontier.profiles import get_profile
from frontier.study import experiments as ex
from frontier.study.workers import one_thread_jobs

P = get_profile("cpu")


def judge(batch: int, seeds=range(5)) -> None:
    """Each batch size's runs against `ngram`'s ladder runs, paired by seed at equal budget, by the rule
    (`frontier.study.compare.keep`, a change that trades steps), on validation and (reported only) test."""
    from frontier.records import REPO, load_record
    from frontier.recipes import resolve
    from frontier.study.compare import keep, p_text, paired_gain

    def finished(label, sizes=None):  # each seed's finished run of the current config (its hash), by folder
        digest = resolve("ngram", P, sizes=sizes).digest()
        recs = [load_record(d) for d in sorted((REPO / "runs" / "cpu" / "docstrings" / label).glob("s*"))]
        return {r["seed"]: r for r in recs if r.get("status") == "finished" and r.get("config_hash") == digest}

    base, var = finished("ngram"), finished(f"ngram-batch-{batch}", dict(batch_size=batch))
    seeds = sorted(set(base) & set(var) & set(seeds))
    b, v = [base[s] for s in seeds], [var[s] for s in seeds]
    for score in ("val_bpb", "test_bpb"):
        gain, p, n = paired_gain(b, v, score)
        print(f"batch {batch} against 16, {score}, seeds {seeds}: gain {gain:+.4f} ({p_text(p)}); "
              f"per seed {', '.join(f'{x[score] - y[score]:+.4f}' for x, y in zip(b, v))}; "
              f"steps {v[0]['steps']} against {b[0]['steps']}, epochs {v[0]['epochs']:.3f} against {b[0]['epochs']:.3f}")
    print("rule:", keep(None, paired_gain(b, v, "val_bpb"), trades_steps=True)[1])


def job(what):
    sizes, seed = what
    label = f"ngram-{ex.size_label(sizes)}" if sizes else "ngram"  # None: `ngram` itself, at the profile's batch
    rec = ex.run("ngram", P, seed=seed, sizes=sizes, label=label, log=print)
    return (f"{ex.size_label(sizes) if sizes else 'batch-16 (ngram)'} s{seed}: {rec['steps']} steps ({rec.get('epochs', float('nan')):.3f} epoch), "
            f"val_bpb {rec['val_bpb']:.4f}, test_bpb {rec['test_bpb']:.4f}")


if __name__ == "__main__":
    # no arguments: BATCH_SWEEPS' sizes on seeds 0 and 1; else pairs `screen BATCH` (seeds 0, 1) and `confirm BATCH`
    # (seeds 2-4), e.g. `python driver.py confirm 32 screen 64`
    if sys.argv[1:2] in (["judge"], ["judge-replication"]):  # seeds 0-4, or the replication's 5-9 alone
        for batch in sys.argv[2:]:
            judge(int(batch), range(5) if sys.argv[1] == "judge" else range(5, 10))
        sys.exit(0)
    args, jobs = sys.argv[1:], []
    for what, batch in zip(args[::2], args[1::2]):
        if what == "replicate":  # fresh seeds 5-9 of the size and of `ngram`, interleaved, judged on their own
            jobs += [j for s in range(5, 10) for j in ((None, s), (dict(batch_size=int(batch)), s))]
            continue
        jobs += [(dict(batch_size=int(batch)), s) for s in {"screen": (0, 1), "confirm": (2, 3, 4)}[what]]
    if not args:
        jobs = [(b, s) for s in (0, 1) for b in ex.BATCH_SWEEPS["cpu"]]
    for line in one_thread_jobs(job, jobs, workers=2):
        print(line, flush=True)

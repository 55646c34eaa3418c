"""The final recipe's batch size at the budget (cpu profile, docstrings corpus, `ngram` at the profile's 180 reference
s): half and double the profile's 16 sequences a step (`frontier.study.experiments.BATCH_SWEEPS`). A step's cost moves
with its tokens, so each size buys its own steps from the committed cost table (`frontier bench --costs --batches`)
and is judged at equal budget, paired by seed with `ngram`'s ladder runs. Screen: seeds 0 and 1;
`python driver.py confirm BATCH`: seeds 2-4 for a size that beat `ngram` on both (`screen BATCH`: seeds 0 and 1 of
another size, after its cost is in the table). Two one-thread workers
(`frontier.study.workers`), run from a clean checkout of the commit named in each record.
"""
import sys

from frontier.profiles import get_profile
from frontier.study import experiments as ex
from frontier.study.workers import one_thread_jobs

P = get_profile("cpu")


def job(what):
    sizes, seed = what
    rec = ex.run("ngram", P, seed=seed, sizes=sizes, label=f"ngram-{ex.size_label(sizes)}", log=print)
    return (f"{ex.size_label(sizes)} s{seed}: {rec['steps']} steps ({rec.get('epochs', float('nan')):.3f} epoch), "
            f"val_bpb {rec['val_bpb']:.4f}, test_bpb {rec['test_bpb']:.4f}")


if __name__ == "__main__":
    # no arguments: BATCH_SWEEPS' sizes on seeds 0 and 1; else pairs `screen BATCH` (seeds 0, 1) and `confirm BATCH`
    # (seeds 2-4), e.g. `python driver.py confirm 32 screen 64`
    args, jobs = sys.argv[1:], []
    for what, batch in zip(args[::2], args[1::2]):
        jobs += [(dict(batch_size=int(batch)), s) for s in {"screen": (0, 1), "confirm": (2, 3, 4)}[what]]
    if not args:
        jobs = [(b, s) for s in (0, 1) for b in ex.BATCH_SWEEPS["cpu"]]
    for line in one_thread_jobs(job, jobs, workers=2):
        print(line, flush=True)

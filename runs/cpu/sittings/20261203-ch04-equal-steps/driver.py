# Chapter 04's equal-steps comparison of the sparse (lazy) and dense updates of the bigram table (2026-12-03, fifth
# session, code of the chapter's execution): `bigram` and `bigram-dense` for 440 steps (the median step count of the
# `bigram` rung's budgeted runs in the ladder sitting: 403, 440, 458), seeds 0-2. Step-limited runs are nearly
# deterministic, so two one-thread workers share the machine before the chapter is executed alone; the chapter's
# `ex.seeds(..., steps=440)` then reuses these runs.
import multiprocessing as mp
import time

STEPS = 440


def job(args):
    import torch
    torch.set_num_threads(1)
    from frontier.profiles import get_profile
    from frontier.study import experiments as ex
    recipe, seed = args
    t = time.time()
    rec = ex.run(recipe, get_profile("cpu"), seed=seed, root="runs", steps=STEPS, label=f"{recipe}-{STEPS}steps",
                 log=lambda *a: None)
    return f"{recipe}-{STEPS}steps s{seed}: val_bpb {rec['val_bpb']:.4f} ({rec['steps']} steps) {time.time() - t:.0f}s"


if __name__ == "__main__":
    jobs = [(r, s) for s in (0, 1, 2) for r in ("bigram", "bigram-dense")]
    with mp.get_context("spawn").Pool(2, maxtasksperchild=1) as pool:
        for line in pool.imap_unordered(job, jobs):
            print(time.strftime("%H:%M:%S"), line, flush=True)

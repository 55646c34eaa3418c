# Issue 25 sitting (2026-12-03, fourth session): the final recipe's leave-one-out ablation at equal steps (420, about
# what 180 reference seconds buy `ema`: 390-445 steps), seeds 0-2, and the final recipe against the baseline on the
# stdlib-source corpus at the same 420 steps. Step-limited runs are nearly deterministic, so two one-thread workers
# share the machine; `frontier ablate` and the sweep records reuse these runs.
import multiprocessing as mp
import sys
import time

STEPS = 420
SEEDS = (0, 1, 2)


def job(args):
    import torch
    torch.set_num_threads(1)
    from frontier.profiles import get_profile
    from frontier.recipes import get_recipe
    from frontier.study import experiments as ex
    corpus, recipe, seed = args
    p = get_profile("cpu")
    if recipe == "ema-no-ngram":
        r = get_recipe("ema").derive("ema-no-ngram", "the final recipe without its n-gram mix (leave-one-out)", ngram=False)
    elif recipe == "ema-no-bigram":
        r = get_recipe("ema").derive("ema-no-bigram", "the final recipe without its hashed bigram table (leave-one-out)",
                                     bigram=False)
    else:
        r = recipe
    name = recipe
    data = None if corpus == "embedded" else ex.profile_dataset(p, corpus_name=corpus, log=lambda *a: None)
    label = f"{name}-{STEPS}steps" if corpus == "embedded" else f"{corpus}/{name}-{STEPS}steps"
    t = time.time()
    rec = ex.run(r, p, seed=seed, root="runs", steps=STEPS, label=label, data=data, log=lambda *a: None)
    return f"{corpus} {label} s{seed}: val_bpb {rec['val_bpb']:.4f} ({rec['steps']} steps, live {rec.get('val_bpb_live')}) {time.time() - t:.0f}s"


if __name__ == "__main__":
    jobs = [("embedded", r, s) for s in SEEDS for r in ("ema", "ema-no-ngram", "ema-no-bigram")]
    jobs += [("stdlib-source", r, s) for s in SEEDS for r in ("baseline", "ema")]
    with mp.get_context("spawn").Pool(2, maxtasksperchild=1) as pool:
        for line in pool.imap_unordered(job, jobs):
            print(time.strftime("%H:%M:%S"), line, flush=True)

# Issue 25 (2026-12-03, fifth session): why the n-gram model's better tables win alone and lose inside the mix at
# equal budget (chapter 06). At equal steps the question loses the steps they cost: `ngram-tables` (check bits,
# modified absolute discounting, more continuations) and `ngram-ctx` (the same tables mixed per context) for 420
# steps (the ablation's equal-steps count), seeds 0-2, against `ngram` at the same steps: the final recipe's
# 420-step runs read at their live weights (`ema` trains exactly as `ngram` does; its average changes only what is
# scored). Two one-thread workers train the variants (step-limited runs are nearly deterministic), then one
# process writes the sweep record `tables-420` (`frontier.study.sweep.run_sweep`, reusing every run).
import multiprocessing as mp
import sys
import time

STEPS = 420
SEEDS = (0, 1, 2)
VARIANTS = ("ngram-tables", "ngram-ctx")


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


def sweep():
    from frontier.study.sweep import Variant, format_sweep, run_sweep
    base = Variant("ngram (ema's live weights)", "ema", score="val_bpb_live")
    variants = [Variant("better tables", "ngram-tables"), Variant("better tables, mixed per context", "ngram-ctx")]
    rec = run_sweep(f"tables-{STEPS}", base, variants, profile="cpu", seeds=SEEDS, steps=STEPS, root="runs",
                    log=lambda *a: None)
    print(format_sweep(rec))
    print(rec["path"])


if __name__ == "__main__":
    jobs = [(r, s) for s in SEEDS for r in VARIANTS]
    with mp.get_context("spawn").Pool(2, maxtasksperchild=1) as pool:
        for line in pool.imap_unordered(job, jobs):
            print(time.strftime("%H:%M:%S"), line, flush=True)
    sweep()

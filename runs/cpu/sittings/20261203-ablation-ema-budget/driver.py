# Issue 25 (2026-12-03, fifth session): the budget stage of the final recipe's leave-one-out with `ema` (the final
# recipe) as its base: `ema`, `ema` without its n-gram mix and `ema` without its bigram table, 180 reference
# seconds each, seeds 0-2 interleaved (seed by seed, the three recipes in turn), one process on the idle machine
# (Intel Xeon, 2 cores). `ema` is trained again here (not reused from the AMD EPYC sitting, whose machine gave
# fewer steps for the same reference seconds), so the three groups come from one sitting. Then the sweep record
# `ablation-ema-budget` (`frontier.study.ablation.run_ablation`, reusing these runs: the newest of each folder).
import time

from frontier.study import experiments as ex
from frontier.study.ablation import run_ablation, variants
from frontier.study.sweep import format_sweep

REMOVES = ["bigram", "ngram"]

if __name__ == "__main__":
    base, rows = variants("ema", REMOVES, steps=None)
    for seed in (0, 1, 2):
        for v in [base, *rows]:
            t = time.time()
            rec = ex.run(v.recipe, "cpu", seed=seed, root="runs", label=v.folder(None), reuse=v is not base,
                         log=lambda *a: None)
            print(time.strftime("%H:%M:%S"), f"{v.name} s{seed}: val_bpb {rec['val_bpb']:.4f} ({rec['steps']} steps) "
                  f"{time.time() - t:.0f}s", flush=True)
    rec = run_ablation("ema", "cpu", removes=REMOVES, log=lambda *a: None)
    print(format_sweep(rec))
    print(rec["path"])

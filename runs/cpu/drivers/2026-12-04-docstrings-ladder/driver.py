"""The ladder on the docstrings corpus under the steps rule (cpu profile, 180 reference s), seeds 0-4, and the
equal-steps evidence beside it: the final recipe's leave-one-out at 400 steps (`frontier ablate --recipe ema
--steps 400`) and gated attention on top of it at 400 steps. Jobs go seed by seed (every rung and variant of seed 0,
then seed 1, ...) to two one-thread workers (`frontier.study.workers`): under the steps rule a run's steps do not
depend on the threads or the load, so the runs are those `frontier ladder --seeds 5` and `frontier ablate` then
reuse (after replaying each). `python driver.py judge [N]` trains nothing and writes the records from the runs of
seeds 0..N-1 (default all five); `python driver.py figure RECORD` draws the README's figure from a ladder record.
"""
import sys

from frontier.profiles import get_profile
from frontier.study import experiments as ex
from frontier.study import ladder
from frontier.study.ablation import variants
from frontier.recipes import get_recipe
from frontier.study.sweep import Variant
from frontier.study.workers import one_thread_jobs

P = get_profile("cpu")
CORPUS = P.corpus
SEEDS = range(5)
STEPS = 400  # about the steps the budget buys the final recipe and the baseline (ema ~400, baseline 412)
base, removed = variants(get_recipe("ema"), None, STEPS)
AT_STEPS = [base, *[v for v in removed if not v.same_runs(base)], Variant("+ gated attention (= gate)", "gate")]


def job(what):
    kind, name, seed = what
    from frontier.data.dataset import profile_dataset

    data = profile_dataset(P, log=lambda *a: None)
    if kind == "budget":
        rec = ex.run(name, P, seed=seed, data=data, label=ladder.corpus_label(name, CORPUS))
    else:
        v = next(v for v in AT_STEPS if v.name == name)
        rec = v.run(P, seed, STEPS, "runs", data, print, CORPUS)
    return f"{kind} {name} s{seed}: {rec['steps']} steps, val_bpb {rec['val_bpb']:.4f}, test_bpb {rec.get('test_bpb')}"


def judge(seeds):
    """The records from the runs that exist (reused after a replay; nothing trains): the leave-one-out sweep at
    STEPS, the gate at STEPS, and the ladder with that equal-steps evidence."""
    from frontier.study.ablation import run_ablation
    from frontier.study.sweep import format_sweep, run_sweep

    from frontier.study.ablation import ALL, parts

    # each part alone; `- everything` (the baseline at STEPS) was cut for time with the gate
    abl = run_ablation("ema", P, seeds=seeds, steps=STEPS, removes=[x for x in parts(get_recipe("ema")) if x != ALL])
    print(format_sweep(abl), "\nsweep record:", abl["path"], flush=True)
    # The gate at STEPS (on 4 December cut for time after its seed 0; all five seeds on the corpus-sized n-gram
    # tables, 5 December): gated attention added to the final's parts, paired with `ema` at STEPS by seed.
    gate = run_sweep(f"gate-{STEPS}-{CORPUS}", base, [v for v in AT_STEPS if v.recipe == "gate"], profile=P,
                     seeds=tuple(seeds), steps=STEPS, corpus=CORPUS)
    print(format_sweep(gate), "\nsweep record:", gate["path"], flush=True)
    evidence = {"bigram": ladder.EqualSteps(abl, "- bigram table", removes=True),
                "ngram": ladder.EqualSteps(abl, "- n-gram mix", removes=True),
                "ema": ladder.EqualSteps(abl, "- weight average (its live weights)", removes=True)}
    rows = ladder.ladder_rows(ladder.run_ladder(P, len(seeds)), equal_steps=evidence)
    print(ladder.format_ladder(rows), flush=True)
    eq = [x for rung, name in (("bigram", "- bigram table"), ("ngram", "- n-gram mix"),
                               ("ema", "- weight average (its live weights)"))
          for x in ("--equal-steps", f"{rung}=ablation-ema-{STEPS}-{CORPUS}:{name}:removes")]
    path = ladder.write_ladder_record(rows, P.name, CORPUS, extra={"command": [
        "frontier", "ladder", "--profile", P.name, "--seeds", str(len(seeds)), *eq]})
    print("ladder record:", path)
    figure(rows, len(seeds))


def figure(rows, n):
    """The README's ladder figure from the rows of a ladder record."""
    from frontier.figures import save_figure

    fig = ladder.ladder_figure(rows, title=ladder.ladder_title(P, CORPUS, n))
    save_figure(fig, f"figures/ladder_{P.name}_{CORPUS}.png")
    print(f"figure: figures/ladder_{P.name}_{CORPUS}.png")


def jobs(priority: bool) -> list[tuple]:
    """Every rung at the budget and every variant at STEPS, seed by seed. `priority`: what the verdicts need first
    (the rungs, and the leave-one-out of each part at STEPS), seed by seed; then the rest (the baseline and the gate
    at STEPS). Finished runs are reused, so a second start trains only what is missing."""
    budget = [("budget", r.recipe) for r in ladder.LADDER if r.recipe and r.recipe != "final"]
    steps = [("steps", v.name) for v in AT_STEPS]
    if not priority:
        return [(k, n, s) for s in SEEDS for k, n in budget + steps]
    first = [("steps", v.name) for v in AT_STEPS if v.recipe not in ("baseline", "gate")]
    rest = [x for x in steps if x not in first]
    return [(k, n, s) for s in SEEDS for k, n in budget + first] + [(k, n, s) for s in SEEDS for k, n in rest]


if __name__ == "__main__":
    if sys.argv[1:2] == ["figure"]:  # `python driver.py figure RECORD`: the figure again from a ladder record
        import json

        rec = json.loads(open(sys.argv[2]).read())
        figure(rec["rows"], max(r.get("n", 0) for r in rec["rows"]))
    elif sys.argv[1:2] == ["judge"]:
        judge(range(int(sys.argv[2]) if len(sys.argv) > 2 else len(SEEDS)))
    else:  # `python driver.py` (the first start), `python driver.py priority` (the second, 05:12 that day)
        for line in one_thread_jobs(job, jobs(sys.argv[1:2] == ["priority"]), workers=2):
            print(line, flush=True)

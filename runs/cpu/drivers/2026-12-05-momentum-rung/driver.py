"""The momentum warm-up as a rung of the ladder (cpu profile, docstrings corpus, 180 reference s): `ngram-momentum`,
the n-gram recipe with Muon's momentum warmed up over the whole run, kept by the schedule screen
(runs/cpu/drivers/2026-12-05-schedule-375/: +0.0019 val, p < 0.001, 5 seeds). Its seeds 0-4 at the budget, on two
one-thread workers (`frontier.study.workers`), from a clean checkout of the commit named in each record; under the
steps rule a speed-neutral change buys the n-gram mix's own 375 steps, so the rung pairs with `ngram`'s ladder runs
at equal steps and equal budget at once. `python driver.py judge`: trains nothing; the rung against `ngram`, paired
by seed (validation decides, test reported), and each run beside the screen's run of the same settings and seed
(`ngram` with the optimiser change, recorded under that label): the same config but for the recipe's name, so the
same numbers where training is deterministic.
"""
import sys

from frontier.profiles import get_profile
from frontier.study import experiments as ex
from frontier.study.workers import one_thread_jobs

P = get_profile("cpu")
CORPUS = P.corpus
RECIPE = "ngram-momentum"
SEEDS = range(5)
SCREEN = "ngram-optim.muon_momentum_warmup_frac1.0"  # the screen's runs of the same settings


def job(seed):
    rec = ex.run(RECIPE, P, seed=seed, log=print)  # under runs/cpu/CORPUS/RECIPE, where the ladder reads it
    return f"{RECIPE} s{seed}: {rec['steps']} steps, val_bpb {rec['val_bpb']:.4f}, test_bpb {rec['test_bpb']:.4f}"


def judge():
    from frontier.records import REPO, load_record
    from frontier.recipes import resolve
    from frontier.study.compare import keep, p_text, paired_gain

    def finished(label, recipe, optim=None):  # each seed's finished run of the current config (its hash)
        digest = resolve(recipe, P, optim=optim).digest()
        recs = [load_record(d) for d in sorted((REPO / "runs" / "cpu" / CORPUS / label).glob("s*"))]
        return {r["seed"]: r for r in recs if r.get("status") == "finished" and r.get("config_hash") == digest}

    base, rung = finished("ngram", "ngram"), finished(RECIPE, RECIPE)
    screen = finished(SCREEN, "ngram", {"muon_momentum_warmup_frac": 1.0})
    seeds = sorted(set(base) & set(rung) & set(SEEDS))
    if not seeds:
        sys.exit(f"no finished runs of {RECIPE} beside ngram's yet: train them first (python driver.py)")
    b, v = [base[s] for s in seeds], [rung[s] for s in seeds]
    for s in seeds:
        if s in screen:  # Inductor's CPU code may round one float32 differently from run to run
            diff = max(abs(screen[s][k] - rung[s][k]) for k in ("val_bpb", "test_bpb"))
            again = (f"{'the same' if screen[s]['steps'] == rung[s]['steps'] else 'OTHER'} steps, scores "
                     f"{'identical' if diff == 0 else f'within {diff:.1e}'}")
        else:
            again = "none"
        print(f"s{s}: {RECIPE} {rung[s]['steps']} steps, val {rung[s]['val_bpb']:.4f}, test {rung[s]['test_bpb']:.4f}"
              f"; ngram {base[s]['steps']} steps, val {base[s]['val_bpb']:.4f}; the screen's run: {again}")
    gain, p, n = paired_gain(b, v, "val_bpb")
    tgain, tp, _ = paired_gain(b, v, "test_bpb")
    equal = all(x["steps"] == y["steps"] for x, y in zip(b, v))
    kept, why = keep((gain, p, n) if equal else None, (gain, p, n))
    print(f"{RECIPE} over ngram, seeds {seeds}: val {gain:+.4f} ({p_text(p)}), test {tgain:+.4f} ({p_text(tp)}); "
          f"{'the same steps each seed' if equal else 'steps differ'}; "
          f"{ {True: 'kept', False: 'dropped', None: 'not shown'}[kept]}: {why}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["judge"]:
        judge()
        sys.exit(0)
    for line in one_thread_jobs(job, list(SEEDS), workers=2):
        print(line, flush=True)

"""The ladder: the write-up's path from the baseline to its final model, one recipe per rung, with its noise.

`LADDER` lists the rungs in the write-up's order of discovery where our recipes allow it (ours stack the EMA on
the n-gram mix, chapters 05 and 06 in that order; the write-up added its EMA before its n-gram mix). A rung
without a recipe (the NKI kernels) changes how fast the same arithmetic runs on a NeuronCore, not what is
trained; on a machine without one it has nothing to measure, and the table says so instead of repeating the
rung below it.

`run_ladder` trains (or reuses, `frontier.study.experiments.run`) every rung for seeds 0..n-1 and `ladder_rows` turns
the records into the table. Every rung is presented by the project's rule (`frontier.study.compare.RULE`):

- A speed rung (`Rung.speed`: the same arithmetic, faster: `compile`, the NKI kernels) is judged by its tokens/s
  beside those of the rung it is built on and by the steps that buys in the budget, not by a bpb test: its row
  keeps both tokens/s (the records' `tokens_per_s`, mean over seeds), their ratio, the steps each trained, and a
  verdict such as "buys 29 more steps under the reference clock (x1.14 tokens/s)". Its bpb is still shown.
- A learning rung shows its gain at equal budget over the nearest rung below that its recipe is built on (a rung
  off its line is skipped: the momentum warm-up's gain is over `ngram`, not `ema`), paired by seed
  (`frontier.study.compare.paired_test`); where a sweep measured the same change at equal steps (`EqualSteps`),
  that gain and its p beside it (without one, where every seed trained the steps of the rung below, as a
  speed-neutral change such as an optimiser setting does, the budget runs are that comparison: `same_steps`); and
  its verdict by `frontier.study.compare.keep` (equal steps first, then the budget; a change of the model's size,
  which trades steps, at equal budget alone).

The equal-steps evidence is handed in explicitly, rung by rung, as rows of a sweep record. For the cpu ladder on
the docstrings corpus (sweep `ablation-ngram-wide-400-docstrings`: the final, `ngram-wide`, with each part removed
at 400 steps, `part_pairs` naming the rung that switches each part on; sweep `ablation-ema-400-docstrings` for the
weight average, `ema`'s live weights in its own runs; the momentum warm-up needs none, its own runs train the
n-gram mix's steps):

    from frontier.study.ladder import EqualSteps, ladder_rows, run_ladder
    from frontier.study.sweep import newest_sweep

    final = newest_sweep("runs", "cpu", "ablation-ngram-wide-400-docstrings")
    ema = newest_sweep("runs", "cpu", "ablation-ema-400-docstrings")
    rows = ladder_rows(run_ladder("cpu", 5), equal_steps={
        "bigram": EqualSteps(final, "- bigram table", removes=True),  # the bigram table, taken out of the final
        "ngram": EqualSteps(final, "- n-gram mix", removes=True),     # the n-gram mix, taken out of the final
        "ngram-wide": EqualSteps(final, "- wider n-gram tables (= ngram-momentum)", removes=True),
        "ema": EqualSteps(ema, "- weight average (its live weights)", removes=True),  # ema's own live weights
    })

(a variant is named by its sweep row's `name`, else its `recipe`; `frontier ladder --equal-steps
"bigram=ablation-ngram-wide-400-docstrings:- bigram table:removes" ...` is the same as a command, the README has it whole).
A key names a rung by its recipe in `LADDER` or the recipe that resolves to: a key of the rung whose recipe `final`
names also serves the final rung; `ema=within-runs` (`WITHIN_RUNS`) measures a weight average inside its own runs
(`WithinRuns`: live against declared weights at the same step). Every bpb the tables print carries its steps (`bpb_cell`). `write_ladder_record`
keeps the table beside the runs (`runs/PROFILE/ladder/CORPUS-TIME.json`), naming every run folder, sweep record
and the code that made them; the README's table is read from such a record (`readme_table`), and ladder records
written before this presentation still load and format (`judged_rows` derives what they lack from what they kept).
`frontier ladder` is the command.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import math
from statistics import mean

from .. import records
from ..records import shown_path
from ..errors import UserError
from .compare import RULE, Group, judge, keep, p_text, paired_test
from .report import bpb_group, short_code

LADDER_KIND = "ladder"


@dataclass(frozen=True)
class Rung:
    name: str  # what the write-up calls the step
    recipe: str | None  # our recipe for it; None: nothing to train differently (see `why_none`)
    change: str
    chapter: str
    why_none: str = ""
    # the same arithmetic, faster (`compare.RULE`): judged by tokens/s and the steps it buys, not by a bpb test
    speed: bool = False


LADDER: tuple[Rung, ...] = (
    Rung("baseline", "baseline", "the competition baseline, eager PyTorch", "01"),
    Rung("torch.compile", "compile", "the model compiled (Inductor here, the neuron backend on Trn2)", "02",
         speed=True),
    Rung("NKI kernels", None, "fused ops as NKI kernels", "03", speed=True,
         why_none="the same arithmetic as the reference ops, faster only on a NeuronCore; without one there is "
                  "nothing to train differently (chapter 03 checks the kernels in the interpreter)"),
    Rung("embedding fix", "bigram", "the 2^k-row hashed bigram table, updated sparsely", "04"),
    Rung("n-gram mix", "ngram", "an n-gram model counted from the train shards, mixed into the logits", "05"),
    Rung("EMA", "ema", "an exponential moving average of the weights over the warm-down", "06"),
    Rung("momentum warm-up", "ngram-momentum", "Muon's momentum warmed up over the whole run, not its first 300 steps",
         "07"),
    Rung("wider n-gram tables", "ngram-wide", "four times the n-gram buckets a context length (cpu: 2^22, not 2^20)",
         "07"),
    Rung("final", "final", "the final recipe: `frontier.recipes.FINAL` (chapter 07)", "07"),
)

# The write-up's own figures (one Trn2 chip, 1,800 charged seconds, ClimbMix, 8,192-token BPE), quoted, not ours.
WRITEUP_TRN2 = {"baseline": 1.259, "final": 0.959, "ngram_gain": 0.007, "noise": 0.0003}


def recipe_name(recipe: str) -> str:
    """The recipe a rung trains under its own name (`final` names another recipe, `frontier.recipes.FINAL`)."""
    from ..recipes import get_recipe

    return get_recipe(recipe).name


def corpus_label(recipe: str, corpus: str = "embedded") -> str | None:
    """The run folder label of a rung: the recipe's own folder on the embedded corpus, `CORPUS/RECIPE` on another
    (RECIPE: the name it is recorded under)."""
    return None if corpus == "embedded" else f"{corpus}/{recipe_name(recipe)}"


def run_ladder(profile, seeds: int, root: str | Path = "runs", corpus: str | None = None,
               log=print) -> dict[str, list[dict]]:
    """Train or reuse every rung's recipe for seeds 0..seeds-1 on `corpus` (`frontier.data.corpus.CORPORA`; default the
    profile's); returns
    recipe -> records, in seed order. Seeds are interleaved across rungs (seed 0 of every rung, then seed 1),
    so a drift of the machine's speed while they train touches every rung alike."""
    from ..data.dataset import profile_dataset
    from ..profiles import get_profile
    from . import experiments as ex

    p = get_profile(profile)
    corpus = corpus or p.corpus
    data = None if corpus == "embedded" else profile_dataset(p, log=log, corpus_name=corpus)
    out: dict[str, list[dict]] = {r.recipe: [] for r in LADDER if r.recipe}
    for seed in range(seeds):
        for recipe in out:
            out[recipe].append(ex.run(recipe, p, seed=seed, root=root, data=data, label=corpus_label(recipe, corpus),
                                      log=log))
    return out


def _group(recipe: str, recs: list[dict], score: str = "val_bpb") -> Group:
    return Group(recipe, tuple(r[score] for r in recs), tuple(str(r.get("run_dir", "")) for r in recs),
                 tuple(r.get("seed") for r in recs))


def _has_test(recs: list[dict]) -> bool:
    return bool(recs) and all(r.get("test_bpb") is not None for r in recs)


def _regime(recs: list[dict]) -> dict:
    """What a rung's runs read of their training split and how far validation lies from training: `epochs_each`
    (`records.epochs_read`) and `loss_gap` (mean over seeds of `records.loss_gap`, nats a token)."""
    epochs = [records.epochs_read(r) for r in recs]
    gaps = [g for g in (records.loss_gap(r) for r in recs) if g is not None]
    return {"epochs_each": epochs if all(e is not None for e in epochs) else None,
            "loss_gap": mean(gaps) if gaps else None}


@dataclass(frozen=True)
class EqualSteps:
    """One rung's change measured at equal steps: a row of a sweep record (`frontier.study.sweep.run_sweep` with
    `steps=N`, read back by `newest_sweep`), paired by seed with the sweep's base. `variant` names the row (its
    `name`, else its `recipe`). `removes`: the variant is the base without the change (a leave-one-out ablation:
    the change's gain is minus the variant's); else the variant is the base with the change added."""

    sweep: dict
    variant: str
    removes: bool = False

    def measure(self) -> dict:
        """The change's gain at equal steps (positive: the change lowers val_bpb), p, seeds, steps, which run is
        with it and which without, and the sweep record's name, path and code. UserError (one line) for a record that
        is not a sweep, a sweep at the budget, or a variant it does not have."""
        sw = self.sweep or {}
        if sw.get("kind") != "sweep" or not isinstance(sw.get("rows"), list):
            raise UserError("EqualSteps needs a sweep record", "pass frontier.study.sweep.newest_sweep(root, profile, "
                                                               "name), a record written by run_sweep")
        if not sw.get("steps"):
            raise UserError(f"sweep {sw.get('name')!r} ran at the budget, not at equal steps",
                            "pass a sweep run with steps=N (its runs stop at N steps)")
        variants = [r for r in sw["rows"] if "gain" in r]
        found = [r for r in variants if r.get("name") == self.variant] or [
            r for r in variants if r.get("recipe") == self.variant]
        if len(found) != 1:
            names = ", ".join(repr(r.get("name")) for r in variants)
            why = "no variant" if not found else "more than one variant of recipe"
            raise UserError(f"sweep {sw.get('name')!r} has {why} {self.variant!r}", f"name one of: {names}")
        row, base = found[0], next((r for r in sw["rows"] if "gain" not in r), sw["rows"][0])
        sign = -1.0 if self.removes else 1.0
        with_, without = (base["name"], row["name"]) if self.removes else (row["name"], base["name"])
        seen = sorted({r["steps"] for x in (base, row) for r in x["runs"].values()})  # all N in a steps=N sweep
        return {"gain": sign * row["gain"], "p": row.get("p"), "diff_std": row.get("diff_std"),
                "seeds": len(sw["seeds"]), "steps": sw["steps"], "steps_seen": seen, "with": with_,
                "without": without, "variant": row["name"], "removes": self.removes, "sweep": sw.get("name"),
                "path": shown_path(sw["path"]) if sw.get("path") else None, "code": short_code(sw.get("code"))}


@dataclass(frozen=True)
class WithinRuns:
    """A weight average's change measured at equal steps inside its own runs: each run of a recipe with an EMA keeps
    the live weights' score (`val_bpb_live`) beside the declared one (`val_bpb`: mix x average + the rest live) at
    the same step, and the EMA never touches the live weights, so the live score is the parent recipe's at those
    steps on the same trajectory. Paired by run (one per seed). `records`: the rung's run records; `parent`: the
    recipe the live weights are (for the table)."""

    records: tuple
    parent: str = "ngram"

    def measure(self) -> dict:
        recs = [r for r in self.records if r.get("val_bpb_live") is not None]
        if len(recs) != len(self.records) or not recs:
            raise UserError("WithinRuns needs runs of a recipe with an EMA (val_bpb_live beside val_bpb)",
                            "pass the records of the rung whose recipe has an EMA (e.g. `ema`)")
        live = Group(self.parent, tuple(r["val_bpb_live"] for r in recs), (), tuple(r.get("seed") for r in recs))
        mixed = Group(recs[0].get("recipe", "ema"), tuple(r["val_bpb"] for r in recs), (),
                      tuple(r.get("seed") for r in recs))
        d = paired_test(live, mixed)
        seen = sorted({r["steps"] for r in recs})
        return {"gain": -d.delta, "p": d.p, "diff_std": d.diff_std, "seeds": len(recs), "steps": None,
                "steps_seen": seen, "with": mixed.name, "without": f"{self.parent} (its live weights)",
                "variant": mixed.name, "removes": False, "sweep": "within the same runs",
                "path": None, "runs": [shown_path(r.get("run_dir", "")) for r in recs], "code": None}


def same_steps(recs: list[dict], other_recs: list[dict], d) -> dict | None:
    """A learning rung's gain at equal steps read from its own budget runs, where each seed trained exactly the steps
    of the rung below (a speed-neutral change, such as an optimiser setting, buys the same steps): the comparison at
    equal budget is then one at equal steps too. `d`: their paired test (`compare.paired_test`, below minus this).
    None where any seed's steps differ, or a seed is missing from either side."""
    mine = {r.get("seed"): r["steps"] for r in recs}
    theirs = {r.get("seed"): r["steps"] for r in other_recs}
    if not mine or mine != theirs or None in mine or len(mine) != len(recs) or len(theirs) != len(other_recs):
        return None
    return {"gain": -d.delta, "p": d.p, "diff_std": d.diff_std, "seeds": d.pairs, "steps": None,
            "steps_seen": sorted(set(mine.values())), "with": recs[0].get("recipe"), "without": other_recs[0].get("recipe"),
            "variant": recs[0].get("recipe"), "removes": False, "sweep": "the budget runs",
            "where": "the budget runs: the same steps each seed", "path": None,
            "runs": [shown_path(r.get("run_dir", "")) for r in recs], "code": None}


def _mean_tokens_per_s(recs: list[dict]) -> float | None:
    vals = [r["tokens_per_s"] for r in recs if r.get("tokens_per_s")]
    return mean(vals) if vals else None


def _clock(recs: list[dict]) -> str | None:
    """The clock all `recs` ran under ("reference", "wall"), "mixed" when they differ, None where none says."""
    clocks = {r.get("clock") for r in recs}
    if clocks == {None}:
        return None
    return clocks.pop() if len(clocks) == 1 else "mixed"


def speed_verdict(bought: float | None, ratio: float | None, clock: str | None = None) -> str:
    """A speed rung's verdict: the steps it buys in the budget and its tokens/s over the rung below
    ("buys 29 more steps under the reference clock (x1.14 tokens/s)")."""
    if bought is None:
        what = "steps not recorded"
    else:
        n = round(bought)
        what = f"buys {n:,} more steps" if n > 0 else f"costs {-n:,} steps" if n < 0 else "buys no more steps"
    where = {"steps": " under the steps rule", "reference": " under the reference clock", "wall": " on the wall clock",
             "mixed": " (its runs on different clocks)"}.get(clock or "", "")
    return f"{what}{where} ({f'x{ratio:.2f} tokens/s' if ratio else 'tokens/s not recorded'})"


def trades_steps(recipe: str, over: str) -> bool:
    """Whether `recipe` differs from `over` in the model's size or batch (`Recipe.sizes`): a change that trades what
    a step learns for how many steps fit, judged at equal budget alone (`compare.keep(trades_steps=True)`). False
    for a recipe this code no longer has."""
    from ..recipes import get_recipe

    try:
        return get_recipe(recipe).sizes != get_recipe(over).sizes
    except UserError:
        return False


def rule_verdict(at_steps: dict | None, at_budget: tuple[float, float | None, int],
                 trades: bool = False) -> tuple[bool | None, str]:
    """(kept, verdict) of a learning rung by `compare.keep`: `at_steps` an `EqualSteps.measure()` (None: not
    measured), `at_budget` the ladder's paired (gain, p, seeds). The verdict starts with kept, dropped or not shown."""
    if at_steps is None and not trades:
        gain, p, n = at_budget
        shown_p = f", {p_text(p)}" if p is not None and math.isfinite(p) else ""
        kept, why = None, f"equal steps not measured; equal budget: {judge(gain, p, n)} ({gain:+.4f}{shown_p})"
    else:
        steps = None if at_steps is None else (at_steps["gain"], at_steps["p"], at_steps["seeds"])
        kept, why = keep(steps, at_budget, trades_steps=trades)
    return kept, f"{ {True: 'kept', False: 'dropped', None: 'not shown'}[kept]}: {why}"


def check_equal_steps_keys(equal_steps: dict) -> None:
    """UserError (one line) for an `equal_steps` key that names no learning rung's recipe: an unknown one, or a speed
    rung's (judged by tokens/s and the steps it buys, never at equal steps)."""
    named = {k: r for r in LADDER if r.recipe for k in (r.recipe, recipe_name(r.recipe))}
    unknown = sorted(set(equal_steps) - set(named))
    if unknown:
        raise UserError(f"equal_steps names no rung's recipe: {', '.join(unknown)}",
                        f"use one of: {', '.join(sorted(k for k, r in named.items() if not r.speed))}")
    speed = sorted(k for k in equal_steps if named[k].speed)
    if speed:
        raise UserError(f"{', '.join(speed)} is a speed rung: it is judged by tokens/s and the steps it buys, not at "
                        "equal steps", "leave it out of equal_steps")


WITHIN_RUNS = "within-runs"  # an `equal_steps` value for a rung with an EMA: `WithinRuns` of its own runs


def parse_equal_steps(items: list[str], root: str | Path, profile: str) -> dict[str, EqualSteps]:
    """`--equal-steps` items, `RUNG=SWEEP:VARIANT` or `RUNG=SWEEP:VARIANT:removes` (RUNG: a rung's recipe; SWEEP: a
    sweep's name, its newest record in ROOT/PROFILE/sweeps/ is read; `removes`: the variant is the base without the
    change) -> `ladder_rows`'s `equal_steps`, each measured once so that a bad one fails before anything trains.
    UserError (one line) for a malformed item, a sweep not found, or what `EqualSteps.measure` refuses."""
    from .sweep import newest_sweep

    out: dict[str, EqualSteps] = {}
    for item in items:
        key, eq, rest = item.partition("=")
        if eq and key and rest == WITHIN_RUNS:
            out[key] = WITHIN_RUNS
            continue
        parts = rest.split(":")
        if not eq or not key or len(parts) not in (2, 3) or not all(parts[:2]) or parts[2:] not in ([], ["removes"]):
            raise UserError(f"--equal-steps {item!r} is not RUNG=SWEEP:VARIANT[:removes] or RUNG={WITHIN_RUNS}",
                            "pass e.g. --equal-steps \"bigram=ablation-ngram-wide-400-docstrings:- bigram table:removes\"")
        sweep = newest_sweep(root, profile, parts[0])
        if sweep is None:
            raise UserError(f"no sweep record named {parts[0]!r} in {Path(root) / profile / 'sweeps'}",
                            "run the sweep first (frontier.study.sweep.run_sweep), or name one that is there")
        out[key] = EqualSteps(sweep, parts[1], removes=parts[2:] == ["removes"])
        out[key].measure()
    check_equal_steps_keys(out)
    return out


def ladder_rows(results: dict[str, list[dict]], equal_steps: dict[str, EqualSteps] | None = None) -> list[dict]:
    """One row per rung (`LADDER`), judged by `compare.RULE`.

    Every measured row: the mean, spread and count of val_bpb, each seed's value and steps (`steps`: their mean,
    `steps_each`), `tokens_per_s` (mean over seeds), the `clock` its runs ran under, the regime (`epochs_each`,
    `loss_gap`: `_regime`), where every run scored a test split its `test_values`, `test_mean` and `test_std` (and
    `test_gain`, `test_p`, `test_total` beside the gains below: reported, never judged on), and, against the nearest
    measured rung below that its recipe is built on (`over`; a rung off the recipe's line, such as `ema` below the
    momentum warm-up, is skipped), the bpb
    `gain` paired by seed (that rung's mean minus this one's, so positive is better) and the steps that rung took
    (`over_steps`, `over_steps_each`); `total` likewise against the baseline (a difference, not a test).

    A speed rung (`kind` "speed") adds `over_tokens_per_s`, `speed_ratio`, `steps_bought` and a `verdict` about
    speed (`speed_verdict`); its `p` is None: no bpb test. A learning rung (`kind` "learning") adds `p` (the paired
    t-test at equal budget), `budget_verdict` (`compare.judge`), `trades_steps`, `equal_steps` (where given:
    `EqualSteps.measure()`, else `same_steps` where every seed trained the steps of the rung below), and `kept` and
    `verdict` by `compare.keep` (`rule_verdict`).

    `equal_steps` maps a rung's recipe (as `LADDER` names it, or the recipe it resolves to) to its `EqualSteps`;
    see the module's docstring for the final ladder's call. A rung without a recipe, or without runs, is a row
    with its reason."""
    equal_steps = dict(equal_steps or {})
    check_equal_steps_keys(equal_steps)
    rows, measured, base, base_recs = [], [], None, []
    for rung in LADDER:
        recs = results.get(rung.recipe or "", [])
        name = recipe_name(rung.recipe) if rung.recipe else "-"
        row = {"rung": rung.name, "recipe": name, "chapter": rung.chapter, "change": rung.change,
               "kind": "speed" if rung.speed else "learning"}
        if not recs:
            rows.append({**row, "note": rung.why_none or "not run"})
            continue
        g = _group(rung.recipe, recs)
        same = next((m for m in measured if m[1] == name), None)
        if same is not None:
            row["note"] = f"the same recipe as the {same[0]} rung"
        # the gain over the nearest rung below whose recipe this one is built on (a rung off its line is skipped)
        line = ancestors(rung.recipe)
        below = next((m for m in reversed(measured) if m[1] in line), None)
        row.update(n=g.n, mean=g.mean, std=g.std, values=list(g.values), seeds=list(g.seeds),
                   steps=sum(r["steps"] for r in recs) / len(recs), steps_each=[r["steps"] for r in recs],
                   tokens_per_s=_mean_tokens_per_s(recs), clock=_clock(recs),
                   runs=[shown_path(r.get("run_dir", "")) for r in recs],
                   code=sorted({short_code(r.get("code")) for r in recs}), **_regime(recs))
        tested = _has_test(recs)
        if tested:
            tg = _group(rung.recipe, recs, "test_bpb")
            row.update(test_values=list(tg.values), test_mean=tg.mean, test_std=tg.std)
        if below is not None:
            other, other_recs = below[2], below[3]
            d = paired_test(other, g)
            row.update(gain=-d.delta, gain_std=d.diff_std, over=other.name,
                       over_steps=mean(r["steps"] for r in other_recs), over_steps_each=[r["steps"] for r in other_recs])
            if tested and _has_test(other_recs):
                dt = paired_test(_group(other.name, other_recs, "test_bpb"), tg)
                row.update(test_gain=-dt.delta, test_p=dt.p)
            if rung.speed:
                theirs = _mean_tokens_per_s(other_recs)
                ratio = row["tokens_per_s"] / theirs if row["tokens_per_s"] and theirs else None
                bought = row["steps"] - row["over_steps"]
                row.update(p=None, over_tokens_per_s=theirs, speed_ratio=ratio, steps_bought=bought,
                           verdict=speed_verdict(bought, ratio, _clock(recs + other_recs)))
            else:
                at_budget = (-d.delta, d.p, d.pairs)
                evidence = equal_steps.get(rung.recipe) or equal_steps.get(name)
                if evidence == WITHIN_RUNS:
                    evidence = WithinRuns(tuple(recs), other.name)
                at_steps = evidence.measure() if evidence is not None else same_steps(recs, other_recs, d)
                trades = trades_steps(name, other.name)
                row.update(p=d.p, budget_verdict=judge(*at_budget), trades_steps=trades)
                if at_steps is not None:
                    row["equal_steps"] = at_steps
                row["kept"], row["verdict"] = rule_verdict(at_steps, at_budget, trades)
        if base is not None:
            row["total"] = -paired_test(base, g).delta
            if tested and _has_test(base_recs):
                row["test_total"] = -paired_test(_group("baseline", base_recs, "test_bpb"), tg).delta
        rows.append(row)
        measured.append((rung.name, name, g, recs))
        if base is None:
            base, base_recs = g, recs
    return rows


def _rung_of(row: dict) -> Rung | None:
    return next((r for r in LADDER if r.name == row.get("rung")), None)


def judged_rows(rows: list[dict]) -> list[dict]:
    """The rows as the rule presents them. A row of a ladder record written before speed and learning rungs were
    told apart (no `kind`) gets its kind from its rung in `LADDER`; a speed row there its steps bought from the mean
    steps it kept (its tokens/s were not kept) and no p; a learning row its verdict by the rule from the gain, p and
    seeds it kept (equal steps not measured). A current row is returned as it is."""
    by = {r["recipe"]: r for r in rows if "mean" in r}
    out = []
    for r in rows:
        if "kind" in r:
            out.append(r)
            continue
        rung = _rung_of(r)
        r = {**r, "kind": "speed" if rung is not None and rung.speed else "learning"}
        if "gain" in r:
            other = by.get(r.get("over"), {})
            r["over_steps"] = other.get("steps")
            if r["kind"] == "speed":
                bought = r["steps"] - other["steps"] if "steps" in r and "steps" in other else None
                r.update(p=None, steps_bought=bought, verdict=speed_verdict(bought, None))
            else:
                at_budget = (r["gain"], r.get("p"), r["n"])
                trades = trades_steps(r["recipe"], r["over"])
                r.update(budget_verdict=judge(*at_budget), trades_steps=trades)
                r["kept"], r["verdict"] = rule_verdict(None, at_budget, trades)
        out.append(r)
    return out


def steps_span(each: list[int] | None, mean_steps: float | None = None) -> str:
    """'400 steps', '408-430 steps'; for a row of an older record that kept only the mean, 'mean 233 steps'."""
    if each:
        lo, hi = min(each), max(each)
        return f"{lo:,} steps" if lo == hi else f"{lo:,}-{hi:,} steps"
    return "steps not recorded" if mean_steps is None else f"mean {mean_steps:,.0f} steps"


def steps_cell(each: list[int] | None, mean_steps: float | None = None) -> str:
    """The steps a rung trained as mean (range): '419 (408-430)', '400', or 'mean 233' where only the mean was kept."""
    if not each:
        return "-" if mean_steps is None else f"mean {mean_steps:,.0f}"
    lo, hi = min(each), max(each)
    return f"{lo:,}" if lo == hi else f"{mean(each):,.0f} ({lo:,}-{hi:,})"


def bpb_cell(row: dict) -> str:
    """A measured row's val_bpb with its seeds and steps, as `frontier.study.report.bpb_group` prints a group:
    '1.7065 ± 0.0040 (3 seeds, 408-430 steps)'."""
    if row.get("steps_each"):
        return bpb_group([{"val_bpb": v, "steps": s} for v, s in zip(row["values"], row["steps_each"])])
    spread = f" ± {row['std']:.4f}" if row["n"] > 1 else ""
    return f"{row['mean']:.4f}{spread} ({_seeds(row['n'])}, {steps_span(None, row.get('steps'))})"


def _seeds(n: int) -> str:
    return f"{n} seed{'s' if n != 1 else ''}"


def _p(p) -> str:
    return f", {p_text(p)}" if p is not None and math.isfinite(p) else ""


def tokens_cell(row: dict) -> str:
    """tokens/s: a speed rung's beside the rung below's, with their ratio; another rung's own (mean over seeds)."""
    if row.get("kind") == "speed" and "gain" in row:
        if not row.get("speed_ratio"):
            return "not in this record" if not row.get("tokens_per_s") else f"{row['tokens_per_s']:,.0f}"
        return f"{row['tokens_per_s']:,.0f} vs {row['over_tokens_per_s']:,.0f} `{row['over']}` (x{row['speed_ratio']:.2f})"
    return f"{row['tokens_per_s']:,.0f}" if row.get("tokens_per_s") else ""


def test_cell(row: dict) -> str:
    """A measured row's test_bpb: '1.8075 ± 0.0040 (+0.0421 over `compile`, p = 0.002)'; empty without a test split."""
    if row.get("test_mean") is None:
        return ""
    spread = f" ± {row['test_std']:.4f}" if len(row["test_values"]) > 1 else ""
    gain = f" ({row['test_gain']:+.4f} over `{row['over']}`{_p(row.get('test_p'))})" if "test_gain" in row else ""
    return f"{row['test_mean']:.4f}{spread}{gain}"


def regime_cell(row: dict) -> str:
    """Epochs read and the validation-training loss gap: '0.20 epoch; val - train +0.005 nats'."""
    parts = []
    if row.get("epochs_each"):
        lo, hi = min(row["epochs_each"]), max(row["epochs_each"])
        parts.append(f"{lo:.2f} epoch" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f} epoch")
    if row.get("loss_gap") is not None:
        parts.append(f"val - train {row['loss_gap']:+.3f} nats")
    return "; ".join(parts)


def equal_steps_cell(row: dict) -> str:
    """A learning rung's gain at equal steps from its sweep: '+0.0020, p = 0.023 (3 seeds, 420 steps: `ema` over
    `ngram`, sweep ablation-ngram-wide-420-docstrings)'; 'not measured' without one; empty for other rows."""
    e = row.get("equal_steps")
    if e:
        return (f"{e['gain']:+.4f}{_p(e['p'])} ({_seeds(e['seeds'])}, {steps_span(e.get('steps_seen'), e['steps'])}: "
                f"`{e['with']}` over `{e['without']}`, {e.get('where') or 'sweep ' + e['sweep']})")
    return "not measured" if row.get("kind") == "learning" and "gain" in row else ""


def budget_cell(row: dict) -> str:
    """A rung's gain at equal budget over the rung it is built on, paired by seed, with the steps each took; a speed
    rung's says its bpb is not tested."""
    if "gain" not in row:
        return ""
    steps = (f"{steps_cell(row.get('steps_each'), row.get('steps'))} vs "
             f"{steps_cell(row.get('over_steps_each'), row.get('over_steps'))} steps")
    if row.get("kind") == "speed":
        return f"{row['gain']:+.4f} over `{row['over']}`, not tested (a speed rung); {steps}"
    return f"{row['gain']:+.4f}{_p(row.get('p'))} over `{row['over']}` ({_seeds(row['n'])}; {steps})"


def same_as(row: dict) -> str | None:
    """The note of a rung whose recipe is another rung's ("the same recipe as the n-gram mix rung": the final rung
    names the recipe the rule built), or None."""
    note = row.get("note", "")
    return note if note.startswith("the same recipe as") else None


def display_row(row: dict) -> dict:
    """One judged row (`judged_rows`) as the tables print it: every cell a string. A rung whose recipe is another
    rung's says so instead of repeating that rung's numbers."""
    if "mean" not in row or same_as(row):
        return {"rung": row["rung"], "recipe": row["recipe"],
                "bpb": same_as(row) or "not measured here", "note": row.get("note", "")}
    return {"rung": row["rung"], "recipe": row["recipe"], "bpb": bpb_cell(row), "test": test_cell(row),
            "regime": regime_cell(row), "tokens": tokens_cell(row),
            "equal_steps": equal_steps_cell(row), "budget": budget_cell(row), "verdict": row.get("verdict", ""),
            "total": "" if "total" not in row else f"{row['total']:+.4f}", "note": row.get("note", "")}


def ancestors(recipe: str) -> list[str]:
    """The recipes `recipe` is built on, nearest first (its parent, the parent's parent, ...), not itself."""
    from ..recipes import RECIPES, get_recipe

    out, r = [], get_recipe(recipe)
    while r.parent:
        out.append(r.parent)
        r = RECIPES[r.parent]
    return out


def part_pairs(recipe: str) -> dict[str, tuple[str, str]]:
    """Each part a leave-one-out removes from `recipe` (`frontier.study.ablation.parts`, by what a reader calls it:
    "bigram table") -> (the rung below, the rung that switches it on): two neighbouring rungs of `LADDER` on the
    recipe's line (the recipe and those it is built on), by their recipes; and "everything" -> (the line's first
    rung, the recipe) where the recipe is not that rung. The ladder's pairs at equal budget for the parts the
    leave-one-out judges at equal steps. A part that no rung switches on (the attention gate: `gate` is no rung) has
    no pair, and `part_pair` says so."""
    from .ablation import PARTS, parts

    what = {name: w for name, w in PARTS.values()}  # "bigram" -> "bigram table"
    name = recipe_name(recipe)
    line = {name, *ancestors(name)}
    rungs = list(dict.fromkeys(recipe_name(r.recipe) for r in LADDER if r.recipe and recipe_name(r.recipe) in line))
    out = {}
    for below, above in zip(rungs, rungs[1:]):  # the parts `above` has and `below` has not
        out.update({what[p]: (below, above) for p in parts(above) if p in what and p not in parts(below)})
    return {**out, "everything": (rungs[0], name)} if rungs and rungs[0] != name else out


def part_pair(recipe: str, part: str) -> tuple[str, str]:
    """`part_pairs(recipe)[part]`: (the rung below, the rung that switches `part` on). UserError (one line) for a
    part that no rung of the ladder switches on."""
    if part is None:
        raise UserError("a sweep row names no part of the recipe (ablation.part_of found none in it)",
                        "pass a row of a leave-one-out sweep (`frontier ablate`) other than its base row")
    pairs = part_pairs(recipe)
    if part not in pairs:
        raise UserError(f"recipe {recipe_name(recipe)!r} has a part ({part}) that no rung of the ladder switches on",
                        "add its rung to frontier.study.ladder.LADDER")
    return pairs[part]


def ladder_title(profile, corpus: str, seeds: int) -> str:
    """The ladder figure's title: what the runs were trained on and how their budget was set."""
    charged = {"steps": "reference s by the steps rule", "reference": "reference s", "wall": "wall-clock s"}
    return (f"the ladder: {profile.name} profile, {corpus} corpus, {seeds} seeds,\n"
            f"{profile.budget_s:g} {charged.get(profile.clock, profile.clock + ' s')}")


def ladder_figure(rows: list[dict], title: str = "", writeup: bool = True):
    """val_bpb per rung (mean with the seeds' spread as error bars, every seed as a dot; each rung's steps under its
    name) and each rung's gain over the one below it is built on. A learning rung's bar is its gain at equal budget,
    beside it (hatched) its gain at equal steps where a sweep measured one, coloured by the rule's verdict (green
    kept, red dropped, grey not shown); where the runs scored a test split, its mean and spread beside validation's.
    The final rung, which names another rung's recipe, is that rung's "(final)" rather than a row of its own; a gain from one seed, which has no spread, is labelled "one seed". A speed
    rung's bar (blue) is labelled with its tokens/s ratio and the steps it buys: it is not tested on bpb. Where
    `writeup`, the write-up's Trn2 endpoints are drawn in a panel of their own, on their own axis: never on ours
    (a second axis scaled to overlay them would make any two lines look alike). Rows of older ladder records are
    drawn as `judged_rows` presents them."""
    from matplotlib.patches import Patch

    from ..figures import new_figure

    rows = judged_rows(rows)
    finals = {r["recipe"] for r in rows if same_as(r)}  # the final rung names another rung's recipe: drawn once
    measured = [r for r in rows if "mean" in r and not same_as(r)]

    def tick(r):
        return (f"{r['rung']}" + (" (final)" if r["recipe"] in finals else "")
                + f"\n{steps_span(r.get('steps_each'), r.get('steps'))}")

    if writeup:
        fig, (ax, ax_theirs, ax_gain) = new_figure(13.5, 4.4, ncols=3, width_ratios=(4, 1.2, 4.6))
    else:
        fig, (ax, ax_gain) = new_figure(11.5, 4.4, ncols=2)
    xs = range(len(measured))
    one_seed = all(r["n"] == 1 for r in measured)
    ax.errorbar(xs, [r["mean"] for r in measured], yerr=[0 if r["std"] != r["std"] else r["std"] for r in measured],
                fmt="o-", capsize=4, color="C0", label="ours, one seed" if one_seed else "validation (mean ± std over seeds)")
    for x, r in zip(xs, measured):
        ax.scatter([x] * r["n"], r["values"], s=10, color="C0", alpha=0.45)
    tested = [(x, r) for x, r in zip(xs, measured) if r.get("test_mean") is not None]
    if tested:  # the test split beside validation: reported, never chosen on
        ax.errorbar([x + 0.12 for x, _ in tested], [r["test_mean"] for _, r in tested],
                    yerr=[r.get("test_std") or 0 for _, r in tested], fmt="s--", capsize=4, color="C1",
                    label="test (reported, chooses nothing)")
    ax.set_xticks(list(xs), [tick(r) for r in measured], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("bpb (lower is better)" if tested else "val_bpb (lower is better)")
    ax.set_title(title or "the ladder")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    if writeup:
        theirs = [WRITEUP_TRN2["baseline"], WRITEUP_TRN2["final"]]
        ax_theirs.plot([0, 1], theirs, "s--", color="C3")
        for x, v in enumerate(theirs):
            ax_theirs.annotate(f"{v:.3f}", (x, v), textcoords="offset points", xytext=(7, 0), ha="left",
                               va="center", fontsize=8)
        ax_theirs.set_xticks([0, 1], ["baseline", "final"], rotation=30, ha="right")
        ax_theirs.set_xlim(-0.5, 1.5)
        ax_theirs.set_ylabel("val_bpb on their data (Trn2)")
        ax_theirs.set_title("the write-up's\nendpoints (quoted)", fontsize=10)
        ax_theirs.grid(alpha=0.3)
    gains = [r for r in measured if "gain" in r]
    any_steps = any(r.get("equal_steps") for r in gains)
    for i, r in enumerate(gains):
        spread = None if r.get("n", 0) < 2 or r.get("gain_std") != r.get("gain_std") else r.get("gain_std")
        up = r["gain"] >= 0
        if r["kind"] == "speed":
            ax_gain.bar([i], [r["gain"]], width=0.6, color="C0", alpha=0.6, yerr=None if spread is None else [spread],
                        capsize=4)
            ratio = f"x{r['speed_ratio']:.2f} tokens/s" if r.get("speed_ratio") else "tokens/s not recorded"
            bought = "" if r.get("steps_bought") is None else f"\n{r['steps_bought']:+,.0f} steps"
            ax_gain.annotate(ratio + bought, (i, _bar_end(r["gain"], spread)), textcoords="offset points",
                             xytext=(0, 3 if up else -3),
                             ha="center", va="bottom" if up else "top", fontsize=7)
            continue
        color = {True: "C2", False: "C3"}.get(r.get("kept"), "0.6")
        e = r.get("equal_steps")
        x = i - 0.2 if e else i
        ax_gain.bar([x], [r["gain"]], width=0.4 if e else 0.6, color=color, capsize=4,
                    yerr=None if spread is None else [spread])
        if spread is None:
            ax_gain.annotate("one seed", (x, r["gain"]), textcoords="offset points", xytext=(0, 3 if up else -3),
                             ha="center", va="bottom" if up else "top", fontsize=7)
        if e:
            sd = e.get("diff_std")
            ax_gain.bar([i + 0.2], [e["gain"]], width=0.4, color=color, alpha=0.55, hatch="//", edgecolor="k",
                        capsize=4, yerr=None if sd is None or sd != sd else [sd])
            ax_gain.annotate(steps_span(e.get("steps_seen"), e.get("steps")), (i + 0.2, _bar_end(e["gain"], sd)), textcoords="offset points",
                             xytext=(0, 3 if e["gain"] >= 0 else -3), ha="center",
                             va="bottom" if e["gain"] >= 0 else "top", fontsize=7)
    ax_gain.margins(y=0.15)
    ax_gain.axhline(0, color="k", lw=0.8)
    ax_gain.set_xticks(range(len(gains)), [tick(r) for r in gains], rotation=30, ha="right", fontsize=8)
    ax_gain.set_ylabel("gain over the rung it is built on (bpb)")
    ax_gain.set_title("gain per rung at equal budget (green: kept by the rule,\nred: dropped, grey: not shown; "
                      "blue: a speed rung, not tested)", fontsize=9)
    ax_gain.grid(alpha=0.3, axis="y")
    if any_steps:  # in a band of its own above the bars: placed among them, it hid the top of the tallest
        lo, hi = ax_gain.get_ylim()
        ax_gain.set_ylim(lo, hi + 0.3 * (hi - lo))
        ax_gain.legend(handles=[Patch(facecolor="0.6", label="at equal budget (this ladder)"),
                                Patch(facecolor="0.6", alpha=0.55, hatch="//", edgecolor="k",
                                      label="at equal steps (sweep, or runs of the same steps)")], fontsize=7,
                       loc="upper right", ncols=2)
    return fig


def _bar_end(value: float, spread: float | None) -> float:
    """Where a bar's label goes: past the end of its error bar, so the two do not overlap."""
    if spread is None or spread != spread:
        return value
    return value + spread if value >= 0 else value - spread


def write_ladder_record(rows: list[dict], profile: str, corpus: str, root: str | Path = "runs",
                        extra: dict | None = None) -> Path:
    """Keep the table as a record of its own, `ROOT/PROFILE/ladder/CORPUS-YYYYmmdd-HHMMSS.json`, beside the runs it
    summarises (never over an older one), with the rule its rungs were judged by."""
    folder = Path(root) / profile / "ladder"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = folder / f"{corpus}-{stamp}.json"
    n = 2
    while path.exists():
        path, n = folder / f"{corpus}-{stamp}-{n}.json", n + 1
    rec = {"kind": LADDER_KIND, "profile": profile, "corpus": corpus, "rows": rows,
           "rungs": [asdict(r) for r in LADDER], "rule": RULE, "writeup_trn2": WRITEUP_TRN2,
           "code": records.code_version(), "hardware": records.hardware(),
           "created": time.strftime("%Y-%m-%dT%H:%M:%S"), **(extra or {})}
    return records.write_json(path, rec)


def latest_ladder_record(profile: str, corpus: str | None = None, root: str | Path = "runs") -> dict | None:
    """The newest ladder record of this profile and corpus (default: the profile's; None if there is none)."""
    import json
    import re

    from ..profiles import get_profile

    corpus = corpus or get_profile(profile).corpus

    def when(path: Path):
        m = re.fullmatch(re.escape(corpus) + r"-(\d{8}-\d{6})(?:-(\d+))?\.json", path.name)
        return (m.group(1), int(m.group(2) or 1)) if m else None

    found = sorted((p for p in (Path(root) / profile / "ladder").glob(f"{corpus}-*.json") if when(p)), key=when)
    return {**json.loads(found[-1].read_text()), "path": str(found[-1])} if found else None


LADDER_COLUMNS = {"rung": "rung", "recipe": "recipe", "bpb": "val_bpb (mean ± std, seeds, steps)",
                  "test": "test_bpb (mean ± std; gain over the rung below, paired)",
                  "regime": "epochs read; val - train loss", "tokens": "tokens/s", "equal_steps": "gain at equal steps (paired by seed)",
                  "budget": "gain at equal budget over the rung it is built on (paired by seed)",
                  "verdict": "verdict (the rule)", "total": "over baseline", "note": "note"}


def format_ladder(rows: list[dict]) -> str:
    """The ladder as a Markdown table (`LADDER_COLUMNS`, cells from `display_row`), rows of older records too."""
    from .report import markdown_table

    return markdown_table([display_row(r) for r in judged_rows(rows)], LADDER_COLUMNS)


README_BEGIN = "<!-- ladder table: generated from {path} by frontier.study.ladder.readme_table; do not edit by hand -->"
README_END = "<!-- end of ladder table -->"


def readme_table(record: dict) -> str:
    """The ladder record as the README shows it: one row per rung, ours with its seeds and steps, tokens/s, the gain
    at equal steps (where the record has one) and at equal budget, the rule's verdict, the write-up's endpoints
    beside (quoted), between markers naming the record (tests/test_ladder.py checks the README holds exactly this
    for the record it names). An older record's rows are presented by `judged_rows`."""
    w = record["writeup_trn2"]
    theirs = {"baseline": f"{w['baseline']}", "final": f"{w['final']}", "n-gram mix": f"gain ~{w['ngram_gain']}"}
    tested = any(r.get("test_mean") is not None for r in record["rows"])  # records with a test split: two columns
    extra = " test_bpb here (mean ± std; gain over the rung below, paired) | epochs read; val - train loss |"
    lines = [README_BEGIN.format(path=shown_path(record["path"])),
             "| rung | recipe | val_bpb here (mean ± std, seeds, steps) |" + (extra if tested else "")
             + " tokens/s | gain at equal steps (paired by seed) | gain at equal budget over the rung it is "
             "built on (paired by seed) | verdict (`frontier.study.compare.RULE`) | the write-up's (Trn2) |",
             "|---|---|---|" + ("---|---|" if tested else "") + "---|---|---|---|---|"]
    for r in judged_rows(record["rows"]):
        d = display_row(r)
        if same_as(r):
            cells = [d["bpb"]] + (["", ""] if tested else []) + ["", "", "", ""]
        elif "mean" not in r:
            cells = [d["bpb"]] + (["", ""] if tested else []) + ["", "", d["note"], ""]
        else:
            cells = ([d["bpb"]] + ([d["test"], d["regime"]] if tested else [])
                     + [d["tokens"], d["equal_steps"], d["budget"], d["verdict"]])
        cells = [c.replace("|", "\\|") for c in cells]
        lines.append(f"| {r['rung']} | `{r['recipe']}` | " + " | ".join(cells) + f" | {theirs.get(r['rung'], '')} |")
    return "\n".join(lines + [README_END])

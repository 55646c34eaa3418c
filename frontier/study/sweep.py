"""Sweeps and ablations: variants of a recipe, each trained (or reused) for the same seeds as its base, and judged
against it paired by seed.

A learning change is judged first at equal steps (`steps=N`: a step-limited run is nearly deterministic on the CPU,
and reusable on any machine where the code reproduces it), then at equal budget (`steps=None`: the profile's
budget, on its clock). `run_sweep` trains what it has not got, pairs every variant with the base by seed, applies
`frontier.study.compare.judge` and keeps the table as a sweep record in `ROOT/PROFILE/sweeps/`.

A variant names what it changes: model size and other profile fields (`sizes`), optimiser settings (`optim`),
n-gram settings (`ngram`), or a recipe of its own (`recipe`: a name, or a `Recipe` derived on the fly, e.g. the
final recipe with a weight average). A variant may also be another score of the base's own runs (`score`: the EMA
recipe's live weights, `val_bpb_live`, are its parent's trajectory at the same step, so they need no runs of their
own at equal steps).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from ..config import EMAConfig
from ..errors import UserError
from ..profiles import get_profile
from ..records import jsonable, repo_named
from ..recipes import Recipe, get_recipe, settings_label
from . import bench_records, experiments
from .compare import Group, judge, paired_test

SWEEP_KIND = "sweep"


@dataclass(frozen=True)
class Variant:
    """One row of a sweep: a recipe (a name or a `Recipe`) with some settings changed."""

    name: str
    recipe: str | Recipe
    sizes: dict | None = None
    optim: dict | None = None
    ngram: dict | None = None
    ema: EMAConfig | None = None
    score: str = "val_bpb"  # which of its runs' scores it is judged by (`val_bpb_live`: an EMA run's live weights)

    @property
    def recipe_name(self) -> str:
        """The recipe's own name (an alias such as `final` resolved: its folders must not move when it does)."""
        return get_recipe(self.recipe).name if isinstance(self.recipe, str) else self.recipe.name

    def label(self, steps: int | None) -> str:
        """Its run folders' name: the recipe, each change, and the step limit (`final-optim.matrix_lr0.04-400steps`)."""
        ema = None if self.ema is None else {"start": self.ema.start_frac, "hl": self.ema.half_life_frac,
                                             "every": self.ema.every, "mix": self.ema.mix}
        base = settings_label(self.recipe_name, sizes=self.sizes, optim=self.optim, ngram=self.ngram,
                                          ema=ema)
        return base + (f"-{steps}steps" if steps else "")

    def describe(self) -> dict:
        return {"name": self.name, "recipe": self.recipe_name, "sizes": self.sizes, "optim": self.optim,
                "ngram": self.ngram, "ema": None if self.ema is None else dataclasses.asdict(self.ema),
                "score": self.score}

    def same_runs(self, other: "Variant") -> bool:
        """Whether the two variants train the same runs (and differ at most in the score they read)."""
        return dataclasses.replace(self, name="", score="") == dataclasses.replace(other, name="", score="")

    def folder(self, steps: int | None, corpus: str = "embedded") -> str:
        """Its run folders' label on `corpus`: `label`, under `CORPUS/` for another corpus than the embedded one."""
        return self.label(steps) if corpus == "embedded" else f"{corpus}/{self.label(steps)}"

    def run(self, profile, seed: int, steps: int | None, root, data=None, log=print, corpus: str = "embedded") -> dict:
        return experiments.run(self.recipe, profile, seed=seed, root=root, steps=steps,
                               label=self.folder(steps, corpus),
                               sizes=self.sizes, ema=self.ema, ngram=self.ngram, optim=self.optim, data=data, log=log)


def run_sweep(name: str, base: Variant, variants: list[Variant], profile="cpu", seeds=(0, 1, 2),
              steps: int | None = None, root: str | Path = "runs", data=None, log=print, write: bool = True,
              corpus: str | None = None) -> dict:
    """Train or reuse `base` and every variant for `seeds` at `steps` steps (None: the profile's budget) on `corpus`
    (`frontier.data.corpus.CORPORA`, default the profile's; another than the embedded one is prepared at the
    profile's vocabulary and its runs live under ROOT/PROFILE/CORPUS/), then judge
    each variant against the base, paired by seed (`frontier.study.compare.judge`). Returns the sweep record (also
    written to ROOT/PROFILE/sweeps/ unless `write` is False): per row the variant, each seed's val_bpb and steps,
    the paired difference and the verdict."""
    prof = get_profile(profile)
    corpus = corpus or prof.corpus
    if data is None and corpus != "embedded":
        data = experiments.profile_dataset(prof, log=log, corpus_name=corpus)
    rows = []
    base_recs = {s: base.run(prof, s, steps, root, data, log, corpus) for s in seeds}
    base_group = _group(base.name, base_recs, base.score)
    for v in [base, *variants]:
        recs = base_recs if v.same_runs(base) else {s: v.run(prof, s, steps, root, data, log, corpus) for s in seeds}
        missing = [s for s, r in recs.items() if r.get(v.score) is None]
        if missing:
            raise UserError(f"sweep {name}: the runs of {v.name!r} have no {v.score} (seeds {missing})",
                            "score a variant by val_bpb_live only where its runs average the weights (an EMA recipe)")
        row = {**v.describe(), "label": v.folder(steps, corpus),
               "runs": {str(s): _run_summary(r, v.score) for s, r in recs.items()}}
        if v is not base:
            group = _group(v.name, recs, v.score)
            d = paired_test(base_group, group) if len(seeds) > 1 else None
            delta = group.mean - base_group.mean
            row.update(delta=delta, gain=-delta, p=None if d is None else d.p,
                       diff_std=None if d is None else d.diff_std,
                       verdict=judge(-delta, None if d is None else d.p, len(seeds)))
            tests = [row["runs"][str(s)]["test_bpb"] for s in seeds]
            base_tests = [_run_summary(base_recs[s], base.score)["test_bpb"] for s in seeds]
            if None not in tests + base_tests:  # reported beside the verdict, never judged on
                t_base = Group(base.name, tuple(base_tests), (), tuple(seeds))
                t_var = Group(v.name, tuple(tests), (), tuple(seeds))
                dt = paired_test(t_base, t_var) if len(seeds) > 1 else None
                row.update(test_gain=-(t_var.mean - t_base.mean), test_p=None if dt is None else dt.p)
        rows.append(row)
        log(f"sweep {name}: {v.name}: " + ", ".join(f"s{s} {r[v.score]:.4f} ({r['steps']} steps)"
                                                     for s, r in recs.items()))
    body = {"name": name, "profile": prof.name, "corpus": corpus, "seeds": list(seeds), "steps": steps,
            "budget_s": None if steps else prof.budget_s, "base": base.name, "rows": rows}
    arguments = {"name": name, "profile": prof.name, "seeds": list(seeds), "steps": steps, "corpus": corpus}
    # a re-execution that reused every run says nothing a record of the same rows does not: that record, not a new
    # one (any of them, newest first: two callers of one sweep with other rows would otherwise alternate as newest)
    same = json.loads(json.dumps(body, default=jsonable))
    old = next((r for r in sweeps_named(root, prof.name, name) if all(r.get(k) == v for k, v in same.items())),
               None) if write else None
    if old is not None:
        log(f"sweep {name}: the same runs and scores as {old.get('path')}: no new record")
        return old
    path = bench_records.new_record_path(Path(root) / prof.name / "sweeps", SWEEP_KIND, [name]) if write else None
    return bench_records.bench_record(SWEEP_KIND, arguments, None, f"{__name__}.run_sweep", body, path)


def _run_summary(rec: dict, score: str = "val_bpb") -> dict:
    """One run in a sweep row: `val_bpb` is the score the row is judged by (`score` of the record); `test_bpb` the
    same weights on the test split where the run scored one (a run scores test for its declared weights only, so a
    row read from its live weights has none)."""
    return {"val_bpb": rec[score], "test_bpb": rec.get("test_bpb") if score == "val_bpb" else None,
            "steps": rec["steps"], "tokens_per_s": rec.get("tokens_per_s"),
            "run_dir": repo_named(rec.get("run_dir")), "source_sha256": (rec.get("code") or {}).get("source_sha256")}


def _group(name: str, recs: dict[int, dict], score: str = "val_bpb") -> Group:
    seeds = sorted(recs)
    return Group(name, tuple(recs[s][score] for s in seeds), tuple(str(recs[s].get("run_dir")) for s in seeds),
                 tuple(seeds))


def format_sweep(rec: dict) -> str:
    """The sweep as a table: each row's val_bpb per seed (with its steps), the gain over the base (positive: lower
    val_bpb), p and the verdict."""
    seeds = rec["seeds"]
    when = f"{rec['steps']} steps" if rec["steps"] else f"budget {rec['budget_s']:g}s"
    lines = [f"sweep {rec['name']} ({rec['profile']} profile, {when}, seeds {', '.join(map(str, seeds))}; gain = "
             f"base - variant, paired by seed)",
             f"{'variant':<34}" + "".join(f"{'s' + str(s):>16}" for s in seeds) + f"{'gain':>9}{'p':>8}  verdict"]
    for row in rec["rows"]:
        cells = "".join(f"{row['runs'][str(s)]['val_bpb']:>9.4f} ({row['runs'][str(s)]['steps']:>3})" for s in seeds)
        gain = f"{row['gain']:>+9.4f}" if "gain" in row else f"{'(base)':>9}"
        p = f"{row['p']:>8.3f}" if row.get("p") is not None else f"{'':>8}"
        test = (f"  (test {row['test_gain']:+.4f}" + (f", p {row['test_p']:.3f})" if row.get("test_p") is not None
                                                      else ")")) if "test_gain" in row else ""
        lines.append(f"{row['name']:<34}{cells}{gain}{p}  {row.get('verdict', '')}{test}")
    return "\n".join(lines)


def sweeps_named(root: str | Path, profile: str, name: str) -> list[dict]:
    """The sweep records of that name in ROOT/PROFILE/sweeps/, newest first (`bench_records.records`)."""
    return bench_records.records(Path(root) / profile / "sweeps", SWEEP_KIND, [name])


def newest_sweep(root: str | Path, profile: str, name: str) -> dict | None:
    """The newest sweep record of that name in ROOT/PROFILE/sweeps/ (None: none)."""
    return next(iter(sweeps_named(root, profile, name)), None)


__all__ = ["Variant", "format_sweep", "newest_sweep", "run_sweep", "sweeps_named"]

"""Leave-one-out ablation: a recipe with each learning change on its path removed in turn, paired by seed.

`parts(recipe)` lists what can be removed from a recipe (the bigram table, the n-gram mix, the n-gram tables'
extra buckets, the weight average, the attention gate, or everything at once: the baseline); `variants(recipe, removes, steps)` builds the sweep's
rows. A removed part is an existing recipe with the same features and settings where there is one (the EMA recipe
without its average is `ngram`, whose runs may exist already), else a recipe derived on the fly (`ema-no-bigram`),
from the farthest recipe up the line of parents whose variant trains the same (`ngram-wide` without its n-gram mix
is `ngram-momentum-no-ngram`: with the mix off, the wider tables change nothing), so its runs serve them all. At equal steps the average needs no runs of its own: the EMA recipe's live weights are its parent's
trajectory at the same step, scored in the same run (`val_bpb_live`).

`run_ablation` trains or reuses the runs through `frontier.study.sweep.run_sweep`, so the record is a sweep record
(`ablation-RECIPE-STEPS` or `ablation-RECIPE-budget`, with `-CORPUS` for another corpus) and every row carries
its verdict. Speed changes (compile, kernels) are not ablated here: they are judged by a bench
(`frontier bench`) and the steps they buy.
"""

from __future__ import annotations

import dataclasses

from ..errors import UserError
from ..recipes import BASELINE, RECIPES, Features, Recipe, get_recipe
from .compare import keep
from .sweep import Variant, run_sweep

# feature of `frontier.recipes.Features` -> (part name on the command line, what a reader calls it)
PARTS = {"bigram": ("bigram", "bigram table"), "ngram": ("ngram", "n-gram mix"),
         "ngram_wider_log2": ("wider", "wider n-gram tables"), "ema": ("average", "weight average"),
         "attn_gate": ("gate", "attention gate")}
OFF = {"ema": None, "ngram_wider_log2": 0}  # a part's feature when it is removed (else False; 0 for a count)
ALL = "all"  # every learning change at once: the baseline
# The steps an equal-steps ablation takes per profile: about what the profile's budget buys the recipes compared
# (cpu: 385-402 steps for `baseline`, `ngram` and `ema` in 180 reference s, runs/cpu/ladder/docstrings-20261204-144642.json).
EQUAL_STEPS = {"smoke": 3, "cpu": 400}


def parts(recipe: str | Recipe) -> list[str]:
    """The parts `variants` can remove from `recipe` (its learning changes, in the order of `PARTS`), then `all`."""
    r = get_recipe(recipe) if isinstance(recipe, str) else recipe
    f = _effective(r.features)  # the n-gram tables' settings count only where the mix is on
    return [name for feature, (name, _) in PARTS.items() if getattr(f, feature)] + [ALL]


def _effective(f: Features) -> Features:
    """The features with the settings of a switched-off part at their defaults (they change nothing then)."""
    off = Features()
    if not f.ngram:
        f = dataclasses.replace(f, **{k.name: getattr(off, k.name) for k in dataclasses.fields(f)
                                      if k.name.startswith("ngram_")})
    if not f.bigram:
        f = dataclasses.replace(f, bigram_update=off.bigram_update)
    return f


def _same_recipe(derived: Recipe) -> Recipe | None:
    """An existing recipe that trains exactly what `derived` trains (its runs can be reused), or None."""
    for r in RECIPES.values():
        if _trains_same(r, derived):
            return r
    return None


def _removed(r: Recipe, feature: str) -> Recipe:
    """`r` with `feature` switched off, as a recipe derived on the fly (`ngram-no-bigram`)."""
    return r.derive(f"{r.name}-no-{PARTS[feature][0]}", f"{r.name} without its {PARTS[feature][1]} (leave-one-out)",
                    **{feature: OFF.get(feature, False)})


def _trains_same(a: Recipe, b: Recipe) -> bool:
    return _effective(a.features) == _effective(b.features) and a.sizes == b.sizes and a.optim == b.optim


def without(recipe: str | Recipe, part: str) -> Recipe:
    """`recipe` without one part (`parts`): an existing recipe with the same settings where there is one; else the
    part removed from the farthest recipe up its unbroken line of parents whose variant trains the same (`ngram-wide`
    without its n-gram mix is `ngram-momentum-no-ngram`: the wider tables mean nothing without the mix), so that
    those runs serve each recipe on that line; else the part removed from `recipe` itself."""
    r = get_recipe(recipe) if isinstance(recipe, str) else recipe
    if part == ALL:
        return BASELINE
    feature = next((f for f, (name, _) in PARTS.items() if name == part), None)
    if feature is None or part not in parts(r):
        raise UserError(f"recipe {r.name!r} has no part {part!r} to remove",
                        f"remove one of {', '.join(parts(r))}")
    derived = _removed(r, feature)
    same = _same_recipe(derived)
    if same is not None:
        return same
    a = r
    while a.parent in RECIPES and part in parts(RECIPES[a.parent]):
        earlier = _removed(RECIPES[a.parent], feature)
        if not _trains_same(earlier, derived):
            break
        derived, a = earlier, RECIPES[a.parent]
    return derived


def variants(recipe: str | Recipe, removes: list[str] | None = None, steps: int | None = None
             ) -> tuple[Variant, list[Variant]]:
    """The base row and one row per removed part (default: every part, then `all`). At equal steps (`steps`) the
    weight average is removed by reading the base runs' live weights; at equal budget its parent is trained."""
    r = get_recipe(recipe) if isinstance(recipe, str) else recipe
    removes = parts(r) if removes is None else list(removes)
    named = r.name if RECIPES.get(r.name) == r else r  # a registered recipe by name, a derived one as itself
    base = Variant(r.name, named)
    rows = []
    for part in removes:
        if part == "average" and steps and r.features.ema is not None:
            rows.append(Variant("- weight average (its live weights)", named, score="val_bpb_live"))
            continue
        other = without(r, part)
        what = "everything" if part == ALL else next(w for n, w in PARTS.values() if n == part)
        known = other.name if other.name in RECIPES else None
        rows.append(Variant(f"- {what}" + (f" (= {known})" if known else ""), known or other))
    return base, rows


def sweep_name(recipe: str, steps: int | None, corpus: str = "embedded") -> str:
    """`ablation-ema-420`, `ablation-ema-budget`, `ablation-ema-420-stdlib-source`."""
    return f"ablation-{recipe}-{steps or 'budget'}" + ("" if corpus == "embedded" else f"-{corpus}")


def run_ablation(recipe: str | Recipe, profile, seeds=(0, 1, 2), steps: int | None = None,
                 removes: list[str] | None = None, corpus: str | None = None, root="runs", log=print) -> dict:
    """Train or reuse the recipe and each row of `variants` for `seeds`, at `steps` (None: the profile's budget)
    on `corpus` (default: the profile's), and write the sweep record (`frontier.study.sweep`). Returns it."""
    from ..profiles import get_profile

    corpus = corpus or get_profile(profile).corpus
    r = get_recipe(recipe) if isinstance(recipe, str) else recipe
    base, rows = variants(r, removes, steps)
    return run_sweep(sweep_name(r.name, steps, corpus), base, rows, profile=profile, seeds=tuple(seeds), steps=steps,
                     root=root, corpus=corpus, log=log)


def part_of(row: dict | str) -> str | None:
    """Which part a sweep row (or a row's name) adds or removes, as a reader calls it: '- n-gram mix (= bigram)' ->
    'n-gram mix', '- everything (= baseline)' -> 'everything'; None for a row that names no part (the base row)."""
    name = row["name"] if isinstance(row, dict) else row
    for _, what in [*PARTS.values(), (ALL, "everything")]:
        if what in name:
            return what
    return None


def part_gain(row: dict) -> tuple[float, float | None, int] | None:
    """(gain of the part, p, seeds) from a sweep row that removes it ('- ...': the part's gain is the base's
    advantage over the row) or adds it ('+ ...'); None for the base row."""
    if "gain" not in row:
        return None
    sign = -1.0 if row["name"].lstrip().startswith("-") else 1.0
    return sign * row["gain"], row.get("p"), len(row["runs"])


def part_rows(at_steps: dict, at_budget: dict | None = None) -> list[dict]:
    """One row per part of a leave-one-out: its gain (positive: the part helps) at equal steps, from the sweep
    record `at_steps`, and at equal budget from `at_budget` (a sweep that removes or adds the same part, matched by
    what its row names), with the steps each ran and the verdict of `frontier.study.compare.keep`."""
    budget = {part_of(r["name"]): r for r in (at_budget or {}).get("rows", []) if "gain" in r}
    base_steps = [r["steps"] for r in at_steps["rows"][0]["runs"].values()]
    out = []
    for row in at_steps["rows"][1:]:
        what = part_of(row["name"])
        g_steps = part_gain(row)
        b_row = budget.get(what)
        g_budget = part_gain(b_row) if b_row else None
        kept, why = keep(g_steps, g_budget)
        steps_b = sorted(r["steps"] for r in (b_row or {}).get("runs", {}).values())
        out.append({"part": what, "row": row["name"], "gain at equal steps": g_steps[0], "p (steps)": g_steps[1],
                    "steps": f"{min(base_steps)}" if len(set(base_steps)) == 1 else
                    f"{min(base_steps)}-{max(base_steps)}",
                    "gain at equal budget": None if g_budget is None else g_budget[0],
                    "p (budget)": None if g_budget is None else g_budget[1],
                    "budget steps (part removed)": f"{steps_b[0]}-{steps_b[-1]}" if steps_b else "",
                    "kept": kept, "why": why})
    return out


__all__ = ["ALL", "EQUAL_STEPS", "PARTS", "part_gain", "part_of", "part_rows", "parts", "run_ablation", "sweep_name", "variants", "without"]

"""Comparing runs with their noise: mean, spread and count per group, and a Welch t-test between groups.

Runs are grouped by what was actually run: the same recipe, the same config hash (which covers the budget and
every config field) and the same step limit (`max_steps`, None for budget runs). `by=` picks a coarser key.

Each metric has a direction (`METRICS`: lower or higher is better). A difference is reported as better or
worse only when the t-test clears `alpha` (0.05 by default); otherwise it is "inside the noise", however large
the gap between the means looks. A difference between two groups that both have no spread, or a group with a
single run, is not judged at all: t and p are NaN.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from statistics import mean, stdev

from .errors import UserError
from .records import load_record

ALPHA = 0.05

# Record fields that can be compared, and whether lower is better (True) or higher is better (False).
METRICS: dict[str, bool] = {
    "val_bpb": True,
    "val_loss": True,
    "final_train_loss": True,
    "charged_s": True,
    "uncharged_s": True,
    "wall_s": True,
    "first_step_s": True,
    "step_s_median": True,
    "compile_s": True,
    "eval_s": True,
    "peak_mib": True,
    "tokens_per_s": False,
    "tokens_per_s_median": False,
    "tokens_per_s_min": False,
    "steps": False,
    "tokens": False,
}
LOWER_IS_BETTER_PREFIXES = ("val_bpb_",)  # val_bpb under another convention, e.g. val_bpb_parameter-golf

BY_RUN = "run"  # the default grouping: (recipe, config_hash, max_steps)
BY_CHOICES = (BY_RUN, "recipe", "config_hash", "profile", "recipe+budget", "label")


@dataclass(frozen=True)
class Group:
    name: str
    values: tuple[float, ...]
    runs: tuple[str, ...]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return mean(self.values)

    @property
    def std(self) -> float:
        return stdev(self.values) if self.n > 1 else float("nan")


@dataclass(frozen=True)
class Difference:
    a: str
    b: str
    delta: float  # mean(b) - mean(a)
    t: float
    p: float
    verdict: str


def metric_lower_is_better(metric: str) -> bool:
    """Whether a lower value of `metric` is better; a UserError naming the known metrics if it has no direction."""
    if metric in METRICS:
        return METRICS[metric]
    if metric.startswith(LOWER_IS_BETTER_PREFIXES):
        return True
    known = ", ".join(sorted(METRICS)) + ", " + ", ".join(p + "*" for p in LOWER_IS_BETTER_PREFIXES)
    raise UserError(f"unknown metric {metric!r}", f"use one of: {known}")


def welch(a: Group, b: Group, metric: str = "val_bpb", alpha: float = ALPHA,
          lower_is_better: bool | None = None) -> Difference:
    """Welch's t-test of `b` against `a` (scipy's ttest_ind, equal_var=False); delta is mean(b) - mean(a).

    The verdict says better or worse in the metric's direction (`lower_is_better`, by default looked up from
    `metric`) when p < alpha, else "inside the noise". With fewer than 2 runs in a group, or no spread in
    either group, t and p are NaN and the verdict says why the difference cannot be judged.
    """
    lower = metric_lower_is_better(metric) if lower_is_better is None else lower_is_better
    delta = b.mean - a.mean
    nan = float("nan")
    if a.n < 2 or b.n < 2:
        return Difference(a.name, b.name, delta, nan, nan, "needs at least 2 runs per group")
    if a.std == 0 and b.std == 0:
        return Difference(a.name, b.name, delta, nan, nan, "cannot be judged: no measured spread")
    from scipy.stats import ttest_ind

    res = ttest_ind(b.values, a.values, equal_var=False)
    t, p = float(res.statistic), float(res.pvalue)
    if not p < alpha:
        verdict = "inside the noise"
    else:
        better = (delta < 0) == lower
        verdict = f"{'better' if better else 'worse'} beyond the noise (p < {alpha})"
    return Difference(a.name, b.name, delta, t, p, verdict)


def folder_label(rec: dict) -> str | None:
    """The folder name that labels a run: a seed folder's parent (`runs/cpu/bigram-640steps/s0` ->
    `bigram-640steps`), else the run folder's own name; None without a run_dir or if it is the profile name."""
    run_dir = rec.get("run_dir")
    if not run_dir:
        return None
    path = Path(run_dir)
    name = path.parent.name if re.fullmatch(r"s\d+", path.name) else path.name
    return None if not name or name == rec.get("profile") else name


def run_label(rec: dict) -> str:
    """What to call one run: its `label` field, else its folder label, else its recipe."""
    return rec.get("label") or folder_label(rec) or str(rec.get("recipe"))


def group_key(rec: dict, by: str = BY_RUN) -> tuple:
    """The key `rec` is grouped under: (recipe, config_hash, max_steps) by default, else the field `by`
    (`recipe+budget`: recipe and budget_s; `label`: `run_label`)."""
    if by == BY_RUN:
        return rec.get("recipe"), rec.get("config_hash"), rec.get("max_steps")
    if by == "recipe+budget":
        return (f"{rec['recipe']}@{rec['budget_s']:g}s",)
    if by == "label":
        return (run_label(rec),)
    return (str(rec.get(by)),)


def group_name(recs: list[dict]) -> str:
    """The name of a default group: the `label` all its records share, else the folder label they all share,
    else the recipe."""
    for label in ([r.get("label") for r in recs], [folder_label(r) for r in recs]):
        if label[0] and len(set(label)) == 1:
            return label[0]
    return str(recs[0].get("recipe"))


def name_groups(keyed: dict[tuple, list[dict]], by: str = BY_RUN) -> list[str]:
    """One name per group, in order. Default groups get `group_name`, with ` [config hash, N steps]` added to
    names that two groups would otherwise share; other groupings are named by their key."""
    if by != BY_RUN:
        return [key[0] for key in keyed]
    names = [group_name(recs) for recs in keyed.values()]
    shared = {name for name in names if names.count(name) > 1}
    for i, (recipe, config_hash, max_steps) in enumerate(keyed):
        if names[i] in shared:
            steps = f", {max_steps} steps" if max_steps else ""
            names[i] = f"{names[i]} [{str(config_hash)[:8]}{steps}]"
    return names


def group_records(recs: list[dict], by: str = BY_RUN, metric: str = "val_bpb") -> list[Group]:
    """Groups of the records that hold `metric`, keyed by `group_key`, in order of first appearance."""
    keyed: dict[tuple, list[dict]] = {}
    for rec in recs:
        if rec.get(metric) is not None:
            keyed.setdefault(group_key(rec, by), []).append(rec)
    return [Group(name, tuple(float(r[metric]) for r in rs), tuple(str(r.get("run_dir", "?")) for r in rs))
            for name, rs in zip(name_groups(keyed, by), keyed.values())]


def compare(runs: list[str | Path | dict], by: str = BY_RUN, metric: str = "val_bpb") -> tuple[list[Group], list[Difference]]:
    """Load the runs (folders or records), keep the finished ones, group them (`group_records`) and test every
    group against the first one (`welch`). UserError for an unknown metric, a grouping field no record has, or
    no finished run holding the metric."""
    lower = metric_lower_is_better(metric)
    recs = [r if isinstance(r, dict) else load_record(r) for r in runs]
    unfinished = [r.get("run_dir", "?") for r in recs if r.get("status") != "finished"]
    recs = [r for r in recs if r.get("status") == "finished"]
    if not recs:
        raise UserError(f"no finished runs among those given (unfinished: {', '.join(unfinished) or 'none'})",
                        "pass run folders whose result.json has status finished")
    if by not in BY_CHOICES and not any(by in r for r in recs):
        raise UserError(f"no run record has a field {by!r} to group by", f"use --by with one of: {', '.join(BY_CHOICES)}")
    groups = group_records(recs, by, metric)
    if not groups:
        raise UserError(f"no finished run records {metric!r}", "pass runs that record it, or choose another --metric")
    diffs = [welch(groups[0], g, metric, lower_is_better=lower) for g in groups[1:]]
    return groups, diffs


def compact_runs(runs: tuple[str, ...]) -> str:
    """Run folders joined by ', ', each one after the first written as its last part alone when it shares its
    parent folder with the one before (`runs/cpu/bigram/s0, s1, s2`)."""
    parts, parent = [], None
    for run in runs:
        path = Path(run)
        parts.append(path.name if path.parent == parent else run)
        parent = path.parent
    return ", ".join(parts)


def format_comparison(groups: list[Group], diffs: list[Difference], metric: str = "val_bpb") -> str:
    """A table of n, mean and spread per group, the metric's direction, each difference against the first
    group with its Welch t and p and verdict, then the run folders that went into each group."""
    width = max(len(g.name) for g in groups) + 2
    lines = [f"{'group':<{width}} {'n':>3} {metric + ' mean':>14} {'std':>9}"]
    for g in groups:
        std = "-" if g.n < 2 else f"{g.std:.4f}"
        lines.append(f"{g.name:<{width}} {g.n:>3} {g.mean:>14.4f} {std:>9}")
    lines.append(_direction_line(metric))
    for d in diffs:
        p = "" if math.isnan(d.p) else f" (Welch t={d.t:.2f}, p={d.p:.3g})"
        lines.append(f"{d.b} - {d.a}: {d.delta:+.4f}{p}: {d.verdict}")
    lines.append("runs:")
    lines += [f"  {g.name}: {compact_runs(g.runs)}" for g in groups]
    return "\n".join(lines)


def _direction_line(metric: str) -> str:
    """`(lower METRIC is better)` or `(higher METRIC is better)`; `(METRIC has no known direction)` if unknown."""
    try:
        lower = metric_lower_is_better(metric)
    except UserError:
        return f"({metric} has no known direction)"
    return f"({'lower' if lower else 'higher'} {metric} is better)"

"""Comparing runs with their noise: mean, spread and count per group, and a Welch t-test between groups.

A difference is reported as a gain or a loss only when the t-test clears `alpha` (0.05 by default); otherwise it
is "inside the noise", however large the gap between the means looks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from statistics import mean, stdev

from .errors import UserError
from .records import load_record

ALPHA = 0.05


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


def welch(a: Group, b: Group, metric: str = "val_bpb", alpha: float = ALPHA, lower_is_better: bool = True) -> Difference:
    delta = b.mean - a.mean
    if a.n < 2 or b.n < 2:
        return Difference(a.name, b.name, delta, float("nan"), float("nan"), "needs at least 2 runs per group")
    from scipy.stats import ttest_ind

    if a.std == 0 and b.std == 0:
        t, p = (0.0, 1.0) if delta == 0 else (math.copysign(math.inf, delta), 0.0)
    else:
        res = ttest_ind(b.values, a.values, equal_var=False)
        t, p = float(res.statistic), float(res.pvalue)
    if not p < alpha:
        verdict = "inside the noise"
    else:
        better = (delta < 0) == lower_is_better
        verdict = f"{'better' if better else 'worse'} beyond the noise (p < {alpha})"
    return Difference(a.name, b.name, delta, t, p, verdict)


def group_records(recs: list[dict], by: str = "recipe", metric: str = "val_bpb") -> list[Group]:
    groups: dict[str, list[tuple[float, str]]] = {}
    for rec in recs:
        value = rec.get(metric)
        if value is None:
            continue
        key = str(rec.get(by)) if by != "recipe+budget" else f"{rec['recipe']}@{rec['budget_s']:g}s"
        groups.setdefault(key, []).append((float(value), rec.get("run_dir", "?")))
    return [Group(k, tuple(v for v, _ in vs), tuple(r for _, r in vs)) for k, vs in groups.items()]


def compare(runs: list[str | Path | dict], by: str = "recipe", metric: str = "val_bpb") -> tuple[list[Group], list[Difference]]:
    recs = [r if isinstance(r, dict) else load_record(r) for r in runs]
    unfinished = [r.get("run_dir", "?") for r in recs if r.get("status") != "finished"]
    recs = [r for r in recs if r.get("status") == "finished"]
    if not recs:
        raise UserError(f"no finished runs among those given (unfinished: {', '.join(unfinished) or 'none'})",
                        "pass run folders whose result.json has status finished")
    groups = group_records(recs, by, metric)
    diffs = [welch(groups[0], g, metric) for g in groups[1:]]
    return groups, diffs


def format_comparison(groups: list[Group], diffs: list[Difference], metric: str = "val_bpb") -> str:
    width = max(len(g.name) for g in groups) + 2
    lines = [f"{'group':<{width}} {'n':>3} {metric + ' mean':>14} {'std':>9}"]
    for g in groups:
        std = "-" if g.n < 2 else f"{g.std:.4f}"
        lines.append(f"{g.name:<{width}} {g.n:>3} {g.mean:>14.4f} {std:>9}")
    for d in diffs:
        p = "" if math.isnan(d.p) else f" (Welch t={d.t:.2f}, p={d.p:.3g})"
        lines.append(f"{d.b} - {d.a}: {d.delta:+.4f}{p}: {d.verdict}")
    return "\n".join(lines)

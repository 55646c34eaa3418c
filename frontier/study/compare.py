"""Comparing runs with their noise: mean, spread and count per group, and a Welch t-test between groups.

Runs are grouped by what was actually run: the same recipe, the same config hash (which covers the budget and
every config field), the same step limit (`max_steps`, None for budget runs) and the same number of data-parallel
processes (`world_size`, 1 for records without it: more processes take more steps in a budget, and more tokens
per second). `by=` picks a coarser key.

Each metric has a direction (`METRICS`: lower or higher is better). A difference is reported as better or
worse only when the t-test clears `alpha` (0.05 by default); otherwise it is "inside the noise", however large
the gap between the means looks. A difference between two groups that both have no spread, or a group with a
single run, is not judged at all: t and p are NaN.

Paired (`paired=True`, `frontier compare --paired`): runs of the same seed share their data order and
initialisation, so much of their noise is common; each group's runs are matched with the first group's by seed
(every seed once in each, the same seeds in both) and a paired t-test (scipy's ttest_rel) judges the per-seed
differences, whose mean and spread are reported. `repeats_needed` says how many seeds (pairs, or runs per group
for Welch) a two-sided t-test needs to detect a difference of a given size.

The machines' speeds: a run under the reference clock (`frontier.train.clock`) records its speed probe's timings;
each group's probe ratio is the median over its runs of (the run's median probe time / the reference time): 1.0 ran
as fast as the reference machine, 2.0 half as fast. The reference clock charges for that, but not exactly (a machine
whose matmuls are fast and memory slow is not normalised exactly), so `format_comparison` prints the ratios and
warns when two groups' differ by more than `PROBE_NOISE`, the probe's own measured noise.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from statistics import mean, stdev

from ..errors import UserError
from ..records import load_record
from ..train.clock import PROBE_NOISE

ALPHA = 0.05  # `compare` (`frontier compare`): a difference is called better or worse beyond the noise at p < 0.05
KEEP_ALPHA = 0.01  # the rule for keeping a learning change is stricter: p < 0.01 ...
POWER = 0.8

# How many seeds a claim needs, from the seeds' spread in the newest cpu ladder record (chapter 06 measures it).
NOISE_DELTA = 0.005  # the difference the help's example sizes the seeds for


def noise_rule(ladder: dict | None) -> str:
    """`frontier compare --help`'s paragraph on how many seeds a claim needs, from a ladder record's spreads (its
    first rung, the baseline, and its last with a spread, the final); without a record, how to get one."""
    rows = [r for r in (ladder or {}).get("rows", []) if r.get("std")]
    if len(rows) < 2:
        return ("How many seeds a claim needs follows from the seeds' spread: `frontier ladder` records it, and "
                "repeats_needed turns it into seeds.")
    base, final = rows[0], rows[-1]
    need = [repeats_needed(NOISE_DELTA, r["std"], alpha=KEEP_ALPHA, paired=False) for r in (final, base)]
    return (f"How many seeds a claim needs here ({ladder['profile']} profile, {ladder['corpus']} corpus, the ladder's "
            f"{final['n']} seeds a recipe: {ladder['path']}): the seed-to-seed std of val_bpb is {final['std']:.4f} "
            f"for {final['recipe']} and {base['std']:.4f} for {base['recipe']}. At the rule's p < {KEEP_ALPHA:g}, "
            f"with power {POWER:g} and unpaired groups, a difference of {NOISE_DELTA:g} needs {need[0]} seeds a "
            f"group at {final['recipe']}'s spread and {need[1]} at {base['recipe']}'s (repeats_needed). "
            "Under the steps rule the same recipe, seed and budget train the same steps anywhere, so pairing by seed "
            "(--paired) removes the seed's share of the spread; a gain measured inside one run (val_bpb_live against "
            "val_bpb_ema) is sharper still.")


# The one rule every rung, sweep and ablation is judged by (chapter 06 explains it; `judge` and `keep` apply it to a
# learning change, `judge_speed` to a speed change).
RULE = (
    "A speed change (the same arithmetic: compile, kernels, the sparse update) is judged by a side-by-side bench "
    "(tokens/s, rounds interleaved in one process) and by the steps it buys under the reference clock; no bpb test. "
    "A learning change (anything that changes what is computed) is judged first at equal steps, paired by seed "
    "(a --steps run is nearly deterministic on the CPU), then confirmed at equal budget, trained interleaved with "
    "its parent. It is kept when its paired gain at equal steps is positive with p < 0.01 (two-sided paired "
    "t-test, at least 5 seeds) and at equal budget it is not worse beyond the noise; worse beyond the noise at "
    "equal steps, it is dropped; anything else is not shown (and not kept). A change that trades what a step "
    "learns for how many steps fit (the model's size, the batch) is shown at equal steps but judged at equal "
    "budget alone: it is kept when its paired gain there is positive with p < 0.01."
)
MIN_SEEDS = 5  # ... over at least 5 seeds, paired: fewer is a screen, which shows nothing


def p_text(p: float) -> str:
    """A p-value as the book prints it: 'p = 0.041', or 'p < 0.001' where three decimals would show zero."""
    return "p < 0.001" if p < 0.0005 else f"p = {p:.3f}"


def judge(gain: float, p: float | None, seeds: int, alpha: float | None = None) -> str:
    """The verdict on one paired comparison of a learning change (`gain`: how much lower the variant's val_bpb is,
    mean over seeds; `p`: the paired t-test's): better or worse beyond the noise (p < `alpha`), else not shown;
    with fewer than `MIN_SEEDS` seeds, a screen that shows nothing. `alpha` None: `KEEP_ALPHA`."""
    alpha = KEEP_ALPHA if alpha is None else alpha
    if seeds < MIN_SEEDS or p is None or not math.isfinite(p):
        return f"screen only ({seeds} seed{'s' if seeds != 1 else ''}; a verdict needs {MIN_SEEDS})"
    if p < alpha:
        return f"{'better' if gain > 0 else 'worse'} beyond the noise"
    return f"not shown (p = {p:.3f}; the rule needs p < {alpha:g})"


def keep(at_steps: tuple[float, float | None, int], at_budget: tuple[float, float | None, int] | None,
         alpha: float | None = None, trades_steps: bool = False) -> tuple[bool | None, str]:
    """`RULE` for a learning change: (kept, why) from its paired (gain, p, seeds) at equal steps and at equal budget
    (None: not measured yet). kept is True when the rule keeps it, False when it drops it (worse beyond the noise),
    None when it is not shown (too few seeds, p not below `alpha`, or the budget stage missing after a gain at equal
    steps): not kept either. `trades_steps` (a size or batch change: more or fewer steps fit the
    budget): equal steps is only shown; kept when better beyond the noise at equal budget."""
    if trades_steps:
        shown = judge(*at_steps, alpha) if at_steps is not None else "not measured"
        if at_budget is None:
            return None, f"trades steps: judged at equal budget, not measured yet (equal steps: {shown})"
        second, detail = _budget_stage(at_budget, alpha)
        if second.startswith("screen"):
            return None, f"equal budget: {second}"
        kept = True if second.startswith("better") else False if second.startswith("worse") else None
        return kept, f"equal budget: {second} ({detail}); equal steps, shown only: {shown}"
    gain, p, n = at_steps
    first = judge(gain, p, n, alpha)
    if first.startswith("screen"):
        return None, f"equal steps: {first}"
    if not first.startswith("better"):
        return (False if first.startswith("worse") else None), f"equal steps: {first} (gain {gain:+.4f}, {p_text(p)})"
    if at_budget is None:
        return None, f"equal steps: better (gain {gain:+.4f}, {p_text(p)}); equal budget not measured yet"
    second, detail = _budget_stage(at_budget, alpha)
    if second.startswith("worse"):
        return False, f"equal steps: better ({p_text(p)}); equal budget: worse beyond the noise ({at_budget[0]:+.4f})"
    return True, f"equal steps: better (gain {gain:+.4f}, {p_text(p)}); equal budget: {second} ({detail})"


def _budget_stage(at_budget: tuple[float, float | None, int], alpha: float) -> tuple[str, str]:
    """The equal-budget stage's verdict (`judge`) and its figures: the gain, and its p where there is one."""
    gain, p, n = at_budget
    shown_p = f", {p_text(p)}" if p is not None and math.isfinite(p) else ""
    return judge(gain, p, n, alpha), f"{gain:+.4f}{shown_p}"


# A speed change's bench: each round of the variant against the round of its parent next to it in time (the bench
# alternates them, so a drift of the machine touches both). Faster (or slower) when every round says so: with
# MIN_ROUNDS rounds a one-sided sign test's p is 0.5 ** 5 = 0.031 < ALPHA.
MIN_ROUNDS = 5


@dataclass(frozen=True)
class SpeedJudgement:
    """`RULE` for a speed change: its bench against its parent's (`ratio` of median tokens/s, `round_ratios` one
    per round) and, where there are runs, the steps each seed took under the reference clock (`steps`: (seed,
    parent's steps, variant's steps) for the seeds both have)."""

    parent: str
    variant: str
    ratio: float
    round_ratios: tuple[float, ...]
    steps: tuple[tuple[int, int, int], ...]
    bench: str  # "faster", "slower", "inside the spread" or "screen only (...)"
    kept: bool | None
    verdict: str  # the bench's ratio and rounds, the steps, the decision
    short: str  # the decision and what decided it, in one clause

    @property
    def steps_gain(self) -> float | None:
        """The mean over seeds of the variant's steps minus its parent's (None without runs)."""
        return mean(v - b for _, b, v in self.steps) if self.steps else None

    @property
    def steps_ratio(self) -> float | None:
        """The variant's steps over its parent's, summed over the paired seeds (None without runs)."""
        return sum(v for *_, v in self.steps) / sum(b for _, b, _ in self.steps) if self.steps else None


def judge_speed(bench: dict, parent: str, variant: str, parent_runs: list[dict] = (),
                variant_runs: list[dict] = ()) -> SpeedJudgement:
    """`RULE` for a speed change (`variant` against `parent`, both recipes of the bench record `bench`): the bench
    decides (faster when every one of at least `MIN_ROUNDS` rounds is, slower likewise, else inside its spread),
    and the runs under the reference clock, paired by seed, say how many steps it bought. Kept when faster and
    the runs took more steps; dropped when slower or inside the spread; undecided when the bench has too few rounds,
    or says faster while the runs took no more steps (then the machine's speed differed between the runs)."""
    rows = {r["recipe"]: r for r in bench["rows"]}
    missing = [r for r in (parent, variant) if r not in rows]
    if missing:
        raise UserError(f"the bench record has no row for {', '.join(missing)} (rows: {', '.join(rows)})",
                        "bench the parent and the variant side by side (`frontier bench PARENT VARIANT`)")
    a, b = rows[parent], rows[variant]
    rounds = tuple(y / x for x, y in zip(a["samples"], b["samples"]))
    ratio = b["tokens_per_s_median"] / a["tokens_per_s_median"]
    by_seed = {r["seed"]: r["steps"] for r in parent_runs}
    steps = tuple((r["seed"], by_seed[r["seed"]], r["steps"]) for r in variant_runs if r["seed"] in by_seed)
    spread = f"rounds {min(rounds):.2f}-{max(rounds):.2f}x"
    if len(rounds) < MIN_ROUNDS:
        seen = f"screen only ({len(rounds)} round{'s' if len(rounds) != 1 else ''}; a verdict needs {MIN_ROUNDS})"
    elif all(r > 1 for r in rounds):
        seen = "faster"
    elif all(r < 1 for r in rounds):
        seen = "slower"
    else:
        seen = "inside the spread"
    bench_part = f"{ratio:.2f}x tokens/s ({spread}, {len(rounds)} interleaved round{'s' if len(rounds) != 1 else ''})"
    if steps:
        gain = mean(v - p for _, p, v in steps)
        clocks = {r.get("clock") or "wall" for r in (*parent_runs, *variant_runs)}
        clock = f"the {clocks.pop()} clock" if len(clocks) == 1 else "mixed clocks"
        diffs = [v - p for _, p, v in steps]
        each = f"{min(diffs):+d} to {max(diffs):+d}, " if len(diffs) > 1 else ""
        steps_part = (f"{gain:+.0f} steps a seed in the same budget under {clock} ({each}"
                      f"{sum(v for *_, v in steps) / sum(p for _, p, _ in steps) - 1:+.0%} in all, "
                      f"{len(steps)} seed{'s' if len(steps) != 1 else ''})")
    else:
        gain, steps_part = None, "no runs"
    if seen.startswith("screen"):
        kept, short = None, f"{seen}: undecided"
        verdict = f"{short}; {bench_part}; {steps_part}"
    elif seen == "faster" and gain is not None and gain <= 0:
        kept, short = None, "faster in every bench round, but no more steps in the same budget: undecided"
        verdict = (f"faster in the bench ({bench_part}) but {steps_part}: the runs disagree with the bench "
                   "(the machine's speed differed between them)")
    elif seen == "faster":
        kept = True if gain is not None else None
        short = (f"faster in every bench round and {gain:+.0f} steps a seed in the same budget"
                 + (f" ({min(diffs):+d} to {max(diffs):+d})" if len(diffs) > 1 else "") + ": kept" if kept else
                 "faster in every bench round; the steps it buys are not measured")
        verdict = f"faster in every round: {bench_part}; {steps_part}" + (": kept" if kept else "")
    else:
        kept = False
        short = f"{'slower in every bench round' if seen == 'slower' else f'inside the bench spread ({spread})'}: dropped"
        verdict = f"{seen}: {bench_part}; {steps_part}: dropped"
    return SpeedJudgement(parent, variant, ratio, rounds, steps, seen, kept, verdict, short)


# Record fields that can be compared, and whether lower is better (True) or higher is better (False).
METRICS: dict[str, bool] = {
    "val_bpb": True,
    "val_loss": True,
    "test_bpb": True,  # the record's report, on the test split (nothing is chosen on it)
    "test_loss": True,
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
# val_bpb under another convention (val_bpb_parameter-golf), or of other weights (val_bpb_live, val_loss_ema)
LOWER_IS_BETTER_PREFIXES = ("val_bpb_", "val_loss_")

BY_RUN = "run"  # the default grouping: (recipe, config_hash, max_steps, world_size)
BY_CHOICES = (BY_RUN, "recipe", "config_hash", "profile", "recipe+budget", "label")


@dataclass(frozen=True)
class Group:
    name: str
    values: tuple[float, ...]
    runs: tuple[str, ...]
    seeds: tuple = ()  # the seed of each run (for pairing), where known
    probe_ratios: tuple = ()  # each run's median probe time / reference time (None: a wall-clock run)

    @property
    def probe_ratio(self) -> float | None:
        """The median probe ratio of the group's reference-clock runs (None: none ran under it)."""
        known = sorted(r for r in self.probe_ratios if r is not None)
        return None if not known else (known[(len(known) - 1) // 2] + known[len(known) // 2]) / 2

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
    delta: float  # mean(b) - mean(a) (paired: also the mean of the per-seed differences b - a)
    t: float
    p: float
    verdict: str
    test: str = "welch"  # or "paired"
    pairs: int | None = None  # paired: the number of seeds matched
    diff_std: float | None = None  # paired: the sample std of the per-seed differences (NaN with one pair)


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
    return Difference(a.name, b.name, delta, t, p, _verdict(delta, p, alpha, lower))


def _verdict(delta: float, p: float, alpha: float, lower: bool) -> str:
    if not p < alpha:
        return "inside the noise"
    better = (delta < 0) == lower
    return f"{'better' if better else 'worse'} beyond the noise (p < {alpha})"


def pair_by_seed(a: Group, b: Group) -> list[tuple[int, float, float]]:
    """(seed, a's value, b's value) for each seed, in seed order. UserError (one line) where a group has a run
    without a seed or a seed twice, or where a seed of one group has no partner in the other."""
    by_seed = []
    for g in (a, b):
        seeds = list(g.seeds) if len(g.seeds) == g.n else [None] * g.n
        if None in seeds:
            raise UserError(f"cannot pair by seed: a run of {g.name!r} records no seed", "compare without --paired")
        twice = sorted({s for s in seeds if seeds.count(s) > 1})
        if twice:
            raise UserError(f"cannot pair by seed: {g.name!r} has seed {', '.join(map(str, twice))} more than once",
                            "pass one run per seed and group, or compare without --paired")
        by_seed.append(dict(zip(seeds, g.values)))
    alone = {g.name: sorted(set(mine) - set(other)) for g, mine, other in
             [(a, by_seed[0], by_seed[1]), (b, by_seed[1], by_seed[0])]}
    if any(alone.values()):
        where = "; ".join(f"seed {', '.join(map(str, s))} of {name!r}" for name, s in alone.items() if s)
        raise UserError(f"cannot pair by seed: no partner for {where}",
                        "pass the same seeds for both groups, or compare without --paired")
    return [(s, by_seed[0][s], by_seed[1][s]) for s in sorted(by_seed[0])]


def paired_test(a: Group, b: Group, metric: str = "val_bpb", alpha: float = ALPHA,
                lower_is_better: bool | None = None) -> Difference:
    """A paired t-test of `b` against `a`, runs matched by seed (`pair_by_seed`): scipy's ttest_rel(b, a) on the
    per-seed values. delta = the mean of the differences b - a, `diff_std` their sample std, `pairs` their count.
    With fewer than 2 pairs, or differences without spread, t and p are NaN and the verdict says why."""
    lower = metric_lower_is_better(metric) if lower_is_better is None else lower_is_better
    pairs = pair_by_seed(a, b)
    diffs = [vb - va for _, va, vb in pairs]
    delta, nan = mean(diffs), float("nan")
    sd = stdev(diffs) if len(diffs) > 1 else nan
    kw = dict(test="paired", pairs=len(pairs), diff_std=sd)
    if len(pairs) < 2:
        return Difference(a.name, b.name, delta, nan, nan, "needs at least 2 pairs", **kw)
    if sd == 0:
        return Difference(a.name, b.name, delta, nan, nan, "cannot be judged: no spread in the differences", **kw)
    from scipy.stats import ttest_rel

    res = ttest_rel([vb for _, _, vb in pairs], [va for _, va, _ in pairs])
    t, p = float(res.statistic), float(res.pvalue)
    return Difference(a.name, b.name, delta, t, p, _verdict(delta, p, alpha, lower), **kw)


def paired_gain(base: list[dict], variant: list[dict], score: str = "val_bpb") -> tuple[float, float, int]:
    """How much lower `variant`'s runs score than `base`'s, paired by seed: (gain, p, pairs), the mean per-seed
    gain (positive: the variant scores fewer bits), the paired t-test's p (`paired_test`) and the number of seeds
    paired: the shape `judge` and `keep` take. `score`: any lower-is-better field of the records (`val_bpb`,
    `test_bpb`, `val_bpb_live`)."""
    def group(name: str, recs: list[dict]) -> Group:
        missing = [r.get("run_dir", "?") for r in recs if r.get(score) is None]
        if missing:
            raise UserError(f"paired_gain: no {score} in {', '.join(map(str, missing))}",
                            "pass runs that scored it (test_bpb: a corpus with a test split)")
        return Group(name, tuple(float(r[score]) for r in recs), tuple(str(r.get("run_dir", "?")) for r in recs),
                     tuple(r.get("seed") for r in recs))

    d = paired_test(group("base", base), group("variant", variant), lower_is_better=True)
    return -d.delta, d.p, d.pairs


def t_test_power(n: int, effect: float, alpha: float = ALPHA, paired: bool = True) -> float:
    """The power of a two-sided t-test at level `alpha` to detect a true difference of `effect` standard
    deviations: paired, n pairs (df n - 1, noncentrality effect * sqrt(n)); else Welch with n runs per group and
    equal spreads (df 2n - 2, noncentrality effect * sqrt(n / 2)). Exact, from scipy's noncentral t."""
    from scipy.stats import nct
    from scipy.stats import t as t_dist

    df, nc = (n - 1, abs(effect) * math.sqrt(n)) if paired else (2 * n - 2, abs(effect) * math.sqrt(n / 2))
    crit = t_dist.ppf(1 - alpha / 2, df)
    return float(nct.sf(crit, df, nc) + nct.cdf(-crit, df, nc))


def repeats_needed(delta: float, sd: float, alpha: float = ALPHA, power: float = POWER, paired: bool = True) -> int:
    """The fewest seeds a two-sided t-test at level `alpha` needs to detect a true difference `delta` with
    probability `power`: paired, the number of pairs, `sd` the std of the per-seed differences; else (Welch)
    the runs per group, `sd` each group's std (equal in both). The smallest n >= 2 with `t_test_power` >= power,
    searched from the normal approximation ((z_(1-alpha/2) + z_power) * sd / delta)^2 (times 2 for Welch)."""
    if not delta or not math.isfinite(delta) or not sd > 0 or not math.isfinite(sd):
        raise UserError(f"repeats_needed needs a nonzero delta and a positive sd (got delta={delta}, sd={sd})",
                        "pass the difference to detect and the measured standard deviation")
    if not (0 < alpha < 1 and 0 < power < 1):
        raise UserError(f"alpha and power must lie in (0, 1) (got {alpha}, {power})", "pass e.g. 0.05 and 0.8")
    from scipy.stats import norm

    effect = abs(delta) / sd
    n = max(2, math.floor((norm.ppf(1 - alpha / 2) + norm.ppf(power)) ** 2 / effect**2 * (1 if paired else 2)))
    while n > 2 and t_test_power(n - 1, effect, alpha, paired) >= power:
        n -= 1
    while t_test_power(n, effect, alpha, paired) < power:
        n += 1
    return n


def folder_label(rec: dict) -> str | None:
    """The folder name that labels a run: a seed folder's parent (`runs/cpu/bigram-640steps/s0` or `.../s0-2` ->
    `bigram-640steps`), else the run folder's own name; None without a run_dir or if it is the profile name."""
    run_dir = rec.get("run_dir")
    if not run_dir:
        return None
    path = Path(run_dir)
    name = path.parent.name if re.fullmatch(r"s\d+(-\d+)?", path.name) else path.name
    return None if not name or name == rec.get("profile") else name


def run_label(rec: dict) -> str:
    """What to call one run: its `label` field, else its folder label, else its recipe."""
    return rec.get("label") or folder_label(rec) or str(rec.get("recipe"))


def group_key(rec: dict, by: str = BY_RUN) -> tuple:
    """The key `rec` is grouped under: (recipe, config_hash, max_steps, world_size) by default, else the field `by`
    (`recipe+budget`: recipe and budget_s; `label`: `run_label`)."""
    if by == BY_RUN:
        return rec.get("recipe"), rec.get("config_hash"), rec.get("max_steps"), rec.get("world_size", 1)
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
    """One name per group, in order. Default groups get `group_name`, with ` [config hash, N steps, x P
    processes]` added to names that two groups would otherwise share; other groupings are named by their key."""
    if by != BY_RUN:
        return [key[0] for key in keyed]
    names = [group_name(recs) for recs in keyed.values()]
    shared = {name for name in names if names.count(name) > 1}
    for i, (recipe, config_hash, max_steps, world_size) in enumerate(keyed):
        if names[i] in shared:
            steps = f", {max_steps} steps" if max_steps else ""
            procs = f", x{world_size} processes" if world_size != 1 else ""
            names[i] = f"{names[i]} [{str(config_hash)[:8]}{steps}{procs}]"
    return names


def group_records(recs: list[dict], by: str = BY_RUN, metric: str = "val_bpb") -> list[Group]:
    """Groups of the records that hold `metric`, keyed by `group_key`, in order of first appearance."""
    keyed: dict[tuple, list[dict]] = {}
    for rec in recs:
        if rec.get(metric) is not None:
            keyed.setdefault(group_key(rec, by), []).append(rec)
    return [Group(name, tuple(float(r[metric]) for r in rs), tuple(str(r.get("run_dir", "?")) for r in rs),
                  tuple(r.get("seed") for r in rs), tuple(probe_ratio(r) for r in rs))
            for name, rs in zip(name_groups(keyed, by), keyed.values())]


def probe_ratio(rec: dict) -> float | None:
    """A reference-clock run's median probe time over its probe's reference time (None: a wall-clock run)."""
    p = rec.get("probe") or {}
    return p["probe_s_median"] / p["ref_s"] if p.get("probe_s_median") and p.get("ref_s") else None


def probe_lines(groups: list[Group]) -> list[str]:
    """Each group's probe ratio, and a warning when two groups' differ by more than `PROBE_NOISE` (relative)."""
    ratios = [(g.name, g.probe_ratio) for g in groups]
    if all(r is None for _, r in ratios):
        return []
    lines = ["machine speed (median probe time / reference time; wall-clock runs: -): "
             + ", ".join(f"{n} {'-' if r is None else f'{r:.2f}'}" for n, r in ratios)]
    known = [r for _, r in ratios if r is not None]
    if len(known) > 1 and max(known) / min(known) - 1 > PROBE_NOISE:
        lines.append(f"warning: the groups ran on machines whose probe times differ by {max(known) / min(known) - 1:.0%}"
                     f", more than the probe's noise ({PROBE_NOISE:.0%}): the reference clock evens out most of "
                     "that, not all (frontier.train.clock)")
    return lines


def compare(runs: list[str | Path | dict], by: str = BY_RUN, metric: str = "val_bpb",
            paired: bool = False, alpha: float = ALPHA) -> tuple[list[Group], list[Difference]]:
    """Load the runs (folders or records), keep the finished ones, group them (`group_records`) and test every
    group against the first one (`welch`, or with `paired` `paired_test`, runs matched by seed), a difference
    called better or worse at p < `alpha` (`KEEP_ALPHA` for the rule that keeps a learning change). UserError for an
    unknown metric, an alpha outside (0, 1), a grouping field no record has, no finished run holding the metric, or
    (paired) runs that cannot be matched by seed."""
    if not 0 < alpha < 1:
        raise UserError(f"alpha {alpha:g} is not a probability between 0 and 1",
                        f"pass e.g. --alpha {KEEP_ALPHA:g} (the rule that keeps a learning change) or {ALPHA:g}")
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
    test = paired_test if paired else welch
    diffs = [test(groups[0], g, metric, alpha=alpha, lower_is_better=lower) for g in groups[1:]]
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
    group with its t and p (Welch, or paired: with the number of pairs and the std of the per-seed differences)
    and verdict, then the run folders that went into each group."""
    width = max(len(g.name) for g in groups) + 2
    lines = [f"{'group':<{width}} {'n':>3} {metric + ' mean':>14} {'std':>9}"]
    for g in groups:
        std = "-" if g.n < 2 else f"{g.std:.4f}"
        lines.append(f"{g.name:<{width}} {g.n:>3} {g.mean:>14.4f} {std:>9}")
    lines.append(_direction_line(metric))
    lines += probe_lines(groups)
    for d in diffs:
        if d.test == "paired":
            sd = "-" if math.isnan(d.diff_std) else f"{d.diff_std:.4f}"
            p = "" if math.isnan(d.p) else f", paired t={d.t:.2f}, p={d.p:.3g}"
            lines.append(f"{d.b} - {d.a}: {d.delta:+.4f} (mean of {d.pairs} per-seed differences, std {sd}{p}): "
                         f"{d.verdict}")
            continue
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

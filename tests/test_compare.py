import math

from scipy.stats import ttest_ind

from frontier.compare import compare, format_comparison


def rec(recipe, bpb, i):
    return {"recipe": recipe, "val_bpb": bpb, "status": "finished", "run_dir": f"{recipe}/{i}"}


def test_welch_matches_scipy_and_says_beyond_the_noise():
    a, b = [1.50, 1.51, 1.49], [1.40, 1.41, 1.395]
    groups, diffs = compare([rec("base", v, i) for i, v in enumerate(a)] + [rec("new", v, i) for i, v in enumerate(b)])
    assert [g.name for g in groups] == ["base", "new"] and groups[0].n == 3
    ref = ttest_ind(b, a, equal_var=False)
    assert math.isclose(diffs[0].p, ref.pvalue) and math.isclose(diffs[0].t, ref.statistic)
    assert diffs[0].delta < 0 and diffs[0].verdict.startswith("better beyond the noise")
    assert "new - base" in format_comparison(groups, diffs)


def test_overlapping_groups_are_inside_the_noise():
    a, b = [1.50, 1.52, 1.48], [1.49, 1.53, 1.50]
    _, diffs = compare([rec("base", v, i) for i, v in enumerate(a)] + [rec("new", v, i) for i, v in enumerate(b)])
    assert diffs[0].verdict == "inside the noise"


def test_single_runs_need_repeats_and_unfinished_runs_are_skipped():
    recs = [rec("base", 1.5, 0), rec("new", 1.4, 0), {"recipe": "new", "val_bpb": None, "status": "interrupted"}]
    groups, diffs = compare(recs)
    assert diffs[0].verdict == "needs at least 2 runs per group" and math.isnan(groups[0].std)

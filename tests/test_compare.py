import json
import math

import pytest
from scipy.stats import ttest_ind

from frontier.cli import main
from frontier.errors import UserError
from frontier.study.compare import compare, format_comparison


def rec(folder, i, recipe="bigram", config_hash="d411cd029d8d96fb", max_steps=None, **metrics):
    """A finished run record as `load_record` returns it, lying in runs/cpu/FOLDER/sI."""
    return {"status": "finished", "recipe": recipe, "profile": "cpu", "config_hash": config_hash,
            "max_steps": max_steps, "seed": i, "run_dir": f"runs/cpu/{folder}/s{i}", **metrics}


def group_of(folder, values, metric="val_bpb", **kw):
    return [rec(folder, i, **kw, **{metric: v}) for i, v in enumerate(values)]


def test_welch_matches_scipy_and_says_beyond_the_noise():
    a, b = [1.50, 1.51, 1.49], [1.40, 1.41, 1.395]
    groups, diffs = compare(group_of("base", a, recipe="base")
                            + group_of("new", b, recipe="new"))
    assert [g.name for g in groups] == ["base", "new"] and groups[0].n == 3
    ref = ttest_ind(b, a, equal_var=False)
    assert math.isclose(diffs[0].p, ref.pvalue) and math.isclose(diffs[0].t, ref.statistic)
    assert diffs[0].delta < 0 and diffs[0].verdict.startswith("better beyond the noise")
    assert "new - base" in format_comparison(groups, diffs)


def test_overlapping_groups_are_inside_the_noise():
    a, b = [1.50, 1.52, 1.48], [1.49, 1.53, 1.50]
    _, diffs = compare(group_of("base", a, recipe="base") + group_of("new", b, recipe="new"))
    assert diffs[0].verdict == "inside the noise"


def test_single_runs_need_repeats_and_unfinished_runs_are_skipped():
    recs = [rec("base", 0, recipe="base", val_bpb=1.5), rec("new", 0, recipe="new", val_bpb=1.4),
            {**rec("new", 1, recipe="new", val_bpb=None), "status": "interrupted"}]
    groups, diffs = compare(recs)
    assert diffs[0].verdict == "needs at least 2 runs per group" and math.isnan(groups[0].std)
    assert math.isnan(diffs[0].t) and math.isnan(diffs[0].p)


def test_faster_tokens_per_s_is_better():
    slow, fast = [10_000, 10_100, 9_900], [12_200, 12_250, 12_150]  # +22% throughput
    _, diffs = compare(group_of("eager", slow, "tokens_per_s", recipe="baseline")
                       + group_of("compiled", fast, "tokens_per_s", recipe="compile"), metric="tokens_per_s")
    assert diffs[0].delta > 0 and diffs[0].verdict.startswith("better beyond the noise")
    _, diffs = compare(group_of("compiled", fast, "tokens_per_s", recipe="compile")
                       + group_of("eager", slow, "tokens_per_s", recipe="baseline"), metric="tokens_per_s")
    assert diffs[0].verdict.startswith("worse beyond the noise")


def test_lower_step_time_is_better():
    _, diffs = compare(group_of("a", [0.30, 0.31, 0.29], "step_s_median", recipe="a")
                       + group_of("b", [0.20, 0.21, 0.19], "step_s_median", recipe="b"), metric="step_s_median")
    assert diffs[0].verdict.startswith("better beyond the noise")


def test_the_test_split_score_is_compared_lower_is_better():
    _, diffs = compare(group_of("a", [1.69, 1.70, 1.68], "test_bpb", recipe="a")
                       + group_of("b", [1.66, 1.67, 1.65], "test_bpb", recipe="b"), metric="test_bpb")
    assert diffs[0].delta < 0 and diffs[0].verdict.startswith("better beyond the noise")


def test_unknown_metric_is_one_error_naming_the_known_ones():
    with pytest.raises(UserError) as e:
        compare(group_of("a", [1.0, 1.1], "val_bpb"), metric="bogus")
    assert "'bogus'" in e.value.problem and "val_bpb" in e.value.fix and "tokens_per_s" in e.value.fix
    assert "\n" not in str(e.value)


def test_zero_spread_groups_are_not_judged():
    groups, diffs = compare(group_of("a", [1.0, 1.0, 1.0], recipe="a")
                            + group_of("b", [1.0001, 1.0001, 1.0001], recipe="b"))
    d = diffs[0]
    assert math.isnan(d.t) and math.isnan(d.p) and math.isclose(d.delta, 0.0001)
    assert d.verdict == "cannot be judged: no measured spread"
    assert "cannot be judged: no measured spread" in format_comparison(groups, diffs)


def test_one_recipe_with_other_steps_budget_or_config_does_not_merge():
    recs = (group_of("bigram", [1.80, 1.79, 1.81])
            + group_of("bigram-640steps", [1.80, 1.81, 1.79], max_steps=640)
            + group_of("bigram-45s", [2.06], config_hash="2ca25b5e54cab5da")
            + group_of("bigram-lr0.05", [2.05], config_hash="7961483e4627b44f"))
    groups, diffs = compare(recs)
    assert [g.name for g in groups] == ["bigram", "bigram-640steps", "bigram-45s", "bigram-lr0.05"]
    assert [g.n for g in groups] == [3, 3, 1, 1]
    assert [(d.a, d.b) for d in diffs] == [("bigram", g) for g in ("bigram-640steps", "bigram-45s", "bigram-lr0.05")]


def test_by_recipe_keeps_the_coarse_grouping():
    recs = group_of("bigram", [1.80, 1.79]) + group_of("bigram-640steps", [1.80, 1.81], max_steps=640)
    groups, _ = compare(recs, by="recipe")
    assert [(g.name, g.n) for g in groups] == [("bigram", 4)]


def test_group_names_label_recipe_and_hash_suffix():
    labelled = [dict(r, label="sparse") for r in group_of("x", [1.8, 1.9])]
    assert compare(labelled)[0][0].name == "sparse"
    mixed_folders = [rec("bigram", 0, val_bpb=1.8), rec("size-3x192", 0, val_bpb=1.9)]  # same config, other folders
    assert [(g.name, g.n) for g in compare(mixed_folders)[0]] == [("bigram", 2)]
    profile_folder = [dict(rec("x", 0, val_bpb=1.8), run_dir="runs/cpu/s0")]  # parent is the profile
    assert compare(profile_folder)[0][0].name == "bigram"
    same_folder = group_of("bigram", [1.8, 1.9]) + group_of("bigram", [1.7, 1.6], max_steps=640)
    assert [g.name for g in compare(same_folder)[0]] == ["bigram [d411cd02]", "bigram [d411cd02, 640 steps]"]


def test_format_lists_the_runs_of_each_group():
    recs = group_of("bigram", [1.80, 1.79, 1.81]) + group_of("bigram-640steps", [1.80, 1.81], max_steps=640)
    out = format_comparison(*compare(recs))
    assert "  bigram: runs/cpu/bigram/s0, s1, s2" in out.splitlines()
    assert "  bigram-640steps: runs/cpu/bigram-640steps/s0, s1" in out.splitlines()
    assert "(lower val_bpb is better)" in out


def test_cli_compare_tokens_per_s_says_better(tmp_path, capsys):
    runs = []
    for folder, recipe, speeds in [("eager", "baseline", [10_000, 10_100, 9_900]),
                                   ("compiled", "compile", [12_200, 12_250, 12_150])]:
        for r in group_of(folder, speeds, "tokens_per_s", recipe=recipe, val_bpb=1.8):
            run_dir = tmp_path / r.pop("run_dir")
            run_dir.mkdir(parents=True)
            (run_dir / "result.json").write_text(json.dumps(r))
            runs.append(str(run_dir))
    assert main(["compare", *runs, "--metric", "tokens_per_s"]) == 0
    out = capsys.readouterr().out
    assert "better beyond the noise" in out and "compiled - eager: +2200.0000" in out
    assert f"  compiled: {tmp_path}/runs/cpu/compiled/s0, s1, s2" in out
    assert main(["compare", *runs, "--metric", "bogus"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unknown metric 'bogus'") and len(err.splitlines()) == 1


# ----------------------------------------------------------------------------- paired by seed, and how many seeds


def seeded(folder, values_by_seed, recipe, metric="val_bpb"):
    return [rec(folder, s, recipe=recipe, **{metric: v}) for s, v in values_by_seed.items()]


def test_paired_pairs_by_seed_and_matches_ttest_rel():
    from statistics import mean, stdev

    from scipy.stats import ttest_rel

    a = {0: 1.500, 1: 1.530, 2: 1.470, 3: 1.512}
    b = {3: 1.500, 1: 1.522, 0: 1.493, 2: 1.466}  # listed in another order: pairing goes by seed
    groups, diffs = compare(seeded("base", a, "base") + seeded("new", b, "new"), paired=True)
    d = diffs[0]
    ref = ttest_rel([b[s] for s in range(4)], [a[s] for s in range(4)])
    assert d.test == "paired" and d.pairs == 4
    assert math.isclose(d.t, ref.statistic) and math.isclose(d.p, ref.pvalue)
    per_seed = [b[s] - a[s] for s in range(4)]
    assert math.isclose(d.delta, mean(per_seed)) and math.isclose(d.diff_std, stdev(per_seed))
    assert math.isclose(d.delta, groups[1].mean - groups[0].mean)
    out = format_comparison(groups, diffs)
    assert "new - base: -0.0077 (mean of 4 per-seed differences, std 0.0033, paired t=-4.69" in out


def test_paired_sees_a_difference_the_seed_noise_hides_from_welch():
    a = {0: 1.50, 1: 1.56, 2: 1.44, 3: 1.53}  # the seed moves every run by several hundredths ...
    b = {s: v - 0.01 + 0.001 * (s % 2) for s, v in a.items()}  # ... the change lowers each seed's run by ~0.01
    recs = seeded("base", a, "base") + seeded("new", b, "new")
    assert compare(recs)[1][0].verdict == "inside the noise"
    assert compare(recs, paired=True)[1][0].verdict.startswith("better beyond the noise")


def test_paired_refuses_runs_it_cannot_pair_naming_the_seeds():
    with pytest.raises(UserError) as e:
        compare(seeded("base", {0: 1.5, 1: 1.6, 2: 1.4}, "base") + seeded("new", {0: 1.5, 1: 1.6, 5: 1.4}, "new"),
                paired=True)
    msg = str(e.value)
    assert "\n" not in msg and "seed 2 of 'base'" in msg and "seed 5 of 'new'" in msg
    twice = seeded("base", {0: 1.5, 1: 1.6}, "base") + seeded("new", {0: 1.5, 1: 1.6}, "new")
    twice.append(dict(twice[-1], run_dir="runs/cpu/new/s1-2"))
    with pytest.raises(UserError, match="'new' has seed 1 more than once"):
        compare(twice, paired=True)
    _, diffs = compare(seeded("base", {0: 1.5}, "base") + seeded("new", {0: 1.4}, "new"), paired=True)
    assert diffs[0].verdict == "needs at least 2 pairs" and math.isnan(diffs[0].p)
    _, diffs = compare(seeded("base", {0: 1.5, 1: 1.6}, "base") + seeded("new", {0: 1.4, 1: 1.5}, "new"), paired=True)
    assert diffs[0].verdict == "cannot be judged: no spread in the differences"


def test_cli_compare_paired(tmp_path, capsys):
    runs = []
    for folder, recipe, values in [("ngram", "ngram", {0: 1.50, 1: 1.56, 2: 1.44}),
                                   ("ema", "ema", {0: 1.49, 1: 1.551, 3: 1.43})]:
        for r in seeded(folder, values, recipe):
            run_dir = tmp_path / r.pop("run_dir")
            run_dir.mkdir(parents=True)
            (run_dir / "result.json").write_text(json.dumps(r))
            runs.append(str(run_dir))
    assert main(["compare", *runs, "--paired"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: cannot pair by seed")
    assert "seed 2 of 'ngram'" in err and "seed 3 of 'ema'" in err
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())  # the rule, as argparse wraps it
    from frontier.study.compare import noise_rule
    from frontier.study.ladder import latest_ladder_record

    assert "How many seeds a claim needs here (cpu profile" in help_text  # the committed ladder record's spreads
    assert " ".join(noise_rule(latest_ladder_record("cpu", "docstrings")).split()) in help_text


def test_repeats_needed_known_values_and_monotone():
    from frontier.study.compare import repeats_needed, t_test_power

    assert repeats_needed(1.0, 1.0) == 10  # paired, alpha 0.05, power 0.8: 10 pairs (power 0.803; 9 give 0.748)
    assert t_test_power(10, 1.0) >= 0.8 > t_test_power(9, 1.0)
    assert repeats_needed(-0.02, 0.02) == 10  # only the size counts
    assert repeats_needed(1.0, 1.0, paired=False) == 17  # Welch, runs per group, equal spreads
    assert repeats_needed(0.5, 1.0) == 34
    deltas = [0.002, 0.005, 0.01, 0.02, 0.05]
    ns = [repeats_needed(d, 0.01) for d in deltas]
    assert ns == sorted(ns, reverse=True) and ns[0] > ns[-1]  # a smaller effect needs more seeds
    assert repeats_needed(0.01, 0.02) > repeats_needed(0.01, 0.01)  # more noise, more seeds
    assert repeats_needed(0.01, 0.01, power=0.9) > repeats_needed(0.01, 0.01)
    assert repeats_needed(0.01, 0.01, alpha=0.01) > repeats_needed(0.01, 0.01)
    with pytest.raises(UserError):
        repeats_needed(0.0, 0.01)


def test_other_weights_have_a_direction():
    from frontier.study.compare import metric_lower_is_better

    assert all(metric_lower_is_better(m) for m in ["val_bpb_live", "val_bpb_ema", "val_loss_live", "val_loss_ema"])


def test_runs_on_other_process_counts_are_other_groups():
    """The same config on 1 and on 2 data-parallel processes: two groups (a record without world_size ran on 1)."""
    one = group_of("ngram", [1.70, 1.71])
    two = [dict(r, world_size=2, run_dir=r["run_dir"].replace("/ngram/", "/ngram-x2/"))
           for r in group_of("ngram", [1.69, 1.695])]
    groups, _ = compare(one + [dict(one[0], world_size=1, seed=5)] + two)
    assert [g.n for g in groups] == [3, 2]
    assert len({g.name for g in groups}) == 2


def bench_of(parent_samples, variant_samples, parent="baseline", variant="compile"):
    from statistics import median

    return {"rows": [{"recipe": r, "samples": list(s), "tokens_per_s_median": median(s)}
                     for r, s in ((parent, parent_samples), (variant, variant_samples))]}


def test_judge_speed_keeps_a_change_faster_in_every_round_that_buys_steps():
    from frontier.study.compare import judge_speed

    bench = bench_of([100, 110, 90, 105, 100], [120, 121, 100, 110, 130])
    j = judge_speed(bench, "baseline", "compile",
                    [rec("baseline", i, steps=s, clock="reference") for i, s in enumerate([200, 210, 220])],
                    [rec("compile", i, recipe="compile", steps=s, clock="reference")
                     for i, s in enumerate([230, 250, 240])])
    assert j.bench == "faster" and j.kept is True
    assert j.round_ratios[1] == pytest.approx(121 / 110) and j.ratio == pytest.approx(120 / 100)
    assert j.steps == ((0, 200, 230), (1, 210, 250), (2, 220, 240)) and j.steps_gain == pytest.approx(30)
    assert j.steps_ratio == pytest.approx(720 / 630)
    assert j.verdict.endswith("+30 steps a seed in the same budget under the reference clock "
                              "(+20 to +40, +14% in all, 3 seeds): kept")
    assert j.short == "faster in every bench round and +30 steps a seed in the same budget (+20 to +40): kept"


def test_judge_speed_drops_overlapping_or_slower_rounds_and_screens_short_benches():
    from frontier.study.compare import MIN_ROUNDS, judge_speed

    overlap = judge_speed(bench_of([100, 100, 100, 100, 100], [120, 90, 120, 120, 120]), "baseline", "compile")
    assert overlap.bench == "inside the spread" and overlap.kept is False and overlap.steps_gain is None
    slower = judge_speed(bench_of([100] * 5, [90] * 5), "baseline", "compile")
    assert slower.bench == "slower" and slower.kept is False and slower.short.endswith("dropped")
    short = judge_speed(bench_of([100] * (MIN_ROUNDS - 1), [200] * (MIN_ROUNDS - 1)), "baseline", "compile")
    assert short.kept is None and short.bench.startswith("screen only") and short.short.endswith("undecided")


def test_judge_speed_does_not_keep_a_bench_gain_the_runs_contradict():
    from frontier.study.compare import judge_speed

    j = judge_speed(bench_of([100] * 5, [120] * 5), "baseline", "compile",
                    [rec("baseline", i, steps=250) for i in range(3)],
                    [rec("compile", i, recipe="compile", steps=240) for i in range(3)])
    assert j.bench == "faster" and j.kept is None and "disagree" in j.verdict


def test_judge_speed_names_a_missing_row():
    from frontier.study.compare import judge_speed

    with pytest.raises(UserError, match="no row for compile-opt"):
        judge_speed(bench_of([100] * 5, [120] * 5), "baseline", "compile-opt")


def test_paired_gain_reads_any_score_pairs_by_seed_and_takes_judges_shape():
    from scipy.stats import ttest_rel

    from frontier.study.compare import judge, paired_gain

    a = {0: 1.80, 1: 1.83, 2: 1.77, 3: 1.81, 4: 1.79}
    b = {4: 1.75, 0: 1.77, 2: 1.74, 1: 1.79, 3: 1.77}  # another order: pairing goes by seed
    base = [{"seed": s, "test_bpb": v, "run_dir": f"runs/cpu/a/s{s}"} for s, v in a.items()]
    variant = [{"seed": s, "test_bpb": v, "run_dir": f"runs/cpu/b/s{s}"} for s, v in b.items()]
    gain, p, n = paired_gain(base, variant, "test_bpb")
    assert n == 5 and math.isclose(gain, sum(a[s] - b[s] for s in a) / 5)
    assert math.isclose(p, ttest_rel([b[s] for s in range(5)], [a[s] for s in range(5)]).pvalue)
    assert judge(gain, p, n).startswith("better")
    with pytest.raises(UserError, match="no val_bpb"):
        paired_gain(base, variant)


def test_compare_alpha_moves_the_verdict_and_refuses_what_is_not_a_probability(tmp_path, capsys):
    base = {0: 1.500, 1: 1.560, 2: 1.440, 3: 1.520, 4: 1.480}
    new = {s: v - d for (s, v), d in zip(base.items(), (0.004, 0.001, 0.006, 0.002, 0.003))}  # p about 0.02
    recs = seeded("base", base, "base") + seeded("new", new, "new")
    _, loose = compare(recs, paired=True)
    _, strict = compare(recs, paired=True, alpha=0.01)
    assert 0.01 < loose[0].p < 0.05 and loose[0].p == strict[0].p
    assert loose[0].verdict.startswith("better") and not strict[0].verdict.startswith("better")
    with pytest.raises(UserError, match="not a probability"):
        compare(recs, alpha=1.5)
    runs = []
    for r in recs:
        run_dir = tmp_path / r.pop("run_dir")
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "result.json").write_text(json.dumps(r))
        runs.append(str(run_dir))
    assert main(["compare", *runs, "--paired", "--alpha", "0.01"]) == 0
    assert "better" not in capsys.readouterr().out.split("runs:")[0].splitlines()[-1]
    assert main(["compare", *runs, "--alpha", "0"]) == 2
    assert capsys.readouterr().err.strip().startswith("error: alpha 0 is not a probability")


def test_the_help_sizes_seeds_from_the_ladder_record_it_names():
    """`compare --help` reads the spreads from a ladder record (its baseline and its last rung with a spread), names
    the record, and without one says how to get one: no figure is written into the help by hand."""
    from frontier.study.compare import KEEP_ALPHA, noise_rule, repeats_needed

    ladder = {"profile": "cpu", "corpus": "docstrings", "path": "runs/cpu/ladder/x.json",
              "rows": [{"recipe": "baseline", "std": 0.015, "n": 5}, {"recipe": "-", "std": None},
                       {"recipe": "final", "std": 0.003, "n": 5}]}
    text = noise_rule(ladder)
    need = [repeats_needed(0.005, sd, alpha=KEEP_ALPHA, paired=False) for sd in (0.003, 0.015)]
    assert "runs/cpu/ladder/x.json" in text and "0.0030 for final and 0.0150 for baseline" in text
    assert f"needs {need[0]} seeds a group at final's spread and {need[1]} at baseline's" in text
    assert need[0] < need[1]
    assert "frontier ladder" in noise_rule(None) and "seeds a group" not in noise_rule(None)

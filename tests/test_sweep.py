"""The keep/drop rule and sweeps at equal steps, paired by seed."""

import json
import math

from frontier.study.compare import KEEP_ALPHA, MIN_SEEDS, judge, keep
from frontier.recipes import FINAL
from frontier.study.sweep import Variant, format_sweep, newest_sweep, run_sweep, sweeps_named


def test_one_seed_is_a_screen_never_a_verdict():
    assert (MIN_SEEDS, KEEP_ALPHA) == (5, 0.01)  # the rule: a learning change is kept at p < 0.01 over 5 seeds
    assert judge(0.05, 0.001, 1).startswith("screen only")
    assert judge(0.05, float("nan"), MIN_SEEDS).startswith("screen only")
    assert keep((0.05, None, 1), None) == (None, "equal steps: screen only (1 seed; a verdict needs 5)")
    assert judge(0.05, 0.001, 4).startswith("screen only (4 seeds")  # p < 0.01 on four seeds: still a screen


def test_the_rule_keeps_only_a_change_better_at_equal_steps_and_not_worse_at_equal_budget():
    assert judge(0.01, 0.009, 5) == "better beyond the noise"
    assert judge(-0.01, 0.009, 5) == "worse beyond the noise"
    assert judge(0.01, 0.02, 5) == "not shown (p = 0.020; the rule needs p < 0.01)"  # p < 0.05 is not enough
    assert keep((0.01, 0.02, 5), None)[0] is None  # not shown at equal steps: not kept
    assert keep((-0.01, 0.005, 5), None)[0] is False  # worse beyond the noise at equal steps: dropped
    assert keep((0.01, 0.005, 5), None)[0] is None  # better, the budget stage still to run
    assert keep((0.01, 0.005, 5), (-0.002, 0.4, 5))[0] is True  # not worse beyond the noise at equal budget
    assert keep((0.01, 0.005, 5), (-0.02, 0.005, 5))[0] is False  # worse at equal budget: dropped


def test_a_sweep_pairs_every_variant_with_its_base_by_seed(tmp_path):
    base = Variant("base", "baseline")
    lr = Variant("matrix lr x2", "baseline", optim={"matrix_lr": 0.04})
    rec = run_sweep("t", base, [lr], profile="smoke", seeds=(0, 1), steps=3, root=tmp_path, log=lambda *a: None)
    assert [r["name"] for r in rec["rows"]] == ["base", "matrix lr x2"]
    row = rec["rows"][1]
    b = [rec["rows"][0]["runs"][s]["val_bpb"] for s in ("0", "1")]
    v = [row["runs"][s]["val_bpb"] for s in ("0", "1")]
    assert math.isclose(row["gain"], sum(b) / 2 - sum(v) / 2)
    assert row["verdict"].startswith("screen only") and row["label"] == "baseline-optim.matrix_lr0.04-3steps"
    assert Variant("f", "final").label(3).startswith(FINAL)  # an alias names no folder
    assert all(row["runs"][s]["steps"] == 3 for s in ("0", "1"))
    assert newest_sweep(tmp_path, "smoke", "t")["rows"] == rec["rows"]
    assert "matrix lr x2" in format_sweep(rec)
    again = run_sweep("t", base, [lr], profile="smoke", seeds=(0, 1), steps=3, root=tmp_path, log=lambda *a: None,
                      write=False)
    assert again["rows"][1]["runs"] == row["runs"]  # reused, not retrained: the same records
    written = sorted((tmp_path / "smoke" / "sweeps").glob("*.json"))
    third = run_sweep("t", base, [lr], profile="smoke", seeds=(0, 1), steps=3, root=tmp_path, log=lambda *a: None)
    assert sorted((tmp_path / "smoke" / "sweeps").glob("*.json")) == written  # nothing new to say: no new record
    assert third["rows"] == rec["rows"] and third["path"] == rec["path"]
    # a caller with fewer rows writes its own record; then the first caller's again finds its own, not a third
    fewer = run_sweep("t", base, [], profile="smoke", seeds=(0, 1), steps=3, root=tmp_path, log=lambda *a: None)
    assert fewer["path"] != rec["path"] and newest_sweep(tmp_path, "smoke", "t")["path"] == fewer["path"]
    fourth = run_sweep("t", base, [lr], profile="smoke", seeds=(0, 1), steps=3, root=tmp_path, log=lambda *a: None)
    assert fourth["path"] == rec["path"] and len(list((tmp_path / "smoke" / "sweeps").glob("*.json"))) == 2


def test_a_change_that_trades_steps_is_judged_at_equal_budget_alone():
    """A bigger model wins at equal steps and may lose at equal budget: the steps do not decide, the budget does."""
    better_at_steps = (0.02, 0.04, 5)
    assert keep(better_at_steps, None, trades_steps=True)[0] is None  # the budget stage still to run
    assert keep(better_at_steps, (-0.03, 0.005, 5), trades_steps=True)[0] is False  # worse at equal budget
    assert keep(better_at_steps, (-0.002, 0.5, 5), trades_steps=True)[0] is None  # not shown to help: not kept
    assert keep((-0.02, 0.005, 5), (0.03, 0.005, 5), trades_steps=True)[0] is True  # worse at steps, better at budget
    assert keep(better_at_steps, (0.03, 0.005, 4), trades_steps=True)[0] is None  # too few seeds to decide
    assert keep((-0.02, 0.005, 5), (0.03, 0.005, 5))[0] is False  # the plain rule would have dropped it


def test_a_sweep_reports_test_beside_its_verdict_where_the_data_has_a_test_split(tmp_path, corpus_dir):
    from frontier.data.dataset import prepare

    data = prepare(tmp_path / "data", text=[str(corpus_dir)], vocab_size=512, val_fraction=0.2, test_fraction=0.2,
                   log=lambda m: None)
    assert data.has_test
    base = Variant("base", "baseline")
    lr = Variant("matrix lr x2", "baseline", optim={"matrix_lr": 0.04})
    rec = run_sweep("t", base, [lr], profile="smoke", seeds=(0, 1), steps=3, root=tmp_path / "runs", data=data,
                    log=lambda *a: None)
    row = rec["rows"][1]
    t = [[r["runs"][s]["test_bpb"] for s in ("0", "1")] for r in rec["rows"]]
    assert None not in t[0] + t[1] and math.isclose(row["test_gain"], sum(t[0]) / 2 - sum(t[1]) / 2)
    assert "(test " in format_sweep(rec)


def test_the_newest_sweep_of_a_second_is_the_one_written_last(tmp_path):
    folder = tmp_path / "cpu" / "sweeps"
    folder.mkdir(parents=True)
    for stem, n in (("20261205-140706", 1), ("20261205-140706-2", 2), ("20261205-140706-3", 3), ("20261204-235959", 0),
                    ("x-20261206-000000", 9)):  # the last: another sweep whose name starts with this one's
        created = "2026-12-04T23:59:59+00:00" if n == 0 else "2026-12-05T14:07:06+00:00"
        (folder / f"sweep-t-{stem}.json").write_text(json.dumps({"record": "frontier-bench", "kind": "sweep",
                                                                  "created": created, "n": n}))
    assert newest_sweep(tmp_path, "cpu", "t")["n"] == 3
    assert [r["n"] for r in sweeps_named(tmp_path, "cpu", "t")] == [3, 2, 1, 0]

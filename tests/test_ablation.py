"""Leave-one-out ablation (`frontier ablate`): what each part's removal trains, and the record it writes."""

import json
from pathlib import Path

import pytest

from frontier import cli
from frontier.errors import UserError
from frontier.study import ablation, experiments
from frontier.study.sweep import Variant, format_sweep


# How verdicts are composed, on three-seed fixtures: the rule's thresholds at three seeds and p < 0.05 (conftest.py).
pytestmark = pytest.mark.usefixtures("rule_of_three")


def test_each_learning_change_is_removed_in_turn_by_an_existing_recipe_where_one_trains_the_same():
    assert ablation.parts("ema") == ["bigram", "ngram", "average", "all"]
    assert ablation.parts("baseline") == ["all"]
    assert ablation.without("ngram", "ngram").name == "bigram"  # its n-gram settings change nothing once it is off
    assert ablation.without("ema", "average").name == "ngram"
    assert ablation.without("gate", "gate").name == "ema"
    assert ablation.without("ema", "all").name == "baseline"
    derived = ablation.without("ema", "bigram")
    assert derived.name == "ema-no-bigram" and not derived.features.bigram and derived.features.ngram
    assert derived.features.ema == ablation.get_recipe("ema").features.ema
    with pytest.raises(UserError, match="no part 'gate'"):
        ablation.without("ema", "gate")


def test_the_wider_tables_are_a_part_whose_removal_is_the_recipe_below_them():
    assert ablation.parts("ngram-wide") == ["bigram", "ngram", "wider", "all"]
    assert "wider" not in ablation.parts("ngram-momentum")  # buckets at the profile's: nothing to remove
    assert ablation.without("ngram-wide", "wider").name == "ngram-momentum"  # its runs are the final's own
    no_mix = ablation.without("ngram-wide", "ngram")
    assert "wider" not in ablation.parts(no_mix)  # the tables' size counts only where the mix is on
    with pytest.raises(UserError, match="no part 'wider'"):
        ablation.without("ngram-momentum", "wider")
    _, rows = ablation.variants("ngram-wide", ["wider"], steps=400)
    assert rows[0].name == "- wider n-gram tables (= ngram-momentum)" and rows[0].label(400) == "ngram-momentum-400steps"


def test_a_part_removed_where_an_earlier_recipe_trains_the_same_takes_that_recipes_runs():
    import dataclasses

    from frontier.profiles import get_profile
    from frontier.recipes import resolve

    def trained(recipe):  # what a run trains, whatever the recipe is called
        return dataclasses.replace(resolve(recipe, get_profile("smoke")), recipe="-").digest()

    mix_off = ablation.without("ngram-wide", "ngram")  # the wider tables mean nothing without the mix
    assert mix_off.name == "ngram-momentum-no-ngram" and mix_off.parent == "ngram-momentum"
    literal = ablation.get_recipe("ngram-wide").derive("ngram-wide-no-ngram", "", ngram=False)
    assert trained(mix_off) == trained(literal)  # the same training as the part taken off the recipe itself
    assert ablation.without("ngram-long", "ngram").name == "ngram-momentum-no-ngram"  # another on the same line
    # no farther: `ngram` without its mix lacks the momentum warm-up, so it trains something else
    assert trained(ablation.without("ngram", "ngram")) != trained(mix_off)
    bigram_off = ablation.without("ngram-wide", "bigram")  # the wider tables still count: the final's own variant
    assert bigram_off.name == "ngram-wide-no-bigram" and bigram_off.features.ngram_wider_log2 == 2
    _, rows = ablation.variants("ngram-wide", ["ngram"], steps=400)
    assert rows[0].label(400) == "ngram-momentum-no-ngram-400steps"


def test_a_rows_part_is_named_as_a_reader_calls_it():
    assert ablation.part_of("- n-gram mix (= bigram)") == "n-gram mix"
    assert ablation.part_of({"name": "- everything (= baseline)"}) == "everything"
    assert ablation.part_of({"name": "- weight average (its live weights)"}) == "weight average"
    assert ablation.part_of({"name": "ngram-wide"}) is None


def test_at_equal_steps_the_average_is_its_own_runs_live_weights_and_at_equal_budget_its_parent():
    base, rows = ablation.variants("ema", steps=420)
    average = next(v for v in rows if "average" in v.name)
    assert average.score == "val_bpb_live" and average.same_runs(base)  # no runs of its own
    _, rows = ablation.variants("ema", steps=None)
    average = next(v for v in rows if "average" in v.name)
    assert average.score == "val_bpb" and average.recipe == "ngram" and not average.same_runs(base)
    assert ablation.sweep_name("ema", 420) == "ablation-ema-420"
    assert ablation.sweep_name("ema", None, "stdlib-source") == "ablation-ema-budget-stdlib-source"


def test_another_corpus_gets_folders_of_its_own(monkeypatch):
    seen = []
    monkeypatch.setattr(experiments, "run", lambda recipe, profile, **kw: seen.append(kw["label"]) or {})
    Variant("b", "baseline").run("smoke", 0, 420, "runs", data="d", corpus="stdlib-source")
    Variant("b", "baseline").run("smoke", 0, None, "runs", data="d")
    assert seen == ["stdlib-source/baseline-420steps", "baseline"]


def test_an_ablation_trains_each_part_once_reads_the_average_from_the_base_runs_and_writes_a_sweep_record(tmp_path):
    eager = ablation.get_recipe("ema").derive("ema-eager", "ema without torch.compile (a test's speed)", compile=False)
    rec = ablation.run_ablation(eager, "smoke", seeds=(0,), steps=3, removes=["average", "ngram"], root=tmp_path,
                                log=lambda *a: None)
    base, average, no_ngram = rec["rows"]
    assert [r["label"] for r in rec["rows"]] == ["ema-eager-3steps", "ema-eager-3steps", "ema-eager-no-ngram-3steps"]
    for s in ("0",):  # one seed (the suite's time): the pairing is test_sweep's
        live = json.loads((Path(base["runs"][s]["run_dir"]) / "result.json").read_text())["val_bpb_live"]
        assert average["runs"][s]["val_bpb"] == live != base["runs"][s]["val_bpb"]
        assert average["runs"][s]["run_dir"] == base["runs"][s]["run_dir"]  # the same runs, another score
        assert no_ngram["runs"][s]["run_dir"] != base["runs"][s]["run_dir"] and no_ngram["runs"][s]["steps"] == 3
    assert rec["name"] == "ablation-ema-eager-3" and rec["corpus"] == "embedded" and rec["steps"] == 3
    assert Path(rec["path"]).is_file() and "(  3)" in format_sweep(rec)


def test_the_ablate_command_passes_its_flags_and_prints_the_table(monkeypatch, capsys, tmp_path):
    seen = {}

    def fake(recipe, profile, **kw):
        seen.update(kw, recipe=recipe, profile=profile.name)
        row = {"name": "ema", "runs": {"0": {"val_bpb": 1.7, "steps": 420}}}
        return {"name": "ablation-ema-420", "profile": "cpu", "seeds": [0], "steps": 420, "rows": [row],
                "path": "runs/cpu/sweeps/x.json"}

    monkeypatch.setattr(ablation, "run_ablation", fake)
    assert cli.main(["ablate", "--steps", "420", "--seeds", "1", "--remove", "ngram", "--corpus", "stdlib-source",
                     "--root", str(tmp_path)]) == 0
    assert seen["recipe"] == "final" and seen["profile"] == "cpu" and list(seen["seeds"]) == [0]
    assert seen["steps"] == 420 and seen["removes"] == ["ngram"] and seen["corpus"] == "stdlib-source"
    out = capsys.readouterr().out
    assert "1.7000 (420)" in out and "sweep record: runs/cpu/sweeps/x.json" in out


def test_each_part_is_judged_by_the_rule_at_equal_steps_then_at_equal_budget():
    def row(name, gain, p, steps=420):
        runs = {str(s): {"val_bpb": 1.7, "steps": steps + s} for s in range(3)}
        return {"name": name, "runs": runs} if gain is None else {"name": name, "runs": runs, "gain": gain, "p": p}

    at_steps = {"rows": [row("ema", None, None), row("- n-gram mix", -0.07, 0.001),
                         row("- weight average (its live weights)", -0.002, 0.01), row("- bigram table", 0.001, 0.6)]}
    at_budget = {"rows": [row("ngram (final)", None, None, 400), row("- n-gram mix (= bigram)", -0.08, 0.01, 440),
                          row("+ weight average (= ema)", 0.003, 0.5, 400)]}
    parts = {r["part"]: r for r in ablation.part_rows(at_steps, at_budget)}
    assert parts["n-gram mix"]["gain at equal steps"] == 0.07 and parts["n-gram mix"]["kept"] is True
    assert parts["n-gram mix"]["gain at equal budget"] == 0.08 and parts["n-gram mix"]["steps"] == "420-422"
    assert parts["n-gram mix"]["budget steps (part removed)"] == "440-442"
    assert parts["weight average"]["gain at equal budget"] == 0.003 and parts["weight average"]["kept"] is True
    assert parts["bigram table"]["kept"] is None  # not shown at equal steps: not kept, whatever the budget
    assert ablation.part_rows(at_steps)[0]["kept"] is None  # better at equal steps, the budget stage not measured

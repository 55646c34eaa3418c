"""The ladder's table: gains paired by seed against the rung each is built on, verdicts, the record it is kept as."""

import json
import math

import pytest

from frontier.recipes import FINAL, get_recipe, resolve
from frontier.study import ladder


def _recs(recipe, values, steps=100):
    return [{"recipe": recipe, "seed": s, "val_bpb": v, "steps": steps, "run_dir": f"runs/x/{recipe}/s{s}",
             "code": {"git_sha": "abcdef123456", "dirty": False}} for s, v in enumerate(values)]


def _results():
    return {"baseline": _recs("baseline", [1.90, 1.92, 1.91]),
            "compile": _recs("compile", [1.89, 1.925, 1.905]),
            "bigram": _recs("bigram", [1.80, 1.83, 1.81]),
            "ngram": _recs("ngram", [1.70, 1.72, 1.705]),
            "ema": _recs("ema", [1.69, 1.715, 1.70]),
            "final": _recs(FINAL, [1.68, 1.70, 1.69])}


def test_final_and_best_name_the_final_recipe():
    assert get_recipe("final").name == get_recipe("best").name == FINAL
    assert resolve("final", "smoke").recipe == FINAL  # recorded under its own name
    assert ladder.recipe_name("final") == FINAL and ladder.recipe_name("ngram") == "ngram"
    assert ladder.corpus_label("final", "embedded") is None
    assert ladder.corpus_label("final", "stdlib-source") == f"stdlib-source/{FINAL}"


def test_rows_pair_each_rung_with_the_one_below():
    rows = ladder.ladder_rows(_results())
    assert [r["rung"] for r in rows] == [r.name for r in ladder.LADDER]
    kernels = next(r for r in rows if r["rung"] == "NKI kernels")
    assert "mean" not in kernels and "NeuronCore" in kernels["note"]  # nothing measured, and it says why
    by = {r["rung"]: r for r in rows if "mean" in r}
    assert "gain" not in by["baseline"] and math.isclose(by["baseline"]["mean"], 1.91)
    # the rung below the embedding fix is torch.compile (the kernels rung has no runs)
    assert by["embedding fix"]["over"] == "compile"
    assert math.isclose(by["embedding fix"]["gain"], (1.89 + 1.925 + 1.905 - 1.80 - 1.83 - 1.81) / 3)
    assert by["embedding fix"]["verdict"].startswith("better")
    assert by["torch.compile"]["verdict"] == "inside the noise"
    assert math.isclose(by["final"]["total"], 1.91 - 1.69)
    assert by["final"]["recipe"] == FINAL and by["final"]["values"] == [1.68, 1.70, 1.69]
    assert "| NKI kernels |" in ladder.format_ladder(rows)


def test_one_seed_per_rung_is_not_judged():
    rows = ladder.ladder_rows({k: v[:1] for k, v in _results().items()})
    measured = [r for r in rows if "gain" in r]
    assert measured and all(r["verdict"] == "needs at least 2 pairs" for r in measured)


def test_a_rung_without_runs_says_so_and_the_next_pairs_past_it(monkeypatch):
    from frontier import recipes

    monkeypatch.setitem(recipes.ALIASES, "final", "gate")  # a final recipe built on the EMA
    res = _results()
    assert next(r for r in ladder.ladder_rows(res) if r["rung"] == "final")["over"] == "ema"
    del res["ema"]
    rows = ladder.ladder_rows(res)
    assert next(r for r in rows if r["rung"] == "EMA")["note"] == "not run"
    assert next(r for r in rows if r["rung"] == "final")["over"] == "ngram"


def test_a_rung_not_kept_is_skipped_by_the_rungs_above(monkeypatch):
    from frontier import recipes

    monkeypatch.setitem(recipes.ALIASES, "final", "ngram")  # the EMA not on the final path
    res = _results()
    res["final"] = res["ngram"]
    rows = {r["rung"]: r for r in ladder.ladder_rows(res)}
    assert rows["EMA"]["over"] == "ngram"  # the EMA is measured on what it is built on
    assert rows["final"]["note"] == "the same recipe as the n-gram mix rung"
    assert rows["final"]["over"] == "bigram" and math.isclose(rows["final"]["gain"], rows["n-gram mix"]["gain"])


def test_the_record_is_kept_beside_older_ones(tmp_path):
    rows = ladder.ladder_rows(_results())
    a = ladder.write_ladder_record(rows, "smoke", "embedded", root=tmp_path)
    b = ladder.write_ladder_record(rows, "smoke", "embedded", root=tmp_path)
    assert a != b and a.exists() and b.exists()
    rec = json.loads(b.read_text())
    assert rec["kind"] == "ladder" and rec["corpus"] == "embedded" and rec["writeup_trn2"]["final"] == 0.959
    assert rec["code"]["source_sha256"] and rec["rows"][0]["rung"] == "baseline"
    assert ladder.latest_ladder_record("smoke", "embedded", root=tmp_path)["path"] == str(b)
    assert ladder.latest_ladder_record("smoke", "stdlib-source", root=tmp_path) is None


def test_the_figure_draws_every_measured_rung():
    fig = ladder.ladder_figure(ladder.ladder_rows(_results()))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == [r.name for r in ladder.LADDER if r.recipe]


@pytest.mark.parametrize("argv", [["ladder", "--seeds", "0"], ["ladder", "--corpus", "nope"]])
def test_bad_ladder_arguments_are_one_line(argv, capsys):
    from frontier.cli import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1


def test_readme_tables_are_the_records_they_name():
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    text = (repo / "README.md").read_text()
    named = re.findall(r"<!-- ladder table: generated from (\S+) by", text)
    assert named, "the README shows the ladder from a ladder record"
    for path in named:
        rec = {**json.loads((repo / path).read_text()), "path": path}
        assert ladder.readme_table(rec) in text, f"the README's table differs from {path}: regenerate it"


def test_readme_table_marks_what_was_not_measured():
    rec = {"path": "/x/runs/cpu/ladder/embedded-1.json", "writeup_trn2": ladder.WRITEUP_TRN2,
           "rows": ladder.ladder_rows(_results())}
    table = ladder.readme_table(rec)
    assert "generated from runs/cpu/ladder/embedded-1.json" in table
    assert "| NKI kernels | `-` | not measured here |" in table and "| 1.259 |" in table and "| 0.959 |" in table
    assert "(p < 0.05)" not in table and "over `compile`, better beyond the noise (p = " in table


@pytest.mark.parametrize("path, named", [("../runs/cpu/ngram/s0", "runs/cpu/ngram/s0"),
                                         ("/home/x/frontier/runs/cpu/ladder/e.json", "runs/cpu/ladder/e.json"),
                                         ("/tmp/myruns/cpu/ngram/s0", "/tmp/myruns/cpu/ngram/s0")])
def test_repo_path_names_run_folders_as_the_repository_does(path, named):
    assert ladder.repo_path(path) == named


def test_the_writeups_endpoints_are_never_on_our_axis():
    fig = ladder.ladder_figure(ladder.ladder_rows(_results()))
    ours = fig.axes[0]
    assert len(fig.axes) == 3  # ours, the write-up's in a panel of its own, the gains
    for ax in fig.axes:  # no twin axis laid over ours
        assert ax is ours or ax.get_position().bounds != ours.get_position().bounds
    drawn_on_ours = [y for line in ours.get_lines() for y in line.get_ydata()]
    assert ladder.WRITEUP_TRN2["final"] not in drawn_on_ours and ladder.WRITEUP_TRN2["baseline"] not in drawn_on_ours
    theirs = [y for line in fig.axes[1].get_lines() for y in line.get_ydata()]
    assert theirs == [ladder.WRITEUP_TRN2["baseline"], ladder.WRITEUP_TRN2["final"]]
    assert len(ladder.ladder_figure(ladder.ladder_rows(_results()), writeup=False).axes) == 2


def test_a_gain_from_one_seed_is_labelled_one_seed(tmp_path):
    from frontier.figures import save_figure

    fig = ladder.ladder_figure(ladder.ladder_rows({k: v[:1] for k, v in _results().items()}), writeup=False)
    texts = [t.get_text() for t in fig.axes[1].texts]
    assert texts and set(texts) == {"one seed"} and len(texts) == len([r for r in fig.axes[1].patches])
    assert "one seed" in fig.axes[0].get_legend().get_texts()[0].get_text()
    save_figure(fig, tmp_path / "ladder.png")  # fits its canvas, bars from zero
    three = ladder.ladder_figure(ladder.ladder_rows(_results()))
    assert not three.axes[2].texts
    save_figure(three, tmp_path / "ladder3.png")

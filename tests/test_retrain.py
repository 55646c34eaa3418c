"""frontier retrain: a recorded run trained again, whole, with its numbers beside the record's."""

import json

import pytest

from frontier.cli import main
from frontier.devices import select_device
from frontier.errors import UserError
from frontier.recipes import resolve
from frontier.study.retrain import retrain, steps_of
from frontier.train.trainer import train

CPU = select_device("cpu")


@pytest.fixture(scope="module")
def smoke_run(smoke_data, tmp_path_factory):
    """A smoke baseline budgeted by the steps rule at the committed table's cost."""
    run_dir = tmp_path_factory.mktemp("retrain") / "run"
    rec = train(resolve("baseline", "smoke"), smoke_data, run_dir, CPU, seed=3, progress=False, log=lambda m: None)
    assert rec["budget"]["source"] == "table"
    return run_dir, rec


def test_a_steps_rule_run_buys_its_steps_again_and_scores_the_same_here(smoke_run, smoke_data, tmp_path):
    run_dir, rec = smoke_run
    assert steps_of(rec)[0] is None  # the budget buys them again
    result = retrain(run_dir, tmp_path / "again", data=smoke_data.folder, device="cpu", record_dir=tmp_path / "b",
                     log=lambda m: None)
    assert result["same_steps"] and result["here"]["steps"] == rec["steps"]
    assert result["differences"]["val_bpb"] == 0.0  # eager, the same machine and threads: bit for bit
    saved = json.loads(open(result["path"]).read())
    assert saved["kind"] == "retrain" and saved["record_side"]["val_bpb"] == rec["val_bpb"]
    assert saved["command"][:2] == ["frontier", "retrain"] and saved["run"] == str(run_dir)
    from frontier.study.bench_records import load_bench_record

    assert load_bench_record(result["path"])["kind"] == "retrain"  # a bench record like any other


def test_a_fixed_steps_run_is_retrained_for_its_steps(smoke_data, tmp_path):
    rec = train(resolve("baseline", "smoke"), smoke_data, tmp_path / "r", CPU, steps=3, progress=False,
                log=lambda m: None)
    assert steps_of(rec) == (3, "a run of a fixed number of steps")
    wall = dict(rec, budget=None, max_steps=None, steps=57)
    assert steps_of(wall)[0] == 57 and "clock" in steps_of(wall)[1]


def test_retrain_refuses_a_folder_in_use_and_an_unfinished_run(smoke_run, tmp_path, capsys):
    run_dir, _ = smoke_run
    with pytest.raises(UserError, match="not empty"):
        retrain(run_dir, run_dir, device="cpu")
    unfinished = tmp_path / "u"
    unfinished.mkdir()
    (unfinished / "result.json").write_text(json.dumps({"status": "running", "recipe": "baseline"}))
    assert main(["retrain", str(unfinished), "--out", str(tmp_path / "x")]) == 2
    assert "did not finish" in capsys.readouterr().err

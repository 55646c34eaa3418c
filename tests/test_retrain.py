"""frontier retrain: a recorded run trained again, whole, with its numbers beside the record's."""

import dataclasses
import json
import shutil

import pytest

from frontier.cli import main
from frontier.devices import select_device
from frontier.errors import UserError
from frontier.recipes import resolve
from frontier.study.retrain import retrain, steps_of
from frontier.train.cost import cost_key, load_table
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
    assert steps_of(rec) == (3, "a run of a fixed number of steps", None)
    wall = dict(rec, budget=None, max_steps=None, steps=57)
    assert steps_of(wall)[0] == 57 and "clock" in steps_of(wall)[1]


def test_a_run_whose_cost_the_table_measured_again_since_buys_its_steps_at_its_own_cost(smoke_run, smoke_data,
                                                                                        tmp_path):
    run_dir, rec = smoke_run
    key = cost_key(resolve("baseline", "smoke"))
    now = load_table()[key]
    dearer = {key: dataclasses.replace(now, step_s=now.step_s * 2, record="runs/bench/smoke/costs-later.json")}
    steps, why, table = steps_of(rec, dearer)
    assert steps is None and table[key].step_s == rec["budget"]["cost"]["step_s"]
    assert "record's own cost" in why and "costs-later.json" in why and "(step_s;" in why
    assert steps_of(rec)[1] == "the steps rule at the committed table's cost buys them again"
    doubled = dataclasses.replace(now, step_s=now.step_s * 2)
    assert doubled.steps_for(rec["config"]["train"]["budget_s"]) != rec["steps"]  # today's table would buy others
    moved = tmp_path / "moved"
    shutil.copytree(run_dir, moved)
    old = json.loads((moved / "result.json").read_text())
    old["budget"]["cost"]["record"] = "runs/bench/smoke/costs-earlier.json"
    (moved / "result.json").write_text(json.dumps(old))
    result = retrain(moved, tmp_path / "again", data=smoke_data.folder, device="cpu", record_dir=tmp_path / "b",
                     log=lambda m: None)
    threads = str(result["here"]["hardware"]["torch_threads"])
    assert result["command"][-2:] == ["--threads", threads]  # the threads it ran at, in the reproducing command
    assert result["same_steps"] and result["here"]["budget"]["cost"]["record"] == "runs/bench/smoke/costs-earlier.json"


def test_retrain_refuses_a_folder_in_use_and_an_unfinished_run(smoke_run, tmp_path, capsys):
    run_dir, _ = smoke_run
    with pytest.raises(UserError, match="not empty"):
        retrain(run_dir, run_dir, device="cpu")
    unfinished = tmp_path / "u"
    unfinished.mkdir()
    (unfinished / "result.json").write_text(json.dumps({"status": "running", "recipe": "baseline"}))
    assert main(["retrain", str(unfinished), "--out", str(tmp_path / "x")]) == 2
    assert "did not finish" in capsys.readouterr().err

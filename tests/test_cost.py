"""The steps rule (frontier.train.cost): a budget bought as steps before the run, the same on any machine."""

import dataclasses
import subprocess
import sys

import pytest
import torch

from frontier.devices import select_device
from frontier.errors import UserError
from frontier.profiles import get_profile
from frontier.recipes import RECIPES, resolve
from frontier.train import cost as cost_mod
from frontier.train.cost import StepCost, cost_key, load_table, measure_cost
from frontier.train.trainer import RunStopped, resume, train

CPU = select_device("cpu")


def no_probe(*a):
    raise AssertionError("the steps rule times no probe during a run")


def fake_table(cfg, step_s=0.01, fixed_s=0.05):
    return {cost_key(cfg): StepCost(cost_key(cfg), cfg.recipe, cfg.profile, step_s, fixed_s, "runs/bench/fake.json")}


def test_the_budget_buys_its_steps_from_the_cost():
    c = StepCost("k", "baseline", "cpu", step_s=0.4, fixed_s=2.0)
    assert c.steps_for(180.0) == 445  # floor(178 / 0.4)
    assert c.steps_for(2.1) == 1 and c.steps_for(1.0) == 1  # at least one step


def test_a_run_takes_the_steps_its_cost_buys_and_is_charged_the_cost(smoke_data, tmp_path):
    cfg = resolve("baseline", "smoke", budget_s=0.5)
    assert cfg.train.clock == "steps"  # the smoke and cpu profiles' rule
    rec = train(cfg, smoke_data, tmp_path / "r", CPU, progress=False, probe_timer=no_probe,
                cost_table=fake_table(cfg))
    assert rec["steps"] == 45 and rec["max_steps"] == 45  # floor((0.5 - 0.05) / 0.01)
    b = rec["budget"]
    assert (b["rule"], b["source"], b["steps"], b["explicit_steps"]) == ("steps", "table", 45, False)
    assert b["cost"]["record"] == "runs/bench/fake.json" and rec["probe"] is None
    assert rec["charged_s"] == pytest.approx(0.05 + 45 * 0.01, abs=1e-12)
    assert rec["charged_other_s"] == pytest.approx(0.05) and rec["charged_wall_s"] > 0
    assert rec["curve"]["charged_s"][0] == pytest.approx(0.06)
    assert rec["tokens_per_s"] == pytest.approx(cfg.train.batch_size * cfg.train.seq_len / 0.01)


def test_a_run_that_counts_the_train_shards_pays_for_every_token_of_its_split(smoke_data, tmp_path):
    cfg = resolve("ngram", "smoke", budget_s=0.5)
    n = smoke_data.manifest["train"]["tokens"]
    per_token = 0.1 / n  # counting this split costs 0.1 reference s
    table = {cost_key(cfg): StepCost(cost_key(cfg), "ngram", "smoke", 0.01, 0.05, "runs/bench/fake.json", per_token)}
    rec = train(cfg, smoke_data, tmp_path / "r", CPU, progress=False, probe_timer=no_probe, cost_table=table)
    b = rec["budget"]
    assert b["counted_tokens"] == n and b["once_s"] == pytest.approx(0.15)
    assert rec["steps"] == 35  # floor((0.5 - 0.05 - 0.1) / 0.01)
    assert rec["charged_s"] == pytest.approx(0.15 + 35 * 0.01, abs=1e-9)


def test_the_same_steps_at_one_thread_two_threads_and_under_load(smoke_data, tmp_path):
    """Whatever the machine does meanwhile, the steps are decided before the run."""
    cfg = resolve("baseline", "smoke", budget_s=0.155)
    table = fake_table(cfg)
    threads = torch.get_num_threads()
    steps = {}
    try:
        torch.set_num_threads(1)
        steps["1 thread"] = train(cfg, smoke_data, tmp_path / "one", CPU, progress=False, cost_table=table)["steps"]
        torch.set_num_threads(2)
        steps["2 threads"] = train(cfg, smoke_data, tmp_path / "two", CPU, progress=False, cost_table=table)["steps"]
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # a busy core beside the run
        try:
            steps["loaded"] = train(cfg, smoke_data, tmp_path / "load", CPU, progress=False, cost_table=table)["steps"]
        finally:
            hog.kill()
            hog.wait()
    finally:
        torch.set_num_threads(threads)
    assert set(steps.values()) == {10}, steps  # floor((0.155 - 0.05) / 0.01)


def test_what_decides_the_cost_and_what_does_not():
    base = resolve("ngram", "smoke")
    assert cost_key(base) == cost_key(resolve("ngram", "smoke", budget_s=9.0))  # the budget buys steps: not a cost
    assert cost_key(base) == cost_key(resolve("ngram", "smoke", optim={"matrix_lr": 0.04}))  # a rate is no cost
    assert cost_key(base) != cost_key(resolve("ngram", "smoke", sizes={"batch_size": 4}))
    assert cost_key(base) != cost_key(resolve("ngram", "smoke", ngram={"slots": 8}))
    assert cost_key(resolve("baseline", "smoke")) != cost_key(resolve("compile", "smoke"))  # a speed change: its own
    ema = resolve("ema", "smoke")
    later = dataclasses.replace(ema.train.ema, start_frac=0.9)
    assert cost_key(ema) != cost_key(resolve("ema", "smoke", ema=later))  # the EMA runs for less of the run
    mixed = dataclasses.replace(ema.train.ema, mix=0.5)
    assert cost_key(ema) == cost_key(resolve("ema", "smoke", ema=mixed))  # the mix is only how it is scored


def test_a_config_without_a_committed_cost_is_measured_here_and_says_so(smoke_data, tmp_path):
    cfg = resolve("baseline", "smoke", budget_s=0.4)
    ref = cfg.train.probe_ref_s

    def probe(name, shapes, repeats):
        return {"probe_s": 2 * ref, "repeats_s": [2 * ref] * repeats}  # this machine: half the reference's speed

    rec = train(cfg, smoke_data, tmp_path / "m", CPU, progress=False, probe_timer=probe, cost_table={})
    b = rec["budget"]
    assert b["source"] == "measured here" and b["cost"]["record"] is None
    assert b["steps"] == rec["steps"] == StepCost(**b["cost"]).steps_for(0.4)


def test_measuring_a_cost_interleaves_the_probe_with_the_steps(smoke_data):
    cfg = resolve("ngram", "smoke")
    ref, calls = cfg.train.probe_ref_s, []

    def probe(name, shapes, repeats):
        calls.append(name)
        return {"probe_s": ref / 2, "repeats_s": [ref / 2] * repeats}  # a machine twice as fast as the reference

    cost, measured = measure_cost(cfg, smoke_data, CPU, probe_timer=probe, rounds=2, steps_per_round=3,
                                  log=lambda m: None)
    assert calls == ["gpt-step-1"] * 2 and len(measured["rounds"]) == 2
    assert all(len(r["steps_s"]) == 3 for r in measured["rounds"])
    ratios = sorted(sum(r["steps_s"]) / 3 / (ref / 2) for r in measured["rounds"])
    assert cost.step_s == pytest.approx(sum(ratios) / 2 * ref, rel=1e-9)  # the median of two: their mean
    n = smoke_data.manifest["train"]["tokens"]
    assert measured["counted_tokens"] == n and measured["counting_s"] > 0 and cost.key == cost_key(cfg)
    # shard counting, in reference s a token: charged in proportion to the split a run counts
    assert cost.count_s_per_token == pytest.approx(measured["counting_s"] * 2 / n, rel=1e-9)
    assert cost.once_s(n) == pytest.approx(cost.fixed_s + measured["counting_s"] * 2, rel=1e-9)
    # a bigger split to count buys fewer steps (at a step cost where counting n tokens takes ten steps, so that
    # the difference shows however slowly this machine ran the timed steps)
    tens = dataclasses.replace(cost, step_s=cost.count_s_per_token * n / 10)
    budget = 4 * n * cost.count_s_per_token
    assert tens.steps_for(budget, 2 * n) < tens.steps_for(budget, n)


def test_explicit_steps_need_no_cost(smoke_data, tmp_path):
    cfg = resolve("baseline", "smoke")
    rec = train(cfg, smoke_data, tmp_path / "s", CPU, steps=3, progress=False, probe_timer=no_probe, cost_table={})
    assert rec["steps"] == 3 and rec["budget"] == {"rule": "steps", "cost": None, "source": "none", "steps": 3,
                                                    "explicit_steps": True, "counted_tokens": 0, "once_s": None}
    assert rec["charged_s"] == rec["charged_wall_s"]  # no cost to charge: wall seconds


def test_a_resumed_run_keeps_its_steps_and_its_cost(smoke_data, tmp_path, monkeypatch):
    import os
    import signal

    cfg = resolve("baseline", "smoke", budget_s=0.35)
    table = fake_table(cfg)
    from frontier.train import trainer as trainer_mod

    real_step, calls = trainer_mod.train_step, []

    def interrupting_step(*a, **k):
        calls.append(1)
        if len(calls) == 10:
            os.kill(os.getpid(), signal.SIGINT)
        return real_step(*a, **k)

    monkeypatch.setattr(trainer_mod, "train_step", interrupting_step)
    with pytest.raises(RunStopped):
        train(cfg, smoke_data, tmp_path / "r", CPU, progress=False, cost_table=table)
    monkeypatch.setattr(trainer_mod, "train_step", real_step)
    after = resume(tmp_path / "r", smoke_data, CPU, progress=False, probe_timer=no_probe)
    assert after["steps"] == 30 and after["budget"]["steps"] == 30  # floor((0.35 - 0.05) / 0.01)
    assert after["charged_s"] == pytest.approx(0.05 + 30 * 0.01, abs=1e-12)


def test_a_profile_without_a_probe_cannot_take_the_steps_rule():
    with pytest.raises(UserError, match="states no reference probe time for the steps clock"):
        resolve("baseline", "gpu", clock="steps")


def test_the_committed_table_covers_every_recipe_at_smoke_and_cpu():
    table = load_table()
    missing = [f"{r} / {p}" for p in ("smoke", "cpu") for r in RECIPES if cost_key(resolve(r, p)) not in table]
    assert not missing, f"no committed cost for {missing}: run `frontier bench --costs --write-table`"
    for c in table.values():
        assert c.step_s > 0 and c.fixed_s >= 0 and c.record and c.record.startswith("runs/bench/")
    assert cost_mod.TABLE.is_file()


def test_the_cost_bench_writes_its_record_and_the_table_it_is_given(tmp_path):
    from frontier.study.costs import format_cost_bench, run_cost_bench

    table = tmp_path / "costs.json"
    rec = run_cost_bench(["ngram-only"], "smoke", repeats=2, device="cpu", out=tmp_path / "bench", write=True,
                         table=table, log=lambda m: None)
    (row,) = rec["costs"]
    assert row["recipe"] == "ngram-only" and len(row["measurements"]) == 2 and row["committed_step_s"] is None
    assert row["step_s"] == pytest.approx(sorted(m["step_s"] for m in row["measurements"])[0] / 2
                                          + sorted(m["step_s"] for m in row["measurements"])[1] / 2)
    written = load_table(table)
    assert list(written) == [row["key"]] and written[row["key"]].record == rec["path"]
    again = run_cost_bench(["ngram-only"], "smoke", repeats=1, device="cpu", out=tmp_path / "bench", table=table,
                           log=lambda m: None)
    assert again["costs"][0]["committed_step_s"] == row["step_s"]  # the table's beside the new measurement
    assert "ngram-only" in format_cost_bench(again)


def test_the_cost_bench_measures_the_screened_sizes_and_never_overwrites_the_recipes_own_entry(tmp_path):
    from frontier.study.costs import run_cost_bench
    from frontier.study.experiments import size

    table = tmp_path / "costs.json"
    own = size(2, 64, head_dim=32)  # the smoke profile's own size
    assert (get_profile("smoke").n_layer, get_profile("smoke").n_embd) == (2, 64)
    rec = run_cost_bench(["baseline"], "smoke", repeats=1, device="cpu", out=tmp_path / "bench", write=True,
                         table=table, sizes=[size(1, 64, head_dim=32), own], log=lambda m: None)
    assert [r["recipe"] for r in rec["costs"]] == ["baseline size-1x64"]  # the own size is the recipe's entry
    written = load_table(table)
    small = resolve("baseline", "smoke", sizes=size(1, 64, head_dim=32))
    assert written[cost_key(small)].recipe == "baseline" and list(written) == [cost_key(small)]
    assert written[cost_key(small)].record == rec["path"]


def test_the_cost_bench_measures_the_screened_batch_sizes_under_their_own_labels(tmp_path):
    from frontier.study.costs import run_cost_bench
    from frontier.study.experiments import BATCH_SWEEPS, size_label

    table = tmp_path / "costs.json"
    own = get_profile("smoke").batch_size
    assert all(b["batch_size"] != own for b in BATCH_SWEEPS["smoke"]) and len(BATCH_SWEEPS["cpu"]) >= 2
    rec = run_cost_bench(["baseline"], "smoke", repeats=1, device="cpu", out=tmp_path / "bench", write=True,
                         table=table, sizes=[dict(batch_size=4), dict(batch_size=own)], log=lambda m: None)
    assert [r["recipe"] for r in rec["costs"]] == ["baseline batch-4"]
    assert size_label(dict(batch_size=4)) == "batch-4" and size_label(dict(n_layer=1, n_embd=64)) == "size-1x64"
    small = resolve("baseline", "smoke", sizes=dict(batch_size=4))
    assert list(load_table(table)) == [cost_key(small)] and small.train.batch_size == 4

"""The reference clock (issue 24), with a fake speed probe: no assertion here depends on how fast anything ran."""

import dataclasses
import inspect
import os
import signal

import pytest

from frontier.cli import main
from frontier.devices import select_device
from frontier.errors import UserError
from frontier.profiles import CPU_NGRAM_TABLES_BEFORE, PROFILES
from frontier.recipes import resolve
from frontier.train import probes
from frontier.train.clock import PROBE_EVERY, PROBE_REPEATS, BudgetClock
from frontier.train.trainer import RunStopped, resume, train

CPU = select_device("cpu")


class FakeProbe:
    """Times nothing: each timing is `probe_s` seconds (one after another from `times`, the last one repeated)."""

    def __init__(self, *times, on_call=None):
        self.times, self.calls, self.on_call = list(times), [], on_call

    def __call__(self, name, shapes, repeats):
        t = self.times[min(len(self.calls), len(self.times) - 1)]
        self.calls.append((name, shapes, repeats))
        if self.on_call:
            self.on_call(len(self.calls))
        return {"probe_s": t, "repeats_s": [t] * repeats}


def _cfg(budget_s=None, clock="reference", recipe="baseline"):
    """The baseline at smoke, on the reference clock unless told (the profile's own rule is the steps rule)."""
    return resolve(recipe, "smoke", budget_s=budget_s, clock=clock)


def test_charging_follows_the_formula():
    c = BudgetClock(budget_s=100.0, uncharged_steps=1, allowance_s=0.5)
    c.add_probe({"probe_s": 0.02, "repeats_s": [0.02]}, ref_s=0.01)  # the machine is half as fast as the reference
    assert c.scale == 0.5
    c.add_step(2.0)  # warm-up: 0.5 wall seconds free, 1.5 charged at half
    assert (c.uncharged_s, c.charged_wall_s, c.charged_s) == (0.5, 1.5, 0.75)
    c.add_step(1.0)
    assert (c.charged_wall_s, c.charged_s, c.max_charged_step_s) == (2.5, 1.25, 0.75)
    c.add_probe({"probe_s": 0.005, "repeats_s": [0.005]}, ref_s=0.01)  # twice as fast as the reference now
    c.add_step(1.0)
    c.add_charged(0.5)  # work that is not a step is charged at the same rate
    assert (c.charged_wall_s, c.charged_s, c.charged_other_s) == (4.0, 4.25, 1.0)
    assert c.charged_step_s == 3.25 and c.charged_step_wall_s == 3.5
    assert c.wall_s == 4.5  # charged wall seconds + uncharged
    assert c.charged_steps == 2.75  # the warm-up step counts as its charged share (1.5 of 2 wall seconds)
    assert c.tokens_per_s(10) == 2.75 * 10 / 3.25 and c.tokens_per_wall_s(10) == 2.75 * 10 / 3.5
    assert [p["scale"] for p in c.probes] == [0.5, 2.0] and [p["step"] for p in c.probes] == [0, 2]


def test_the_budget_stops_on_reference_seconds():
    c = BudgetClock(budget_s=2.0, uncharged_steps=0, allowance_s=0.0)
    c.add_probe({"probe_s": 4.0, "repeats_s": [4.0]}, ref_s=1.0)
    while not c.done:
        c.add_step(1.0)
    assert c.steps == 8 and c.charged_s == 2.0 and c.charged_wall_s == 8.0


def test_the_probe_is_due_at_every_eighth_of_the_run():
    c = BudgetClock(budget_s=8.0, uncharged_steps=0, allowance_s=0.0)
    assert c.probe_due()  # before any timing
    due = []
    c.add_probe({"probe_s": 1.0, "repeats_s": [1.0]}, ref_s=1.0)
    while not c.done:
        if c.probe_due():
            due.append(c.charged_s)
            c.add_probe({"probe_s": 1.0, "repeats_s": [1.0]}, ref_s=1.0)
        c.add_step(0.25)
    assert due == [k * PROBE_EVERY * 8.0 for k in range(1, round(1 / PROBE_EVERY))]
    assert not c.probe_due()  # none once the run is done


def test_an_old_clock_state_ran_on_the_wall_clock():
    state = BudgetClock(budget_s=10, uncharged_steps=0, allowance_s=0.0).state_dict()
    for k in ["scale", "charged_wall_s", "charged_step_wall_s", "probes"]:
        del state[k]
    state.update(charged_s=3.0, charged_step_s=3.0, steps=3, charged_steps=3)
    c = BudgetClock.from_state(state)
    assert (c.scale, c.charged_wall_s, c.charged_step_wall_s, c.probes) == (1.0, 3.0, 3.0, [])


def test_a_reference_run_charges_at_the_probes_rate_and_records_both_clocks(smoke_data, tmp_path):
    ref = PROFILES["smoke"].probe_ref_s
    fake = FakeProbe(4 * ref)  # a machine four times slower than the reference: a wall second is 0.25 s charged
    rec = train(_cfg(budget_s=0.5), smoke_data, tmp_path / "r", CPU, progress=False, probe_timer=fake)
    assert rec["clock"] == "reference" and rec["config"]["train"]["clock"] == "reference"
    assert rec["charged_s"] == pytest.approx(rec["charged_wall_s"] / 4, rel=1e-9)
    assert rec["charged_s"] >= 0.5 and rec["curve"]["charged_s"][-2] < 0.5  # stopped on reference seconds
    assert rec["wall_s"] == pytest.approx(rec["charged_wall_s"] + rec["uncharged_s"], rel=1e-12)
    p = rec["probe"]
    assert (p["name"], p["ref_s"], p["drift"], p["drifted"]) == ("gpt-step-1", ref, 0.0, False)
    assert p["source_sha256"] == probes.source_hash("gpt-step-1")
    where = [t["where"] for t in p["timings_s"]]
    assert where[0] == "start" and where[-1] == "end" and set(where[1:-1]) <= {"during"}
    assert len(fake.calls) == len(where) and all(c[2] == PROBE_REPEATS for c in fake.calls)
    assert fake.calls[0][1] == probes.ProbeShapes.of(PROFILES["smoke"])  # the profile's shapes


def test_drift_is_flagged(smoke_data, tmp_path):
    ref = PROFILES["smoke"].probe_ref_s
    rec = train(_cfg(), smoke_data, tmp_path / "d", CPU, steps=16, progress=False,
                probe_timer=FakeProbe(ref, ref, ref, 1.5 * ref))
    assert rec["probe"]["drift"] == pytest.approx(0.5) and rec["probe"]["drifted"]
    assert len(rec["probe"]["timings_s"]) == 1 + (round(1 / PROBE_EVERY) - 1) + 1  # start, each eighth, end


def test_a_wall_clock_run_ignores_the_probe(smoke_data, tmp_path):
    def no_probe(*a):
        raise AssertionError("the wall clock times no probe")

    rec = train(_cfg(budget_s=0.3, clock="wall"), smoke_data, tmp_path / "w", CPU, progress=False, probe_timer=no_probe)
    assert rec["clock"] == "wall" and rec["probe"] is None
    assert rec["charged_s"] == rec["charged_wall_s"] >= 0.3
    assert resolve("baseline", "trn2").train.clock == "wall" and resolve("baseline", "gpu").train.clock == "wall"


def test_a_resumed_run_continues_both_clocks(smoke_data, tmp_path):
    ref = PROFILES["smoke"].probe_ref_s
    interrupt = FakeProbe(2 * ref, on_call=lambda n: n == 3 and os.kill(os.getpid(), signal.SIGINT))
    run = tmp_path / "r"
    with pytest.raises(RunStopped) as stopped:
        train(_cfg(), smoke_data, run, CPU, steps=40, progress=False, probe_timer=interrupt)
    before = stopped.value.record
    assert before["status"] == "interrupted" and 0 < before["steps"] < 40
    assert before["charged_s"] == pytest.approx(before["charged_wall_s"] / 2, rel=1e-9)
    after = resume(run, smoke_data, CPU, progress=False, probe_timer=FakeProbe(ref / 2))
    assert after["status"] == "finished" and after["steps"] == 40
    # the seconds after the resume were charged at the new probe's rate, on top of those before it
    assert after["charged_s"] - before["charged_s"] == pytest.approx(
        2 * (after["charged_wall_s"] - before["charged_wall_s"]), rel=1e-9)
    timings = after["probe"]["timings_s"]
    assert timings[:len(before["probe"]["timings_s"])] == before["probe"]["timings_s"]
    assert [t["where"] for t in timings].count("resume") == 1
    assert after["probe"]["range"] == pytest.approx(3.0)  # 2 x reference, then 0.5 x: fourfold
    assert after["probe"]["drift"] < -0.5 and after["probe"]["drifted"]  # faster in the later half


def test_old_records_hash_as_wall_clock_records():
    """A config at the wall clock hashes as before the clock existed (old records stay replayable as wall-clock
    records); the reference clock is part of what is trained, so it changes the hash."""
    # the digests of these configs before the clock existed (commit d3406a1), which records of them carry
    assert resolve("baseline", "cpu", clock="wall").digest() == "b206d3b692965179"
    assert resolve("ngram", "cpu", clock="wall", ngram=CPU_NGRAM_TABLES_BEFORE).digest() == "0ce00c23126d5b9e"
    smoke_then = dataclasses.replace(PROFILES["smoke"], budget_s=2.5)  # the smoke profile's budget then (issue 26 cut it)
    assert resolve("baseline", smoke_then, clock="wall").digest() == "f29dfa55e83cd29f"
    assert resolve("baseline", "trn2").digest() == "ad26fff52745ffd2"  # trn2 keeps the wall clock: unchanged
    assert resolve("baseline", "cpu").digest() != resolve("baseline", "cpu", clock="wall").digest()


def test_clock_errors_are_one_line():
    with pytest.raises(UserError, match="states no reference probe time"):
        resolve("baseline", "trn2", clock="reference")
    with pytest.raises(UserError, match="unknown clock"):
        resolve("baseline", "cpu", clock="sundial")


def test_resume_refuses_another_clock(smoke_data, tmp_path, capsys):
    ref = PROFILES["smoke"].probe_ref_s
    run = tmp_path / "r"
    with pytest.raises(RunStopped):
        train(_cfg(), smoke_data, run, CPU, steps=40, progress=False,
              probe_timer=FakeProbe(ref, on_call=lambda n: n == 2 and os.kill(os.getpid(), signal.SIGINT)))
    assert main(["train", "--resume", str(run), "--clock", "wall", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ran under the reference clock, not --clock wall" in err[0]


def test_the_probe_does_not_use_the_package():
    """The probe is plain torch: making the model or its kernels faster must not make the probe faster."""
    src = inspect.getsource(probes)
    assert "from .." not in src.replace("from ..errors import UserError", "")
    assert "model" not in inspect.getsource(probes.gpt_step_1).replace("# model", "")
    step = probes.gpt_step_1(probes.ProbeShapes(2, 8, 16, 2, 32))
    step()  # runs, and again (its weights are updated in place, its graph rebuilt)
    step()


@pytest.mark.parametrize("args, says", [
    (["nope"], "unknown recipe"),
    (["baseline", "--profile", "trn2"], "states no reference probe time"),
    (["baseline", "--conditions", "2-threads,sideways"], "unknown clock-check condition sideways"),
    (["baseline", "--conditions", ","], "unknown clock-check condition"),
])
def test_clock_check_argument_errors_are_one_line(args, says, capsys, tmp_path):
    assert main(["clock-check", *args, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert not any(tmp_path.iterdir())  # nothing trained, nothing written


def test_clock_check_summary_puts_each_condition_beside_the_first():
    from frontier.study.clock_check import summarise

    runs = [dict(recipe="b", condition="2-threads", steps=200, charged_wall_s=180.0),
            dict(recipe="b", condition="1-thread", steps=190, charged_wall_s=360.0)]
    s = summarise(runs)["b"]
    assert s["2-threads"]["steps_rel"] == 0.0 and s["1-thread"]["steps_rel"] == pytest.approx(-0.05)
    assert s["1-thread"]["wall_ratio"] == 2.0


def test_only_records_of_the_steps_rule_at_the_tables_cost_go_free_of_their_hardware():
    from types import SimpleNamespace

    from frontier.study.experiments import mismatch
    from frontier.train import cost as step_costs

    data = SimpleNamespace(manifest_hash="m")
    here = {"cpu": "AMD EPYC", "cpu_cores": 2, "torch_threads": 2, "gpu": None}
    there = {**here, "cpu": "Intel Xeon"}
    tied = "trained under a budget on other hardware: cpu 'Intel Xeon'"
    for clock, source, why in (("wall", None, tied), ("reference", None, tied), ("steps", "measured here", tied),
                               ("steps", "table", None)):
        cfg = _cfg(clock=clock)
        cost = step_costs.load_table().get(step_costs.cost_key(cfg))
        bought = cost.steps_for(cfg.train.budget_s, step_costs.counted_tokens(cfg, data)) if cost else None
        rec = {"status": "finished", "config_hash": cfg.digest(), "data": {"manifest_hash": "m"}, "max_steps": None,
               "device": {"backend": "cpu"}, "hardware": there, "budget": {"source": source} if source else None,
               "steps": bought}
        got = mismatch(rec, cfg, data, None, "cpu", here)
        assert got == why or (why and got.startswith(why)), got
        assert mismatch({**rec, "hardware": here}, cfg, data, None, "cpu", here) is None
        if source == "table":  # the same steps everywhere only while the committed table still buys them
            assert bought is not None
            assert "the committed cost table buys" in mismatch({**rec, "steps": bought + 1}, cfg, data, None, "cpu", here)


def test_compare_prints_the_groups_probe_ratios_and_warns_past_the_noise():
    from frontier.study.compare import format_comparison, group_records
    from frontier.train.clock import PROBE_NOISE

    def rec(name, seed, ratio, bpb):
        probe = {"probe_s_median": 0.1 * ratio, "ref_s": 0.1} if ratio else None
        return {"recipe": name, "config_hash": name, "seed": seed, "val_bpb": bpb, "run_dir": f"runs/{name}/s{seed}",
                "status": "finished", "probe": probe}

    close = [rec("a", s, 1.0, 2.0 + s / 100) for s in range(2)] + [rec("b", s, 1.0 + PROBE_NOISE / 2, 2.1) for s in
                                                                    range(2)]
    far = close[:2] + [rec("b", s, 1.0 + 2 * PROBE_NOISE, 2.1) for s in range(2)]
    wall = [rec("a", s, None, 2.0 + s / 100) for s in range(2)] + [rec("b", s, None, 2.1) for s in range(2)]
    out = {k: format_comparison(group_records(v), []) for k, v in (("close", close), ("far", far), ("wall", wall))}
    assert "machine speed" in out["close"] and "warning" not in out["close"]
    assert "warning: the groups ran on machines whose probe times differ" in out["far"]
    assert "machine speed" not in out["wall"]


def test_one_noisy_timing_sets_the_range_not_the_drift():
    c = BudgetClock(budget_s=1.0, uncharged_steps=0, allowance_s=0.0)
    for t in (1.0, 1.0, 2.0, 1.0, 1.0, 1.1, 1.0, 1.0, 1.0):
        c.add_probe({"probe_s": t, "repeats_s": [t]}, ref_s=1.0)
    s = c.probe_summary()
    assert s["range"] == 1.0 and s["drift"] == 0.0 and not s["drifted"] and s["probe_s_median"] == 1.0
    assert BudgetClock(budget_s=1.0, uncharged_steps=0, allowance_s=0.0).probe_summary()["drift"] is None

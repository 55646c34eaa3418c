import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from frontier.devices import select_device
from frontier.errors import UserError
from frontier.recipes import resolve
from frontier.train import step as step_mod
from frontier.train.clock import BudgetClock
from frontier.train.trainer import RunStopped, train

CPU = select_device("cpu")


def _train(smoke_data, run_dir, **kw):
    """The baseline at smoke; on the wall clock where the test is of it (the steps rule: tests/test_cost.py)."""
    cfg = resolve("baseline", "smoke", budget_s=kw.pop("budget_s", None), clock=kw.pop("clock", None))
    return train(cfg, smoke_data, run_dir, CPU, progress=False, **kw)


def test_same_seed_same_steps_same_losses(smoke_data, tmp_path):
    a = _train(smoke_data, tmp_path / "a", seed=3, steps=12)
    b = _train(smoke_data, tmp_path / "b", seed=3, steps=12)
    c = _train(smoke_data, tmp_path / "c", seed=4, steps=12)
    assert a["curve"]["train_loss"] == b["curve"]["train_loss"]
    assert a["val_bpb"] == b["val_bpb"]
    assert a["curve"]["train_loss"] != c["curve"]["train_loss"]


def test_record_has_what_a_reader_needs(smoke_data, tmp_path):
    rec = _train(smoke_data, tmp_path / "r", seed=0, steps=6)
    for key in ["recipe", "profile", "config", "seed", "device", "hardware", "code", "data", "budget_s", "charged_s",
                "uncharged_s", "steps", "tokens", "tokens_per_s", "val_bpb", "val_loss", "val_tokens", "val_bytes",
                "bpb_convention", "status", "implementations", "curve", "cpu_share"]:
        assert key in rec, key
    assert rec["status"] == "finished" and rec["steps"] == 6
    assert rec["val_bytes"] == smoke_data.val_bytes
    assert rec["implementations"]["attention"].startswith("sdpa")
    ops = ("rmsnorm", "rotary", "relu2_mlp", "head_softcap_cross_entropy", "newton_schulz", "adamw_step")
    assert {op: rec["implementations"][op] for op in ops} == dict.fromkeys(ops, "reference")  # observed, not copied
    assert rec["kernels"] == "reference" and rec["kernel_calls"]["rmsnorm.backward"]["reference"] > 0
    assert rec["hardware"]["cpu_cores"] >= 1 and rec["hardware"]["torch"] == torch.__version__
    assert set(rec["code"]) >= {"git_sha", "dirty"}
    assert json.loads((tmp_path / "r" / "result.json").read_text())["val_bpb"] == rec["val_bpb"]
    assert (tmp_path / "r" / "checkpoint.pt").is_file()


def test_budget_stops_on_the_charged_clock(smoke_data, tmp_path):
    """The run stops at the first step that reaches the budget: not one step later, not one step early."""
    rec = _train(smoke_data, tmp_path / "b", budget_s=1.0, clock="wall")
    charged = rec["curve"]["charged_s"]
    assert rec["curve"]["step"] == list(range(1, rec["steps"] + 1))  # the smoke profile logs every step
    assert charged[-1] == rec["charged_s"] >= 1.0
    assert charged[-2] < 1.0  # the step before the last had not reached the budget yet
    last_step_s = charged[-1] - charged[-2]
    assert rec["charged_s"] - 1.0 < last_step_s <= rec["max_charged_step_s"] + 1e-9
    steps_s = [b - a for a, b in zip([0.0] + charged[:-1], charged)]
    assert rec["max_charged_step_s"] == pytest.approx(max(steps_s), abs=1e-9)
    assert rec["uncharged_s"] > 0  # the first (warm-up) steps were free


def test_clock_stops_at_the_first_step_that_reaches_the_budget():
    c = BudgetClock(budget_s=2.0, uncharged_steps=1, allowance_s=0.25)
    charged_after = []
    while not c.done:
        c.add_step(0.5)  # the first: 0.25 s free, 0.25 s charged; then 0.5 s charged each
        charged_after.append(c.charged_s)
    assert charged_after == [0.25, 0.75, 1.25, 1.75, 2.25] and c.steps == 5
    assert c.max_charged_step_s == 0.5 and c.charged_s - c.budget_s < 0.5
    exact = BudgetClock(budget_s=1.0, uncharged_steps=0, allowance_s=0.0)
    exact.add_step(0.5)
    assert not exact.done
    exact.add_step(0.5)
    assert exact.done and exact.charged_s == 1.0  # reaching the budget exactly stops the run too


def test_clock_allowance():
    c = BudgetClock(budget_s=10, uncharged_steps=2, allowance_s=3.0)
    c.add_step(2.0)  # free
    c.add_step(2.0)  # 1 s free (allowance used up), 1 s charged: half a charged step
    c.add_step(1.0)  # charged
    assert (c.uncharged_s, c.charged_s, c.steps) == (3.0, 2.0, 3)
    assert c.fraction == 0.2 and not c.done
    assert c.tokens_per_s(100) == 1.5 * 100 / 2.0  # 1.5 steps' tokens in 2 charged seconds
    c.add_charged(8.0)
    assert c.done and c.wall_s == 13.0 and c.charged_s == 10.0
    assert c.tokens_per_s(100) == 1.5 * 100 / 2.0  # the steps' own rate: other charged work does not lower it
    assert c.step_s_median == 1.0 and c.compile_s == 1.0  # first step 2 s, a typical one 1 s
    assert (c.charged_step_s, c.charged_other_s, c.charged_steps, c.max_charged_step_s) == (2.0, 8.0, 1.5, 1.0)


def test_a_partly_charged_warmup_step_counts_as_its_charged_share():
    c = BudgetClock(budget_s=100, uncharged_steps=1, allowance_s=0.75)
    c.add_step(1.0)  # 0.75 s free, 0.25 s charged: a quarter of a step in 0.25 s, the step's own rate
    assert c.charged_steps == 0.25 and c.tokens_per_s(64) == 64.0
    c.add_step(0.5)  # a whole step in 0.5 s: 128 tokens/s
    assert c.tokens_per_s(64) == 1.25 * 64 / 0.75


def test_an_old_clock_state_loads():
    state = BudgetClock(budget_s=10, uncharged_steps=0, allowance_s=0.0).state_dict()
    for k in ["charged_step_s", "charged_other_s", "max_charged_step_s"]:
        del state[k]
    state.update(charged_s=3.0, charged_steps=3, steps=3)
    c = BudgetClock.from_state(state)  # a checkpoint written before those fields: its charged seconds are steps'
    assert (c.charged_step_s, c.charged_other_s, c.tokens_per_s(10)) == (3.0, 0.0, 10.0)


def test_counting_the_shards_is_charged_but_does_not_lower_the_throughput(smoke_data, tmp_path):
    cfg = resolve("ngram", "smoke", clock="wall")  # charged seconds = wall seconds (tests/test_clock.py: reference)
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, compile=False))
    assert cfg.model.ngram.counting == "shards" and cfg.train.uncharged_steps == 2
    rec = train(cfg, smoke_data, tmp_path / "n", CPU, seed=0, steps=6, progress=False)
    counting_s, charged = rec["ngram"]["counting_s"], rec["curve"]["charged_s"]
    assert counting_s > 0 and charged[1] == counting_s  # the two warm-up steps were free: so far, the counting
    step_s = charged[-1] - charged[1]  # the charged seconds of steps 3..6
    tokens = 4 * cfg.train.batch_size * cfg.train.seq_len
    assert rec["tokens_per_s"] == pytest.approx(tokens / step_s, rel=1e-9)
    assert rec["charged_s"] == charged[-1] == pytest.approx(rec["charged_step_s"] + counting_s, abs=1e-12)
    assert rec["charged_other_s"] == counting_s
    assert rec["charged_steps"] == 4 and rec["charged_step_s"] == pytest.approx(step_s, rel=1e-9)


class Faulty(torch.nn.Module):
    """The real model, with something going wrong from its `at`-th forward pass on (`fault(loss)`)."""

    def __init__(self, inner, at, fault):
        super().__init__()
        self.inner, self.at, self.fault, self.calls = inner, at, fault, 0

    def num_params(self):
        return self.inner.num_params()

    def forward(self, x, y, reduction="mean"):
        self.calls += 1
        loss = self.inner(x, y, reduction)
        return self.fault(loss) if self.calls >= self.at else loss


def _faulty(monkeypatch, at, fault):
    real_build = step_mod.build_model
    monkeypatch.setattr(step_mod, "build_model", lambda cfg: Faulty(real_build(cfg), at, fault))


def test_diverged_run_keeps_record_and_checkpoint(smoke_data, tmp_path, monkeypatch):
    _faulty(monkeypatch, 4, lambda loss: loss * float("nan"))
    with pytest.raises(RunStopped) as e:
        _train(smoke_data, tmp_path / "d", steps=20)
    assert e.value.status == "diverged" and e.value.exit_code == 3
    assert "diverged at step 4" in str(e.value)
    rec = json.loads((tmp_path / "d" / "result.json").read_text())
    assert rec["status"] == "diverged" and rec["steps"] == 4 and rec["val_bpb"] is None
    assert len(rec["curve"]["train_loss"]) == 4 and math.isnan(rec["curve"]["train_loss"][-1])
    assert (tmp_path / "d" / "checkpoint-diverged.pt").is_file()


def test_a_crash_keeps_the_record_and_the_state(smoke_data, tmp_path, monkeypatch):
    def crash(loss):
        raise RuntimeError("simulated compiler failure")

    _faulty(monkeypatch, 3, crash)
    with pytest.raises(RuntimeError, match="simulated"):
        _train(smoke_data, tmp_path / "f", steps=10)
    rec = json.loads((tmp_path / "f" / "result.json").read_text())
    assert rec["status"] == "failed" and rec["steps"] == 2 and "simulated compiler failure" in rec["error"]
    assert (tmp_path / "f" / "checkpoint-failed.pt").is_file()


def test_refuses_to_overwrite_a_run(smoke_data, tmp_path):
    _train(smoke_data, tmp_path / "r", steps=2)
    with pytest.raises(UserError, match="already holds a run"):
        _train(smoke_data, tmp_path / "r", steps=2)


def _cli(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "frontier", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)


def test_sigint_saves_and_resume_matches_an_uninterrupted_run(smoke_data, tmp_path):
    steps = "120"  # about 4 s of smoke steps: the SIGINT 1 s after the start lands part way
    common = ["--recipe", "baseline", "--profile", "smoke", "--data", str(smoke_data.folder), "--device", "cpu",
              "--seed", "1", "--no-progress"]
    run = tmp_path / "interrupted"
    proc = _cli("train", *common, "--steps", steps, "--out", str(run))
    deadline = time.time() + 60
    while not (run / "result.json").exists() and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    rec = json.loads((run / "result.json").read_text())
    assert rec["status"] == "interrupted" and 0 < rec["steps"] < int(steps), rec["steps"]
    assert "--resume" in err and "Traceback" not in err
    proc = _cli("train", "--resume", str(run), "--no-progress", "--device", "cpu")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.strip().splitlines()[-1].startswith("val_bpb=")
    resumed = json.loads((run / "result.json").read_text())
    full = _train(smoke_data, tmp_path / "full", seed=1, steps=int(steps))
    assert resumed["status"] == "finished" and resumed["steps"] == int(steps)
    assert resumed["curve"]["train_loss"] == full["curve"]["train_loss"]
    assert resumed["val_bpb"] == full["val_bpb"]


@pytest.mark.parametrize("flag", [["--recipe", "final"], ["--profile", "cpu"], ["--seed", "0"], ["--steps", "3"],
                                  ["--budget", "9"], ["--out", "elsewhere"], ["--kernels", "reference"],
                                  ["--ngram", "slots_short=256"], ["--optim", "matrix_lr=0.04"]])
def test_a_resumed_run_refuses_flags_that_would_change_it(flag, capsys):
    """--resume continues the run's own config, seed, steps and folder: a flag that would train something else is
    one error line naming it, before anything is read (the run folder need not exist)."""
    from frontier.cli import main

    assert main(["train", "--resume", "somewhere", "--device", "cpu", *flag]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {flag[0]} cannot change a run being resumed; drop it") and "\n" not in err, err

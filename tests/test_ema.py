"""The EMA of the weights: the update rule, decay by elapsed fraction, resume, scoring, config and flags."""

import dataclasses
import json
import signal

import pytest
import torch
import torch.nn as nn

from frontier.cli import build_parser, main
from frontier.config import EMAConfig, RunConfig
from frontier.devices import select_device
from frontier.errors import UserError
from frontier.flags import ema_override
from frontier.profiles import CPU_NGRAM_TABLES_BEFORE
from frontier.recipes import EMA_HALF_LIFE_FRAC, EMA_MIX, EMA_START_FRAC, ema_label, get_recipe, resolve
from frontier.train import trainer as trainer_mod
from frontier.train.ema import WeightEMA
from frontier.train.trainer import CHECKPOINT, RunStopped, evaluate_run, resume, train

CPU = select_device("cpu")


class Tiny(nn.Module):
    """Two weights, a bigram-like table with its gradient sink, and a buffer."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.bigram = nn.Module()
        self.bigram.table = nn.Parameter(torch.zeros(4, 2))
        self.bigram.sink = nn.Parameter(torch.zeros(2, 2))
        self.register_buffer("counts", torch.zeros(5))


def _set(model: nn.Module, value: float) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)


def test_shadow_equals_a_hand_computed_ema():
    torch.manual_seed(0)
    model = Tiny()
    ema = WeightEMA(model, EMAConfig(start_frac=0.3, half_life_frac=0.2))
    assert ema.names == ["lin.weight", "lin.bias", "bigram.table"]  # no sink, no buffer
    assert ema.mib == (6 + 2 + 8) * 4 / 2**20
    hand, last = None, None
    for step, frac in enumerate([0.1, 0.3, 0.45, 0.5, 0.9], start=1):
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randn_like(p))
        updated = ema.update(frac, step)
        live = [p.detach().double().clone() for p in ema.params]
        assert updated == (frac >= 0.3)
        if not updated:
            assert ema.shadow is None
            continue
        if hand is None:
            hand = live  # the first update at or after start_frac copies the live weights
        else:
            decay = 0.5 ** ((frac - last) / 0.2)
            hand = [decay * h + (1 - decay) * w for h, w in zip(hand, live)]
        last = frac
        for s, h in zip(ema.shadow, hand):
            torch.testing.assert_close(s.double(), h, rtol=1e-6, atol=1e-7)
    assert ema.updates == 4 and ema.first_step == 2 and ema.last_frac == 0.9
    assert all(s.dtype == torch.float32 for s in ema.shadow)


def test_every_n_steps_updates_on_multiples_of_n():
    model = Tiny()
    ema = WeightEMA(model, EMAConfig(start_frac=0.0, half_life_frac=0.1, every=3))
    assert [ema.update(step / 10, step) for step in range(1, 10)] == [False, False, True] * 3


def _constant_then_jump(steps_per_tenth: int, half_life: float = 0.15) -> list[torch.Tensor]:
    """Live weights 1.0 until the EMA starts at 0.5, then 3.0 to the end of the run (fraction 0.9)."""
    model = Tiny()
    ema = WeightEMA(model, EMAConfig(start_frac=0.5, half_life_frac=half_life))
    n = 9 * steps_per_tenth
    for step in range(1, n + 1):
        frac = step / (10 * steps_per_tenth)
        _set(model, 1.0 if frac <= 0.5 else 3.0)
        ema.update(frac, step)
    return ema.shadow


def test_the_decay_depends_on_the_elapsed_fraction_not_the_step_count():
    slow, fast = _constant_then_jump(1), _constant_then_jump(8)  # 5 updates against 33 over the same fractions
    expected = 3.0 + (1.0 - 3.0) * 0.5 ** (0.4 / 0.15)
    for s, f in zip(slow, fast):
        torch.testing.assert_close(s, f, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(s, torch.full_like(s, expected), rtol=1e-6, atol=1e-6)


def test_averaged_mixes_and_applied_restores_the_live_weights():
    model = Tiny()
    ema = WeightEMA(model, EMAConfig(start_frac=0.0, half_life_frac=0.1, mix=0.25))
    _set(model, 2.0)
    assert ema.averaged()[0].eq(2.0).all()  # no shadow yet: the live weights
    ema.update(0.1, 1)
    _set(model, 6.0)
    assert ema.averaged(1.0)[0].eq(2.0).all() and ema.averaged(0.0)[0].eq(6.0).all()
    assert ema.averaged()[0].eq(0.25 * 2.0 + 0.75 * 6.0).all()
    with ema.applied(1.0):
        assert model.lin.weight.eq(2.0).all() and model.bigram.sink.eq(6.0).all()  # the sink is not averaged
    assert model.lin.weight.eq(6.0).all()


def test_config_round_trip_and_validation():
    cfg = resolve("ema", "smoke")
    assert cfg.train.ema == EMAConfig(EMA_START_FRAC, EMA_HALF_LIFE_FRAC, 1, EMA_MIX)
    assert get_recipe("ema").parent == "ngram" and cfg.model.ngram is not None and cfg.model.bigram is not None
    again = RunConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg and again.digest() == cfg.digest()
    other = resolve("ema", "smoke", ema=EMAConfig(0.6, 0.05))
    assert other.train.ema == EMAConfig(0.6, 0.05) and other.digest() != cfg.digest()
    # without an EMA the field is left out of the hash: the hashes of the runs recorded before it stay
    # (runs under the wall clock, as those were)
    assert resolve("ngram", "cpu", clock="wall", ngram=CPU_NGRAM_TABLES_BEFORE).digest() == "0ce00c23126d5b9e"
    assert resolve("baseline", "cpu", clock="wall").digest() == "b206d3b692965179"
    with pytest.raises(UserError, match="has no EMA"):
        resolve("ngram", "smoke", ema=EMAConfig(0.5, 0.1))
    for bad in [dict(start_frac=1.0, half_life_frac=0.1), dict(start_frac=0.5, half_life_frac=0.0),
                dict(start_frac=0.5, half_life_frac=0.1, every=0), dict(start_frac=0.5, half_life_frac=0.1, mix=1.5)]:
        with pytest.raises(UserError) as e:
            EMAConfig(**bad)
        assert "\n" not in str(e.value)


def _ema_cfg(recipe: str = "baseline", **ema) -> RunConfig:
    """`recipe` at the smoke profile with an EMA, eager (no compile: seconds on a CPU)."""
    cfg = resolve(recipe, "smoke")
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, compile=False, ema=EMAConfig(**ema)))


def test_live_and_ema_scores_are_both_recorded_and_val_bpb_follows_mix(smoke_data, tmp_path):
    recs = {mix: train(_ema_cfg(start_frac=0.0, half_life_frac=0.1, mix=mix), smoke_data, tmp_path / str(mix), CPU,
                       seed=0, steps=6, progress=False) for mix in (1.0, 0.0, 0.5)}
    full, none, half = recs[1.0], recs[0.0], recs[0.5]
    assert full["val_bpb"] == full["val_bpb_ema"] != full["val_bpb_live"]
    assert full["val_loss"] == full["val_loss_ema"] and none["val_loss"] == none["val_loss_live"]
    assert none["val_bpb"] == none["val_bpb_live"]
    assert half["val_bpb"] not in (half["val_bpb_live"], half["val_bpb_ema"])
    # the same training: the same live and EMA weights whatever is declared
    assert len({r["val_bpb_live"] for r in recs.values()}) == 1 and len({r["val_bpb_ema"] for r in recs.values()}) == 1
    model = trainer_mod.build_model(_ema_cfg(start_frac=0.0, half_life_frac=0.1))
    assert full["ema"]["updates"] == 6 and full["ema"]["first_step"] == 1
    assert full["ema"]["mib"] == pytest.approx(model.num_params() * 4 / 2**20)
    for weights, key in [(None, "val_bpb"), ("live", "val_bpb_live"), ("ema", "val_bpb_ema")]:
        again = evaluate_run(tmp_path / "0.5", smoke_data, CPU, weights=weights)
        assert again["val_bpb"] == pytest.approx(half[key], abs=1e-9), weights


def test_cli_eval_scores_either_set_of_weights(smoke_data, tmp_path, capsys):
    rec = train(_ema_cfg(start_frac=0.5, half_life_frac=0.1), smoke_data, tmp_path / "r", CPU, seed=0, steps=4,
                progress=False)
    for weights, key in [("live", "val_bpb_live"), ("ema", "val_bpb_ema")]:
        assert main(["eval", "--run", str(tmp_path / "r"), "--weights", weights, "--device", "cpu"]) == 0
        last = capsys.readouterr().out.strip().splitlines()[-1]
        assert abs(float(last.split("=")[1]) - rec[key]) < 1e-6
    assert rec["ema"]["updates"] == 2 and rec["ema"]["first_step"] == 3  # steps 3 and 4 start at 2/4 and 3/4


def test_a_run_without_ema_records_nothing_new(smoke_data, tmp_path):
    cfg = resolve("baseline", "smoke")
    rec = train(cfg, smoke_data, tmp_path / "b", CPU, seed=0, steps=2, progress=False)
    assert not {"ema", "val_bpb_live", "val_bpb_ema", "val_loss_live", "val_loss_ema"} & rec.keys()
    assert "ema" not in torch.load(tmp_path / "b" / CHECKPOINT, weights_only=False)
    with pytest.raises(UserError, match="has no EMA"):
        evaluate_run(tmp_path / "b", smoke_data, CPU, weights="ema")


def test_interrupt_and_resume_continue_the_shadow_bit_for_bit(smoke_data, tmp_path, monkeypatch):
    """SIGINT after step 6 of 16 (the average started at step 5), then --resume: the same shadow, bit for bit, as
    an uninterrupted run; the bigram table and the n-gram mixture are averaged, the sink is not."""
    cfg = _ema_cfg("ema", start_frac=0.25, half_life_frac=0.2, every=1)
    real_step, calls = trainer_mod.train_step, []

    def step_then_interrupt(*args, **kw):
        out = real_step(*args, **kw)
        calls.append(1)
        if len(calls) == 6:
            signal.raise_signal(signal.SIGINT)  # the trainer's handler: finish the step, save, stop
        return out

    monkeypatch.setattr(trainer_mod, "train_step", step_then_interrupt)
    with pytest.raises(RunStopped):
        train(cfg, smoke_data, tmp_path / "cut", CPU, seed=1, steps=16, progress=False)
    monkeypatch.setattr(trainer_mod, "train_step", real_step)
    saved = torch.load(tmp_path / "cut" / CHECKPOINT, weights_only=False)["ema"]
    assert saved["updates"] == 2 and saved["first_step"] == 5 and saved["shadow"] is not None
    assert {"bigram.table", "bigram.scale", "ngram.mix_logits", "ngram.scale"} <= set(saved["names"])
    assert not any(n.endswith(".sink") for n in saved["names"])
    resumed = resume(tmp_path / "cut", smoke_data, CPU, progress=False)
    full = train(cfg, smoke_data, tmp_path / "full", CPU, seed=1, steps=16, progress=False)
    a = torch.load(tmp_path / "cut" / CHECKPOINT, weights_only=False)["ema"]
    b = torch.load(tmp_path / "full" / CHECKPOINT, weights_only=False)["ema"]
    assert a["updates"] == b["updates"] == 12 and a["last_frac"] == b["last_frac"]
    assert all(torch.equal(x, y) for x, y in zip(a["shadow"], b["shadow"]))
    assert resumed["curve"]["train_loss"] == full["curve"]["train_loss"]
    assert (resumed["val_bpb_ema"], resumed["val_bpb_live"]) == (full["val_bpb_ema"], full["val_bpb_live"])


def test_train_flags_change_the_recipes_ema_and_only_that(capsys):
    parse = build_parser().parse_args
    a = parse(["train", "--recipe", "ema", "--ema-half-life", "0.05", "--ema-every", "4"])
    assert ema_override(a, get_recipe("ema")) == EMAConfig(EMA_START_FRAC, 0.05, 4, EMA_MIX)
    assert ema_override(parse(["train", "--recipe", "ema"]), get_recipe("ema")) is None
    cases = [
        (["--recipe", "ngram", "--ema-start", "0.5"], ["recipe 'ngram' has no EMA", "--recipe ema"]),
        (["--recipe", "ema", "--ema-mix", "1.5"], ["EMA mix 1.5 is out of range"]),
    ]
    for args, words in cases:
        assert main(["train", "--profile", "smoke", "--device", "cpu", *args]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("error: ") and all(w in err for w in words), err
    assert main(["train", "--resume", "somewhere", "--device", "cpu", "--ema-mix", "0.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: --ema-* flags cannot change a run being resumed; drop them: --resume continues the run's "
                   "own config"), err


def test_experiments_pass_the_ema_through(monkeypatch, tmp_path, smoke_data):
    from frontier.study import experiments as ex

    seen = []

    def fake_train(cfg, dataset, run_dir, dev, **kw):
        seen.append((cfg, run_dir, kw["label"]))
        return {"val_bpb": 1.0, "steps": 1, "tokens_per_s": 1.0}

    monkeypatch.setattr(ex, "train", fake_train)
    setting = EMAConfig(0.7, 0.05, every=2, mix=0.5)
    ex.seeds("ema", "smoke", n=2, root=tmp_path, data=smoke_data, device="cpu", ema=setting,
             label=ema_label(setting), log=lambda m: None)
    assert [cfg.train.ema for cfg, _, _ in seen] == [setting, setting]
    assert [str(d.relative_to(tmp_path)) for _, d, _ in seen] == ["smoke/ema-start0.7-hl0.05-every2-mix0.5/s0",
                                                                   "smoke/ema-start0.7-hl0.05-every2-mix0.5/s1"]

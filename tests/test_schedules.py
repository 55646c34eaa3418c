"""Schedules as shares of the run, and optimiser settings as recorded config changes (`--optim`, `Recipe.optim`)."""

import dataclasses

import pytest

from frontier.config import EMAConfig, OptimConfig
from frontier.errors import UserError
from frontier.optim.optimizers import muon_momentum
from frontier.profiles import CPU_NGRAM_TABLES_BEFORE
from frontier.recipes import RECIPES, get_recipe, resolve


def test_momentum_warms_up_over_a_share_of_the_run_at_any_step_rate():
    o = OptimConfig(muon_momentum_start=0.85, muon_momentum=0.95, muon_momentum_warmup_frac=0.2)
    # the same share of the run gives the same momentum, whatever step it is
    assert muon_momentum(10, o, 0.1) == muon_momentum(500, o, 0.1) == pytest.approx(0.90)
    assert muon_momentum(3, o, 0.0) == 0.85
    assert muon_momentum(3, o, 0.2) == muon_momentum(3, o, 0.7) == 0.95
    assert muon_momentum(3, dataclasses.replace(o, muon_momentum_warmup_frac=0.0), 0.0) == 0.95


def test_momentum_warms_up_over_steps_by_default():
    o = OptimConfig()
    assert o.muon_momentum_warmup_frac is None
    assert muon_momentum(150, o, 0.99) == pytest.approx((o.muon_momentum_start + o.muon_momentum) / 2)
    assert muon_momentum(300, o) == o.muon_momentum


@pytest.mark.parametrize("recipe", ["baseline", "ngram-sized", "ema"])
def test_a_new_optimiser_field_left_at_its_default_keeps_every_config_hash(recipe):
    """Records written before `muon_momentum_warmup_frac` existed stay comparable: the field is hashed only when
    set, so today's config of a recipe hashes as its committed record does."""
    from pathlib import Path

    from frontier.records import load_record

    rec = load_record(Path(__file__).resolve().parents[1] / "runs" / "cpu" / recipe / "s0")
    # those records ran under the wall clock: at the clock's earlier value the hash is as it was
    # `ema`'s weight average moved since (frontier.recipes.EMA_*): that record's own average is handed back to it
    # and those with an n-gram model counted into the cpu profile's tables of then (CPU_NGRAM_TABLES_BEFORE)
    ema = EMAConfig(**rec["config"]["train"]["ema"]) if recipe == "ema" else None
    ngram = CPU_NGRAM_TABLES_BEFORE if rec["config"]["model"]["ngram"] else None
    assert resolve(recipe, "cpu", clock="wall", ema=ema, ngram=ngram).digest() == rec["config_hash"]
    assert resolve(recipe, "cpu", clock="wall", ema=ema, ngram=ngram,
                   optim={"muon_momentum_warmup_frac": 0.2}).digest() != rec["config_hash"]
    assert resolve(recipe, "cpu").digest() != rec["config_hash"]  # the cpu profile's reference clock is hashed


def test_optim_changes_go_into_the_config_and_unknown_ones_are_one_line():
    cfg = resolve("final", "smoke", optim={"matrix_lr": 0.03, "adam_betas": [0.9, 0.95]})
    assert cfg.optim.matrix_lr == 0.03 and cfg.optim.adam_betas == (0.9, 0.95)
    with pytest.raises(UserError, match="no setting nope"):
        resolve("final", "smoke", optim={"nope": 1})


def test_a_recipe_carries_its_own_optimiser_settings_and_passes_them_on():
    base = get_recipe("baseline")
    tuned = base.derive("tuned", "test", optim={"matrix_lr": 0.03})
    child = tuned.derive("child", "test", optim={"warmdown_frac": 0.3})
    assert child.optim == {"matrix_lr": 0.03, "warmdown_frac": 0.3}
    cfg = resolve(child, "smoke", optim={"matrix_lr": 0.05})  # a sweep goes over the recipe's own
    assert (cfg.optim.matrix_lr, cfg.optim.warmdown_frac) == (0.05, 0.3)
    assert all(isinstance(r.optim, dict) for r in RECIPES.values())


def test_replay_drives_the_schedules_with_the_fractions_the_run_ran_at(tmp_path):
    """A record whose first steps depend on the elapsed fraction (momentum warmed up over a share of the run) is
    reproduced by a replay, which steps at the record's own `early_fracs`; replayed at fraction 0 it would not be."""
    from frontier.data.dataset import profile_dataset
    from frontier.devices import select_device
    from frontier.profiles import get_profile
    from frontier.study.replay import replay_losses
    from frontier.train.trainer import EARLY_STEPS, train

    cfg = resolve("baseline", "smoke", optim={"muon_momentum_warmup_frac": 0.5})
    data, dev = profile_dataset(get_profile("smoke"), log=lambda *a: None), select_device("cpu")
    rec = train(cfg, data, tmp_path / "run", dev, seed=0, steps=6, progress=False, log=lambda *a: None)
    assert len(rec["early_fracs"]) == min(6, EARLY_STEPS) and rec["early_fracs"][3] == 0.5
    losses = rec["curve"]["train_loss"]
    assert replay_losses(cfg, data, dev, 0, 6, rec["early_fracs"]) == losses
    assert replay_losses(cfg, data, dev, 0, 6) != losses


def test_the_tuned_recipe_is_the_sized_one_with_its_screened_rate_and_warm_up_share():
    sized, tuned = resolve("ngram-sized", "cpu"), resolve("ngram-tuned", "cpu")
    assert (tuned.model.n_layer, tuned.model.n_embd) == (sized.model.n_layer, sized.model.n_embd)
    assert tuned.model.bigram.lr == 0.01 and sized.model.bigram.lr != 0.01
    assert tuned.optim.muon_momentum_warmup_frac == 0.75 and sized.optim.muon_momentum_warmup_frac is None
    # other profiles keep their own bigram rate: the screen ran at the cpu profile only
    assert resolve("ngram-tuned", "smoke").model.bigram.lr == resolve("ngram-sized", "smoke").model.bigram.lr


def test_a_replay_of_a_compiled_run_compiles_for_itself(monkeypatch):
    """Like a training run, a replay of a compiled recipe starts from a fresh compile: a process that replays many
    (a chapter reusing twenty runs) would otherwise reach dynamo's recompile limit and replay the rest eager."""
    from frontier.data.dataset import profile_dataset
    from frontier.devices import select_device
    from frontier.profiles import get_profile
    from frontier.study import replay
    from frontier.train import run as run_mod

    resets = []
    monkeypatch.setattr(run_mod, "fresh_compile", lambda: resets.append(1))
    data, dev = profile_dataset(get_profile("smoke"), log=lambda *a: None), select_device("cpu")
    replay.replay_losses(resolve("baseline", "smoke"), data, dev, 0, 1)
    assert resets == []  # eager: nothing to forget
    replay.replay_losses(resolve("compile", "smoke"), data, dev, 0, 1)
    assert resets == [1]

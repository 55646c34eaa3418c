"""Recipes with a size of their own, and the names `final` and `best`."""

import dataclasses

import pytest

from frontier import recipes
from frontier.errors import UserError
from frontier.profiles import PROFILES, get_profile
from frontier.recipes import get_recipe, resolve


def test_a_recipe_can_carry_its_own_size_per_profile_and_a_sweep_goes_over_it():
    r = recipes.NGRAM.derive("ngram-1-layer", "test", sizes={"smoke": {"n_layer": 1}})
    assert resolve(r, "smoke").model.n_layer == 1
    assert resolve(r, "cpu").model.n_layer == resolve("ngram", "cpu").model.n_layer  # other profiles: theirs
    assert resolve(r, "smoke", sizes={"n_layer": 3}).model.n_layer == 3  # a sweep's size wins
    assert r.derive("child", "test", bigram=False).sizes == r.sizes  # inherited by what is built on it
    assert resolve(r, "smoke").digest() != resolve("ngram", "smoke").digest()


def test_sizes_given_to_resolve_train_what_a_changed_profile_trains():
    s = dict(n_layer=2, n_embd=128, n_head=2, n_kv_head=2)
    changed = dataclasses.replace(get_profile("cpu"), **s)  # the profile with those sizes: the same config
    assert resolve("ngram", "cpu", sizes=s).digest() == resolve("ngram", changed).digest()


def test_final_and_best_are_names_for_one_recipe():
    assert get_recipe("final") is get_recipe("best") is recipes.RECIPES[recipes.FINAL]
    assert "final" not in recipes.RECIPES  # a name, not a recipe: its runs are recorded under the recipe's own
    with pytest.raises(UserError, match="'final' or 'best'"):
        get_recipe("finale")


def _with_tables(cfg, recipe, **tables):
    """`cfg` as `recipe` with its n-gram tables' settings `tables`: what a recipe that changes only those trains."""
    return dataclasses.replace(cfg, recipe=recipe, model=dataclasses.replace(
        cfg.model, ngram=dataclasses.replace(cfg.model.ngram, **tables)))


def test_a_recipe_sets_the_longest_context_its_tables_count():
    from frontier.train.cost import cost_key

    for p in PROFILES:
        final = resolve("ngram-momentum", p)
        assert final.model.ngram.max_order == 16  # the default: the recipes' runs stand
        assert resolve("ngram-long", p) == _with_tables(final, "ngram-long", max_order=32)  # nothing else changes
    assert cost_key(resolve("ngram-long", "cpu")) != cost_key(resolve("ngram-momentum", "cpu"))


def test_the_wide_recipe_takes_four_times_each_profiles_buckets():
    for p in PROFILES:
        final = resolve("ngram-momentum", p)
        wide = _with_tables(final, "ngram-wide", buckets_log2=final.model.ngram.buckets_log2 + 2)
        assert resolve("ngram-wide", p) == wide  # nothing else changes
    assert not recipes.NGRAM_WIDE.sizes  # the tables' size is not the model's: no step is traded by a model size

"""Recipes with a size of their own, and the names `final` and `best`."""

import dataclasses

import pytest

from frontier import recipes
from frontier.errors import UserError
from frontier.recipes import get_recipe, resolve
from frontier.study.experiments import profile_with


def test_a_recipe_can_carry_its_own_size_per_profile_and_a_sweep_goes_over_it():
    r = recipes.NGRAM.derive("ngram-1-layer", "test", sizes={"smoke": {"n_layer": 1}})
    assert resolve(r, "smoke").model.n_layer == 1
    assert resolve(r, "cpu").model.n_layer == resolve("ngram", "cpu").model.n_layer  # other profiles: theirs
    assert resolve(r, "smoke", sizes={"n_layer": 3}).model.n_layer == 3  # a sweep's size wins
    assert r.derive("child", "test", bigram=False).sizes == r.sizes  # inherited by what is built on it
    assert resolve(r, "smoke").digest() != resolve("ngram", "smoke").digest()


def test_sizes_given_to_resolve_train_what_a_changed_profile_trains():
    s = dict(n_layer=2, n_embd=128, n_head=2, n_kv_head=2)
    assert resolve("ngram", "cpu", sizes=s).digest() == resolve("ngram", profile_with("cpu", **s)).digest()


def test_final_and_best_are_names_for_one_recipe():
    assert get_recipe("final") is get_recipe("best") is recipes.RECIPES[recipes.FINAL]
    assert "final" not in recipes.RECIPES  # a name, not a recipe: its runs are recorded under the recipe's own
    with pytest.raises(UserError, match="'final' or 'best'"):
        get_recipe("finale")


def test_a_recipe_sets_the_longest_context_its_tables_count():
    from frontier.train.cost import cost_key

    r = recipes.NGRAM_MOMENTUM.derive("ngram-long-test", "test", ngram_max_order=32)
    assert resolve(r, "cpu").model.ngram.max_order == 32
    assert resolve("ngram-momentum", "cpu").model.ngram.max_order == 16  # the default: the recipes' runs stand
    # the same model as the sweep override of the same setting, and a step of it costs what its own bench says
    assert resolve(r, "cpu").model == resolve("ngram-momentum", "cpu", ngram={"max_order": 32}).model
    assert cost_key(resolve(r, "cpu")) != cost_key(resolve("ngram-momentum", "cpu"))


def test_the_wide_recipe_takes_four_times_each_profiles_buckets():
    for p in ("smoke", "cpu", "gpu", "trn2"):
        wide, final = resolve("ngram-wide", p).model.ngram, resolve("ngram-momentum", p).model.ngram
        assert wide.buckets_log2 == final.buckets_log2 + 2
        assert dataclasses.replace(wide, buckets_log2=final.buckets_log2) == final  # nothing else changes

"""The n-gram mix's smoothings (`NGramConfig.smoothing`). Each test can fail: each checks a property that a wrong
formula, an improper distribution, a stale discount or a changed config hash would break."""

import dataclasses

import pytest
import torch
from ngram_text import V, only_length, text

from frontier.config import NGRAM_SMOOTHINGS, NGramConfig, RunConfig, stable_hash
from frontier.errors import UserError
from frontier.model.ngram import NGramMix
from frontier.profiles import CPU_NGRAM_TABLES_BEFORE
from frontier.recipes import resolve


def _text(n, seed):
    return text(n, seed, repeat=0.6)


def _two_folds(smoothing, check_bits, slots=2):
    m = NGramMix(NGramConfig(max_order=5, buckets_log2=6, seen_log2=14, slots=slots, slots_short=3, folds=2,
                             smoothing=smoothing, check_bits=check_bits), V)
    for f, seed in [(0, 0), (1, 1)]:
        t = torch.tensor(_text(1200, seed)).view(4, -1)
        m.observe(t[:, :-1], t[:, 1:], f)
    return m


@pytest.mark.parametrize("check_bits", [0, 31])
@pytest.mark.parametrize("smoothing", NGRAM_SMOOTHINGS)
def test_every_smoothing_sums_to_one_over_the_vocabulary(smoothing, check_bits):
    m = _two_folds(smoothing, check_bits)  # few slots and buckets: unlisted mass and collisions at every length
    x = torch.tensor(_text(130, 7)).view(2, -1)
    with torch.no_grad():
        m.mix_logits.copy_(torch.randn(6))
    for fold in (None, 0, 1):  # evaluation (both folds' average) and a training batch of each fold
        p = m.distribution(x, fold)
        assert torch.allclose(p.sum(-1), torch.ones(2, 65), atol=1e-5) and (p > 0).all(), fold
    for k in range(6):  # each context length alone
        only_length(m, k)
        for fold in (None, 0):
            p = m.distribution(x, fold)
            assert torch.allclose(p.sum(-1), torch.ones(2, 65), atol=1e-5) and (p > 0).all(), (k, fold)


@pytest.mark.parametrize("check_bits", [0, 31])
@pytest.mark.parametrize("smoothing", NGRAM_SMOOTHINGS)
def test_the_sparse_bias_equals_the_dense_formula(smoothing, check_bits):
    m = _two_folds(smoothing, check_bits)
    with torch.no_grad():
        m.mix_logits.copy_(torch.randn(6))
        m.scale.fill_(0.7)
    x = torch.tensor(_text(130, 8)).view(2, -1)
    z = torch.randn(2, 65, V) * 3
    for fold in (0, 1):
        floor, p = m.floor_and_distribution(x, fold)
        exact = torch.softmax(z + 0.3 * torch.log(floor) + 0.7 * torch.log(p), -1)
        assert torch.allclose(torch.softmax(m.add_to(z, x, fold), -1), exact, atol=1e-5), fold
    floor, p = m.floor_and_distribution(x)
    exact = torch.softmax(z + 0.3 * torch.log(floor) + 0.7 * torch.log(p), -1)
    assert torch.allclose(torch.softmax(m.add_to(z, x), -1), exact, atol=1e-5)


# A hand-counted example. Counted tokens (one fold, max_order 2, 2 slots at every length):
SEQ = [2, 3, 2, 4, 4, 4, 3, 2, 3, 2, 3, 2, 1, 3, 1]
# targets: 1 x2, 2 x4, 3 x5, 4 x3 (14): P_0(w) = (count + 1) / 26.
# Length 1, context "2": continuations 3 x3, 4 x1, 1 x1: N = 5, T = 3, slots {3: 3, 1: 1} (the tie to the smaller
# token), U = 1. Slots of length 1: "2" {3: 3, 1: 1}, "3" {2: 4, 1: 1}, "4" {4: 2, 3: 1}, "1" {3: 1}: n1..n4 = 4, 1, 1, 1.
# Length 2, context "3 2": 3 x2, 4 x1, 1 x1: N = 4, T = 3, slots {3: 2, 1: 1}, U = 1. Slots of length 2:
# n1..n4 = 7, 1, 1, 0.
P0 = torch.tensor([1, 3, 5, 6, 4, 1, 1, 1, 1, 1, 1, 1], dtype=torch.float64) / 26


def _hand(smoothing):
    """(discounts of lengths 1 and 2, P_1(. | "2"), P_2(. | "3 2")) by the docstring's formulas."""
    e3, e1 = torch.eye(V, dtype=torch.float64)[3], torch.eye(V, dtype=torch.float64)[1]
    if smoothing == "witten-bell":  # a = (T + U) / (N + T), s = count / (N + T)
        d = None
        p1 = 4 / 8 * P0 + 3 / 8 * e3 + 1 / 8 * e1
        p2 = 4 / 7 * p1 + 2 / 7 * e3 + 1 / 7 * e1
    elif smoothing == "absolute":  # D_k = n1 / (n1 + 2 n2): 4/6 and 7/9
        d1, d2 = 2 / 3, 7 / 9
        d = [[d1] * 3, [d2] * 3]
        p1 = (2 * d1 + 1) / 5 * P0 + (3 - d1) / 5 * e3 + (1 - d1) / 5 * e1
        p2 = (2 * d2 + 1) / 4 * p1 + (2 - d2) / 4 * e3 + (1 - d2) / 4 * e1
    else:  # Y = n1 / (n1 + 2 n2); D_r = r - (r + 1) Y n_{r+1} / n_r, clipped to [0.05, r]
        # length 1: Y = 2/3, D1 = 1 - 2Y/4 = 2/3, D2 = 2 - 3Y = 0, clipped to 0.05, D3+ = 3 - 4Y = 1/3
        # length 2: Y = 7/9, D1 = 1 - 2Y/7 = 7/9, D2 = 2 - 3Y = -1/3, clipped to 0.05, D3+ = 3 - 0 = 3
        d = [[2 / 3, 0.05, 1 / 3], [7 / 9, 0.05, 3.0]]
        p1 = (1 / 3 + 2 / 3 + 1) / 5 * P0 + (3 - 1 / 3) / 5 * e3 + (1 - 2 / 3) / 5 * e1
        p2 = (0.05 + 7 / 9 + 1) / 4 * p1 + (2 - 0.05) / 4 * e3 + (1 - 7 / 9) / 4 * e1
    return d, p1, p2


@pytest.mark.parametrize("smoothing", NGRAM_SMOOTHINGS)
def test_a_hand_counted_example_gives_the_formulas_probabilities(smoothing):
    m = NGramMix(NGramConfig(max_order=2, buckets_log2=14, seen_log2=20, slots=2, slots_short=2, folds=1,
                             smoothing=smoothing), V)
    t = torch.tensor(SEQ)[None]
    m.observe(t[:, :-1], t[:, 1:])
    d, p1, p2 = _hand(smoothing)
    if d is None:
        assert m.discounts(0) is None
    else:
        assert torch.allclose(m.discounts(0), torch.tensor(d, dtype=torch.float32), atol=1e-6)
    x = torch.tensor([[3, 2]])
    for k, want in enumerate([P0, p1, p2]):
        only_length(m, k)
        got = m.distribution(x)[0, 1].double()
        assert torch.allclose(got, want, atol=1e-6), (k, got, want)
        assert abs(float(want.sum()) - 1) < 1e-12  # the hand formula is itself a distribution


def test_discounts_follow_the_tables():
    m = NGramMix(NGramConfig(max_order=3, buckets_log2=10, seen_log2=16, folds=1, smoothing="absolute-modified"), V)
    t = torch.tensor(_text(300, 0))[None]
    m.observe(t[:, :-1], t[:, 1:])
    before = m.discounts(0).clone()
    with m.counts_kept():
        u = torch.tensor(_text(300, 5))[None]
        m.observe(u[:, :-1], u[:, 1:])
        assert not torch.equal(m.discounts(0), before)  # counted more: estimated again
    assert torch.equal(m.discounts(0), before)  # the tables restored: so are the discounts
    other = NGramMix(m.cfg, V)
    other.load_state_dict(m.state_dict())
    assert torch.equal(other.discounts(0), before)
    assert other.summary()["smoothing"] == "absolute-modified" and len(other.summary()["discounts"][0]) == 3
    assert "smoothing" not in NGramMix(NGramConfig(max_order=3, buckets_log2=10, seen_log2=16), V).summary()


def test_the_default_smoothing_keeps_old_config_hashes():
    # the digests of the main branch before the field existed (runs/cpu/ngram/*, runs/cpu/ngram-only/*)
    # (those runs ran under the wall clock: at the clock's earlier value the hash is as it was)
    assert resolve("ngram", "cpu", clock="wall", ngram=CPU_NGRAM_TABLES_BEFORE).digest() == "0ce00c23126d5b9e"
    assert resolve("ngram-only", "cpu", clock="wall", ngram=CPU_NGRAM_TABLES_BEFORE).digest() == "d1620a178e6c02db"
    cfg = resolve("ngram", "cpu", clock="wall", ngram=CPU_NGRAM_TABLES_BEFORE)
    old = cfg.to_dict()
    del old["model"]["ngram"]["smoothing"], old["model"]["ngram"]["check_bits"], old["model"]["ngram"]["eval_counts"]
    del old["model"]["ngram"]["mixer"]
    for later in ("compile_optimizer", "ema", "kernels", "clock", "probe", "probe_ref_s"):
        del old["train"][later]
    del old["optim"]["muon_momentum_warmup_frac"]
    assert RunConfig.from_dict(old) == cfg and stable_hash(old) == cfg.digest() == "0ce00c23126d5b9e"
    for smoothing in NGRAM_SMOOTHINGS[1:]:
        on = dataclasses.replace(cfg, model=dataclasses.replace(
            cfg.model, ngram=dataclasses.replace(cfg.model.ngram, smoothing=smoothing)))
        assert on.digest() != cfg.digest() and RunConfig.from_dict(on.to_dict()) == on


def test_an_unknown_smoothing_is_refused_in_one_line():
    with pytest.raises(UserError) as err:
        NGramConfig(smoothing="kneser-ney")
    msg = str(err.value)
    assert "\n" not in msg and "'kneser-ney'" in msg and all(s in msg for s in NGRAM_SMOOTHINGS)

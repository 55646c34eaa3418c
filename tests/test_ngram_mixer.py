"""The context-dependent n-gram mixing (`NGramConfig.mixer="counts"`). Each test can fail: a mixing that ignored
the context, an improper distribution, a sparse training bias that disagreed with the dense formula, a head that
did not start as the global mixing or that no gradient reached, or a changed config hash would break one."""

import dataclasses

import pytest
import torch
from ngram_text import V, text

from frontier.config import NGramConfig, RunConfig
from frontier.errors import UserError
from frontier.model.ngram import NGramMix
from frontier.model.ngram.mix import COUNT_FEATURES
from frontier.profiles import CPU_NGRAM_TABLES_BEFORE
from frontier.recipes import resolve


def _mix(mixer="counts", smoothing="witten-bell", seed=0):
    torch.manual_seed(seed)
    m = NGramMix(NGramConfig(max_order=5, buckets_log2=6, seen_log2=14, slots=2, slots_short=3, folds=2,
                             smoothing=smoothing, check_bits=31, mixer=mixer), V)
    for f, s in [(0, 0), (1, 1)]:
        t = torch.tensor(text(1200, s, repeat=0.6)).view(4, -1)
        m.observe(t[:, :-1], t[:, 1:], f)
    return m


def _randomise(m):
    with torch.no_grad():
        m.mix_logits.copy_(torch.randn_like(m.mix_logits))
        m.mix_head.weight.copy_(torch.randn_like(m.mix_head.weight))
        m.mix_head.bias.copy_(torch.randn_like(m.mix_head.bias) * 0.3)


def _x():
    return torch.tensor(text(130, 7, repeat=0.6)).view(2, -1)


def test_the_head_reads_three_features_per_context_length():
    m = _mix()
    assert m.mix_head.in_features == COUNT_FEATURES * 5 and m.mix_head.out_features == 5 + 2


@pytest.mark.parametrize("smoothing", ["witten-bell", "absolute-modified"])
def test_mixing_by_counts_is_a_distribution_and_depends_on_the_context(smoothing):
    m = _mix(smoothing=smoothing)
    _randomise(m)
    x = _x()
    for fold in (None, 0, 1):
        p = m.distribution(x, fold)
        assert torch.allclose(p.sum(-1), torch.ones(2, 65), atol=1e-5) and (p > 0).all(), fold
    _, c0, _, _, scale = m.entries(x, 0)
    assert scale.shape == (2, 65) and scale.std() > 0.01  # a scale per position, not one
    assert c0.std() > 0.01  # the unigram's share differs between positions


def test_a_zero_head_is_the_global_mixing():
    counts, glob = _mix("counts"), _mix("global")
    with torch.no_grad():
        w = torch.randn(6)
        counts.mix_logits.copy_(w), glob.mix_logits.copy_(w)
        counts.scale.fill_(0.6), glob.scale.fill_(0.6)
    x = _x()
    for fold in (None, 0):
        assert torch.allclose(counts.bias(x, fold), glob.bias(x, fold), atol=1e-6), fold
        for a, b in zip(counts.bias_parts(x, 0), glob.bias_parts(x, 0)):
            assert torch.allclose(a, b, atol=1e-6)


def test_the_sparse_training_bias_matches_the_dense_formula_with_a_scale_per_position():
    m = _mix()
    _randomise(m)
    x = _x()
    z = torch.randn(2, 65, V) * 3
    floor, p = m.floor_and_distribution(x, 1)
    s = m.entries(x, m.tables_for(1))[4][..., None]
    exact = torch.softmax(z + (1 - s) * torch.log(floor) + s * torch.log(p), -1)
    assert torch.allclose(torch.softmax(m.add_to(z, x, 1), -1), exact, atol=1e-5)
    assert torch.allclose(torch.softmax(m.add_to(z, x, 1), -1), torch.softmax(z + m.bias(x, 1), -1), atol=1e-5)


def test_gradients_reach_the_head():
    m = _mix()
    x = _x()
    y = torch.tensor(text(131, 7, repeat=0.6))[1:].view(2, -1)
    loss = torch.nn.functional.cross_entropy(m.add_to(torch.zeros(2, 65, V), x, 0).view(-1, V), y.reshape(-1))
    loss.backward()
    assert m.mix_head.weight.grad.abs().sum() > 0 and m.mix_head.bias.grad.abs().sum() > 0
    assert m.scale.grad.abs() > 0


def test_an_unknown_mixer_is_one_clear_error():
    with pytest.raises(UserError, match="unknown n-gram mixer 'gates'"):
        NGramConfig(mixer="gates")


def _gpt(mixer, seed=0):
    """A smoke-sized `ngram-tables-hidden` network with `mixer`, its tables counted from two folds of the test text."""
    from frontier.model.gpt import GPT

    cfg = resolve("ngram-tables-hidden", "smoke", vocab_size=V, ngram={"mixer": mixer})  # eager, as that recipe
    torch.manual_seed(seed)
    model = GPT(cfg.model, max_seq_len=64, batch_size=2)
    t = torch.tensor(text(2000, 0, repeat=0.6)).view(8, -1)[:, :65]
    for f in (0, 1):
        model.ngram.observe(t[f::2, :-1], t[f::2, 1:], f)
    return model, t[:2, :-1], t[:2, 1:]


def test_the_hidden_mixer_starts_as_the_global_mixing_and_then_reads_the_network():
    hidden, x, y = _gpt("hidden")
    glob, _, _ = _gpt("global")
    glob.load_state_dict({k: v for k, v in hidden.state_dict().items() if "mix_head" not in k})
    assert hidden.ngram.mix_head.in_features == hidden.cfg.n_embd
    for fold in (None, 0):  # evaluation's dense bias and a training batch's sparse one
        assert torch.allclose(hidden(x, y, fold=fold), glob(x, y, fold=fold), atol=1e-6), fold
    with torch.no_grad():
        hidden.ngram.mix_head.weight.normal_(std=0.2)
    h = hidden.hidden(x)
    *_, scale, pi = hidden.ngram.entries(x, 0, with_weights=True, hidden=h)
    assert pi.shape == (hidden.ngram.K + 1, *x.shape) and scale.std() > 0.01  # per position, from the state
    assert not torch.allclose(hidden(x, y, fold=0), glob(x, y, fold=0))
    # the sparse training bias is the dense formula's, the mixing weights read from the same state
    z = torch.randn(*x.shape, V)
    assert torch.allclose(torch.softmax(hidden.ngram.add_to(z, x, 1, hidden=h), -1),
                          torch.softmax(z + hidden.ngram.bias(x, 1, hidden=h), -1), atol=1e-5)
    # what the model scores is that formula on its own hidden state
    logits = hidden(x)
    assert torch.allclose(logits, hidden.network_logits(x) + hidden.ngram.bias(x, hidden=h), atol=1e-4)


def test_the_hidden_mixer_trains_the_head_and_the_network_through_it():
    model, x, y = _gpt("hidden")
    with torch.no_grad():
        model.ngram.mix_head.weight.normal_(std=0.1)
    model(x, y, fold=0).backward()
    assert model.ngram.mix_head.weight.grad.abs().sum() > 0 and model.ngram.mix_head.bias.grad.abs().sum() > 0
    # the blocks' last projection (zero at the start) gets a gradient from the mixer as well as from the head
    head_only, _, _ = _gpt("global")
    head_only.load_state_dict({k: v for k, v in model.state_dict().items() if "mix_head" not in k})
    head_only(x, y, fold=0).backward()
    a, b = model.blocks[-1].mlp.c_proj.weight.grad, head_only.blocks[-1].mlp.c_proj.weight.grad
    assert not torch.allclose(a, b)


def test_the_hidden_mixer_needs_a_network_and_its_state():
    with pytest.raises(UserError, match="reads a network's hidden state.*'global' or 'counts'"):
        NGramMix(NGramConfig(mixer="hidden"), V)
    model, x, _ = _gpt("hidden")
    with pytest.raises(ValueError, match="pass hidden="):
        model.ngram.bias(x)
    with pytest.raises(UserError, match="'hidden' does not run in a compiled model.*without compile"):
        resolve("ngram", "smoke", ngram={"mixer": "hidden"})
    assert not resolve("ngram-hidden", "cpu").train.compile and resolve("ngram-hidden", "cpu").model.ngram.mixer == "hidden"


def test_the_global_mixer_keeps_the_config_hash_it_had():
    cfg = resolve("ngram", "cpu", clock="wall", ngram=CPU_NGRAM_TABLES_BEFORE)
    assert cfg.digest() == "0ce00c23126d5b9e"  # runs/cpu/ngram/* (wall clock), before the field existed
    other = dataclasses.replace(cfg, model=dataclasses.replace(
        cfg.model, ngram=dataclasses.replace(cfg.model.ngram, mixer="counts")))
    assert other.digest() != cfg.digest() and RunConfig.from_dict(other.to_dict()) == other


def test_explain_positions_splits_the_loss_between_network_and_counts():
    from frontier.model.gpt import GPT
    from frontier.model.ngram import explain_positions

    cfg = resolve("ngram-ctx", "smoke", vocab_size=V)
    torch.manual_seed(0)
    model = GPT(cfg.model, max_seq_len=64, batch_size=2).eval()
    t = torch.tensor(text(2000, 0, repeat=0.6)).view(8, -1)[:, :65]
    for f in (0, 1):
        model.ngram.observe(t[f::2, :-1], t[f::2, 1:], f)
    _randomise(model.ngram)
    x, y = t[:2, :-1], t[:2, 1:]
    out = explain_positions(model, x, y)
    assert torch.allclose(out["nats_mixed"], model(x, y, reduction="none"), atol=1e-4)  # the model as scored
    assert torch.allclose(out["gain_bits"] * 0.6931472, out["nats_network"] - out["nats_mixed"], atol=1e-5)
    assert out["context_length"].shape == x.shape and out["context_length"].std() > 0  # per position
    assert ((out["known"] >= 0) & (out["known"] <= cfg.model.ngram.max_order - 1)).all()


def test_a_sweep_changes_the_ngram_settings_and_labels_its_folders():
    from frontier.recipes import ngram_label

    cfg = resolve("ngram-only", "cpu", ngram={"slots": 8, "mixer": "counts"})
    assert (cfg.model.ngram.slots, cfg.model.ngram.mixer) == (8, "counts")
    assert cfg.digest() != resolve("ngram-only", "cpu").digest()
    assert ngram_label("ngram-only", {"slots": 8, "mixer": "counts"}) == "ngram-only-mixercounts-slots8"
    with pytest.raises(UserError, match="has no n-gram model to set"):
        resolve("bigram", "cpu", ngram={"slots": 8})
    with pytest.raises(UserError, match="no setting colour"):
        resolve("ngram", "cpu", ngram={"colour": 1})


def test_the_recipes_take_the_tables_chapter_6_chose():
    for name in ("ngram-tables", "ngram-ctx", "ngram-only-tables", "ngram-only-ctx"):
        ng = resolve(name, "cpu").model.ngram
        assert (ng.check_bits, ng.smoothing, ng.slots_short, ng.slots) == (31, "absolute-modified", 256, 8), name
    assert resolve("ngram-ctx", "cpu").model.ngram.mixer == "counts"
    assert resolve("ngram-tables", "cpu").model.ngram.mixer == "global"

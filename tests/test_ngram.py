"""Validity of the n-gram mix. Each test can fail: each checks a property an invalid mix would break."""

import collections
import dataclasses

import numpy as np
import pytest
import torch
from ngram_text import V, text

from frontier.config import NGramConfig
from frontier.devices import select_device
from frontier.model.ngram import NGramMix
from frontier.model.ngram.hashing import LOW, _bucket, context_hashes, unpack_slots
from frontier.recipes import resolve
from frontier.train.trainer import build_model, train


def _counted(tokens, **cfg):
    """Tables of one fold (in-sample), so that what was counted is what is read."""
    m = NGramMix(NGramConfig(**{"max_order": 4, "buckets_log2": 14, "seen_log2": 20, "slots": 4, "folds": 1, **cfg}), V)
    t = torch.tensor(tokens)[None]
    m.observe(t[:, :-1], t[:, 1:])
    return m


def _text(n=400, seed=0):
    return text(n, seed, repeat=0.7)


def test_counts_match_brute_force():
    tokens = _text()
    m = _counted(tokens)
    assert m.uni[0].tolist() == [tokens[1:].count(v) for v in range(V)]
    pairs = collections.Counter(zip(tokens[:-1], tokens[1:]))
    for a in range(V):  # context length 1: one row per token, every continuation fits in its 32 slots
        counter = {b: c for (p, b), c in pairs.items() if p == a}
        assert m.short_ctx[0, a] & LOW == sum(counter.values()) and m.short_ctx[0, a] >> 32 == len(counter)
        tok, cnt = unpack_slots(m.short_slots[0, a])
        assert {int(tk): int(n) for tk, n in zip(tok, cnt) if tk >= 0} == counter
    for k in range(2, 5):  # contexts of length k: totals, types, and the top slots
        ctx = collections.defaultdict(collections.Counter)
        for t in range(k - 1, len(tokens) - 1):
            ctx[tuple(tokens[t - k + 1 : t + 1])][tokens[t + 1]] += 1
        x = torch.tensor(tokens[:-1])[None]
        hashes, _ = context_hashes(x, 4)
        buckets = _bucket(hashes[k - 2, 0], 14)
        by_bucket = {}
        for t in range(k - 1, len(tokens) - 1):
            by_bucket.setdefault(int(buckets[t]), set()).add(tuple(tokens[t - k + 1 : t + 1]))
        assert all(len(s) == 1 for s in by_bucket.values()), "hash collision: enlarge buckets in this test"
        for b, (c,) in by_bucket.items():
            counter = ctx[c]
            assert m.ctx[0, k - 2, b] & LOW == sum(counter.values())
            assert m.ctx[0, k - 2, b] >> 32 == len(counter)
            tok, cnt = unpack_slots(m.slots[0, k - 2, b])
            slots = {int(tk): int(n) for tk, n in zip(tok, cnt) if tk >= 0}
            assert all(counter[tk] == n for tk, n in slots.items())
            if len(counter) <= 4:
                assert slots == dict(counter)


def test_every_order_and_the_mixture_sum_to_one():
    m = _counted(_text())
    with torch.no_grad():
        m.mix_logits.copy_(torch.randn(5))
    x = torch.tensor(_text(64, seed=1))[None]
    p = m.distribution(x)
    assert p.shape == (1, 64, V)
    assert torch.allclose(p.sum(-1), torch.ones(1, 64), atol=1e-5) and (p > 0).all()
    for k in range(5):  # each context length alone (pi = one-hot) is a distribution too
        with torch.no_grad():
            m.mix_logits.fill_(-1e4)
            m.mix_logits[k] = 0
        assert torch.allclose(m.distribution(x).sum(-1), torch.ones(1, 64), atol=1e-5), k


def _sparse_bias(m, x, fold):
    log_p0, toks, corr = m.bias_parts(x, fold)
    return log_p0.expand(*x.shape, -1).scatter_add(-1, toks, corr)


def test_mixed_logits_softmax_sums_to_one_and_match_the_dense_formula():
    m = _counted(_text())
    with torch.no_grad():
        m.mix_logits.copy_(torch.randn(5))
        m.scale.fill_(0.7)
    x = torch.tensor(_text(64, seed=2))[None]
    z = torch.randn(1, 64, V) * 3
    floor, p = m.floor_and_distribution(x)
    exact = torch.softmax(z + 0.3 * torch.log(floor) + 0.7 * torch.log(p), -1)
    for fold in (None, 0):  # evaluation (dense) and a training batch (sparse form)
        mixed = torch.softmax(m.add_to(z, x, fold), -1)
        assert torch.allclose(mixed.sum(-1), torch.ones(1, 64), atol=1e-5)
        assert torch.allclose(mixed, exact, atol=1e-5), fold
    with torch.no_grad():
        m.scale.fill_(1.0)  # scale 1: the bias is log P_mix itself, up to a per-position constant
    diff = _sparse_bias(m, x, 0) - torch.log(m.distribution(x))
    assert torch.allclose(diff, diff[..., :1].expand_as(diff), atol=1e-4)


def test_gradients_reach_the_mixture_and_the_scale():
    m = _counted(_text())
    x = torch.tensor(_text(64, seed=4))[None]
    y = torch.tensor(_text(65, seed=4))[None, 1:]
    loss = torch.nn.functional.cross_entropy(m.add_to(torch.zeros(1, 64, V), x, 0).view(-1, V), y.reshape(-1))
    loss.backward()
    assert m.mix_logits.grad.abs().sum() > 0 and m.scale.grad.abs() > 0


@pytest.mark.parametrize("form", ["evaluation", "training"])
def test_bias_ignores_the_target_and_everything_after_it(form):
    m = _counted(_text())
    x = torch.tensor(_text(64, seed=3))[None]
    bias = (lambda t: m.bias(t)) if form == "evaluation" else (lambda t: _sparse_bias(m, t, 0))
    before = bias(x)
    for t in [0, 10, 40, 62]:
        changed = x.clone()
        changed[0, t + 1 :] = (changed[0, t + 1 :] + 5) % V  # the target of position t and all later tokens
        after = bias(changed)
        assert torch.equal(before[0, : t + 1], after[0, : t + 1]), t
    changed = x.clone()
    changed[0, 30] = (changed[0, 30] + 1) % V  # a context token does change the bias
    assert not torch.equal(before[0, 30], bias(changed)[0, 30])


def test_a_batch_never_reads_its_own_folds_counts():
    m = NGramMix(NGramConfig(max_order=4, buckets_log2=14, seen_log2=20, folds=2), V)
    x = torch.tensor(_text(65, seed=5))[None]
    empty = _sparse_bias(m, x[:, :-1], 0).clone()
    m.observe(x[:, :-1], x[:, 1:], fold=0)  # counts of fold 0 ...
    assert torch.equal(_sparse_bias(m, x[:, :-1], 0), empty)  # ... are invisible to a batch of fold 0
    assert not torch.equal(_sparse_bias(m, x[:, :-1], 1), empty)  # ... and visible to fold 1
    p = m.distribution(x[:, :-1])  # evaluation: the average of both folds' distributions
    half = 0.5 * (m.distribution(x[:, :-1], batch_fold=0) + m.distribution(x[:, :-1], batch_fold=1))
    assert torch.allclose(p, half) and torch.allclose(p.sum(-1), torch.ones(1, 64), atol=1e-5)


def test_a_context_seen_once_gets_half_and_backs_off_with_the_other_half():
    m = _counted([1, 2, 3, 4, 5] + [9, 4, 6] * 10)
    x = torch.tensor([[1, 2, 3, 4]])

    def only(k):
        with torch.no_grad():
            m.mix_logits.fill_(-1e4)
            m.mix_logits[k] = 0
        return m.distribution(x)[0, 3]

    p4, p3 = only(4), only(3)  # "1 2 3 4" was seen once (-> 5): Witten-Bell with N = T = 1
    expected = 0.5 * torch.nn.functional.one_hot(torch.tensor(5), V).float() + 0.5 * p3
    assert torch.allclose(p4, expected, atol=1e-6)


def _two_datasets(tmp_path, corpus_dir):
    from frontier.data.dataset import prepare

    (tmp_path / "v1").mkdir()
    (tmp_path / "v2").mkdir()
    (tmp_path / "v1" / "a.txt").write_text("one validation text " * 50)
    (tmp_path / "v2" / "b.txt").write_text("a completely different validation set, with other words " * 80)
    a = prepare(tmp_path / "a", text=[str(corpus_dir)], val_text=[str(tmp_path / "v1")], vocab_size=512, log=lambda m: None)
    b = prepare(tmp_path / "b", text=[str(corpus_dir)], val_text=[str(tmp_path / "v2")], vocab_size=512, log=lambda m: None)
    return a, b


TABLES = ["ngram.uni", "ngram.short_slots", "ngram.short_ctx", "ngram.slots", "ngram.ctx", "ngram.seen", "ngram.counted"]


def _validation_counts(tmp_path, corpus_dir, counting, monkeypatch):
    """Train the same n-gram run on two datasets that differ only in their validation text, and read each run's
    tables after its evaluation (the trainer's own model, captured as it is built). Returns (the records, the
    tables that evaluation changed (checkpoint before evaluation vs model after), the tables in which the two runs
    differ after evaluation): with no counting of validation tokens, both sets are empty."""
    from frontier.train import step as step_mod

    a, b = _two_datasets(tmp_path, corpus_dir)
    assert a.tokenizer.sha256 == b.tokenizer.sha256  # trained on the same (train) documents
    assert [np.asarray(s).tolist() for s in a.train_tokens()] == [np.asarray(s).tolist() for s in b.train_tokens()]
    assert a.val_tokens().tolist() != b.val_tokens().tolist()
    cfg = resolve("ngram", "smoke")
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, compile=False),
                              model=dataclasses.replace(cfg.model, ngram=dataclasses.replace(cfg.model.ngram, counting=counting)))
    built = []
    real_build = step_mod.build_model
    monkeypatch.setattr(step_mod, "build_model", lambda c: built.append(real_build(c)) or built[-1])
    cpu = select_device("cpu")
    recs, after = [], []
    for name, data in [("ra", a), ("rb", b)]:
        recs.append(train(cfg, data, tmp_path / name, cpu, seed=0, steps=6, progress=False))
        after.append({k: v.clone() for k, v in built[-1].state_dict().items() if k in TABLES})
    before = torch.load(tmp_path / "ra" / "checkpoint.pt", weights_only=False)["model"]  # saved before evaluation
    changed_by_eval = {k for k in TABLES if not torch.equal(before[k], after[0][k])}
    differ = {k for k in TABLES if not torch.equal(after[0][k], after[1][k])}
    return recs, changed_by_eval, differ


@pytest.mark.parametrize("counting", ["stream", "shards"])
def test_tables_never_count_validation_tokens(tmp_path, corpus_dir, counting, monkeypatch):
    (ra, rb), changed_by_eval, differ = _validation_counts(tmp_path, corpus_dir, counting, monkeypatch)
    assert changed_by_eval == set() and differ == set()  # evaluation counted nothing; different validation text,
    assert ra["ngram"]["counted_tokens"] > 0 and ra["val_bpb"] != rb["val_bpb"]  # same tables, other scores


def test_the_leak_test_catches_counting_during_evaluation(tmp_path, corpus_dir, monkeypatch):
    """The check above, against an n-gram model that counts the validation windows it scores: it must see it."""
    from frontier.model.ngram import NGramMix

    real_bias = NGramMix.bias

    def counting_bias(self, x, batch_fold=None, hidden=None):
        if not self.training:  # evaluation: count the window's own transitions (a leak) before scoring it
            self.observe(x[:, :-1], x[:, 1:])
        return real_bias(self, x, batch_fold, hidden)

    monkeypatch.setattr(NGramMix, "bias", counting_bias)
    _, changed_by_eval, differ = _validation_counts(tmp_path, corpus_dir, "stream", monkeypatch)
    assert {"ngram.uni", "ngram.counted"} <= changed_by_eval and {"ngram.uni", "ngram.counted"} <= differ


def test_eval_of_a_checkpoint_reproduces_the_score(tmp_path, smoke_data):
    from frontier.train.trainer import evaluate_run

    cfg = resolve("ngram", "smoke")
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, compile=False))
    cpu = select_device("cpu")
    rec = train(cfg, smoke_data, tmp_path / "r", cpu, seed=0, steps=5, progress=False)
    again = evaluate_run(tmp_path / "r", smoke_data, cpu)
    assert again["val_bpb"] == pytest.approx(rec["val_bpb"], abs=1e-9)


def test_ngram_only_scores_without_a_network(tmp_path, smoke_data):
    cfg = resolve("ngram-only", "smoke")
    model = build_model(cfg)
    assert not hasattr(model, "blocks") and model.num_params() == cfg.model.ngram.max_order + 2
    rec = train(cfg, smoke_data, tmp_path / "n", select_device("cpu"), seed=0, steps=3, progress=False)
    assert rec["status"] == "finished" and rec["ngram"]["counted_tokens"] >= sum(len(s) for s in smoke_data.train_tokens()) - 100

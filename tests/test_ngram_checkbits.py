"""Check bits, the false-hit rate and adaptive evaluation of the n-gram mix. Each test can fail: each checks a
property that tables without fingerprints, a wrong false-hit count or a leaky adaptive evaluation would break."""

import dataclasses
import json

import numpy as np
import pytest
import torch
from ngram_text import V, only_length, text

from frontier.config import NGramConfig, RunConfig, stable_hash
from frontier.data.loader import eval_windows, training_windows, window_folds
from frontier.devices import select_device
from frontier.errors import UserError
from frontier.model.ngram import NGramMix, NGramOnly, false_hit_rate, shard_batches
from frontier.model.ngram.hashing import _bucket, context_hashes
from frontier.profiles import CPU_NGRAM_TABLES_BEFORE
from frontier.recipes import resolve
from frontier.train.bpb import evaluate_bpb, evaluate_bpb_adaptive
from frontier.train.trainer import build_model, evaluate_run, train


def _collision(counted):
    """A context of length 2 never counted in `counted` whose bucket (of 4) holds another context's counts."""
    pairs = set(zip(counted[:-2], counted[1:-1]))
    h, _ = context_hashes(torch.tensor(counted[:-1])[None], 2)
    occupied = {int(b) for b in _bucket(h[0, 0, 1:], 2)}
    for a in range(V):
        for b in range(V):
            bucket = int(_bucket(context_hashes(torch.tensor([[a, b]]), 2)[0][0, 0, 1], 2))
            if (a, b) not in pairs and bucket in occupied:
                return [a, b]
    raise AssertionError("no collision: change the counted tokens")


@pytest.mark.parametrize("check_bits", [0, 31])
def test_a_context_never_counted_gets_no_counts(check_bits):
    counted = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1, 3, 5, 7]
    m = NGramMix(NGramConfig(max_order=2, buckets_log2=2, seen_log2=12, folds=1, check_bits=check_bits), V)
    t = torch.tensor(counted)[None]
    m.observe(t[:, :-1], t[:, 1:])
    x = torch.tensor([_collision(counted)])
    known = bool(m.known(x, 0)[0, 0, 1])
    only_length(m, 2)
    p2 = m.distribution(x)[0, 1]
    only_length(m, 1)
    p1 = m.distribution(x)[0, 1]
    if check_bits:  # unseen: length 2 backs off entirely to length 1
        assert not known and torch.allclose(p2, p1, atol=1e-7)
        assert sum(m.summary()["fingerprint_dropped"]) > 0  # 4 buckets: later contexts were refused
    else:  # the false hit check bits prevent: the occupant's counts are read
        assert known and not torch.allclose(p2, p1, atol=1e-3)


def _text(n, seed):
    return text(n, seed, repeat=0.6)


def test_distributions_sum_to_one_with_check_bits():
    m = NGramMix(NGramConfig(max_order=6, buckets_log2=3, seen_log2=14, folds=2, check_bits=31), V)
    for f, seed in [(0, 0), (1, 1)]:
        t = torch.tensor(_text(2000, seed)).view(4, -1)
        m.observe(t[:, :-1], t[:, 1:], f)
    assert all(n > 0 for n in m.summary()["fingerprint_dropped"])  # conflicts happened at every length
    with torch.no_grad():
        m.mix_logits.copy_(torch.randn(7))
        m.scale.fill_(0.6)
    x = torch.tensor(_text(130, 7)).view(2, -1)
    for fold in (None, 0, 1):  # evaluation (both folds' average) and training batches of each fold
        floor, p = m.floor_and_distribution(x, fold)
        assert torch.allclose(p.sum(-1), torch.ones(2, 65), atol=1e-5) and (p > 0).all(), fold
    z = torch.randn(2, 65, V)
    for fold in (0, 1):  # the sparse bias of a training batch equals the dense formula
        floor, p = m.floor_and_distribution(x, fold)
        exact = torch.softmax(z + 0.4 * torch.log(floor) + 0.6 * torch.log(p), -1)
        assert torch.allclose(torch.softmax(m.add_to(z, x, fold), -1), exact, atol=1e-5), fold


def _brute_unseen(train, val, seq_len, folds, K):
    """Validation positions (summed over folds) whose context of length 2..K occurs in no counted window of that
    fold, counted with Python tuples."""
    windows = training_windows([train], seq_len)
    fold_of = window_folds(len(windows), folds)
    counted = [set() for _ in range(folds)]
    for (_, s), f in zip(windows, fold_of):
        x = train[s : s + seq_len]
        for k in range(2, K + 1):
            counted[f].update(tuple(x[t - k + 1 : t + 1]) for t in range(k - 1, len(x)))
    unseen = 0
    for w in eval_windows(val, seq_len, 4):
        for x in w.inputs.tolist():
            for k in range(2, K + 1):
                for t in range(k - 1, len(x)):
                    unseen += sum(tuple(x[t - k + 1 : t + 1]) not in c for c in counted)
    return unseen


def test_false_hit_rate_is_zero_with_check_bits_and_large_without(smoke_data):
    train, val = np.asarray(smoke_data.train_tokens()[0][:20_000]), smoke_data.val_tokens()
    rates = {}
    for bits in (0, 31):
        m = NGramMix(NGramConfig(max_order=5, buckets_log2=8, seen_log2=16, folds=2, check_bits=bits), 512)
        m.count_tokens([train], 64)
        rates[bits] = false_hit_rate(m, shard_batches([train], 64, 2), val, 64, batch_size=4)
    assert rates[0]["unseen"] == rates[31]["unseen"] == _brute_unseen(train, val, 64, 2, 5) > 0
    assert rates[31]["false_hits"] == 0 and rates[31]["false_hit_rate"] == 0.0
    assert rates[31]["miss_rate"] > 0  # 256 buckets per length: most counted contexts lost theirs
    assert rates[0]["false_hit_rate"] > 0.5 and rates[0]["miss_rate"] == 0.0
    assert all(r > 0.5 for r in rates[0]["by_order"])


def _ngram_model(smoke_data, check_bits=0, folds=2):
    cfg = NGramConfig(max_order=8, buckets_log2=12, seen_log2=16, folds=folds, check_bits=check_bits)
    model = NGramOnly(cfg, 512)
    model.ngram.count_tokens([np.asarray(smoke_data.train_tokens()[0][:20_000])], 64)
    with torch.no_grad():
        model.ngram.mix_logits.copy_(torch.linspace(-1, 1, 9))
    return model


def _tables(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("check_bits", [0, 31])
def test_adaptive_evaluation_scores_each_window_before_counting_it(smoke_data, monkeypatch, check_bits):
    model, tok = _ngram_model(smoke_data, check_bits), smoke_data.tokenizer
    val = smoke_data.val_tokens()
    events = []
    real_bias, real_count = NGramMix.bias, NGramMix.count_into
    monkeypatch.setattr(NGramMix, "bias", lambda self, x, fold=None: events.append(("score", x.clone(), None))
                        or real_bias(self, x, fold))
    monkeypatch.setattr(NGramMix, "count_into", lambda self, x, y, fold: events.append(("count", x.clone(), fold))
                        or real_count(self, x, y, fold))
    evaluate_bpb_adaptive(model, val, tok, 64)
    windows = list(eval_windows(val, 64, 1))
    assert len(windows) > 2
    expected = [(what, w.inputs, f) for w in windows for what, f in [("score", None), ("count", 0), ("count", 1)]]
    assert [(e[0], e[2]) for e in events] == [(e[0], e[2]) for e in expected]
    assert all(torch.equal(e[1], w[1]) for e, w in zip(events, expected))


def test_adaptive_evaluation_adapts_and_leaves_the_competition_score_alone(smoke_data):
    model, tok = _ngram_model(smoke_data), smoke_data.tokenizer
    val = smoke_data.val_tokens()
    tables = _tables(model)
    before = evaluate_bpb(model, val, tok, 64, 16)
    once = evaluate_bpb_adaptive(model, val, tok, 64)
    twice = evaluate_bpb_adaptive(model, np.concatenate([val, val]), tok, 64)
    after = evaluate_bpb(model, val, tok, 64, 16)
    assert after == before  # bit for bit: the competition's score never sees validation counts
    assert all(torch.equal(v, tables[k]) for k, v in model.state_dict().items())
    assert "val_bpb" not in once and "val_bpb" not in once["by_convention"]["nanochat"]
    assert once["val_tokens"] == before["val_tokens"] and once["val_bytes"] == before["val_bytes"]
    # the text seen again is predicted much better: the second copy costs less than half the first
    second = 2 * twice["val_loss_adaptive"] - once["val_loss_adaptive"]
    assert second < 0.5 * once["val_loss_adaptive"] and once["val_bpb_adaptive"] < before["val_bpb"]
    first = val[: 64 + 1]  # a window is scored before it is counted: the first one as without adaptation
    assert evaluate_bpb_adaptive(model, first, tok, 64)["val_loss_adaptive"] == evaluate_bpb(model, first, tok, 64, 1)["val_loss"]


def test_adaptive_evaluation_needs_ngram_tables(smoke_data):
    model = build_model(resolve("baseline", "smoke"))
    with pytest.raises(UserError, match="no n-gram tables|has none"):
        evaluate_bpb_adaptive(model, smoke_data.val_tokens(), smoke_data.tokenizer, 64)


def test_check_bits_leave_old_config_hashes_and_records_alone():
    cfg = resolve("ngram", "cpu", clock="wall", ngram=CPU_NGRAM_TABLES_BEFORE)  # the records before these fields ran under the wall clock
    old = cfg.to_dict()
    del old["model"]["ngram"]["check_bits"], old["model"]["ngram"]["eval_counts"], old["model"]["ngram"]["smoothing"]
    del old["model"]["ngram"]["mixer"]
    assert RunConfig.from_dict(old) == cfg  # a record written before the fields reads back with their defaults
    for later in ("compile_optimizer", "ema", "kernels", "clock", "probe", "probe_ref_s"):  # the other later fields
        del old["train"][later]
    del old["optim"]["muon_momentum_warmup_frac"]  # a later field of the optimiser
    assert cfg.digest() == stable_hash(old) == "0ce00c23126d5b9e"  # as in runs/cpu/ngram/*/result.json
    on = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, ngram=dataclasses.replace(cfg.model.ngram,
                                                                                                 check_bits=31)))
    assert on.digest() != cfg.digest() and RunConfig.from_dict(on.to_dict()) == on
    assert "fp" not in dict(NGramMix(cfg.model.ngram, 64).named_buffers())  # checkpoints keep their keys
    with pytest.raises(UserError, match="check_bits"):
        NGramConfig(check_bits=32)


@pytest.mark.parametrize("counting", ["shards", "stream"])
def test_a_run_with_check_bits_records_its_false_hits_and_evaluates_adaptively(tmp_path, smoke_data, counting):
    cfg = resolve("ngram-only", "smoke")
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, ngram=dataclasses.replace(
        cfg.model.ngram, check_bits=31, counting=counting)))
    cpu = select_device("cpu")
    rec = train(cfg, smoke_data, tmp_path / "r", cpu, seed=0, steps=4, progress=False)
    hits = rec["ngram"]["false_hits"]
    assert hits["unseen"] > 0 and hits["false_hits"] == 0 and len(hits["by_order"]) == cfg.model.ngram.max_order - 1
    assert len(rec["ngram"]["fingerprint_dropped"]) == cfg.model.ngram.max_order - 1
    assert "val_bpb_adaptive" not in rec
    again = evaluate_run(tmp_path / "r", smoke_data, cpu, adaptive=True)
    assert again["val_bpb"] == pytest.approx(rec["val_bpb"], abs=1e-9)
    assert 0 < again["val_bpb_adaptive"] < again["val_bpb"]


def test_eval_adaptive_on_the_command_line(tmp_path, smoke_data):
    import subprocess
    import sys

    cpu = select_device("cpu")
    for recipe in ("ngram-only", "baseline"):
        cfg = resolve(recipe, "smoke")
        train(dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, compile=False)), smoke_data,
              tmp_path / recipe, cpu, seed=0, steps=2, progress=False)
    cli = [sys.executable, "-m", "frontier", "eval", "--adaptive", "--device", "cpu", "--run"]
    p = subprocess.run([*cli, str(tmp_path / "ngram-only")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert lines[-1].startswith("val_bpb=")  # the competition's score, last, as without --adaptive
    assert lines[-2].startswith("val_bpb_adaptive=") and "not the competition's score" in lines[-2]
    assert "trained 2 steps" in lines[0]  # a bpb is printed with the steps behind it
    p = subprocess.run([*cli, str(tmp_path / "ngram-only"), "--record"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    kept = sorted((tmp_path / "ngram-only").glob("eval-*.json"))
    assert len(kept) == 1 and f"evaluation record: {kept[0]}" in p.stdout
    ev = json.loads(kept[0].read_text())
    printed = {l.split("=")[0]: float(l.split("=")[1].split()[0]) for l in p.stdout.splitlines()
               if l.startswith(("val_bpb=", "val_bpb_adaptive="))}
    assert ev["kind"] == "evaluation" and ev["adaptive"] and ev["steps"] == 2 and ev["weights"] == "declared"
    assert abs(ev["scores"]["val_bpb"] - printed["val_bpb"]) < 1e-6
    assert abs(ev["scores"]["val_bpb_adaptive"] - printed["val_bpb_adaptive"]) < 1e-6
    assert ev["scores"]["val_bpb_adaptive"] != ev["scores"]["val_bpb"]
    assert ev["command"][:4] == ["frontier", "eval", "--run", str(tmp_path / "ngram-only")] and "--adaptive" in ev["command"]
    assert sum(ev["val_by_document"]["bytes"]) == ev["scores"]["val_bytes"]  # per document, for a bootstrap
    p = subprocess.run([*cli, str(tmp_path / "baseline")], capture_output=True, text=True, timeout=120)
    err = [l for l in p.stderr.strip().splitlines() if l.strip()]
    assert p.returncode == 2 and len(err) == 1 and err[0].startswith("error: ") and "no n-gram tables" in err[0]


def _counted(smoke_data, **changes):
    cfg = dataclasses.replace(resolve("ngram-only", "smoke").model.ngram, **changes)
    m = NGramMix(cfg, smoke_data.vocab_size)
    m.count_tokens(smoke_data.train_tokens(), 64)
    return m


def test_evaluation_can_read_counts_of_the_whole_split(smoke_data):
    folds, whole = _counted(smoke_data, check_bits=31), _counted(smoke_data, check_bits=31, eval_counts="all")
    assert whole.eval_tables() == [2] and folds.eval_tables() == [0, 1]
    for f in range(2):  # the folds' tables are the same either way; the whole split's counted every window
        assert torch.equal(whole.uni[f], folds.uni[f]) and torch.equal(whole.ctx[f], folds.ctx[f])
    assert torch.equal(whole.uni[2], folds.uni[0] + folds.uni[1])
    assert int(whole.counted[2]) == int(folds.counted.sum())
    x = torch.from_numpy(smoke_data.val_tokens()[:129].astype("int64"))[None]
    p = whole.distribution(x[:, :-1])
    assert torch.allclose(p.sum(-1), torch.ones(1, 128, dtype=p.dtype), atol=1e-5)
    # a training batch still reads another fold's tables, never the whole split's (which hold its own targets)
    assert torch.equal(whole.bias(x[:, :-1], 0), folds.bias(x[:, :-1], 0))
    # the whole split's false-hit rate is measured too, against every counted batch
    from frontier.model.ngram import false_hit_rate, shard_batches
    r = false_hit_rate(whole, shard_batches(smoke_data.train_tokens(), 64, 2), smoke_data.val_tokens(), 64)
    assert r["false_hit_rate"] == 0.0
    with pytest.raises(UserError, match="eval_counts"):
        dataclasses.replace(whole.cfg, eval_counts="everything")

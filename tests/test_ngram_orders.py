"""`frontier ngram-orders`: the n-gram model alone against its longest context. Each test can fail: a curve that
scored the wrong distribution, longer contexts that hurt tables with check bits and discounting, a false-hit rate
not in the record, or a bad argument that is not one clear error."""

import json

import pytest
import torch
from ngram_text import V, text

from frontier.errors import UserError
from frontier.model.ngram import NGramMix
from frontier.recipes import resolve
from frontier.study.ngram_orders import LongestContext, format_order_curve, run_order_curve


def test_longest_context_scores_p_k_alone():
    m = NGramMix(resolve("ngram-only", "smoke").model.ngram, V)
    t = torch.tensor(text(2000, 0, repeat=0.6)).view(4, -1)
    m.observe(t[:, :-1], t[:, 1:], 0)
    m.observe(t[:, :-1], t[:, 1:], 1)
    x, y = t[:1, :-1], t[:1, 1:]
    for k in (0, 1, 5):
        nats = LongestContext(m, k)(x, y)
        with torch.no_grad():
            m.mix_logits.fill_(-torch.inf)
            m.mix_logits[k] = 0
        assert torch.allclose(nats, -torch.log(m.distribution(x).gather(-1, y[..., None])[..., 0]))


def test_the_curve_record(smoke_data, tmp_path):
    variants = {"wb": dict(smoothing="witten-bell"),
                "amc": dict(smoothing="absolute-modified", check_bits=31),
                "amc-all-2x": dict(smoothing="absolute-modified", check_bits=31, folds=1, buckets_log2="+1")}
    res = run_order_curve("smoke", variants=variants, orders=[0, 1, 2, 4, 8], data=smoke_data, log=lambda m: None,
                          out=tmp_path)
    rec = json.loads(open(res["path"]).read())
    rows = {r["variant"]: r for r in rec["rows"]}
    assert rows["amc-all-2x"]["ngram"]["buckets_log2"] == resolve("ngram-only", "smoke").model.ngram.buckets_log2 + 1
    assert rows["amc"]["false_hits"]["false_hit_rate"] == 0.0  # check bits: no unseen context reads counts
    curve = [s["val_bpb"] for s in rows["amc"]["scores"]]
    assert curve[1] < curve[0] and all(b <= a + 0.01 for a, b in zip(curve[1:], curve[2:]))  # longer never hurts
    assert "amc" in format_order_curve(rec)


def test_bad_arguments_are_one_clear_error(smoke_data):
    with pytest.raises(UserError, match="has no n-gram model"):
        run_order_curve("smoke", recipe="baseline", data=smoke_data, log=lambda m: None)
    with pytest.raises(UserError, match="outside"):
        run_order_curve("smoke", orders=[99], data=smoke_data, log=lambda m: None)

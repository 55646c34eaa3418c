import math

import numpy as np
import torch

from frontier.data.loader import eval_windows
from frontier.train.bpb import bits_per_byte, evaluate_bpb, evaluate_bpb_by_document, scored_bytes


class Uniform(torch.nn.Module):
    """A model that knows nothing: every token gets probability 1/V."""

    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab

    def forward(self, idx, targets, reduction="mean"):
        logits = torch.zeros(*idx.shape, self.vocab)
        return torch.nn.functional.cross_entropy(logits.view(-1, self.vocab), targets.reshape(-1), reduction=reduction).view(targets.shape)


def test_formula():
    assert bits_per_byte(math.log(2) * 10, 10) == 1.0


def test_windows_score_every_target_once():
    tokens = np.arange(1000)
    seen = []
    for w in eval_windows(tokens, seq_len=64, batch_size=5):
        assert torch.equal(w.targets, w.inputs + 1)
        seen.extend(w.targets.flatten().tolist())
    assert seen == list(range(1, 1000))


def test_byte_total_is_exact_and_uniform_model_scores_log_v(smoke_data):
    tok, val = smoke_data.tokenizer, smoke_data.val_tokens()
    res = evaluate_bpb(Uniform(tok.vocab_size), val, tok, seq_len=32, batch_size=4)
    n_docs = int((val == tok.bos_id).sum())
    assert res["bpb_convention"] == "nanochat"
    assert res["val_bytes"] == smoke_data.val_bytes  # the UTF-8 length of the validation documents
    assert res["val_tokens"] == len(val) - n_docs  # every non-BOS target once
    expected = res["val_tokens"] * math.log(tok.vocab_size) / (math.log(2) * res["val_bytes"])
    assert abs(res["val_bpb"] - expected) < 1e-6 * expected  # float32 cross-entropy
    pg = res["by_convention"]["parameter-golf"]
    assert pg["val_tokens"] == len(val) - 1  # BOS targets count in the nats
    starts_with_space = sum(1 for d in _val_docs(smoke_data) if d.startswith(" "))
    assert pg["val_bytes"] == smoke_data.val_bytes - starts_with_space


def _val_docs(ds):
    tok, ids = ds.tokenizer, ds.val_tokens()
    cuts = list(np.flatnonzero(ids == tok.bos_id)) + [len(ids)]
    return [tok.decode(ids[a + 1 : b]) for a, b in zip(cuts, cuts[1:])]


def test_convention_masks(smoke_data):
    tok = smoke_data.tokenizer
    x = np.array([[tok.bos_id, 5, 6]])
    y = np.array([[5, 6, tok.bos_id]])
    mask, nbytes = scored_bytes(tok, x, y, "nanochat")
    assert mask.tolist() == [[True, True, False]] and nbytes[0, 2] == 0


def _document_lengths(val, bos_id):
    """Positions per document of the stream (each BOS starts one)."""
    cuts = list(np.flatnonzero(val == bos_id)) + [len(val)]
    return [b - a for a, b in zip(cuts, cuts[1:])]


def test_per_document_scores_sum_to_the_totals_and_follow_the_documents(smoke_data):
    """A document's targets are those whose input token lies in it: L - 1 scored targets under nanochat (its BOS
    target, which ends it, scores nothing), L under parameter-golf (the BOS target counts), one fewer for the last
    document (the stream's last token has no target)."""
    tok, val = smoke_data.tokenizer, smoke_data.val_tokens()
    bits_per_token = math.log2(tok.vocab_size)
    lengths = _document_lengths(val, tok.bos_id)
    assert val[0] == tok.bos_id and len(lengths) > 1
    for convention in ("nanochat", "parameter-golf"):
        res = evaluate_bpb_by_document(Uniform(tok.vocab_size), val, tok, seq_len=32, batch_size=4,
                                       convention=convention)
        assert {k: v for k, v in res.items() if k != "val_by_document"} == evaluate_bpb(
            Uniform(tok.vocab_size), val, tok, seq_len=32, batch_size=4, convention=convention)  # the same score
        per_doc = res["val_by_document"]
        assert len(per_doc["bits"]) == len(per_doc["bytes"]) == len(lengths)
        assert sum(per_doc["bytes"]) == res["val_bytes"]
        total_bits = res["val_bpb"] * res["val_bytes"]
        assert abs(sum(per_doc["bits"]) - total_bits) < 1e-9 * total_bits
        targets = [n - 1 for n in lengths] if convention == "nanochat" else lengths[:-1] + [lengths[-1] - 1]
        for bits, n in zip(per_doc["bits"], targets):
            assert abs(bits - n * bits_per_token) <= 1e-5 * n * bits_per_token  # float32 cross-entropy
    nanochat = evaluate_bpb_by_document(Uniform(tok.vocab_size), val, tok, seq_len=32, batch_size=4)["val_by_document"]
    assert nanochat["bytes"] == [len(d.encode("utf-8")) for d in _val_docs(smoke_data)]


def test_splitting_by_document_leaves_the_model_in_its_mode(smoke_data):
    tok, val = smoke_data.tokenizer, smoke_data.val_tokens()
    model = Uniform(tok.vocab_size).eval()
    evaluate_bpb_by_document(model, val[:200], tok, seq_len=32, batch_size=4)
    assert not model.training


def test_a_stream_without_a_leading_bos_counts_its_first_tokens_in_document_0():
    from frontier.train.bpb import document_of_position

    assert document_of_position(np.array([7, 8, 1, 9, 1, 1, 5]), bos_id=1).tolist() == [0, 0, 0, 0, 1, 2, 2]
    assert document_of_position(np.array([1, 8, 1, 9]), bos_id=1).tolist() == [0, 0, 1, 1]

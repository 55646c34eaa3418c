import math

import numpy as np
import torch

from frontier.data.loader import eval_windows
from frontier.train.bpb import bits_per_byte, evaluate_bpb, scored_bytes


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

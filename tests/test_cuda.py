"""The CUDA path against the CPU path: same tables, same bias, same sparse update, a training run that finishes.

Skipped where no CUDA device is present (CI); run on a GPU machine with `pytest tests/test_cuda.py`.
"""

import dataclasses

import numpy as np
import pytest
import torch

from frontier.config import BigramConfig, NGramConfig, OptimConfig
from frontier.devices import select_device
from frontier.model.bigram import BigramEmbedding
from frontier.model.ngram import NGramMix
from frontier.optim.bigram_update import SparseRowAdam
from frontier.recipes import resolve
from frontier.train.trainer import train

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

V = 64
DEV = "cuda"


def _tokens(n=4096, seed=0):
    rng = np.random.default_rng(seed)
    base = list(rng.integers(0, V, size=40))
    out = []
    while len(out) < n:
        out += base[: rng.integers(5, 40)] if rng.random() < 0.7 else list(rng.integers(0, V, size=7))
    return torch.tensor(out[:n])[None]


def test_ngram_tables_and_bias_match_the_cpu():
    cfg = NGramConfig(max_order=4, buckets_log2=12, seen_log2=16, slots=4, folds=2)
    cpu, gpu = NGramMix(cfg, V), NGramMix(cfg, V).to(DEV)
    t = _tokens()
    for fold, part in enumerate(t.split(1024, dim=1)):
        cpu.observe(part[:, :-1], part[:, 1:], fold=fold % 2)
        gpu.observe(part[:, :-1].to(DEV), part[:, 1:].to(DEV), fold=fold % 2)
    for name, a in cpu.state_dict().items():
        assert torch.equal(a, gpu.state_dict()[name].cpu()), name
    x = _tokens(256, seed=1)
    for fold in (0, 1):
        logits = torch.randn(1, 256, V)
        want = cpu.add_to(logits.clone(), x, batch_fold=fold)
        got = gpu.add_to(logits.to(DEV), x.to(DEV), batch_fold=fold).cpu()
        assert torch.allclose(want, got, atol=1e-4), (want - got).abs().max()


def test_sparse_row_adam_matches_the_cpu():
    o, cfg = OptimConfig(), BigramConfig(rows=1024, update="sparse")
    torch.manual_seed(0)
    embs = [BigramEmbedding(cfg, 16, (2, 32)) for _ in range(2)]
    embs[1].load_state_dict(embs[0].state_dict())
    embs[1].to(DEV)
    upds = [SparseRowAdam(e, cfg, o) for e in embs]
    for step in range(4):
        idx = torch.randint(0, 200, (2, 32))
        upstream = torch.randn(2, 32, 16)
        for e, u, dev in zip(embs, upds, ("cpu", DEV)):
            e(idx.to(dev)).backward(upstream.to(dev))
            u.step(idx.to(dev), 1.0)
            u.zero_grad()
        assert torch.allclose(embs[0].table, embs[1].table.cpu(), atol=1e-5), step


@pytest.mark.parametrize("compile", [False, True])
def test_ngram_recipe_trains_on_cuda(tmp_path, smoke_data, compile):
    cfg = resolve("ngram", "smoke")
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, compile=compile))
    rec = train(cfg, smoke_data, tmp_path / "r", select_device(DEV), seed=0, steps=8, progress=False)
    assert rec["status"] == "finished" and np.isfinite(rec["val_bpb"])
    assert rec["device"]["kind"] == DEV and rec["implementations"]

import dataclasses

import pytest
import torch

from frontier.bigram import (BigramEmbedding, DenseTableAdamW, SparseRowAdam, bigram_rows, bench_update, sum_by_row, table_step,
                             touched_rows)
from frontier.config import BigramConfig, OptimConfig
from frontier.recipes import resolve
from frontier.trainer import build_model

O = OptimConfig()


def test_rows_follow_the_hash_and_reserve_position_zero():
    idx = torch.tensor([[5, 7, 7, 1]])
    rows = bigram_rows(idx, 1000)
    assert rows[0, 0] == 999
    for t in range(1, 4):
        assert rows[0, t] == ((36313 * idx[0, t].item()) ^ (27191 * idx[0, t - 1].item())) % 999


def test_sum_by_row_has_fixed_shapes():
    rows = torch.tensor([4, 2, 4, 9, 2, 4])
    grads = torch.arange(6, dtype=torch.float32)[:, None].repeat(1, 3)
    slots, summed = sum_by_row(rows, grads, scratch=99)
    assert slots.shape == (6,) and summed.shape == (6, 3)
    got = {int(r): summed[i, 0].item() for i, r in enumerate(slots[:3])}
    assert got == {2: 1 + 4, 4: 0 + 2 + 5, 9: 3}
    assert slots[3:].tolist() == [99, 99, 99] and summed[3:].abs().sum() == 0


def _pair(rows=512, dim=8, shape=(2, 16)):
    torch.manual_seed(0)
    dense = BigramEmbedding(BigramConfig(rows=rows, update="dense"), dim, shape)
    sparse = BigramEmbedding(BigramConfig(rows=rows, update="sparse"), dim, shape)
    with torch.no_grad():
        start = torch.randn(rows + 1, dim) * 0.1
        start[-1] = 0  # the scratch row
        dense.table.copy_(start)
        sparse.table.copy_(start)
    return dense, sparse, DenseTableAdamW(dense, dense.cfg, O), SparseRowAdam(sparse, sparse.cfg, O)


def test_sparse_equals_dense_when_the_same_rows_are_touched():
    dense, sparse, du, su = _pair()
    torch.manual_seed(1)
    idx = torch.randint(0, 50, (2, 16))
    for step in range(5):  # the same rows every step, from a fresh state: the two updates must agree
        upstream = torch.randn(2, 16, 8)
        table_step(dense, du, idx, upstream)
        table_step(sparse, su, idx, upstream)
        assert torch.allclose(dense.table, sparse.table, atol=1e-6), step


def test_untouched_rows_never_change_with_the_sparse_update():
    _, sparse, _, su = _pair()
    before = sparse.table.detach().clone()
    touched = set()
    torch.manual_seed(2)
    for _ in range(4):
        idx = torch.randint(0, 60, (2, 16))
        touched |= set(sparse.rows(idx).flatten().tolist())
        table_step(sparse, su, idx, torch.randn(2, 16, 8))
    changed = (sparse.table != before).any(1).nonzero().flatten().tolist()
    assert set(changed) <= touched and len(changed) > 0
    assert torch.equal(sparse.table[-1], before[-1])  # the scratch row stays as it was


def test_dense_adamw_moves_rows_a_step_did_not_touch():
    dense, _, du, _ = _pair()
    idx_a, idx_b = torch.full((2, 16), 3), torch.full((2, 16), 40)
    table_step(dense, du, idx_a, torch.randn(2, 16, 8))
    after_first = dense.table.detach().clone()
    table_step(dense, du, idx_b, torch.randn(2, 16, 8))
    rows_a = set(dense.rows(idx_a).flatten().tolist()) - set(dense.rows(idx_b).flatten().tolist())
    assert any(not torch.equal(dense.table[r], after_first[r]) for r in rows_a)  # momentum keeps moving them


def test_recipe_trains_the_table_sparsely_and_counts_params_without_the_sink():
    cfg = resolve("bigram", "smoke")
    assert cfg.model.bigram is not None and cfg.model.bigram.update == "sparse" and cfg.train.compile
    model = build_model(cfg)
    total = sum(p.numel() for p in model.parameters())
    assert model.num_params() == total - model.bigram.sink.numel()
    x = torch.randint(0, cfg.model.vocab_size, (cfg.train.batch_size, cfg.train.seq_len))
    model(x, x).backward()
    assert model.bigram.table.grad is None and model.bigram.sink.grad is not None
    dense = build_model(dataclasses.replace(cfg, model=dataclasses.replace(
        cfg.model, bigram=dataclasses.replace(cfg.model.bigram, update="dense"))))
    dense(x, x).backward()
    assert dense.bigram.table.grad.shape == dense.bigram.table.shape


def test_touched_rows_and_bench_report():
    idx = torch.randint(0, 100, (4, 32))
    assert 0 < touched_rows(idx, 1 << 12) <= idx.numel()
    times = bench_update(1 << 10, 8, idx, steps=1, repeats=1)
    assert set(times) == {"dense", "sparse"} and all(len(v) == 1 and v[0] > 0 for v in times.values())
    from frontier.bigram import update_time_curve

    curve = update_time_curve([1 << 8, 1 << 10], 8, idx, steps=1, repeats=1)
    assert [c["rows"] for c in curve] == [256, 1024]
    assert all(c["ratio"] == pytest.approx(c["dense_ms"] / c["sparse_ms"]) for c in curve)


def test_a_row_touched_once_moves_once_under_the_sparse_update_and_keeps_moving_under_dense():
    from frontier.bigram import travel_after_one_touch

    b1, b2 = O.adam_betas
    t = travel_after_one_touch(O)
    assert t["sparse"]["first_step"] == pytest.approx(1.0, rel=1e-4)  # per-row bias correction: one lr
    assert t["sparse"]["total"] == pytest.approx(t["sparse"]["first_step"], rel=1e-6)  # then never again
    first = (1 - b1) / (1 - b2) ** 0.5  # global-step bias correction is ~1 late in training
    assert t["dense"]["first_step"] == pytest.approx(first, rel=1e-2)
    ratio = b1 / b2**0.5  # each later step: momentum decays by b1, the denominator by sqrt(b2)
    assert t["dense"]["total"] == pytest.approx(first / (1 - ratio), rel=2e-2)

import dataclasses

import pytest
import torch

from frontier.config import BigramConfig, OptimConfig
from frontier.errors import UserError
from frontier.model.bigram import BigramEmbedding, bigram_rows
from frontier.optim.bigram_update import DenseTableAdamW, SparseRowAdam, sum_by_row
from frontier.recipes import resolve
from frontier.study.bench_table import UPDATE_KINDS, bench_update, curve_point, table_setup, table_step, touched_rows
from frontier.train.trainer import build_model

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
    times = bench_update(1 << 10, 8, idx, steps=1, repeats=2)
    assert set(times) == set(UPDATE_KINDS) == {"dense", "sparse", "torch-sparseadam"}
    assert all(len(v) == 2 and min(v) > 0 for v in times.values())
    from frontier.study.bench_table import update_time_curve

    curve = update_time_curve([1 << 8, 1 << 10], 8, idx, steps=1, repeats=2)
    assert [c["rows"] for c in curve] == [256, 1024]
    for c in curve:  # every kind's best round is in the curve, beside its rounds
        assert c["ratio"] == pytest.approx(c["dense_ms"] / c["sparse_ms"])
        assert c["torch_sparseadam_ms"] == min(c["samples"]["torch-sparseadam"]) > 0
        assert c["vs_sparse"]["torch-sparseadam"] == pytest.approx(c["torch_sparseadam_ms"] / c["sparse_ms"])


def test_curve_point_takes_each_kinds_best_round_and_dense_over_sparse():
    c = curve_point(512, {"dense": [12.0, 10.0], "sparse": [2.0, 1.0], "torch-sparseadam": [5.0, 4.0]})
    assert (c["dense_ms"], c["sparse_ms"], c["torch_sparseadam_ms"]) == (10.0, 1.0, 4.0)
    assert c["ratio"] == 10.0  # dense / sparse: inverted (0.1) or from another kind (4.0, 2.5) would miss
    assert c["vs_sparse"] == {"dense": 10.0, "sparse": 1.0, "torch-sparseadam": 4.0}


def test_a_row_touched_once_moves_once_under_the_sparse_update_and_keeps_moving_under_dense():
    from frontier.study.bench_table import travel_after_one_touch

    b1, b2 = O.adam_betas
    t = travel_after_one_touch(O)
    assert t["sparse"]["first_step"] == pytest.approx(1.0, rel=1e-4)  # per-row bias correction: one lr
    assert t["sparse"]["total"] == pytest.approx(t["sparse"]["first_step"], rel=1e-6)  # then never again
    first = (1 - b1) / (1 - b2) ** 0.5  # global-step bias correction is ~1 late in training
    assert t["dense"]["first_step"] == pytest.approx(first, rel=1e-2)
    ratio = b1 / b2**0.5  # each later step: momentum decays by b1, the denominator by sqrt(b2)
    assert t["dense"]["total"] == pytest.approx(first / (1 - ratio), rel=2e-2)


# ----------------------------------------------------------------------------- a batch of the wrong shape


def test_a_training_batch_of_another_shape_raises_instead_of_skipping_the_update():
    emb = BigramEmbedding(BigramConfig(rows=256, update="sparse"), 8, (2, 16))
    emb.train()
    with pytest.raises(UserError) as e:
        emb(torch.randint(0, 50, (3, 16)))
    msg = str(e.value)
    assert "(3, 16)" in msg and "(2, 16)" in msg and "model.eval()" in msg and len(msg.splitlines()) == 1
    emb.eval()  # evaluation reads other shapes without the sink
    out = emb(torch.randint(0, 50, (3, 16)))
    assert out.shape == (3, 16, 8)


def test_sparse_step_without_a_gradient_raises_in_training_mode():
    emb = BigramEmbedding(BigramConfig(rows=256, update="sparse"), 8, (2, 16))
    upd = SparseRowAdam(emb, emb.cfg, O)
    idx = torch.randint(0, 50, (2, 16))
    with torch.no_grad():
        emb(idx)  # a training-mode forward that builds no gradient
    with pytest.raises(UserError, match="no gradient"):
        upd.step(idx, 1.0)
    emb.eval()
    before = emb.table.detach().clone()
    upd.step(idx, 1.0)  # eval mode: nothing to apply, nothing changes
    assert torch.equal(emb.table, before)


def test_a_model_with_the_sparse_table_evaluates_at_other_batch_shapes(smoke_data):
    from frontier.train.bpb import evaluate_bpb

    cfg = resolve("bigram", "smoke")
    assert cfg.train.eval_batch_size != cfg.train.batch_size
    model = build_model(cfg)
    model.train()
    res = evaluate_bpb(model, smoke_data.val_tokens(), smoke_data.tokenizer, cfg.train.seq_len,
                       cfg.train.eval_batch_size)
    assert res["val_bpb"] > 0 and model.training  # eval mode inside, training mode restored
    x = torch.randint(0, cfg.model.vocab_size, (cfg.train.batch_size + 1, cfg.train.seq_len))
    with pytest.raises(UserError, match="sparse bigram update"):
        model(x, x)


# ----------------------------------------------------------------------------- torch.optim.SparseAdam


def test_torch_sparseadam_trains_the_touched_rows_and_leaves_the_rest():
    torch.manual_seed(0)
    start = torch.randn(257, 8) * 0.1
    start[-1] = 0
    tables = {}
    for kind in ("sparse", "torch-sparseadam"):
        emb, upd = table_setup(kind, 256, 8, (2, 16), O)
        with torch.no_grad():
            emb.table.copy_(start)
        torch.manual_seed(1)
        idx, upstream = torch.randint(0, 40, (2, 16)), torch.randn(2, 16, 8)
        table_step(emb, upd, idx, upstream)
        assert emb.table.grad is None
        tables[kind] = emb.table.detach().clone()
    touched = set(bigram_rows(idx, 256).flatten().tolist())
    for kind, t in tables.items():
        changed = set((t != start).any(1).nonzero().flatten().tolist())
        assert changed == touched, kind  # the touched rows move, no other row does
    # one step from a fresh state: both are Adam's first step on the same rows (eps placed differently)
    assert torch.allclose(tables["sparse"], tables["torch-sparseadam"], atol=1e-6)


def test_torch_sparseadam_corrects_bias_with_one_global_step_count():
    """A row first touched on the second step: SparseRowAdam (its own count, 1) moves it by lr; SparseAdam (the
    table's count, 2) by lr * sqrt(1 - b2^2) / (1 - b1^2) * (1 - b1) / sqrt(1 - b2)."""
    b1, b2 = O.adam_betas
    busy, rare_idx, unit = torch.tensor([[1, 2]]), torch.tensor([[1, 3]]), torch.ones(1, 2, 1)
    moved = {}
    for kind in ("sparse", "torch-sparseadam"):
        emb, upd = table_setup(kind, 64, 1, (1, 2), O, lr=1.0, signs=False, scale_init=1.0)
        rare = int(emb.rows(rare_idx)[0, 1])
        assert rare not in emb.rows(busy).tolist()[0]
        table_step(emb, upd, busy, unit)
        before = float(emb.table.detach()[rare, 0])
        table_step(emb, upd, rare_idx, unit)
        moved[kind] = abs(float(emb.table.detach()[rare, 0]) - before)
    assert moved["sparse"] == pytest.approx(1.0, rel=1e-6)
    global_count = (1 - b2**2) ** 0.5 / (1 - b1**2) * (1 - b1) / (1 - b2) ** 0.5
    assert moved["torch-sparseadam"] == pytest.approx(global_count, rel=1e-5)


def test_sparseadam_fit_reports_compile_and_data_dependent_row_counts():
    from frontier.study.bench_table import sparseadam_fit

    fit = sparseadam_fit(rows=1 << 10, dim=4, batch_shape=(2, 32), batches=3, backend="aot_eager")
    assert fit["positions"] == 64 and fit["gradient"]["layout"] == "torch.sparse_coo"
    assert isinstance(fit["forward_backward_fullgraph"], str) and isinstance(fit["step_fullgraph"], str)
    assert fit["step_fullgraph"] != "ok"  # SparseAdam's step does not compile into one graph
    assert fit["coalesced_rows"] == fit["touched_rows"] and len(set(fit["coalesced_rows"])) > 1  # varies by batch

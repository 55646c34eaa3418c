"""The fast counting of the n-gram tables against the counting it replaced. Each test can fail: each compares every
buffer of the tables (or of one slot table) with a verbatim copy of the original torch counting, kept below as the
reference, on inputs where the fast path's shortcuts (one sort per group, ranks computed once, the rounds by rank,
packed flags, empty slots found at the end of a row) would give other tables if they were wrong."""

import dataclasses

import numpy as np
import pytest
import torch

from frontier.config import NGramConfig
from frontier.model.ngram import NGramMix, counting, hashing, shard_batches
from frontier.model.ngram.hashing import LOW

# ----------------------------------------------------------------------------- the reference: the original counting


def _rank_within_ref(groups, score):
    order = torch.sort(score, descending=True, stable=True).indices
    order = order[torch.sort(groups[order], stable=True).indices]
    g = groups[order]
    first = torch.ones_like(g, dtype=torch.bool)
    first[1:] = g[1:] != g[:-1]
    pos = torch.arange(len(g), device=g.device)
    rank_sorted = pos - torch.where(first, pos, 0).cummax(0).values
    return torch.empty_like(rank_sorted).scatter_(0, order, rank_sorted)


def _update_slots_ref(slots, rows, tok, c):
    S = slots.size(1)
    st, sc = slots[rows] >> 32, slots[rows] & LOW
    match = st == tok[:, None]
    found = match.any(1)
    slots.view(-1).index_add_(0, (rows * S + match.int().argmax(1))[found], c[found])
    rows, tok, c, st, sc = rows[~found], tok[~found], c[~found], st[~found], sc[~found]
    if rows.numel() == 0:
        return
    score = c * (int(tok.max()) + 1) - tok
    rank = _rank_within_ref(rows, score)
    empty = st < 0
    nth_empty = (empty.int().cumsum(1) == (rank + 1)[:, None]) & empty
    fits = nth_empty.any(1)
    slots.view(-1)[rows[fits] * S + nth_empty[fits].int().argmax(1)] = (tok[fits] << 32) | c[fits]
    rows, score, tok, c = rows[~fits], score[~fits], tok[~fits], c[~fits]
    for _ in range(8):
        if rows.numel() == 0:
            break
        win = _rank_within_ref(rows, score) == 0
        w_rows, w_tok, w_c = rows[win], tok[win], c[win]
        counts = slots[w_rows] & LOW
        j = counts.argmin(1)
        enter = w_c > counts.gather(1, j[:, None])[:, 0]
        slots.view(-1)[w_rows[enter] * S + j[enter]] = (w_tok[enter] << 32) | w_c[enter]
        rows, score, tok, c = rows[~win], score[~win], tok[~win], c[~win]


def _claim_ref(owners, rows, fps):
    empty = owners[rows] == 0
    if not empty.any():
        return
    pairs, n = torch.unique(rows[empty] * (1 << 32) + fps[empty], return_counts=True)
    row, fp = pairs >> 32, pairs & LOW
    win = _rank_within_ref(row, n) == 0
    owners[row[win]] = fp[win].to(owners.dtype)


def _groups_ref(m, x, f):
    short = (x[None], torch.ones(1, 1, x.size(1), dtype=torch.bool), m.short_slots[f], m.short_ctx[f])
    if m.K < 2:
        return [short]
    hashes, valid = hashing.context_hashes(x, m.K)
    H, nb = m.K - 1, 1 << m.cfg.buckets_log2
    rows = torch.arange(H)[:, None, None] * nb + hashing._bucket(hashes, m.cfg.buckets_log2)
    if m.cfg.check_bits:
        fps, owners = hashing._fingerprint(hashes, m.cfg.check_bits), m.fp[f].view(-1)
        exist = valid.expand_as(rows)
        _claim_ref(owners, rows[exist], fps[exist])
        valid = exist & (owners[rows] == fps)
        m.dropped[f] += (exist & ~valid).sum((1, 2))
    return [short, (rows, valid, m.slots[f].view(-1, m.cfg.slots), m.ctx[f].view(-1))]


@torch.no_grad()
def observe_ref(m, x, y, fold=0):
    """`NGramMix.observe` as it was before the fast counting (torch, one `torch.unique` per group)."""
    V = m.V
    x, y = x.long(), y.long()
    m.counted[fold] += y.numel()
    m.uni[fold] += torch.bincount(y.flatten(), minlength=V)
    for g, (rows, valid, slots, ctx_table) in enumerate(_groups_ref(m, x, fold)):
        keep = valid.expand_as(rows)
        keys, counts = torch.unique(rows[keep] * V + y.expand_as(rows)[keep], return_counts=True)
        ctx, tok = keys // V, keys % V
        ctx_table.index_add_(0, ctx, counts)
        seen_at = hashing._bucket(keys * 2 + g, m.cfg.seen_log2)
        new = ~m.seen[fold, seen_at]
        m.seen[fold, seen_at] = True
        ctx_table.index_add_(0, ctx[new], torch.full_like(ctx[new], 1 << 32))
        _update_slots_ref(slots, ctx, tok, counts)


# ----------------------------------------------------------------------------- helpers


def _assert_same_tables(a, b):
    bufs_a, bufs_b = dict(a.named_buffers()), dict(b.named_buffers())
    assert bufs_a.keys() == bufs_b.keys()
    for name in bufs_a:
        assert torch.equal(bufs_a[name], bufs_b[name]), name


def _zipf_batch(rng, B, T, V):
    """Tokens with a few frequent ones and repeated phrases, so that contexts recur and fill their slots."""
    p = 1.0 / np.arange(1, V + 1) ** 1.1
    t = rng.choice(V, size=(B, T + 1), p=p / p.sum())
    phrase = rng.integers(0, V, size=12)
    for b in range(B):
        for o in rng.integers(0, T - 12, size=max(1, T // 40)):
            t[b, o : o + 12] = phrase
    t = torch.from_numpy(t.astype(np.int64))
    return t[:, :-1], t[:, 1:]


CONFIGS = {
    "tiny-buckets": dict(max_order=6, buckets_log2=4, seen_log2=10, slots=2, slots_short=3),
    "small": dict(max_order=8, buckets_log2=8, seen_log2=14, slots=4, slots_short=8),
    "cpu-like": dict(max_order=16, buckets_log2=12, seen_log2=18),
    "odd-slots": dict(max_order=5, buckets_log2=6, seen_log2=12, slots=3, slots_short=5),
}


# ----------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("check_bits", [0, 31, 6])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_observe_gives_the_reference_tables_on_random_batches(name, check_bits):
    V = 37  # not a power of two: the // and % path
    cfg = NGramConfig(folds=2, check_bits=check_bits, **CONFIGS[name])
    fast, ref = NGramMix(cfg, V), NGramMix(cfg, V)
    rng = np.random.default_rng(hash((name, check_bits)) % 2**32)
    for i, (B, T) in enumerate([(1, 1), (1, 17), (3, 64), (8, 128), (1, 300), (16, 256), (2, 5)] * 2):
        x, y = _zipf_batch(rng, B, T, V) if T >= 24 else (torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T)))
        fold = int(rng.integers(0, 2))
        fast.observe(x, y, fold)
        observe_ref(ref, x, y, fold)
        _assert_same_tables(fast, ref)
    assert (fast.ctx & LOW).sum() > 0 and (fast.slots >= 0).any()


@pytest.mark.parametrize("check_bits", [0, 31])
def test_count_tokens_gives_the_reference_tables_on_the_smoke_corpus(smoke_data, check_bits):
    V = smoke_data.tokenizer.vocab_size  # a power of two: the shift path
    cfg = NGramConfig(max_order=16, buckets_log2=12, seen_log2=16, folds=2, check_bits=check_bits)
    shards = [np.asarray(s[:40_000]) for s in smoke_data.train_tokens()]
    for windows_per_call, threads in [(1, 1), (16, 2), (128, None)]:  # threads: one per fold, or one in all
        fast, ref = NGramMix(cfg, V), NGramMix(cfg, V)
        fast.count_tokens(shards, 64, windows_per_call, threads=threads)
        for x, y, f in shard_batches(shards, 64, 2, windows_per_call):
            observe_ref(ref, x, y, f)
        _assert_same_tables(fast, ref)
    full = (fast.slots >= 0).all(-1).sum()  # buckets whose slots are all taken: replacement had work to do
    assert full > 100 and (fast.ctx >> 32).max() > cfg.slots


def test_a_continuation_that_beats_the_smallest_slot_replaces_it_as_in_the_reference():
    V = 16
    cfg = NGramConfig(max_order=3, buckets_log2=10, seen_log2=12, slots=4, slots_short=4, folds=1)
    fast, ref = NGramMix(cfg, V), NGramMix(cfg, V)
    first = [1, 2, 3, 1, 2, 4, 1, 2, 5, 1, 2, 6, 1, 2, 7]  # context (1, 2) and token 1, 2: four slots taken
    then = [1, 2, 9, 1, 2, 9, 1, 2, 9, 1, 2, 8, 1, 2, 8, 1, 2, 10]  # 9 (x3) and 8 (x2) beat counts of 1
    for tokens in (first, then):
        t = torch.tensor(tokens)[None]
        fast.observe(t[:, :-1], t[:, 1:])
        observe_ref(ref, t[:, :-1], t[:, 1:])
        _assert_same_tables(fast, ref)
    toks, counts = hashing.unpack_slots(fast.short_slots[0, 2])  # context "2": 3 4 5 6 7 then 9 9 9 8 8 10
    kept = dict(zip(toks.tolist(), counts.tolist()))
    assert kept[9] == 3 and kept[8] == 2 and 10 not in kept  # two rounds entered, the count-1 newcomer did not


def _random_slot_table(rng, R, S, holes):
    """Packed slots with distinct tokens per row, some rows full, some empty, some partly filled; `holes`: the
    empty slots are anywhere in the row (counting never makes those, the fast path must still handle them)."""
    toks = np.stack([rng.permutation(40)[:S] for _ in range(R)])
    counts = rng.integers(1, 6, size=(R, S))
    empty = rng.random((R, S)) < 0.4
    if not holes:
        n_empty = rng.integers(0, S + 1, size=R)
        empty = np.arange(S)[None] >= (S - n_empty)[:, None]
    packed = np.where(empty, -1 << 32, (toks << 32) | counts)
    return torch.from_numpy(packed.astype(np.int64))


@pytest.mark.parametrize("holes", [False, True])
@pytest.mark.parametrize("S", [1, 3, 4, 8, 32])
def test_update_slots_np_matches_the_reference_on_any_table(S, holes):
    rng = np.random.default_rng(S * 2 + holes)
    for _ in range(20):
        R = int(rng.integers(1, 30))
        table = _random_slot_table(rng, R, S, holes)
        n = int(rng.integers(1, 200))
        keys = np.unique(rng.integers(0, R, size=n) * 40 + rng.integers(0, 40, size=n))  # distinct, sorted
        rows, tok = keys // 40, keys % 40
        c = rng.integers(1, 8, size=len(keys))
        ref, fast = table.clone(), table.clone()
        _update_slots_ref(ref, torch.from_numpy(rows), torch.from_numpy(tok), torch.from_numpy(c))
        counting._update_slots_np(fast.numpy(), rows, tok, c)
        assert torch.equal(fast, ref)


def test_rank_sorted_is_rank_within():
    rng = np.random.default_rng(0)
    for n in (1, 2, 10, 500):
        keys = np.unique(rng.integers(0, 20, size=n) * 100 + rng.integers(0, 100, size=n))
        rows, tok = keys // 100, keys % 100
        c = rng.integers(1, 5, size=len(keys))
        score = torch.from_numpy(c * 100 - tok)
        assert np.array_equal(counting._rank_sorted(rows, c), _rank_within_ref(torch.from_numpy(rows), score).numpy())


def test_claim_np_matches_the_reference():
    rng = np.random.default_rng(1)
    for _ in range(30):
        owners = torch.from_numpy(np.where(rng.random(50) < 0.5, 0, rng.integers(1, 9, size=50)).astype(np.int32))
        rows = torch.from_numpy(rng.integers(0, 50, size=300))
        fps = torch.from_numpy(rng.integers(1, 6, size=300))  # few fingerprints: ties in the number of positions
        ref, fast = owners.clone(), owners.clone()
        _claim_ref(ref, rows, fps)
        counting._claim_np(fast.numpy(), rows.numpy(), fps.numpy())
        assert torch.equal(fast, ref)


def test_the_torch_counting_for_tables_off_the_cpu_gives_the_same_tables():
    """Tables on an accelerator are counted by `_count_group_torch`: here on the CPU, against the NumPy path."""
    V = 64
    cfg = NGramConfig(max_order=6, buckets_log2=6, seen_log2=12, slots=4, slots_short=8, folds=1)
    a, b = NGramMix(cfg, V), NGramMix(cfg, V)
    rng = np.random.default_rng(2)
    for _ in range(4):
        x, y = _zipf_batch(rng, 4, 64, V)
        groups_a, groups_b = a._groups(x, 0), b._groups(x, 0)
        for g, ((rows, valid, slots_a, ctx_a), (_, _, slots_b, ctx_b)) in enumerate(zip(groups_a, groups_b)):
            keep = valid.expand_as(rows)
            pairs = rows[keep] * V + y.expand_as(rows)[keep]
            counting._count_group(pairs.numpy(), V, g, cfg.seen_log2, a.seen[0].numpy(), ctx_a.numpy(), slots_a.numpy())
            counting._count_group_torch(pairs, V, g, cfg.seen_log2, b.seen[0], ctx_b, slots_b)
        _assert_same_tables(a, b)
    assert (a.slots >= 0).all(-1).any()

"""The exact count model (`frontier.model.ngram.exact`): its context ids against a dictionary, its evidence against
counting by hand (static from the other segments' counted positions, adaptive from the segment's earlier ones),
and its distribution summing to 1 over the vocabulary."""

from collections import Counter, defaultdict

import numpy as np
import pytest
import torch

from frontier.model.ngram.exact import (OUTSIDE, UNIQUE, EscapeChain, context_ids, document_starts, evidence,
                                        fit_chain)

BOS = 1


def _stream(n=3000, vocab=5, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(2, vocab, n)
    x[rng.random(n) < 0.03] = BOS
    x[0] = BOS
    return x


def _context(x, starts, t, k):
    return tuple(x[t - k + 1 : t + 1]) if t - k + 1 >= starts[t] else None


@pytest.mark.parametrize("seed", [0, 1])
def test_context_ids_name_exactly_the_contexts(seed):
    x = _stream(seed=seed)
    starts = document_starts(x, BOS)
    ids, sizes = context_ids(x, starts, 7)
    for k in range(1, 8):
        ctx = [_context(x, starts, t, k) for t in range(len(x))]
        seen = Counter(c for c in ctx if c is not None)
        by_id = defaultdict(set)
        for t, c in enumerate(ctx):
            g = ids[k - 1][t]
            if c is None:
                assert g == OUTSIDE
            elif seen[c] == 1 and k > 1:
                assert g == UNIQUE
            else:
                assert g >= 0
                by_id[g].add(c)
        assert all(len(v) == 1 for v in by_id.values())  # one context an id ...
        owners = [next(iter(v)) for v in by_id.values()]
        assert len(owners) == len(set(owners))  # ... and one id a context
        assert sizes[k - 1] >= len(by_id)


def _by_hand(x, starts, counted, positions, segment, K, vocab):
    followed = np.r_[x[1:] != BOS, False]
    counted = counted & followed
    where = {int(p): i for i, p in enumerate(positions)}
    out = {n: np.zeros((K, len(positions))) for n in ("Ns", "Ts", "Cs", "Ne", "Te", "Ce")}
    for k in range(1, K + 1):
        static = defaultdict(Counter)  # per segment: the counts outside it
        for t in np.flatnonzero(counted):
            c = _context(x, starts, t, k)
            if c is not None:
                static[None][c, x[t + 1]] += 1
        for i, t in enumerate(positions):
            c = _context(x, starts, t, k)
            if c is None:
                continue
            seg = segment[i]
            outside = Counter(static[None])
            for u in positions:  # take out the segment's own counted pairs
                j = where[int(u)]
                if segment[j] == seg and counted[u] and _context(x, starts, u, k) is not None:
                    outside[_context(x, starts, u, k), x[u + 1]] -= 1
            before = Counter()
            for u in positions[:i]:
                j = where[int(u)]
                if segment[j] == seg and followed[u] and _context(x, starts, u, k) is not None:
                    before[_context(x, starts, u, k), x[u + 1]] += 1
            s = {w: v for (cc, w), v in outside.items() if cc == c and v > 0}
            e = {w: v for (cc, w), v in before.items() if cc == c and v > 0}
            y = x[t + 1]
            out["Ns"][k - 1, i], out["Ts"][k - 1, i], out["Cs"][k - 1, i] = sum(s.values()), len(s), s.get(y, 0)
            out["Ne"][k - 1, i], out["Ce"][k - 1, i] = sum(e.values()), e.get(y, 0)
            out["Te"][k - 1, i] = len(set(e) - set(s))
    return out


def test_evidence_is_counting_by_hand():
    x = _stream(n=700, vocab=4, seed=3)
    starts = document_starts(x, BOS)
    K = 4
    ids, sizes = context_ids(x, starts, K + 1)
    docs = np.cumsum(x == BOS) - 1
    counted = np.arange(len(x)) < 500  # the "training text"; two folds of its documents and a held-out rest
    positions = np.arange(len(x) - 1)
    segment = np.where(counted[positions], docs[positions] % 2, 2)
    ev = evidence(x, starts, ids, sizes, counted, positions, segment, BOS, 4, K)
    want = _by_hand(x, starts, counted, positions, segment, K, 4)
    for name, arr in want.items():
        np.testing.assert_array_equal(getattr(ev, name), arr, err_msg=name)


def test_the_chain_is_a_distribution_whatever_its_parameters():
    x = _stream(n=1500, vocab=6, seed=5)
    starts = document_starts(x, BOS)
    K, V = 3, 6
    ids, sizes = context_ids(x, starts, K + 1)
    counted = np.arange(len(x)) < 1000
    t = 1200
    chain = EscapeChain(K, V)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in chain.parameters():
            p.normal_()
    for adaptive in (False, True):
        total = 0.0
        for w in range(V):  # the same position with every possible next token
            xw = x.copy()
            xw[t + 1] = w
            idw, szw = context_ids(xw, starts, K + 1)
            pos = np.arange(1000, t + 1)
            ev = evidence(xw, starts, idw, szw, counted, pos, np.zeros(len(pos), int), BOS, V, K)
            with torch.no_grad():
                total += float(chain(ev.tensors(), adaptive)[-1])
        assert total == pytest.approx(1.0, abs=1e-5)


def test_fitting_lowers_the_loss():
    x = _stream(n=4000, vocab=5, seed=7)
    starts = document_starts(x, BOS)
    K, V = 3, 5
    ids, sizes = context_ids(x, starts, K + 1)
    counted = np.ones(len(x), bool)
    docs = np.cumsum(x == BOS) - 1
    positions = np.arange(len(x) - 1)
    ev = evidence(x, starts, ids, sizes, counted, positions, docs[positions] % 4, BOS, V, K).tensors()
    before = -torch.log(EscapeChain(K, V)(ev, True)).mean()
    after = -torch.log(fit_chain(ev, K, V, True, steps=60, batch=2048)(ev, True)).mean()
    assert after < before - 0.01


def test_threads_make_the_same_partition():
    x = _stream(n=200_000, vocab=6, seed=11)
    starts = document_starts(x, BOS)
    one, _ = context_ids(x, starts, 6, threads=1)
    two, _ = context_ids(x, starts, 6, threads=2)
    for a, b in zip(one, two):
        assert ((a < 0) == (b < 0)).all() and (a[a < 0] == b[b < 0]).all()
        m = a >= 0
        assert len(set(zip(a[m].tolist(), b[m].tolist()))) == len(set(a[m].tolist())) == len(set(b[m].tolist()))


def test_the_bench_scores_both_splits_and_places_ppmd_beside(tmp_path, corpus_dir, capsys):
    """`frontier count-model` on a small corpus with a test split: one record, every order scored on validation
    and test, static and adaptive, the compressor record of the same data beside it; a bad --orders is one line."""
    from frontier.cli import main
    from frontier.data.dataset import prepare
    from frontier.study.bench_records import load_bench_record, records
    from frontier.study.compressors import run_compressor_bench

    data = prepare(tmp_path / "data", text=[str(corpus_dir)], vocab_size=512, test_fraction=0.1, log=lambda m: None)
    out = tmp_path / "bench"
    run_compressor_bench(data, "smoke", out, log=lambda m: None)
    assert main(["count-model", "--data", str(data.folder), "--orders", "2,3", "--out", str(out)]) == 0
    rec = load_bench_record(records(out, "count-model")[0]["path"])
    assert [r["order"] for r in rec["rows"]] == [2, 3]
    for row in rec["rows"]:
        for split in ("val", "test"):
            for kind in ("static", "adaptive"):
                assert 0 < row[f"{split}_bpb_{kind}"] < 12
    assert rec["compressors"]["rows"] and rec["counting"]["tokens_per_s"] > 0
    assert main(["count-model", "--data", str(data.folder), "--orders", "0,x", "--out", str(out)]) == 2
    assert "--orders '0,x' is not a list of context lengths" in capsys.readouterr().err

"""Counting training tokens into the n-gram tables: per table group one sort of a batch's (context row, next
token) pairs gives the distinct pairs, their counts and each context's segment; new continuations enter a context's
slots best first, then replace its smallest slot when they beat it; with check bits the first context counted into
an empty bucket claims it. The torch functions run where the tables are off the CPU; the NumPy ones (the same
tables, bit for bit) where they are on it. `shard_batches` cuts the training shards the way the loader does."""

from __future__ import annotations

import numpy as np
import torch

from ...data.loader import training_windows, window_folds
from .hashing import LOW, _bucket, _bucket_np, unpack_slots

INSERT_ROUNDS = 8  # new continuations a set of slots can take per call


def _rank_within(groups: torch.Tensor, score: torch.Tensor) -> torch.Tensor:
    """For items in groups, each item's rank by descending score within its group (0 = best; ties by position)."""
    order = torch.sort(score, descending=True, stable=True).indices
    order = order[torch.sort(groups[order], stable=True).indices]
    g = groups[order]
    first = torch.ones_like(g, dtype=torch.bool)
    first[1:] = g[1:] != g[:-1]
    pos = torch.arange(len(g), device=g.device)
    rank_sorted = pos - torch.where(first, pos, 0).cummax(0).values
    return torch.empty_like(rank_sorted).scatter_(0, order, rank_sorted)


def _update_slots(slots: torch.Tensor, rows: torch.Tensor, tok: torch.Tensor, c: torch.Tensor) -> None:
    """Add counts `c` of continuation `tok` to context `rows` in the packed slot table (R, S)."""
    S = slots.size(1)
    st, sc = unpack_slots(slots[rows])
    match = st == tok[:, None]
    found = match.any(1)
    slots.view(-1).index_add_(0, (rows * S + match.int().argmax(1))[found], c[found])
    rows, tok, c, st, sc = rows[~found], tok[~found], c[~found], st[~found], sc[~found]
    if rows.numel() == 0:
        return
    score = c * (int(tok.max()) + 1) - tok  # the most frequent first; ties to the smaller token id
    # New continuations fill empty slots first, best first ...
    rank = _rank_within(rows, score)
    empty = st < 0
    nth_empty = (empty.int().cumsum(1) == (rank + 1)[:, None]) & empty
    fits = nth_empty.any(1)
    slots.view(-1)[rows[fits] * S + nth_empty[fits].int().argmax(1)] = (tok[fits] << 32) | c[fits]
    rows, score, tok, c = rows[~fits], score[~fits], tok[~fits], c[~fits]
    # ... then replace a context's smallest slot when they beat it, one per context per round.
    for _ in range(INSERT_ROUNDS):
        if rows.numel() == 0:
            break
        win = _rank_within(rows, score) == 0
        w_rows, w_tok, w_c = rows[win], tok[win], c[win]
        counts = unpack_slots(slots[w_rows])[1]
        j = counts.argmin(1)
        enter = w_c > counts.gather(1, j[:, None])[:, 0]
        slots.view(-1)[w_rows[enter] * S + j[enter]] = (w_tok[enter] << 32) | w_c[enter]
        rows, score, tok, c = rows[~win], score[~win], tok[~win], c[~win]


def _count_group_torch(pairs: torch.Tensor, V: int, g: int, seen_log2: int, seen: torch.Tensor,
                       ctx_table: torch.Tensor, slots: torch.Tensor) -> None:
    """Count the (context row * V + next token) `pairs` of table group `g` into its packed contexts and slots, and
    the pairs first seen into the types (torch: tables off the CPU)."""
    keys, counts = torch.unique(pairs, return_counts=True)
    ctx, tok = keys // V, keys % V
    ctx_table.index_add_(0, ctx, counts)  # totals, in the low half
    seen_at = _bucket(keys * 2 + g, seen_log2)
    new = ~seen[seen_at]
    seen[seen_at] = True
    ctx_table.index_add_(0, ctx[new], torch.full_like(ctx[new], 1 << 32))  # types, in the high half
    _update_slots(slots, ctx, tok, counts)


def _claim(owners: torch.Tensor, rows: torch.Tensor, fps: torch.Tensor) -> None:
    """Empty buckets (owner 0) among `rows` take an owner: of the fingerprints `fps` of the positions landing in
    one, the one with the most positions, ties to the smaller fingerprint (torch; `_claim_np` on the CPU)."""
    empty = owners[rows] == 0
    if not empty.any():
        return
    pairs, n = torch.unique(rows[empty] * (1 << 32) + fps[empty], return_counts=True)  # sorted: by row, then fp
    row, fp = pairs >> 32, pairs & LOW
    win = _rank_within(row, n) == 0  # the most positions; ties by position in `pairs`, the smaller fingerprint
    owners[row[win]] = fp[win].to(owners.dtype)


# ----------------------------------------------------------------------------- counting in NumPy (tables on the CPU)
# The same tables as the torch functions above, bit for bit, from one sort per table group: `pairs` sorted once give
# the distinct pairs (sorted by context row, then token), their counts, each context's segment (for its totals and
# types), and the order in which a context's new continuations are ranked. NumPy's sort of int64 is a vectorised
# quicksort, single-threaded (no thread pool to contend for on a shared machine).


def _sizes(starts: np.ndarray, n: int) -> np.ndarray:
    """The lengths of the runs that begin at `starts` in an array of length n."""
    sizes = np.empty_like(starts)
    sizes[:-1] = starts[1:] - starts[:-1]
    sizes[-1:] = n - starts[-1:]
    return sizes


def _starts(sorted_values: np.ndarray) -> np.ndarray:
    """Where each run of equal values of a sorted array starts."""
    if len(sorted_values) == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.empty(len(sorted_values), dtype=bool)
    first[0] = True
    np.not_equal(sorted_values[1:], sorted_values[:-1], out=first[1:])
    return np.flatnonzero(first)


def _sorted_counts(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys, ascending, and how often each occurs (`torch.unique(keys, return_counts=True)`)."""
    keys = np.sort(keys)
    starts = _starts(keys)
    return keys[starts], _sizes(starts, len(keys))


def _rank_sorted(rows: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Each item's rank within its row by descending count `c`, ties by position (0 = best), for items sorted by
    row: `_rank_within(rows, score)` where, as in `_update_slots`, rows come sorted and a row's items have distinct
    tokens in ascending order (score = c * (max token + 1) - token: by count, ties to the earlier item)."""
    n = len(rows)
    rank = np.zeros(n, dtype=np.int64)
    starts = _starts(rows)
    sizes = _sizes(starts, n)
    multi = sizes > 1  # a row with one new continuation ranks it 0: no sorting
    if not multi.any():
        return rank
    sel = np.flatnonzero(np.repeat(multi, sizes))
    gsize = sizes[multi]
    m, G = len(sel), len(gsize)
    gid = np.repeat(np.arange(G, dtype=np.int64), gsize)
    cs = c[sel]
    cmax = int(cs.max())
    pos = np.arange(m, dtype=np.int64)
    if G * (cmax + 1) * m < 2**62:  # one sort of unique keys: (row, descending count, position)
        key = (gid * (cmax + 1) + (cmax - cs)) * m + pos
        key.sort()
        order = key % m
    else:
        order = np.lexsort((pos, -cs, gid))
    group_start = np.repeat(np.cumsum(gsize) - gsize, gsize)  # in sorted order groups stay where they were
    within = np.empty(m, dtype=np.int64)
    within[order] = pos - group_start
    rank[sel] = within
    return rank


_PACKED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _packed(flags: np.ndarray) -> np.ndarray | None:
    """The S bool flags of each row of a C-contiguous (n, S) array as one unsigned integer (byte s: flag s), for S
    in 1, 2, 4, 8; None otherwise."""
    dt = _PACKED.get(flags.shape[1])
    return None if dt is None or not flags.flags.c_contiguous else flags.view(dt)[:, 0]


def _tail_masks(S: int, dtype) -> np.ndarray:
    """Packed flags (`_packed`) with the last k of S set, for k = 0..S."""
    return np.array([sum(1 << (8 * s) for s in range(S - k, S)) for k in range(S + 1)], dtype=dtype)


def _update_slots_np(slots: np.ndarray, rows: np.ndarray, tok: np.ndarray, c: np.ndarray) -> None:
    """`_update_slots` in NumPy, for distinct (row, token) pairs sorted by row, then token (as `_sorted_counts`
    gives them): continuations already in a slot add their counts; new ones fill a row's empty slots best first;
    the next `INSERT_ROUNDS` best of a full row each replace its smallest slot if they beat it, one per round. The
    rounds are the original's: round r takes the new continuations of rank r among those that found no empty slot
    (the original re-ranks what is left each round, which is the same ranking, shifted)."""
    S = slots.shape[1]
    flat = slots.reshape(-1)
    st = np.take(slots, rows, axis=0) >> 32  # (n, S): the tokens in each pair's slots
    match, empty = st == tok[:, None], st < 0
    j = match.argmax(1)  # the slot holding the token, where one does
    packed = _packed(empty)  # a row's S flags as one integer, where S is 1, 2, 4 or 8
    if packed is None:
        found, n_empty = match.any(1), empty.sum(1)
    else:
        found, n_empty = _packed(match) != 0, np.bitwise_count(packed).astype(np.int64)
    fi = np.flatnonzero(found)
    if len(fi):
        flat[rows[fi] * S + j[fi]] += c[fi]  # one slot per (row, token): no duplicates
    nf = np.flatnonzero(~found)
    if len(nf) == 0:
        return
    rows, tok, c, n_empty = rows[nf], tok[nf], c[nf], n_empty[nf]
    rank = _rank_sorted(rows, c)
    fits = rank < n_empty
    fi = np.flatnonzero(fits)
    if len(fi):
        # the (rank + 1)-th empty slot: S - n_empty + rank where a row's empty slots are its last ones (counting
        # fills slots in order, so they always are), else found column by column
        slot = S - n_empty[fi] + rank[fi]
        if packed is None:
            tail = (empty[nf[fi]] == (np.arange(S) >= (S - n_empty[fi])[:, None])).all(1)
        else:
            tail = packed[nf[fi]] == _tail_masks(S, packed.dtype)[n_empty[fi]]
        odd = np.flatnonzero(~tail)
        if len(odd):
            e, want = empty[nf[fi[odd]]], rank[fi[odd]] + 1
            seen_empty, at = np.zeros(len(odd), dtype=np.int64), np.zeros(len(odd), dtype=np.int64)
            for s in range(S):
                seen_empty += e[:, s]
                at[e[:, s] & (seen_empty == want)] = s
            slot[odd] = at
        flat[rows[fi] * S + slot] = (tok[fi] << 32) | c[fi]
    late = rank - n_empty  # a continuation that found no empty slot tries in round `late`
    rest = np.flatnonzero(~fits & (late < INSERT_ROUNDS))
    rows, tok, c, late = rows[rest], tok[rest], c[rest], late[rest]
    for r in range(INSERT_ROUNDS):
        w = np.flatnonzero(late == r)
        if len(w) == 0:
            break
        w_rows, w_tok, w_c = rows[w], tok[w], c[w]
        counts = np.take(slots, w_rows, axis=0) & LOW
        j = counts.argmin(1)
        enter = w_c > counts[np.arange(len(w)), j]
        flat[w_rows[enter] * S + j[enter]] = (w_tok[enter] << 32) | w_c[enter]


def _count_group(pairs: np.ndarray, V: int, g: int, seen_log2: int, seen: np.ndarray, ctx_table: np.ndarray,
                 slots: np.ndarray) -> None:
    """`_count_group_torch` in NumPy, on NumPy views of the CPU tables (written in place)."""
    if len(pairs) == 0:
        return
    keys, counts = _sorted_counts(pairs)
    if V & (V - 1) == 0:
        shift = V.bit_length() - 1
        ctx, tok = keys >> shift, keys & (V - 1)
    else:
        ctx, tok = keys // V, keys % V
    seen_at = _bucket_np(keys * 2 + g, seen_log2)
    new = ~seen[seen_at]
    seen[seen_at] = True
    starts = _starts(ctx)  # keys sorted: each context's pairs are a segment
    ctx_table[ctx[starts]] += np.add.reduceat(counts + (new.astype(np.int64) << 32), starts)  # totals | types
    _update_slots_np(slots, ctx, tok, counts)


def _claim_np(owners: np.ndarray, rows: np.ndarray, fps: np.ndarray) -> None:
    """`_claim` in NumPy: of the fingerprints landing in an empty bucket, the one with the most positions, ties to
    the smaller fingerprint (the first of its row among the sorted pairs)."""
    empty = owners[rows] == 0
    if not empty.any():
        return
    pairs, n = _sorted_counts(rows[empty] * (1 << 32) + fps[empty])
    row, fp = pairs >> 32, pairs & LOW
    starts = _starts(row)
    sizes = _sizes(starts, len(row))
    best = np.repeat(np.maximum.reduceat(n, starts), sizes)
    cand = np.flatnonzero(n == best)
    win = cand[_starts(row[cand])]  # the first candidate of each row
    owners[row[win]] = fp[win].astype(owners.dtype)


def shard_batches(shards: list[np.ndarray], seq_len: int, folds: int, windows_per_call: int = 128,
                  fold: int | None = None):
    """The batches `count_tokens` counts, as (x, y, fold), int64 on the CPU: the training windows as the loader
    cuts them (window i in fold i mod folds), shard by shard and fold by fold, `windows_per_call` at a time
    (`fold`: that fold's batches only, in the same order)."""
    windows, only = training_windows(shards, seq_len), fold
    fold_of = window_folds(len(windows), folds)
    for s, shard in enumerate(shards):
        in_shard = windows[:, 0] == s
        starts, fold_in = windows[in_shard, 1], fold_of[in_shard]
        for f in range(folds) if only is None else [only]:
            mine = starts[fold_in == f]
            for i in range(0, len(mine), windows_per_call):
                rows = np.stack([shard[o : o + seq_len + 1] for o in mine[i : i + windows_per_call]])
                rows = torch.from_numpy(rows.astype(np.int64))
                yield rows[:, :-1], rows[:, 1:], f

"""An n-gram model counted from training tokens during the run, mixed into the logits as a learned bias.

What the tables hold (all bounded, allocated once; `table_mib()` reports their size):
- context length 0: unigram counts (add-one smoothed), a dense vector over the vocabulary;
- context length 1: for every token, its total N, its number of distinct continuations T, and its
  `slots_short` most frequent continuations with their counts;
- context lengths 2..K (K = `max_order`, 16 by default): contexts hashed into `2**buckets_log2` buckets per
  length, each with N, T and its `slots` most frequent continuations.
A continuation enters a full set of slots when its count in a batch beats the smallest slot. Whatever a context
counted that is not in a slot joins its back-off mass, so every distribution below still sums to 1.

Smoothing (`NGramConfig.smoothing`), interpolated: every method writes the distribution of a context c of length
k as P_k(. | c) = a_k P_{k-1}(. | c') + s_k, with s_k non-zero only on the context's slots and a_k the escape, so
that each P_k is a proper distribution over the whole vocabulary (a_k + sum s_k = 1). Let c be seen N times with T
distinct continuations, L = sum of its slots' counts and U = N - L the mass of the continuations it keeps no slot
for (always part of the escape: it backs off to the shorter context). A context never seen backs off entirely.
- "witten-bell" (the default; PPM's escape method C):
      P_k(w | c) = (count(c, w) + T * P_{k-1}(w | c')) / (N + T),
  s_k = count/(N + T), a_k = (T + U)/(N + T): a context seen once gives its continuation half of the mass.
  T comes from the seen set (`seen_log2` bits, one per hashed (context, token) pair), which under-counts where two
  pairs share a bit: a context whose every continuation collided has T = 0, no escape, and P_k = 0 outside its
  slots (`frontier ngram-orders` shows it). Inside the learned mixture every length keeps a positive weight, so
  P_mix stays positive; the other smoothings do not read T.
- "absolute" (interpolated absolute discounting, one discount D_k per context length k):
      P_k(w | c) = max(count(c, w) - D_k, 0)/N + (D_k * T_listed + U)/N * P_{k-1}(w | c'),
  T_listed the number of the context's slots in use (what is taken off the slots is the back-off mass, so it sums
  to 1). D_k = n1/(n1 + 2 n2) (Ney, Essen and Kneser), n_r the number of slots of length k holding count r in the
  tables read (the count-of-counts of the listed continuations: the unlisted ones have no counts of their own).
- "absolute-modified" (modified Kneser-Ney's three discounts, Chen and Goodman): D(count) = D1, D2 or D3+ for a
  count of 1, 2 or >= 3, with Y = n1/(n1 + 2 n2), D1 = 1 - 2Y n2/n1, D2 = 2 - 3Y n3/n2, D3+ = 3 - 4Y n4/n3,
      P_k(w | c) = (count(c, w) - D(count(c, w)))/N + (sum_listed D(count) + U)/N * P_{k-1}(w | c').
  Not Kneser-Ney: its lower orders count distinct left contexts per (shorter context, token), which these tables
  do not keep (a slot holds occurrences only), so the shorter contexts keep their ordinary distributions here.
Every discount is clipped to [0.05, r] for a count r (an estimate from few slots can fall outside, and a positive
discount keeps every escape, hence every probability, positive); the discounts are estimated per fold and per
length from the tables (`discounts`) and recomputed only after the tables change.
The unigram (length 0) is add-one smoothed under every method.

The mixture: P_mix = sum_k pi_k P_k over context lengths 0..K, pi = softmax of K+1 learned logits. Unrolled,
    P_mix = coef_0 * P_0 + sum_{k>=1} coef_k * s_k,   coef_K = pi_K,  coef_k = pi_k + a_{k+1} coef_{k+1},
one position-independent dense vector (the unigram) times a per-position scalar, plus a few scattered entries.
With `mixer="counts"` the weights depend on the context: per position, pi = softmax(mix_logits + W f + b) and
scale = scale + (W f + b)_last, f the position's count features per context length 1..K (`count_features`:
whether the context is known, log(1 + N)/8 and T/(N + T)), W and b one small linear layer (3K inputs, K + 2
outputs) that starts at zero, so the mixing starts as the global one. It reads the tables only, never the
network, so `ngram-only` can use it and the bias still depends on the tokens alone.

The bias, from the tokens up to and including position t and from the tables only, over the whole vocabulary,
added to the network's logits before the one softmax:
    bias = (1 - scale) * log floor + scale * log P_mix,    floor = coef_0 * P_0,
a log-linear interpolation between the n-gram distribution and the part of it that backed off to the unigram,
with `scale` learned (scale = 1: the n-gram distribution itself). For every token without an entry P_mix(w)
equals its floor, so up to a per-position constant (log coef_0, which the softmax cancels exactly) the bias is
the dense vector log P_0 plus, at the entries' tokens only, scale * log(P_mix(w) / floor(w)). Training batches
take that sparse form: nothing of size (batch, sequence, vocabulary) is built besides the logits themselves, and
nothing learned multiplies the dense vector. Evaluation computes the same formula densely (it is not charged).

Cross-fitting (`folds`, 2 by default): window i of the training split belongs to fold i mod folds, each training
batch comes from one fold and reads only another fold's tables, so the mixture never learns from counts that
already hold the batch's own continuations (which happens as soon as a run sees its data twice). Evaluation reads
the average of the folds' distributions (and of their floors), each counted from its share of the training text;
with `eval_counts="all"` it reads one more table set instead, counted from every training window beside the
folds' (`observe` counts a batch into its fold's tables and that one; the counting is charged as the rest is), so
that evaluation sees counts of the whole split.

Check bits (`check_bits` > 0; 0, the default, keeps none): every bucket of a context length >= 2 also holds a
fingerprint of the context it counts, `check_bits` bits of a second mixing of the context's 64-bit hash (never 0:
0 marks an empty bucket). The first context counted into an empty bucket claims it (several new contexts of one
batch racing for it: the one with the most positions in the batch, ties to the smaller fingerprint); counts of
any other context that lands there are dropped at that length (`summary()` reports how many), and reading such a
context finds it unseen, so it backs off, instead of taking the owner's counts. Without check bits a bucket keeps
no record of whose counts it holds: an unseen context in an occupied bucket reads its occupant's counts (a false
hit; `false_hit_rate` measures how often on the validation split).

Counting never sees validation tokens: the trainer feeds `observe` the training batches (after the step that used
them, so a batch's own targets never reach its bias), or `count_tokens` the training shards.

How counting runs. Tables on the CPU are counted in NumPy (`_observe_np`): per table group one sort of the batch's
(context row, next token) pairs gives the distinct pairs, their counts and each context's segment; the new
continuations of a context are ranked once (the original re-ranked them every replacement round, the same ranks
shifted); a row's slot flags are read as one packed integer. `count_tokens` counts each fold on its own thread
(folds share no table; NumPy releases the GIL). Tables elsewhere (an accelerator) are counted by `_observe_torch`,
the counting as first written. Both give the same tables bit for bit (tests/test_ngram_counting.py compares every
buffer with a copy of the original); `frontier bench-ngram` times them side by side.

Counting beside an accelerator at Trn2 scale (a design note; nothing here was measured on a Trn2). At the trn2
profile (2**20 buckets per length, a 2**28 seen set) the tables are about 1.7 GiB, read and written at random
per pair (a slot row, a context, a seen flag): host work that a NeuronCore's matrix units do not help with, in
memory the model would otherwise have. The plan is to count on the host, overlapped with the steps: the batch of
step s goes to a counting thread once step s has used it (stream counting), and a batch of fold f reads only the
other fold's tables, so counting fold f never races a read of fold f. Overlap holds while host counting keeps up
with the run's token rate (32 x 2,048 tokens per step / seconds per step); shard counting up front
(`count_tokens`, charged to the budget) costs (train tokens) / (tokens/s) seconds, which at billions of tokens and
the rates `frontier bench-ngram` reports here does not fit a 1,800 s budget. Counting on the device (sort and
segment ops) stays possible through `_observe_torch`, at the price of device time and memory every step.
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import NGramConfig
from .dataloader import eval_windows, training_windows, window_folds

HASH_STEP = 1_000_003
HASH_MIX = -7046029254386353131  # 0x9E3779B97F4A7C15 as a signed 64-bit integer (wrapping multiplication)
INSERT_ROUNDS = 8  # new continuations a set of slots can take per call
FP_MIX = (-4658895280553007687, -7723592293110705685)  # splitmix64's multipliers, as signed 64-bit integers


def _bucket(h: torch.Tensor, log2: int) -> torch.Tensor:
    return ((h * HASH_MIX) >> (64 - log2)) & ((1 << log2) - 1)


def _fingerprint(h: torch.Tensor, bits: int) -> torch.Tensor:
    """`bits` bits of hash `h` mixed a second way (splitmix64's finaliser; the bucket takes the top bits of another
    product), in [1, 2**bits): 0 marks an empty bucket, so a mix that ends in 0 becomes 1."""
    z = h * FP_MIX[0]
    z = (z ^ ((z >> 27) & ((1 << 37) - 1))) * FP_MIX[1]  # (z >> n) & mask: a logical shift of a signed integer
    z = z ^ ((z >> 31) & ((1 << 33) - 1))
    fp = z & ((1 << bits) - 1)
    return torch.where(fp == 0, torch.ones_like(fp), fp)


def context_hashes(x: torch.Tensor, max_order: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Hashes of the contexts of length 2..K ending at each position: (K-1, B, T), and which exist (K-1, 1, T)."""
    x = x.long()
    B, T = x.shape
    h = x + 1
    hashes, valid = [], []
    pos = torch.arange(T, device=x.device)
    for k in range(2, max_order + 1):
        older = F.pad(x[:, : T - (k - 1)], (k - 1, 0)) if k - 1 < T else torch.zeros_like(x)
        h = h * HASH_STEP + older + 1
        hashes.append(h)
        valid.append((pos >= k - 1)[None])
    return torch.stack(hashes), torch.stack(valid)


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


LOW = (1 << 32) - 1  # packed tables: a slot is (token << 32) | count, a context is (types << 32) | total


def unpack_slots(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens, counts) of packed slots; an empty slot has token -1 and count 0."""
    return packed >> 32, packed & LOW


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


# ----------------------------------------------------------------------------- counting in NumPy (tables on the CPU)
# The same tables as the torch functions above, bit for bit, from one sort per table group: `pairs` sorted once give
# the distinct pairs (sorted by context row, then token), their counts, each context's segment (for its totals and
# types), and the order in which a context's new continuations are ranked. NumPy's sort of int64 is a vectorised
# quicksort, single-threaded (no thread pool to contend for on a shared machine).


def _bucket_np(h: np.ndarray, log2: int) -> np.ndarray:
    """`_bucket` in NumPy (int64 arithmetic wraps alike)."""
    return ((h * np.int64(HASH_MIX)) >> np.int64(64 - log2)) & np.int64((1 << log2) - 1)


def _fingerprint_np(h: np.ndarray, bits: int) -> np.ndarray:
    """`_fingerprint` in NumPy."""
    z = h * np.int64(FP_MIX[0])
    z = (z ^ ((z >> 27) & ((1 << 37) - 1))) * np.int64(FP_MIX[1])
    z = z ^ ((z >> 31) & ((1 << 33) - 1))
    fp = z & ((1 << bits) - 1)
    fp[fp == 0] = 1
    return fp


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


def _witten_bell(n, t, cnts, known):
    """Escape a_k (shape of n) and slot shares s_k (shape of cnts) of Witten-Bell for contexts with totals n,
    type counts t and slot counts cnts; contexts not `known` back off entirely."""
    denom = (n + t).clamp_min(1)
    escape = torch.where(known, (t + n - cnts.sum(-1)) / denom, torch.ones_like(n))
    share = torch.where(known[..., None], cnts / denom[..., None], torch.zeros_like(cnts))
    return escape, share


def _discounted(n, cnts, known, d):
    """Escape and slot shares of interpolated absolute discounting: slot counts cnts lose their discount (`d`:
    (..., 3), D1, D2, D3+ for counts 1, 2, >= 3, broadcasting against n), what they lose and the unlisted mass
    n - sum(cnts) is the escape; contexts not `known` back off entirely."""
    r = cnts.clamp(0, 3).long()
    disc = torch.cat([torch.zeros_like(d[..., :1]), d], -1)[..., None, :].expand(*cnts.shape, 4)
    kept = (cnts - disc.gather(-1, r[..., None])[..., 0]).clamp_min(0)
    denom = n.clamp_min(1)
    escape = torch.where(known, (n - kept.sum(-1)) / denom, torch.ones_like(n))
    share = torch.where(known[..., None], kept / denom[..., None], torch.zeros_like(cnts))
    return escape, share


COUNT_FEATURES = 3  # per context length, what the "counts" mixer reads of a position's context


def count_features(n: torch.Tensor, t: torch.Tensor, known: torch.Tensor) -> torch.Tensor:
    """What the "counts" mixer reads of contexts with totals n and type counts t (any shape S): (S, 3), whether
    the context is known, log(1 + N) / 8, and T / (N + T), the Witten-Bell escape (how often it saw something new);
    zeros where it is not known."""
    k = known.float()
    return torch.stack([k, k * torch.log1p(n) / 8, k * t / (n + t).clamp_min(1)], -1)


def count_discounts(slot_counts: torch.Tensor, modified: bool) -> torch.Tensor:
    """(D1, D2, D3+) from the counts of a set of slots (any shape; 0: empty): n_r slots with count r; absolute
    discounting uses one D = n1/(n1 + 2 n2) for all three, modified D_r = r - (r + 1) Y n_{r+1}/n_r; each
    clipped to [0.05, r]."""
    n = torch.stack([(slot_counts == r).sum() for r in (1, 2, 3, 4)]).double()
    y = n[0] / (n[0] + 2 * n[1]).clamp_min(1)
    if modified:
        d = torch.stack([r - (r + 1) * y * n[r] / n[r - 1].clamp_min(1) for r in (1, 2, 3)])
    else:
        d = y.expand(3)
    lo = torch.full_like(d, 0.05)
    return torch.minimum(torch.maximum(d, lo), torch.tensor([1.0, 2.0, 3.0], dtype=d.dtype, device=d.device)).float()


class NGramMix(nn.Module):
    def __init__(self, cfg: NGramConfig, vocab: int):
        super().__init__()
        self.cfg, self.V, self.K, self.F = cfg, vocab, cfg.max_order, cfg.folds
        # With eval_counts "all" (and more than one fold), table set F counts every training window: evaluation's.
        self.ALL = cfg.folds if cfg.eval_counts == "all" and cfg.folds > 1 else None
        F = cfg.folds + (self.ALL is not None)  # table sets
        H, nb, S, S1 = cfg.max_order - 1, 1 << cfg.buckets_log2, cfg.slots, cfg.slots_short
        self.register_buffer("uni", torch.zeros(F, vocab, dtype=torch.int64))
        empty = -1 << 32  # token -1, count 0
        self.register_buffer("short_slots", torch.full((F, vocab, S1), empty, dtype=torch.int64))
        self.register_buffer("short_ctx", torch.zeros(F, vocab, dtype=torch.int64))
        self.register_buffer("slots", torch.full((F, H, nb, S), empty, dtype=torch.int64))
        self.register_buffer("ctx", torch.zeros(F, H, nb, dtype=torch.int64))
        self.register_buffer("seen", torch.zeros(F, 1 << cfg.seen_log2, dtype=torch.bool))
        self.register_buffer("counted", torch.zeros(F, dtype=torch.int64))
        if cfg.check_bits:  # only then: tables without check bits keep the state (and checkpoints) they always had
            self.register_buffer("fp", torch.zeros(F, H, nb, dtype=torch.int32))  # the owner's fingerprint; 0: empty
            self.register_buffer("dropped", torch.zeros(F, H, dtype=torch.int64))  # counts refused, per length
        self._version, self._discounts = 0, {}  # the tables' version (bumped whenever they change); discounts by fold
        self.mix_logits = nn.Parameter(torch.zeros(cfg.max_order + 1))  # pi over context lengths 0..K
        self.scale = nn.Parameter(torch.tensor(1.0))
        self.mix_head = None
        if cfg.mixer == "counts":  # offsets of the K+1 mixture logits and of the scale, per position, from its counts
            self.mix_head = nn.Linear(COUNT_FEATURES * cfg.max_order, cfg.max_order + 2)
            nn.init.zeros_(self.mix_head.weight)  # it starts as the global mixture
            nn.init.zeros_(self.mix_head.bias)

    def tables_for(self, batch_fold: int) -> int:
        """The tables a training batch of `batch_fold` reads: never its own fold's (with one fold: in-sample)."""
        return (batch_fold + 1) % self.F

    def eval_tables(self) -> list[int]:
        """The table sets evaluation reads: the whole split's (eval_counts "all"), or every fold's, averaged."""
        return [self.ALL] if self.ALL is not None else list(range(self.F))

    # ------------------------------------------------------------------ counting
    def _groups(self, x: torch.Tensor, f: int, claim: bool = False):
        """Per table group of fold f: (context row of every position (L, B, T), which exist (L, 1, T) or, with
        check bits, which exist and own their bucket (L, B, T), packed slots (R, S), packed contexts (R,)).
        `claim` (counting, with check bits): the batch's contexts first claim the empty buckets they land in
        (`_claim`), and the positions that own no bucket are added to `dropped`."""
        short = (x[None], torch.ones(1, 1, x.size(1), dtype=torch.bool, device=x.device), self.short_slots[f],
                 self.short_ctx[f])
        if self.K < 2:
            return [short]
        hashes, valid = context_hashes(x, self.K)
        H, nb = self.K - 1, 1 << self.cfg.buckets_log2
        rows = torch.arange(H, device=x.device)[:, None, None] * nb + _bucket(hashes, self.cfg.buckets_log2)
        if self.cfg.check_bits:
            fps, owners = _fingerprint(hashes, self.cfg.check_bits), self.fp[f].view(-1)
            exist = valid.expand_as(rows)
            if claim:
                _claim(owners, rows[exist], fps[exist])
            valid = exist & (owners[rows] == fps)
            if claim:
                self.dropped[f] += (exist & ~valid).sum((1, 2))
        return [short, (rows, valid, self.slots[f].view(-1, self.cfg.slots), self.ctx[f].view(-1))]

    @torch.no_grad()
    def observe(self, x: torch.Tensor, y: torch.Tensor, fold: int = 0) -> None:
        """Count every (context, next token) pair of a training batch of `fold` (contexts from `x`, next tokens
        `y`) into that fold's tables, and into the whole split's where there are such (eval_counts "all")."""
        self.count_into(x, y, fold)
        if self.ALL is not None:
            self.count_into(x, y, self.ALL)

    @torch.no_grad()
    def observe_evaluated(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Adaptive evaluation only: count pairs already scored into every table set evaluation reads."""
        for t in self.eval_tables():
            self.count_into(x, y, t)

    @torch.no_grad()
    def count_into(self, x: torch.Tensor, y: torch.Tensor, fold: int) -> None:
        """Count the pairs of (x, y) into table set `fold`. With check bits, a pair whose context does not own its
        bucket (after the batch's claims) is not counted at that length. Tables on the CPU are counted in NumPy
        (`_observe_np`), tables elsewhere in torch (`_observe_torch`): the same tables, bit for bit."""
        x, y = x.long(), y.long()
        self._version += 1
        (self._observe_np if self.uni.device.type == "cpu" else self._observe_torch)(x, y, fold)

    @torch.no_grad()
    def _observe_torch(self, x: torch.Tensor, y: torch.Tensor, f: int) -> None:
        """`observe` in torch, on any device: one `torch.unique` per table group, then `_update_slots` (the counting
        as it was first written; on the CPU, `frontier bench-ngram` times it beside `_observe_np`)."""
        V = self.V
        self.counted[f] += y.numel()
        self.uni[f] += torch.bincount(y.flatten(), minlength=V)
        for g, (rows, valid, slots, ctx_table) in enumerate(self._groups(x, f, claim=True)):
            keep = valid.expand_as(rows)
            pairs = rows[keep] * V + y.expand_as(rows)[keep]
            _count_group_torch(pairs, V, g, self.cfg.seen_log2, self.seen[f], ctx_table, slots)

    @torch.no_grad()
    def _observe_np(self, x: torch.Tensor, y: torch.Tensor, f: int) -> None:
        """The contexts and slots of `observe` counted in NumPy, on views of the CPU tables: the pairs (context row
        * V + next token) of every existing context (the positions t >= k - 1 of each length k, cut out without a
        mask), the claims and refusals of check bits, then `_count_group` per table group."""
        V, cfg = self.V, self.cfg
        self.counted[f] += y.numel()
        self.uni[f] += torch.bincount(y.flatten(), minlength=V)
        xn, yn = x.numpy(), y.numpy()
        groups = [((xn * V + yn).ravel(), self.short_ctx[f].numpy(), self.short_slots[f].numpy())]
        T = x.size(1)
        lengths = [k for k in range(2, self.K + 1) if k - 1 < T]  # context lengths with a position to count
        if lengths:
            hashes = context_hashes(x, self.K)[0].numpy()
            h = np.concatenate([hashes[k - 2, :, k - 1 :].ravel() for k in lengths])
            nxt = np.concatenate([yn[:, k - 1 :].ravel() for k in lengths])
            per_length = [x.size(0) * (T - k + 1) for k in lengths]
            nb = 1 << cfg.buckets_log2
            rows = np.repeat(np.array(lengths, dtype=np.int64) - 2, per_length) * nb + _bucket_np(h, cfg.buckets_log2)
            if cfg.check_bits:
                fps, owners = _fingerprint_np(h, cfg.check_bits), self.fp[f].view(-1).numpy()
                _claim_np(owners, rows, fps)
                own = owners[rows] == fps
                starts = np.cumsum(per_length) - per_length
                refused = np.add.reduceat((~own).astype(np.int64), starts)
                self.dropped[f, : len(lengths)] += torch.from_numpy(refused)
                rows, nxt = rows[own], nxt[own]
            groups.append((rows * V + nxt, self.ctx[f].view(-1).numpy(), self.slots[f].view(-1, cfg.slots).numpy()))
        for g, (pairs, ctx_table, slots) in enumerate(groups):
            _count_group(pairs, V, g, cfg.seen_log2, self.seen[f].numpy(), ctx_table, slots)

    @torch.no_grad()
    def count_tokens(self, shards: list[np.ndarray], seq_len: int, windows_per_call: int = 128,
                     threads: int | None = None) -> float:
        """Count the training shards up front, window by window as the loader cuts them (window i belongs to fold
        i mod folds); returns seconds taken. Tables on the CPU count each fold on a thread of its own (`threads`
        at most; default: one per fold, up to the CPU count): folds share no table, and each fold's batches keep
        their order, so the tables are those of counting the batches one after another. With the whole split's
        tables (eval_counts "all"), which every batch goes to, counting stays on one thread."""
        t0 = time.perf_counter()
        device = self.uni.device
        n = min(self.F, threads or os.cpu_count() or 1) if device.type == "cpu" else 1
        if self.ALL is not None:  # every fold's batches also go to the whole split's tables: one thread, in order
            n = 1
        if n <= 1:
            for x, y, f in shard_batches(shards, seq_len, self.F, windows_per_call):
                self.observe(x.to(device), y.to(device), f)
        else:
            def count_folds(folds):
                for fold in folds:
                    for x, y, f in shard_batches(shards, seq_len, self.F, windows_per_call, fold=fold):
                        self.observe(x, y, f)

            with ThreadPoolExecutor(n) as pool:
                for done in [pool.submit(count_folds, range(i, self.F, n)) for i in range(n)]:
                    done.result()
        return time.perf_counter() - t0

    @contextmanager
    def counts_kept(self):
        """Inside, count anything (adaptive evaluation counts validation windows); on leaving, every table holds
        again exactly what it held on entering (a copy on the CPU is put back)."""
        saved = {name: b.detach().to("cpu", copy=True) for name, b in self.named_buffers()}
        try:
            yield self
        finally:
            for name, b in self.named_buffers():
                b.copy_(saved[name])
            self._version += 1

    def _load_from_state_dict(self, *args, **kwargs):
        self._version += 1  # loaded tables: discounts estimated before are stale
        return super()._load_from_state_dict(*args, **kwargs)

    def discounts(self, f: int) -> torch.Tensor | None:
        """The discounts (D1, D2, D3+) of the tables of fold f per context length 1..K, (K, 3), from their slot
        counts (`count_discounts`; None under Witten-Bell). Cached until the tables change."""
        if self.cfg.smoothing == "witten-bell":
            return None
        key = (f, self._version, self.slots.device)
        if self._discounts.get(f, (None,))[0] != key:
            modified = self.cfg.smoothing == "absolute-modified"
            per_length = [count_discounts(unpack_slots(self.short_slots[f])[1], modified)]
            per_length += [count_discounts(unpack_slots(self.slots[f, h])[1], modified) for h in range(self.K - 1)]
            self._discounts[f] = (key, torch.stack(per_length))
        return self._discounts[f][1]

    # ------------------------------------------------------------------ the distribution
    def mixture(self) -> torch.Tensor:
        return torch.softmax(self.mix_logits, 0)

    def unigram(self, f: int) -> torch.Tensor:
        uni = self.uni[f].float()
        return (uni + 1) / (uni.sum() + self.V)

    def known(self, x: torch.Tensor, f: int) -> torch.Tensor:
        """Which positions of x the tables of fold f report seen, per context length 2..K: (K-1, B, T) bool (the
        context exists, its bucket has counts and, with check bits, the context owns the bucket)."""
        if self.K < 2:
            return torch.zeros(0, *x.shape, dtype=torch.bool, device=x.device)
        rows, valid, _, ctx_table = self._groups(x.long(), f)[1]
        return valid & ((ctx_table[rows] & LOW) > 0)

    def entries(self, x: torch.Tensor, f: int, with_weights: bool = False):
        """P_mix from the tables of fold f, for every position of x, as (P_0 (V,), coef_0 (B, T), tokens
        (B, T, E), values (B, T, E), scale (0-d, or (B, T) with the "counts" mixer)): P_mix(w) = coef_0 * P_0(w)
        + the values of the entries whose token is w; `scale` is the bias's. `with_weights`: also pi, the
        weights over context lengths 0..K, (K + 1,) or (K + 1, B, T)."""
        x = x.long()
        B, T = x.shape
        escapes, shares, toks, feats = [], [], [], []
        d = self.discounts(f)
        for g, (rows, valid, slots, ctx_table) in enumerate(self._groups(x, f)):
            ctx = ctx_table[rows]  # (L, B, T)
            n, t = (ctx & LOW).float(), (ctx >> 32).float()
            tok, cnt = unpack_slots(slots[rows])  # (L, B, T, S)
            if d is None:
                a, s = _witten_bell(n, t, cnt.float(), valid & (n > 0))
            else:  # group 0: length 1; group 1: lengths 2..K
                dg = (d[:1] if g == 0 else d[1:])[:, None, None, :]
                a, s = _discounted(n, cnt.float(), valid & (n > 0), dg)
            escapes.extend(a.unbind(0))
            shares.extend(s.unbind(0))
            toks.extend(tok.clamp_min(0).unbind(0))
            if self.mix_head is not None:
                feats.extend(count_features(n, t, valid & (n > 0)).unbind(0))
        pi, scale = self.mixture(), self.scale
        if self.mix_head is not None:  # per position: the global logits and scale plus the head's offsets
            offsets = self.mix_head(torch.cat(feats, -1))  # (B, T, K + 2)
            pi = torch.softmax(self.mix_logits + offsets[..., :-1], -1).movedim(-1, 0)  # (K + 1, B, T)
            scale = self.scale + offsets[..., -1]
        coef = [None] * (self.K + 1)  # coef_k = pi_k + a_{k+1} coef_{k+1}; escapes[k-1] is a_k
        coef[self.K] = pi[self.K].expand(B, T)
        for k in range(self.K - 1, -1, -1):
            coef[k] = pi[k] + escapes[k] * coef[k + 1]
        values = torch.cat([coef[k + 1][..., None] * shares[k] for k in range(self.K)], -1)
        out = self.unigram(f), coef[0], torch.cat(toks, -1), values, scale
        return out + (pi,) if with_weights else out

    def floor_and_distribution(self, x: torch.Tensor, batch_fold: int | None = None):
        """(floor, P_mix), dense (B, T, V): P_mix(next token | context) and its floor coef_0 * P_0 (the mass that
        backed off all the way to the unigram), as a training batch of `batch_fold` sees them, or (None) as
        evaluation does, averaged over the folds' tables."""
        return self._dense(x, batch_fold)[:2]

    def _dense(self, x: torch.Tensor, batch_fold: int | None = None):
        """(floor, P_mix, scale): `floor_and_distribution` and the bias scale (averaged over the folds' tables as
        the distributions are; (B, T, 1) with the "counts" mixer)."""
        folds = self.eval_tables() if batch_fold is None else [self.tables_for(batch_fold)]
        floor = total = scale = 0
        for f in folds:
            p0, c0, toks, values, s = self.entries(x, f)
            fl = c0[..., None] * p0
            floor, total = floor + fl, total + fl.scatter_add(-1, toks, values)
            scale = scale + (s[..., None] if s.dim() else s)
        return floor / len(folds), total / len(folds), scale / len(folds)

    def distribution(self, x: torch.Tensor, batch_fold: int | None = None) -> torch.Tensor:
        """P_mix(next token | context), dense (B, T, V); rows sum to 1."""
        return self.floor_and_distribution(x, batch_fold)[1]

    # ------------------------------------------------------------------ the bias
    def bias(self, x: torch.Tensor, batch_fold: int | None = None) -> torch.Tensor:
        """(1 - scale) * log floor + scale * log P_mix, dense (B, T, V)."""
        floor, p, scale = self._dense(x, batch_fold)
        return (1 - scale) * torch.log(floor) + scale * torch.log(p)

    @torch.compiler.disable
    def bias_parts(self, x: torch.Tensor, batch_fold: int):
        """The bias of a training batch as (log P_0 (V,), tokens (B, T, E), corrections (B, T, E)): log P_0 plus
        the corrections scattered at their tokens equals `bias` up to a per-position constant (log coef_0, which
        the softmax cancels). Always eager (one graph break in a compiled model): its integer hashing must match
        the eager counting bit for bit."""
        p0, c0, toks, values, scale = self.entries(x, self.tables_for(batch_fold))
        key = toks.to(torch.int16 if self.V <= 32767 else torch.int32)  # a narrow key sorts faster
        _, order = key.sort(-1)  # entries for the same token become neighbours ...
        toks, values = toks.gather(-1, order), values.gather(-1, order)
        total = values.cumsum(-1)
        E = toks.size(-1)
        first = torch.ones_like(toks, dtype=torch.bool)
        first[..., 1:] = toks[..., 1:] != toks[..., :-1]
        last = torch.ones_like(first)
        last[..., :-1] = first[..., 1:]
        start = torch.where(first, torch.arange(E, device=x.device), 0).cummax(-1).values
        run_sum = total - (total - values).gather(-1, start)  # ... summed within each run; complete at its end
        gain = torch.log1p(run_sum / (c0[..., None] * p0[toks]))  # log(P_mix / floor) at the token
        scale = scale[..., None] if scale.dim() else scale
        corrections = torch.where(last, scale * gain, torch.zeros_like(gain))
        return torch.log(p0), toks, corrections

    def add_to(self, logits: torch.Tensor, x: torch.Tensor, batch_fold: int | None = None, parts=None) -> torch.Tensor:
        """logits + bias. Training batches (of `batch_fold`) take the sparse form (`parts`: `bias_parts` computed
        already); evaluation (None) the dense form over the folds' average (exact, uncharged)."""
        if batch_fold is None:
            return logits + self.bias(x)
        log_p0, toks, corr = parts if parts is not None else self.bias_parts(x, batch_fold)
        return (logits + log_p0).scatter_add(-1, toks, corr)

    # ------------------------------------------------------------------ reporting
    def table_mib(self) -> float:
        return sum(b.numel() * b.element_size() for b in self.buffers()) / 2**20

    def summary(self) -> dict:
        """The tables at a glance: `contexts_in_use` per context length 1..K (buckets with counts, all folds);
        with check bits, `check_bits` and `fingerprint_dropped` per context length 2..K (counts refused because
        their context did not own its bucket, all folds); with a smoothing other than Witten-Bell, `smoothing` and
        its `discounts` (D1, D2, D3+) per fold and context length 1..K."""
        out = {
            "folds": self.F,
            "counted_tokens": int(self.counted.sum()),
            "table_mib": self.table_mib(),
            "mixture": [round(float(v), 5) for v in self.mixture().detach()],
            "scale": float(self.scale.detach()),
            "contexts_in_use": [int(((self.short_ctx & LOW) > 0).sum())]
            + [int(((self.ctx[:, h] & LOW) > 0).sum()) for h in range(self.K - 1)],
        }
        if self.mix_head is not None:
            out["mixer"] = self.cfg.mixer  # `mixture` and `scale` above are then the global parts of the mixing
        if self.cfg.check_bits:
            out["check_bits"] = self.cfg.check_bits
            out["fingerprint_dropped"] = self.dropped.sum(0).tolist()
        if self.cfg.smoothing != "witten-bell":
            out["smoothing"] = self.cfg.smoothing
            out["discounts"] = [[[round(float(v), 5) for v in d] for d in self.discounts(f)] for f in range(self.F)]
        return out


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


def _fold_chunks(batches, positions: int = 1 << 18):
    """The inputs of consecutive batches (x, y, fold) of one fold, concatenated into chunks of at most about
    `positions` positions: the same positions in fewer, larger calls (small batches made the per-call cost
    dominate)."""
    chunk, fold, size = [], None, 0
    for x, _, f in batches:
        if chunk and (f != fold or size + x.numel() > positions or x.shape[1] != chunk[0].shape[1]):
            yield torch.cat(chunk), fold
            chunk, size = [], 0
        chunk.append(x)
        fold, size = f, size + x.numel()
    if chunk:
        yield torch.cat(chunk), fold


@torch.no_grad()
def false_hit_rate(ngram: NGramMix, counted, val_tokens: np.ndarray, seq_len: int, batch_size: int = 16) -> dict:
    """How often the tables report seen a validation context of length 2..K that was never counted (a false hit).

    `counted`: the batches (x, y, fold) the tables were counted from, as `observe` took them (`shard_batches` for
    shard counting). The validation tokens are cut into the windows evaluation reads (`eval_windows`). For fold f
    and length k, a validation position is unseen when its context's 64-bit hash (`context_hashes`, the hash the
    buckets come from) is the hash of no context counted into fold f (exact up to collisions of that 64-bit hash);
    it is a false hit when fold f's tables report it seen nonetheless (`NGramMix.known`); the whole split's tables
(eval_counts "all") are a set of their own, counted from every batch. Summed over the table sets:
    `unseen` and `false_hits` (positions), `false_hit_rate` = false_hits / unseen over all lengths 2..K,
    `by_order` the same per length k = 2..K (None where nothing is unseen), and `miss_rate`: the share of the
    positions whose context was counted that read unseen (their counts were dropped by check bits)."""
    device, H = ngram.uni.device, ngram.K - 1
    sets = ngram.F + (ngram.ALL is not None)  # the whole split's tables (eval_counts "all") count every batch
    val_hashes, known = [[] for _ in range(H)], [[[] for _ in range(H)] for _ in range(sets)]
    for w in eval_windows(val_tokens, seq_len, batch_size):
        x = w.inputs.to(device)
        hashes, valid = context_hashes(x, ngram.K)
        valid = valid.expand_as(hashes)
        for f in range(sets):
            kn = ngram.known(x, f)
            for h in range(H):
                known[f][h].append(kn[h][valid[h]])
        for h in range(H):
            val_hashes[h].append(hashes[h][valid[h]])
    distinct, where = zip(*(torch.unique(torch.cat(v), return_inverse=True) for v in val_hashes)) if H else ((), ())
    counted_in = [torch.zeros(sets, len(d), dtype=torch.bool, device=device) for d in distinct]
    for x, f in _fold_chunks(counted):
        hashes, valid = context_hashes(x.to(device), ngram.K)
        # A context of length k occurs in validation only if its last k-1 tokens do: each length looks up only the
        # positions whose shorter context matched (the same hits, far fewer lookups at the long lengths).
        alive = valid[0].expand_as(hashes[0]).reshape(-1)
        for h in range(H):
            flat = hashes[h].reshape(-1)
            at = (alive & valid[h].expand_as(hashes[h]).reshape(-1)).nonzero().squeeze(1)
            if not len(distinct[h]) or not len(at):
                break
            hk = flat[at]
            i = torch.searchsorted(distinct[h], hk).clamp_max(len(distinct[h]) - 1)
            match = distinct[h][i] == hk
            hit = i[match]
            counted_in[h][f, hit] = True
            if ngram.ALL is not None:
                counted_in[h][ngram.ALL, hit] = True
            alive = torch.zeros_like(alive)
            alive[at[match]] = True
    unseen, false_hits, seen, missed = ([0] * H for _ in range(4))
    for h in range(H):
        for f in range(sets):
            was_counted, reads_seen = counted_in[h][f, where[h]], torch.cat(known[f][h])
            unseen[h] += int((~was_counted).sum())
            false_hits[h] += int((~was_counted & reads_seen).sum())
            seen[h] += int(was_counted.sum())
            missed[h] += int((was_counted & ~reads_seen).sum())
    return {
        "false_hit_rate": sum(false_hits) / sum(unseen) if sum(unseen) else None,
        "by_order": [fh / u if u else None for fh, u in zip(false_hits, unseen)],
        "unseen": sum(unseen),
        "false_hits": sum(false_hits),
        "miss_rate": sum(missed) / sum(seen) if sum(seen) else None,
    }


@torch.no_grad()
def explain_positions(model, x: torch.Tensor, y: torch.Tensor) -> dict:
    """Where the counts win and where the network wins, per position of one batch (x, y) of a network with an
    n-gram mix (`GPT` with `ngram`), as evaluation scores it (the folds' tables averaged, dense): `nats_mixed`, the
    model's -log p(y); `nats_network`, the same network's logits without the bias (softcapped); `gain_bits`, their
    difference in bits (positive: the counts helped); `context_length`, the mixture's expected context length
    sum_k k pi_k; `scale`, the bias scale; and `known`, how many of the lengths 2..K the tables report seen (all
    averaged over the folds' tables, each (B, T))."""
    ng = model.ngram
    z = model.network_logits(x)
    nll = lambda logits: F.cross_entropy(logits.flatten(0, 1), y.reshape(-1), reduction="none").view(y.shape)
    nats_network, nats_mixed = nll(z), nll(ng.add_to(z, x))
    lengths = torch.arange(ng.K + 1, dtype=torch.float32, device=x.device)
    context = scale = known = 0
    tables = ng.eval_tables()
    for f in tables:
        *_, s, pi = ng.entries(x, f, with_weights=True)
        pi = pi if pi.dim() > 1 else pi[:, None, None].expand(-1, *x.shape)
        context = context + (lengths[:, None, None] * pi).sum(0)
        scale = scale + (s if s.dim() else s.expand(x.shape))
        known = known + ng.known(x, f).sum(0).float()
    n = len(tables)
    return {"nats_mixed": nats_mixed, "nats_network": nats_network,
            "gain_bits": (nats_network - nats_mixed) / math.log(2), "context_length": context / n,
            "scale": scale / n, "known": known / n}


class NGramOnly(nn.Module):
    """The n-gram model alone (recipe `ngram-only`): logits = its bias, no network."""

    def __init__(self, cfg: NGramConfig, vocab: int):
        super().__init__()
        self.ngram = NGramMix(cfg, vocab)

    def logits(self, idx: torch.Tensor, fold: int | None = None) -> torch.Tensor:
        return self.ngram.bias(idx, fold)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor, reduction: str = "mean", fold: int | None = None):
        z = self.logits(idx, fold)
        loss = F.cross_entropy(z.view(-1, z.size(-1)), targets.reshape(-1), reduction=reduction)
        return loss.view(targets.shape) if reduction == "none" else loss

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

"""The count model at compressor grade: exact contexts, counts by document fold, escapes learned from evidence.

Contexts are exact. `context_ids` gives every position t of a token stream the id of each context x[t-k+1..t]
(k = 1..K+1, never reaching back past the position's document start): ids of length k come from one sort of
(id of length k-1, the token before it, position) per length, so two contexts share an id only when they are the
same tokens (no hashing, no buckets, nothing collides). The id of the length-(k+1) context ending at t+1 names the
pair (context of length k at t, next token x[t+1]), so one set of ids gives contexts and pairs alike.

`evidence` reads, for positions of interest, what a compressor reads at each context length k: N (the context's
occurrences with a next token), T (its distinct continuations) and C (how often the next token followed it), in two
parts: the static part, counted from the `counted` positions outside the position's own segment, and the adaptive
part, counted from the positions of its own segment before it (score-first: a position never sees its own next
token). A segment is a fold of training documents (the counts the mixer trains on come from the other folds, and
its own fold plays the stream being coded) or a held-out split (the static part is then the whole training split).

`EscapeChain` turns the evidence into P(next token): from the add-one unigram up, each context length k that has
been seen mixes its own estimate C/N with the shorter lengths' prediction,

    P_k(y) = (1 - e_k) * C_k(y) / N_k + e_k * P_{k-1}(y),    e_k = sigmoid(w_k . f_k + b_k),

where f_k is the context's evidence (log N and log T of each part, T/N, whether it is deterministic, whether the
coded stream has seen it) and the adaptive part's counts are weighed by a learned factor per length. The escape e_k
is PPM's escape probability learned from small context features, as PPMd's secondary escape estimation does, and
P_K is a distribution over the whole vocabulary for any parameters (each P_k is, by induction). The static score
uses the static part alone; the adaptive score both (a compressor's setting: every token is scored before it is
counted).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn

FEATURES = 8  # per context length: the evidence `EscapeChain` reads (`_features`)


def document_starts(x: np.ndarray, bos: int) -> np.ndarray:
    """For every position of a token stream, the position of its document's BOS (0 before the first)."""
    return np.maximum.accumulate(np.where(x == bos, np.arange(len(x)), 0))


UNIQUE, OUTSIDE = -2, -1  # context ids: a context seen once in the stream (no id needed); one reaching past its start


def context_ids(x: np.ndarray, starts: np.ndarray, levels: int, threads: int = 2) -> tuple[list[np.ndarray], list[int]]:
    """Exact context ids: `ids[k-1][t]` names the tokens x[t-k+1..t] for k = 1..levels, `UNIQUE` where they occur
    once in the stream (nobody else can read their counts), `OUTSIDE` where they would reach past the position's
    document start; `sizes[k-1]` is the number of ids of length k (contexts seen twice or more).

    Length 1 is the token itself. Length k sorts (id of length k-1 at t, x[t-k+1], t), packed in one int64, so that
    equal contexts become neighbours, and numbers the runs; a context seen once extends only to contexts seen once,
    so those positions are never sorted again (most long contexts are such). `threads`: the sort of a length runs in
    that many parts (contexts split by their shorter id), each on a thread of its own; the ids are the same for any
    number of threads in the partition they make, and their numbering depends only on `threads`."""
    x = np.asarray(x, dtype=np.int64)
    n = len(x)
    if n >= 2**31:
        raise ValueError(f"a stream of {n:,} tokens has more positions than int32 context ids can name")
    depth = np.arange(n, dtype=np.int64) - starts  # how far back a context can reach from each position
    ids, sizes = [x.astype(np.int32)], [int(x.max()) + 1 if n else 0]  # int32: half the memory traffic
    pbits, tbits = max(1, (n - 1).bit_length()), max(1, int(x.max()).bit_length() if n else 1)
    shared = np.arange(n, dtype=np.int64)  # the positions whose context of the last length has an id
    for k in range(2, levels + 1):
        prev = ids[-1]
        at = shared[depth[shared] >= k - 1]
        if max(1, sizes[-1].bit_length()) + tbits + pbits > 62:
            raise ValueError(f"a stream of {n:,} tokens is too long for one packed sort per context length")
        g = prev.copy()  # UNIQUE stays UNIQUE, OUTSIDE stays OUTSIDE ...
        g[np.flatnonzero(depth == k - 2)] = OUTSIDE  # ... and the positions whose reach ends here leave
        if threads > 1 and len(at) >= 1 << 16:
            odd = (prev[at] & 1).astype(bool)  # equal contexts share a part; NumPy's sort drops the GIL
            parts = [at[~odd], at[odd]] if threads == 2 else [at[prev[at] % threads == i] for i in range(threads)]
        else:
            parts = [at]
        with ThreadPoolExecutor(len(parts)) as pool:
            runs = list(pool.map(lambda a: _runs(prev, x, a, k, tbits, pbits), parts))
        offset, kept = 0, []
        for where, number in runs:
            g[where] = np.where(number < 0, UNIQUE, number + offset).astype(np.int32)
            kept.append(where[number >= 0])
            offset += int(number.max()) + 1 if len(number) and number.max() >= 0 else 0
        shared = np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64)
        ids.append(g)
        sizes.append(offset)
    return ids, sizes


def _runs(prev, x, at, k, tbits, pbits):
    """The positions `at` sorted by (context of length k-1, the token before it), and for each the number of its
    run among the runs seen twice or more (-1: a run of one)."""
    key = (prev[at].astype(np.int64) << (tbits + pbits)) | (x[at - (k - 1)] << pbits) | at
    key.sort()
    run = key >> pbits
    first = np.empty(len(run), dtype=bool)
    first[:1] = True
    np.not_equal(run[1:], run[:-1], out=first[1:])
    last = np.empty(len(run), dtype=bool)
    last[-1:] = True
    last[:-1] = first[1:]
    alone = first & last
    number = np.where(alone, -1, np.cumsum(first & ~alone) - 1)
    return key & ((1 << pbits) - 1), number


def _within(groups: np.ndarray, *weights: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """For items in stream order with group ids (>= 0), per weight array: the weights of earlier items of the same
    group summed (before), and of all items of the group (total). One sort of the groups serves every weight."""
    m = len(groups)
    if m == 0:
        return [(np.zeros(0), np.zeros(0)) for _ in weights]
    pbits = max(1, (m - 1).bit_length())
    key = (groups.astype(np.int64) << pbits) | np.arange(m, dtype=np.int64)
    key.sort()
    order = key & ((1 << pbits) - 1)
    g = key >> pbits
    first = np.empty(m, dtype=bool)
    first[:1] = True
    np.not_equal(g[1:], g[:-1], out=first[1:])
    start = np.maximum.accumulate(np.where(first, np.arange(m), 0))
    last = np.empty(m, dtype=bool)
    last[-1:] = True
    last[:-1] = first[1:]
    end = np.minimum.accumulate(np.where(last, np.arange(m), m - 1)[::-1])[::-1]
    out = []
    for weight in weights:
        w = weight[order].astype(np.float64)
        cs = np.cumsum(w)
        base = cs[start] - w[start]
        before, total = np.empty(m), np.empty(m)
        before[order], total[order] = cs - w - base, cs[end] - base
        out.append((before, total))
    return out


@dataclass
class Evidence:
    """What the count model reads at positions of interest, per context length 1..K ((K, m) arrays; the `s` part
    static, the `e` part adaptive) and for the unigram ((m,) arrays)."""

    Ns: np.ndarray
    Ts: np.ndarray
    Cs: np.ndarray
    Ne: np.ndarray
    Te: np.ndarray
    Ce: np.ndarray
    C0s: np.ndarray
    N0s: np.ndarray
    C0e: np.ndarray
    N0e: np.ndarray

    def tensors(self) -> dict[str, torch.Tensor]:
        return {k: torch.as_tensor(np.asarray(v), dtype=torch.float32) for k, v in vars(self).items()}


def evidence(x: np.ndarray, starts: np.ndarray, ids: list[np.ndarray], sizes: list[int], counted: np.ndarray,
             positions: np.ndarray, segment: np.ndarray, bos: int, vocab: int, K: int) -> Evidence:
    """The evidence at `positions` (each predicting x[t+1]; in stream order) for context lengths 1..K (`ids` has
    K+1 lengths). Static part: the pairs of `counted` positions outside the position's `segment` (one id per
    position of interest, >= 0); adaptive part: the pairs of the positions of interest in the same segment before
    it. A position whose next token is a BOS (a document's end) counts nothing and is still scored."""
    n = len(x)
    followed = np.zeros(n, dtype=bool)
    followed[:-1] = x[1:] != bos
    counted = counted & followed
    m = len(positions)
    seg = segment.astype(np.int64)
    own = counted[positions].astype(np.float64)  # the position's pair is in the static tables (a training fold)
    mine = followed[positions].astype(np.float64)  # ... and it is counted adaptively once scored
    y = x[positions + 1]
    out = {n_: np.zeros((K, m)) for n_ in ("Ns", "Ts", "Cs", "Ne", "Te", "Ce")}
    nseg = int(seg.max()) + 1 if m else 1
    for k in range(1, K + 1):
        g, g2 = ids[k - 1], ids[k]
        pair = np.full(n, OUTSIDE, dtype=np.int64)
        pair[:-1] = g2[1:]
        pair[~followed] = OUTSIDE
        ok = counted & (pair >= 0)
        N = np.bincount(g[counted & (g >= 0)], minlength=sizes[k - 1]).astype(np.float64)
        pc = np.bincount(pair[ok], minlength=sizes[k]).astype(np.float64)
        parent = np.full(sizes[k], -1, dtype=np.int64)
        parent[pair[ok]] = g[ok]
        T = np.bincount(parent[parent >= 0], minlength=sizes[k - 1]).astype(np.float64)
        T += np.bincount(g[counted & (pair == UNIQUE) & (g >= 0)], minlength=sizes[k - 1])  # continuations seen once
        gp, pp = g[positions].astype(np.int64), pair[positions]
        has_g, has_p = gp >= 0, pp >= 0
        # groups: (context or pair, segment); a position without one is a group of its own
        gg = np.where(has_g, gp * nseg + seg, -1 - np.arange(m))
        pg = np.where(has_p, pp * nseg + seg, -1 - np.arange(m))
        gg, pg = gg - gg.min(), pg - pg.min()
        (n_before, _), (_, n_static_own) = _within(gg, mine * has_g, own * has_g)
        (c_before, _), (_, c_static_own) = _within(pg, mine * has_p, own * has_p)
        pcp = np.where(has_p, pc[np.maximum(pp, 0)], 0.0)
        # continuations of the context found only in this segment (among the counted positions): subtracted from
        # the static T, and new types for the adaptive part at their first occurrence in the segment
        exclusive = (pp == UNIQUE) | (has_p & (pcp - c_static_own <= 0))
        first_here = exclusive & (c_before == 0) & (mine > 0) & has_g
        (_, t_static_own), (t_before, _) = _within(gg, (first_here & (own > 0)).astype(np.float64),
                                                   first_here.astype(np.float64))
        out["Ns"][k - 1] = np.where(has_g, N[np.maximum(gp, 0)] - n_static_own, 0)
        out["Ts"][k - 1] = np.where(has_g, T[np.maximum(gp, 0)] - t_static_own, 0)
        out["Cs"][k - 1] = np.where(has_p, pcp - c_static_own, 0)
        out["Ne"][k - 1] = np.where(has_g, n_before, 0)
        out["Te"][k - 1] = np.where(has_g, t_before, 0)
        out["Ce"][k - 1] = np.where(has_p, c_before, 0)
    c0 = np.bincount(x[1:][counted[:-1]], minlength=vocab).astype(np.float64)
    yg = y * nseg + seg
    (c0_before, _), (_, c0_own) = _within(yg, mine, own)
    (n0_before, _), (_, n0_own) = _within(seg, mine, own)
    return Evidence(C0s=c0[y] - c0_own, N0s=c0.sum() - n0_own, C0e=c0_before, N0e=n0_before, **out)


def _features(k_ns, k_ne, t, n, ts, te) -> torch.Tensor:
    return torch.stack([torch.log1p(k_ns), torch.log1p(k_ne), torch.log1p(t), t / n.clamp_min(1e-6),
                        (t == 1).float(), (k_ne > 0).float(), torch.log1p(ts), torch.log1p(te)], -1)


class EscapeChain(nn.Module):
    """P(next token) from the evidence of context lengths 1..K: learned escapes, from the unigram up (module
    docstring). `adaptive`: read the adaptive part too (False: the static part alone)."""

    def __init__(self, K: int, vocab: int):
        super().__init__()
        self.K, self.V = K, vocab
        self.w = nn.Parameter(torch.zeros(K, FEATURES))
        self.b = nn.Parameter(torch.zeros(K))
        self.recent = nn.Parameter(torch.zeros(K))  # log of the weight of an adaptive count against a static one

    def forward(self, ev: dict[str, torch.Tensor], adaptive: bool) -> torch.Tensor:
        a = 1.0 if adaptive else 0.0
        p = (ev["C0s"] + a * ev["C0e"] + 1) / (ev["N0s"] + a * ev["N0e"] + self.V)
        for k in range(self.K):
            r = a * torch.exp(self.recent[k])
            n = ev["Ns"][k] + r * ev["Ne"][k]
            c = ev["Cs"][k] + r * ev["Ce"][k]
            t = ev["Ts"][k] + a * ev["Te"][k]
            f = _features(ev["Ns"][k], a * ev["Ne"][k], t, n, ev["Ts"][k], a * ev["Te"][k])
            e = torch.sigmoid(f @ self.w[k] + self.b[k])
            p = torch.where(n > 0, (1 - e) * c / n.clamp_min(1e-6) + e * p, p)
        return p


def fit_chain(ev: dict[str, torch.Tensor], K: int, vocab: int, adaptive: bool, steps: int = 300,
              batch: int = 65536, lr: float = 0.05, seed: int = 0, weights: torch.Tensor | None = None) -> EscapeChain:
    """An `EscapeChain` fitted by Adam on the log loss of the positions in `ev` (`weights`: 1 where a position
    is scored, 0 where not)."""
    g = torch.Generator().manual_seed(seed)
    chain = EscapeChain(K, vocab)
    opt = torch.optim.Adam(chain.parameters(), lr=lr)
    m = ev["C0s"].numel()
    w = torch.ones(m) if weights is None else weights.float()
    for _ in range(steps):
        i = torch.randint(0, m, (min(batch, m),), generator=g)
        sub = {k: (v[:, i] if v.dim() == 2 else v[i]) for k, v in ev.items()}
        p = chain(sub, adaptive)
        loss = -(torch.log(p.clamp_min(1e-12)) * w[i]).sum() / w[i].sum().clamp_min(1)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return chain


def bits(p: torch.Tensor) -> float:
    return float(-torch.log2(p.double()).sum())


def nats_to_bpb(nats: float, nbytes: int) -> float:
    return nats / (math.log(2) * nbytes)

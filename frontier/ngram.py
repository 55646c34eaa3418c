"""An n-gram model counted from training tokens during the run, mixed into the logits as a learned bias.

What the tables hold (all bounded, allocated once; `table_mib()` reports their size):
- context length 0: unigram counts (add-one smoothed);
- context length 1: a dense V x V table of bigram counts, with each context's total N and type count T;
- context lengths 2..K (K = `max_order`, 16 by default): contexts hashed into `2**buckets_log2` buckets per
  length; each bucket keeps its total N, its type count T, and its `slots` most frequent continuations with
  their counts (a continuation enters when its count in a batch beats the bucket's smallest slot; mass that is
  not in a slot backs off to the shorter context).

Smoothing: interpolated Witten-Bell (PPM's escape method C). For a context c of length k seen N times with T
distinct continuations,
    P_k(w | c) = (count(c, w) + T * P_{k-1}(w | c')) / (N + T),
so a context seen once gives its continuation half of the mass and backs off with the other half; a context
never seen backs off entirely. Counts that are not in a slot join the back-off mass, so every P_k sums to 1.

The bias. For every position the bias is `scale * log P_mix`, where P_mix = sum_k pi_k P_k is a learned mixture
over context lengths 0..K (pi = softmax of K+1 learned logits) and `scale` is learned too. It is computed from
the tokens up to and including position t and from the tables only, over the whole vocabulary, and added to the
network's logits before the one softmax; training and evaluation take the same path. Because P_k = a_k P_{k-1}
+ s_k with s_k non-zero on at most `slots` tokens, P_mix is one dense term (the bigram row) plus a few scattered
entries per length: the bias costs a handful of passes over a (batch, seq, vocab) tensor, not one per order.

Counting never sees validation tokens: the trainer feeds `observe` the training batches (after the step that used
them, so a batch's own targets never reach its bias), or `count_tokens` the training shards.
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import NGramConfig

HASH_STEP = 1_000_003
HASH_MIX = -7046029254386353131  # 0x9E3779B97F4A7C15 as a signed 64-bit integer (wrapping multiplication)
CHUNK = 1 << 15  # tokens per call when counting shards


def _bucket(h: torch.Tensor, log2: int) -> torch.Tensor:
    return ((h * HASH_MIX) >> (64 - log2)) & ((1 << log2) - 1)


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


class NGramMix(nn.Module):
    def __init__(self, cfg: NGramConfig, vocab: int):
        super().__init__()
        self.cfg, self.V, self.K = cfg, vocab, cfg.max_order
        H, nb, S = cfg.max_order - 1, 1 << cfg.buckets_log2, cfg.slots
        self.register_buffer("uni", torch.zeros(vocab, dtype=torch.int64))
        self.register_buffer("big", torch.zeros(vocab, vocab, dtype=torch.int32))
        self.register_buffer("big_n", torch.zeros(vocab, dtype=torch.int64))
        self.register_buffer("big_t", torch.zeros(vocab, dtype=torch.int64))
        self.register_buffer("slot_tok", torch.full((H, nb, S), -1, dtype=torch.int32))
        self.register_buffer("slot_cnt", torch.zeros(H, nb, S, dtype=torch.int32))
        self.register_buffer("ctx_n", torch.zeros(H, nb, dtype=torch.int32))
        self.register_buffer("ctx_t", torch.zeros(H, nb, dtype=torch.int32))
        self.register_buffer("seen", torch.zeros(1 << cfg.seen_log2, dtype=torch.bool))
        self.register_buffer("counted", torch.zeros((), dtype=torch.int64))
        self.mix_logits = nn.Parameter(torch.zeros(cfg.max_order + 1))  # pi over context lengths 0..K
        self.scale = nn.Parameter(torch.tensor(1.0))

    # ------------------------------------------------------------------ counting
    @torch.no_grad()
    def observe(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Count every (context, next token) pair of a batch: contexts from `x`, next tokens `y` (= x shifted)."""
        V, cfg = self.V, self.cfg
        x, y = x.long(), y.long()
        self.counted += y.numel()
        self.uni += torch.bincount(y.flatten(), minlength=V)
        pairs, counts = torch.unique((x * V + y).flatten(), return_counts=True)
        before = self.big.view(-1)[pairs]
        self.big.view(-1).index_add_(0, pairs, counts.int())
        self.big_n.index_add_(0, pairs // V, counts)
        self.big_t.index_add_(0, (pairs // V)[before == 0], torch.ones_like(pairs[before == 0]))
        if self.K < 2:
            return
        hashes, valid = context_hashes(x, self.K)
        H, nb = self.K - 1, 1 << cfg.buckets_log2
        ob = torch.arange(H, device=x.device)[:, None, None] * nb + _bucket(hashes, cfg.buckets_log2)
        keep = valid.expand_as(ob)
        keys = ob[keep] * V + y.expand(H, -1, -1)[keep]
        keys, counts = torch.unique(keys, return_counts=True)
        kob, ktok = keys // V, keys % V
        self.ctx_n.view(-1).index_add_(0, kob, counts.int())
        seen_at = _bucket(keys, cfg.seen_log2)
        new = ~self.seen[seen_at]
        self.seen[seen_at] = True
        self.ctx_t.view(-1).index_add_(0, kob[new], torch.ones_like(kob[new], dtype=torch.int32))
        self._update_slots(kob, ktok, counts)

    def _update_slots(self, ob: torch.Tensor, tok: torch.Tensor, c: torch.Tensor) -> None:
        S, V = self.cfg.slots, self.V
        st, sc = self.slot_tok.view(-1, S), self.slot_cnt.view(-1, S)
        match = st[ob] == tok[:, None].int()
        found = match.any(1)
        flat = ob * S + match.int().argmax(1)
        sc.view(-1).index_add_(0, flat[found], c[found].int())
        ob, tok, c = ob[~found], tok[~found], c[~found]
        for _ in range(S):  # at most one new continuation per bucket per round
            if ob.numel() == 0:
                break
            score = c * V + (V - 1 - tok)  # the most frequent first; ties to the smaller token id
            buckets, inv = torch.unique(ob, return_inverse=True)
            best = torch.zeros(len(buckets), dtype=score.dtype, device=score.device)
            best = best.scatter_reduce(0, inv, score, "amax", include_self=False)
            win = score == best[inv]
            w_ob, w_tok, w_c = ob[win], tok[win], c[win]
            counts = sc[w_ob]
            j = counts.argmin(1)
            enter = w_c > counts.gather(1, j[:, None])[:, 0]  # beats the smallest slot (an empty slot is 0)
            where = w_ob[enter] * S + j[enter]
            st.view(-1)[where] = w_tok[enter].int()
            sc.view(-1)[where] = w_c[enter].int()
            ob, tok, c = ob[~win], tok[~win], c[~win]

    @torch.no_grad()
    def count_tokens(self, shards: list[np.ndarray], chunk: int = CHUNK) -> float:
        """Count whole token streams (the training shards), `chunk` tokens at a time; returns seconds taken.

        Contexts do not cross chunk boundaries (at most K-1 pairs lost per chunk).
        """
        t0 = time.perf_counter()
        device = self.uni.device
        for shard in shards:
            for i in range(0, len(shard) - 1, chunk):
                part = torch.from_numpy(np.asarray(shard[i : i + chunk + 1], dtype=np.int64)).to(device)
                if len(part) > 1:
                    self.observe(part[None, :-1], part[None, 1:])
        return time.perf_counter() - t0

    # ------------------------------------------------------------------ the distribution and the bias
    def mixture(self) -> torch.Tensor:
        return torch.softmax(self.mix_logits, 0)

    def distribution(self, x: torch.Tensor) -> torch.Tensor:
        """P_mix(next token | context) for every position of x: (B, T, V), rows sum to 1."""
        V, S, cfg = self.V, self.cfg.slots, self.cfg
        x = x.long()
        B, T = x.shape
        uni = self.uni.float()
        p0 = (uni + 1) / (uni.sum() + V)
        n1, t1 = self.big_n.float()[x], self.big_t.float()[x]
        rows = self.big[x].float()
        p1 = torch.where((n1 > 0)[..., None], (rows + t1[..., None] * p0) / (n1 + t1).clamp_min(1)[..., None], p0)
        pi = self.mixture()
        if self.K < 2:
            return pi[0] * p0 + pi[1] * p1
        hashes, valid = context_hashes(x, self.K)
        H, nb = self.K - 1, 1 << cfg.buckets_log2
        ob = torch.arange(H, device=x.device)[:, None, None] * nb + _bucket(hashes, cfg.buckets_log2)
        n = self.ctx_n.view(-1)[ob].float()
        t = self.ctx_t.view(-1)[ob].float()
        toks = self.slot_tok.view(-1, S)[ob].long()  # (H, B, T, S)
        cnts = self.slot_cnt.view(-1, S)[ob].float()
        known = valid & (n > 0)
        denom = (n + t).clamp_min(1)
        escape = torch.where(known, (t + n - cnts.sum(-1)) / denom, torch.ones_like(n))  # a_k
        share = torch.where(known[..., None], cnts / denom[..., None], torch.zeros_like(cnts))  # s_k on its slots
        # P_mix = pi_0 p0 + coef_1 p1 + sum_{k>=2} coef_k s_k, coef_k = pi_k + a_{k+1} coef_{k+1}, coef_K = pi_K
        coef = [None] * (self.K + 1)
        coef[self.K] = pi[self.K].expand(B, T)
        for k in range(self.K - 1, 0, -1):
            coef[k] = pi[k] + escape[k + 1 - 2] * coef[k + 1]
        p = pi[0] * p0 + coef[1][..., None] * p1
        sparse_vals = torch.stack([coef[k] for k in range(2, self.K + 1)])[..., None] * share  # (H, B, T, S)
        idx = toks.clamp_min(0).permute(1, 2, 0, 3).reshape(B, T, H * S)
        vals = sparse_vals.permute(1, 2, 0, 3).reshape(B, T, H * S)
        return p.scatter_add(-1, idx, vals)

    @torch.compiler.disable
    def bias(self, x: torch.Tensor) -> torch.Tensor:
        """scale * log P_mix. Always eager (one graph break in a compiled model): the hashing must match the
        eager counting bit for bit, and Inductor in torch 2.11 fails to compile it for CUDA."""
        return self.scale * torch.log(self.distribution(x))

    # ------------------------------------------------------------------ reporting
    def table_mib(self) -> float:
        return sum(b.numel() * b.element_size() for b in self.buffers()) / 2**20

    def summary(self) -> dict:
        return {
            "counted_tokens": int(self.counted),
            "table_mib": self.table_mib(),
            "mixture": [round(float(v), 5) for v in self.mixture().detach()],
            "scale": float(self.scale.detach()),
            "contexts_in_use": [int((self.ctx_n[h] > 0).sum()) for h in range(self.K - 1)],
        }


class NGramOnly(nn.Module):
    """The n-gram model alone (recipe `ngram-only`): logits = its bias, no network."""

    def __init__(self, cfg: NGramConfig, vocab: int):
        super().__init__()
        self.ngram = NGramMix(cfg, vocab)

    def logits(self, idx: torch.Tensor) -> torch.Tensor:
        return self.ngram.bias(idx)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
        z = self.logits(idx)
        loss = F.cross_entropy(z.view(-1, z.size(-1)), targets.reshape(-1), reduction=reduction)
        return loss.view(targets.shape) if reduction == "none" else loss

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

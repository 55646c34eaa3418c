"""The n-gram model as a module: `NGramMix` holds the tables of every fold, counts batches into them, turns them
into the mixture P_mix and the bias added to the network's logits (sparse for a training batch, dense for
evaluation); `NGramOnly` is the n-gram model alone (no network)."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ...config import NGramConfig
from ...errors import UserError
from .counting import _claim, _claim_np, _count_group, _count_group_torch, shard_batches
from .hashing import LOW, _bucket, _bucket_np, _fingerprint, _fingerprint_np, context_hashes, unpack_slots
from .smoothing import _discounted, _witten_bell, count_discounts

COUNT_FEATURES = 3  # per context length, what the "counts" mixer reads of a position's context


def count_features(n: torch.Tensor, t: torch.Tensor, known: torch.Tensor) -> torch.Tensor:
    """What the "counts" mixer reads of contexts with totals n and type counts t (any shape S): (S, 3), whether
    the context is known, log(1 + N) / 8, and T / (N + T), the Witten-Bell escape (how often it saw something new);
    zeros where it is not known."""
    k = known.float()
    return torch.stack([k, k * torch.log1p(n) / 8, k * t / (n + t).clamp_min(1)], -1)


class NGramMix(nn.Module):
    """`n_embd`: the width of the network's hidden state, which the "hidden" mixer reads (None: no network)."""

    def __init__(self, cfg: NGramConfig, vocab: int, n_embd: int | None = None):
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
        self.mix_head, self.reads_hidden = None, cfg.mixer == "hidden"
        if self.reads_hidden and n_embd is None:
            raise UserError("the n-gram mixer 'hidden' reads a network's hidden state, and this model has no network",
                            "use the mixer 'global' or 'counts' for the n-gram model alone")
        if cfg.mixer in ("counts", "hidden"):  # offsets of the K+1 mixture logits and of the scale, per position
            inputs = COUNT_FEATURES * cfg.max_order if cfg.mixer == "counts" else n_embd
            self.mix_head = nn.Linear(inputs, cfg.max_order + 2)
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
        """`observe` in torch, on any device: one `torch.unique` per table group, then `_update_slots` (what counts
        tables that live on an accelerator; on the CPU, `frontier bench-ngram` times it beside `_observe_np`)."""
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

    def entries(self, x: torch.Tensor, f: int, with_weights: bool = False, hidden: torch.Tensor | None = None):
        """P_mix from the tables of fold f, for every position of x, as (P_0 (V,), coef_0 (B, T), tokens
        (B, T, E), values (B, T, E), scale (0-d, or (B, T) with a per-position mixer)): P_mix(w) = coef_0 * P_0(w)
        + the values of the entries whose token is w; `scale` is the bias's. `with_weights`: also pi, the
        weights over context lengths 0..K, (K + 1,) or (K + 1, B, T). `hidden`: the network's last hidden state
        (B, T, n_embd), which the "hidden" mixer reads (the others ignore it)."""
        if self.reads_hidden and hidden is None:
            raise ValueError("the 'hidden' mixer needs the network's hidden state: pass hidden=model.hidden(x)")
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
            if self.cfg.mixer == "counts":
                feats.extend(count_features(n, t, valid & (n > 0)).unbind(0))
        pi, scale = self.mixture(), self.scale
        if self.mix_head is not None:  # per position: the global logits and scale plus the head's offsets
            offsets = self.mix_head(hidden if self.reads_hidden else torch.cat(feats, -1))  # (B, T, K + 2)
            pi = torch.softmax(self.mix_logits + offsets[..., :-1], -1).movedim(-1, 0)  # (K + 1, B, T)
            scale = self.scale + offsets[..., -1]
        coef = [None] * (self.K + 1)  # coef_k = pi_k + a_{k+1} coef_{k+1}; escapes[k-1] is a_k
        coef[self.K] = pi[self.K].expand(B, T)
        for k in range(self.K - 1, -1, -1):
            coef[k] = pi[k] + escapes[k] * coef[k + 1]
        values = torch.cat([coef[k + 1][..., None] * shares[k] for k in range(self.K)], -1)
        out = self.unigram(f), coef[0], torch.cat(toks, -1), values, scale
        return out + (pi,) if with_weights else out

    def floor_and_distribution(self, x: torch.Tensor, batch_fold: int | None = None,
                               hidden: torch.Tensor | None = None):
        """(floor, P_mix), dense (B, T, V): P_mix(next token | context) and its floor coef_0 * P_0 (the mass that
        backed off all the way to the unigram), as a training batch of `batch_fold` sees them, or (None) as
        evaluation does, averaged over the folds' tables. `hidden`: as `entries`."""
        return self._dense(x, batch_fold, hidden)[:2]

    def _dense(self, x: torch.Tensor, batch_fold: int | None = None, hidden: torch.Tensor | None = None):
        """(floor, P_mix, scale): `floor_and_distribution` and the bias scale (averaged over the folds' tables as
        the distributions are; (B, T, 1) with a per-position mixer)."""
        folds = self.eval_tables() if batch_fold is None else [self.tables_for(batch_fold)]
        floor = total = scale = 0
        for f in folds:
            p0, c0, toks, values, s = self.entries(x, f, hidden=hidden)
            fl = c0[..., None] * p0
            floor, total = floor + fl, total + fl.scatter_add(-1, toks, values)
            scale = scale + (s[..., None] if s.dim() else s)
        return floor / len(folds), total / len(folds), scale / len(folds)

    def distribution(self, x: torch.Tensor, batch_fold: int | None = None,
                     hidden: torch.Tensor | None = None) -> torch.Tensor:
        """P_mix(next token | context), dense (B, T, V); rows sum to 1."""
        return self.floor_and_distribution(x, batch_fold, hidden)[1]

    # ------------------------------------------------------------------ the bias
    def bias(self, x: torch.Tensor, batch_fold: int | None = None, hidden: torch.Tensor | None = None) -> torch.Tensor:
        """(1 - scale) * log floor + scale * log P_mix, dense (B, T, V)."""
        floor, p, scale = self._dense(x, batch_fold, hidden)
        return (1 - scale) * torch.log(floor) + scale * torch.log(p)

    @torch.compiler.disable
    def bias_parts(self, x: torch.Tensor, batch_fold: int, hidden: torch.Tensor | None = None):
        """The bias of a training batch as (log P_0 (V,), tokens (B, T, E), corrections (B, T, E)): log P_0 plus
        the corrections scattered at their tokens equals `bias` up to a per-position constant (log coef_0, which
        the softmax cancels). Always eager (one graph break in a compiled model): its integer hashing must match
        the eager counting bit for bit."""
        p0, c0, toks, values, scale = self.entries(x, self.tables_for(batch_fold), hidden=hidden)
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

    def add_to(self, logits: torch.Tensor, x: torch.Tensor, batch_fold: int | None = None, parts=None,
               hidden: torch.Tensor | None = None) -> torch.Tensor:
        """logits + bias. Training batches (of `batch_fold`) take the sparse form (`parts`: `bias_parts` computed
        already); evaluation (None) the dense form over the folds' average (exact, uncharged). `hidden`: as
        `entries`."""
        if batch_fold is None:
            return logits + self.bias(x, hidden=hidden)
        log_p0, toks, corr = parts if parts is not None else self.bias_parts(x, batch_fold, hidden)
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


class NGramOnly(nn.Module):
    """The n-gram model alone (recipe `ngram-only`): logits = its bias, no network."""

    def __init__(self, cfg: NGramConfig, vocab: int):
        super().__init__()
        self.ngram = NGramMix(cfg, vocab)

    def logits(self, idx: torch.Tensor, fold: int | None = None) -> torch.Tensor:
        return self.ngram.bias(idx, fold)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, reduction: str = "mean",
                fold: int | None = None):
        """As `GPT.forward`: the cross-entropy with `targets`, the logits without."""
        z = self.logits(idx, fold)
        if targets is None:
            return z
        loss = F.cross_entropy(z.view(-1, z.size(-1)), targets.reshape(-1), reduction=reduction)
        return loss.view(targets.shape) if reduction == "none" else loss

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

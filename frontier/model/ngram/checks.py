"""Checks of the n-gram tables' validity: how often they report seen a validation context never counted (false
hits, what check bits prevent), and where the counts win or lose against the network, position by position."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from ...data.loader import eval_windows
from .hashing import context_hashes
from .mix import NGramMix


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
    h = model.hidden(x) if ng.reads_hidden else None  # what the "hidden" mixer reads
    nll = lambda logits: F.cross_entropy(logits.flatten(0, 1), y.reshape(-1), reduction="none").view(y.shape)
    nats_network, nats_mixed = nll(z), nll(ng.add_to(z, x, hidden=h))
    lengths = torch.arange(ng.K + 1, dtype=torch.float32, device=x.device)
    context = scale = known = 0
    tables = ng.eval_tables()
    for f in tables:
        *_, s, pi = ng.entries(x, f, with_weights=True, hidden=h)
        pi = pi if pi.dim() > 1 else pi[:, None, None].expand(-1, *x.shape)
        context = context + (lengths[:, None, None] * pi).sum(0)
        scale = scale + (s if s.dim() else s.expand(x.shape))
        known = known + ng.known(x, f).sum(0).float()
    n = len(tables)
    return {"nats_mixed": nats_mixed, "nats_network": nats_network,
            "gain_bits": (nats_network - nats_mixed) / math.log(2), "context_length": context / n,
            "scale": scale / n, "known": known / n}

"""How each context length backs off to the next shorter one (`NGramConfig.smoothing`; the formulas are in the
package's docstring): Witten-Bell's escape and shares, interpolated absolute discounting's, and the discounts
(D1, D2, D3+) estimated from the tables' count-of-counts."""

from __future__ import annotations

import torch


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

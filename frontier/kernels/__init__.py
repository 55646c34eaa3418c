"""Which implementation runs each op, recorded in every run record.

Custom kernels (NKI on Trainium) plug in here as alternatives to the PyTorch reference of an op. The rule: a run
records the implementation that actually ran for every op, and nothing falls back silently. Today every op of
the model runs its PyTorch reference; the ops a recipe chooses between (the bigram table's update) say which.
"""

from __future__ import annotations

from ..config import RunConfig

REFERENCE = "reference"

# op -> what its reference is
OPS = {
    "rmsnorm": "torch.nn.functional.rms_norm",
    "rotary": "frontier.gpt.Rotary",
    "attention": "torch.nn.functional.scaled_dot_product_attention",
    "mlp": "frontier.gpt.MLP (relu^2)",
    "cross_entropy": "torch.nn.functional.cross_entropy",
    "newton_schulz": "frontier.muon.newton_schulz",
    "adamw": "torch.optim.AdamW",
}


def implementations(cfg: RunConfig, device=None) -> dict[str, str]:
    """op -> implementation that runs for `cfg` (what a run record stores)."""
    impl = {op: REFERENCE for op in OPS} if cfg.model.network else {}
    if cfg.model.network and device is not None and getattr(device, "fused_optimizer", False):
        impl["adamw"] = "reference (torch fused)"
    if cfg.model.network and cfg.train.compile_optimizer:
        impl["newton_schulz"] = f"{REFERENCE} (torch.compile)"
    if cfg.model.bigram is not None:
        impl["bigram_update"] = f"{cfg.model.bigram.update} ({'reference' if cfg.model.bigram.update == 'dense' else 'frontier.bigram.SparseRowAdam'})"
    if cfg.model.ngram is not None:
        impl["ngram_bias"] = REFERENCE
    return impl

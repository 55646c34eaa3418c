"""Everything that decides what is trained, as frozen dataclasses.

A run is fully described by a `RunConfig`: the model, the optimiser and the training loop. Profiles
(`frontier.profiles`) choose sizes, recipes (`frontier.recipes`) choose features, and `resolve` in
`frontier.recipes` combines the two. Nothing here is read from environment variables.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from .errors import UserError


@dataclass(frozen=True)
class BigramConfig:
    """Hashed bigram embedding: a table row per (previous token, current token) pair."""

    rows: int  # 2**19 in the write-up's final model
    signs: bool = True  # a random +-1 per (prev XOR cur) mod 8192 keeps colliding bigrams apart
    scale_init: float = 0.05  # learned scale on the table's output, added to the token embedding
    update: str = "sparse"  # "sparse": only touched rows do work; "dense": AdamW over the whole table
    lr: float = 0.05  # Adam learning rate of the table (before the schedule)


# The n-gram model's smoothings (formulas in docs/ngram.md): Witten-Bell (the default), interpolated absolute
# discounting with one discount per context length, and with three (D1, D2, D3+: modified Kneser-Ney's discounts,
# without its continuation-count lower orders, which the tables do not keep).
NGRAM_SMOOTHINGS = ("witten-bell", "absolute", "absolute-modified")
NGRAM_MIXERS = ("global", "counts", "hidden")


@dataclass(frozen=True)
class NGramConfig:
    """An n-gram model counted from training tokens during the run, mixed into the logits."""

    max_order: int = 16  # context orders 1..max_order (order n = the last n tokens)
    buckets_log2: int = 18  # hashed contexts per order for orders >= 3
    slots: int = 4  # continuations kept per hashed context of length >= 2 (the rest of its mass backs off)
    slots_short: int = 32  # continuations kept per context of length 1 (one per token, no hashing)
    counting: str = "stream"  # "stream": count batches as they pass (first epoch); "shards": count train shards first
    folds: int = 2  # cross-fitting: a training batch of fold f reads tables counted from the other folds only
    seen_log2: int = 24  # bits in the set of (context, token) pairs seen, for Witten-Bell's type counts
    mix_lr: float = 0.02  # Adam learning rate of the mixture weights
    check_bits: int = 0  # fingerprint bits per hashed context (0: none, a context in another's bucket reads its counts)
    eval_counts: str = "folds"  # evaluation reads: "folds", the average of the folds' distributions (each counted
    # from its share of the text); "all", tables counted from every training window (counted beside the folds')
    smoothing: str = "witten-bell"  # how each context length backs off to the next shorter one (`NGRAM_SMOOTHINGS`)
    mixer: str = "global"  # the weights over context lengths and the bias scale: "global", one learned set; "counts",
    # per position from the contexts' counts; "hidden", per position from the network's last hidden state
    # (`NGRAM_MIXERS`, `frontier.model.ngram`)

    def __post_init__(self):
        if self.smoothing not in NGRAM_SMOOTHINGS:
            raise UserError(f"unknown n-gram smoothing {self.smoothing!r}",
                            f"choose one of {', '.join(NGRAM_SMOOTHINGS)} (see frontier.model.ngram)")
        for name in ("max_order", "buckets_log2", "slots", "slots_short", "folds", "seen_log2"):
            v = getattr(self, name)
            if not (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
                raise UserError(f"n-gram {name} {v!r} is not a positive whole number",
                                f"pass a whole number >= 1 for {name} (see frontier.config.NGramConfig)")
        if self.mixer not in NGRAM_MIXERS:
            raise UserError(f"unknown n-gram mixer {self.mixer!r}",
                            f"choose one of {', '.join(NGRAM_MIXERS)} (see frontier.model.ngram)")
        if not (isinstance(self.check_bits, int) and 0 <= self.check_bits <= 31):
            raise UserError(f"n-gram check_bits {self.check_bits!r} is out of range",
                            "pass a whole number of fingerprint bits in [0, 31] (0: no check bits)")
        if self.eval_counts not in ("folds", "all"):
            raise UserError(f"n-gram eval_counts {self.eval_counts!r} is not a choice",
                            "pass 'folds' (the average of the folds' tables) or 'all' (tables of the whole split)")


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    n_layer: int
    n_embd: int
    n_head: int
    n_kv_head: int
    mlp_ratio: int = 4
    rope_base: float = 10_000.0
    logit_softcap: float = 15.0
    attn_gate: bool = False  # per-head sigmoid gate on the attention output
    network: bool = True  # False: no transformer at all (the n-gram model alone)
    bigram: BigramConfig | None = None
    ngram: NGramConfig | None = None

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


@dataclass(frozen=True)
class OptimConfig:
    """Muon for the matrices inside blocks, AdamW for embeddings, head and scalars; LR by elapsed fraction."""

    matrix_lr: float = 0.02
    embed_lr: float = 0.2
    head_lr: float = 0.004
    scalar_lr: float = 0.04
    adam_lr_scale_dim: int = 768  # Adam lrs are scaled by (n_embd / this) ** -0.5, as in nanochat
    adam_betas: tuple[float, float] = (0.8, 0.95)
    adam_eps: float = 1e-10
    weight_decay: float = 0.0
    muon_momentum: float = 0.95
    muon_momentum_start: float = 0.85
    muon_momentum_warmup_steps: int = 300
    # The warm-up as a share of the run instead (elapsed fraction: charged seconds / budget, or steps / --steps), so
    # that it means the same at any step rate; None: over `muon_momentum_warmup_steps` steps.
    muon_momentum_warmup_frac: float | None = None
    ns_steps: int = 5
    warmdown_frac: float = 0.5  # the last half of the budget decays linearly ...
    final_lr_frac: float = 0.0  # ... to this fraction of the peak


@dataclass(frozen=True)
class EMAConfig:
    """An exponential moving average of the weights (`frontier.train.ema`), its decay set by the elapsed fraction of the
    run (charged seconds / budget, or steps / max_steps), so that it means the same at any step rate.

    The shadow starts as a copy of the live weights at the first update at or after `start_frac`, and is updated
    every `every` steps; where the run advanced by d since the previous update, the old shadow keeps a weight of
    0.5 ** (d / half_life_frac). The weights evaluated are mix * EMA + (1 - mix) * live (1.0: the EMA alone).
    """

    start_frac: float
    half_life_frac: float
    every: int = 1
    mix: float = 1.0

    def __post_init__(self):
        checks = [
            (0.0 <= self.start_frac < 1.0, "start_frac", self.start_frac, "a fraction of the run in [0, 1)"),
            (self.half_life_frac > 0.0, "half_life_frac", self.half_life_frac, "a fraction of the run > 0"),
            (isinstance(self.every, int) and self.every >= 1, "every", self.every, "a whole number of steps >= 1"),
            (0.0 <= self.mix <= 1.0, "mix", self.mix, "a weight in [0, 1] (1: the EMA alone, 0: the live weights)"),
        ]
        for ok, name, value, want in checks:
            if not ok:
                raise UserError(f"EMA {name} {value!r} is out of range", f"pass {want}")


CLOCKS = ("wall", "reference", "steps")  # how a budget is charged (`TrainConfig.clock`)


@dataclass(frozen=True)
class TrainConfig:
    seq_len: int
    batch_size: int
    budget_s: float  # charged seconds of training
    uncharged_steps: int = 5  # the first steps (compilation, warm-up) are not charged ...
    startup_allowance_s: float = 900.0  # ... up to this many seconds
    compile: bool = False
    compile_optimizer: bool = False  # compile Muon's Newton-Schulz step too (one graph per matrix shape)
    eval_batch_size: int = 16
    bpb_convention: str = "nanochat"  # or "parameter-golf"
    log_every: int = 1
    ema: EMAConfig | None = None  # an average of the weights, evaluated beside the live ones (`frontier.train.ema`)
    kernels: str = "reference"  # what runs the fused ops (`frontier.kernels`): reference | interpreter | nki
    # How the budget is charged (`frontier.train.clock`): "wall", a second of wall time (the competition's clock);
    # "reference", a second of the reference machine, by timing the speed probe `probe` (`frontier.train.probes`)
    # against its reference time `probe_ref_s` (the profile's) during the run; "steps", the budget bought as a
    # number of steps before the run, at the recipe's step cost in reference seconds (`frontier.train.cost`,
    # measured against the same probe). The budget, the schedules and the step count follow.
    clock: str = "wall"
    probe: str | None = None
    probe_ref_s: float | None = None

    def __post_init__(self):
        if self.clock not in CLOCKS:
            raise UserError(f"unknown clock {self.clock!r}", f"choose one of {', '.join(CLOCKS)} (see "
                            "frontier.train.clock)")
        if self.clock != "wall" and not (self.probe and self.probe_ref_s and self.probe_ref_s > 0):
            raise UserError(f"the {self.clock} clock needs a speed probe and its reference time",
                            "pass probe= and probe_ref_s= > 0 (a profile's, see frontier.profiles), or clock='wall'")
        if self.clock == "wall" and (self.probe is not None or self.probe_ref_s is not None):
            raise UserError("the wall clock times no probe", "leave probe and probe_ref_s at None with clock='wall'")


@dataclass(frozen=True)
class RunConfig:
    recipe: str
    profile: str
    model: ModelConfig
    optim: OptimConfig
    train: TrainConfig

    def __post_init__(self):
        if self.train.compile and self.model.ngram is not None and self.model.ngram.mixer == "hidden":
            # Its bias (eager) sits between two compiled graphs, whose kernel-call tally the second one's counting
            # changes under the first one's saved backward (autograd refuses it).
            raise UserError("the n-gram mixer 'hidden' does not run in a compiled model",
                            "train it without compile (the recipes ngram-hidden and ngram-tables-hidden)")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunConfig":
        m = dict(d["model"])
        m["bigram"] = BigramConfig(**m["bigram"]) if m.get("bigram") else None
        m["ngram"] = NGramConfig(**m["ngram"]) if m.get("ngram") else None
        o = dict(d["optim"])
        o["adam_betas"] = tuple(o["adam_betas"])
        t = dict(d["train"])
        t["ema"] = EMAConfig(**t["ema"]) if t.get("ema") else None
        return cls(
            recipe=d["recipe"],
            profile=d["profile"],
            model=ModelConfig(**m),
            optim=OptimConfig(**o),
            train=TrainConfig(**t),
        )

    def digest(self) -> str:
        """A short hash of everything that decides what is trained. A field added after records existed is hashed
        only where it differs from its default (`LATER_FIELDS`): older records ran with the default behaviour, so
        they stay comparable."""
        d = self.to_dict()
        for path, fields in LATER_FIELDS.items():
            section = d
            for key in path.split("."):
                section = section.get(key) if isinstance(section, dict) else None
            if not isinstance(section, dict):  # a section the run does not have (no n-gram model)
                continue
            for name, default in fields.items():
                if section.get(name) == default:
                    section.pop(name)
        return stable_hash(d)


# Fields added after records existed, by section (a dotted path into `RunConfig.to_dict()`), with their defaults.
LATER_FIELDS = {"optim": {"muon_momentum_warmup_frac": None},
                "train": {"compile_optimizer": False, "ema": None, "kernels": "reference", "clock": "wall", "probe": None,
                          "probe_ref_s": None},
                "model.ngram": {"check_bits": 0, "eval_counts": "folds", "smoothing": "witten-bell",
                                "mixer": "global"}}


def field_value(text: str) -> int | float | str:
    """The value of a FIELD=VALUE setting on the command line (`frontier train --ngram`, `--optim`): a whole number
    where it reads as one, else a number, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def stable_hash(obj: Any, length: int = 16) -> str:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:length]

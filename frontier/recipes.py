"""Recipes: the write-up's steps as code. Each recipe is its parent plus one change.

`resolve(recipe, profile, vocab_size=...)` turns a recipe, a profile and the data's vocabulary into the `RunConfig`
a run records. `final` and `best` name the final recipe (chapter 07; what `make demo` trains).

The EMA recipe's settings are the `EMA_*` constants below (chosen by a sweep on the earlier corpus: docs/log.md). A sweep tries other
settings without editing code: `resolve(..., ema=EMAConfig(...))`, `frontier.study.experiments.run(..., ema=...)`, or
`frontier train --ema-start/--ema-half-life/--ema-every/--ema-mix`. They change the EMA of a recipe that has one;
a recipe without one refuses them (an EMA on another recipe is a recipe of its own: derive it here).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .config import CLOCKS, BigramConfig, EMAConfig, ModelConfig, NGramConfig, OptimConfig, RunConfig, TrainConfig
from .errors import UserError
from .profiles import Profile, get_profile

# The EMA recipe's weight average: a short one, updated every step and evaluated as 0.6 average + 0.4 live, beat the
# live weights at equal steps (docs/log.md; runs/cpu/sweeps/sweep-average-400-20261203-070854.json).
EMA_START_FRAC = 0.5
EMA_HALF_LIFE_FRAC = 0.05
EMA_EVERY = 1
EMA_MIX = 0.6


@dataclass(frozen=True)
class Features:
    """What a recipe switches on. Sizes come from the profile."""

    network: bool = True
    compile: bool = False
    compile_optimizer: bool = False
    attn_gate: bool = False
    bigram: bool = False
    bigram_update: str = "sparse"
    ngram: bool = False
    ngram_counting: str = "stream"
    ngram_max_order: int = 16  # the longest context the tables count, in tokens (`NGramConfig.max_order`)
    ngram_wider_log2: int = 0  # 2**this times the profile's buckets a context length (`NGramConfig.buckets_log2`)
    ngram_folds: int = 2
    ngram_check_bits: int = 0  # fingerprint bits per hashed n-gram context (0: none; `NGramConfig.check_bits`)
    ngram_eval_counts: str = "folds"  # what evaluation reads: the folds' average, or "all" (`NGramConfig.eval_counts`)
    ngram_smoothing: str = "witten-bell"  # `NGramConfig.smoothing`
    ngram_slots: int = 4  # `NGramConfig.slots`: continuations per hashed context
    ngram_slots_short: int = 32  # `NGramConfig.slots_short`: continuations per token (the vocabulary: a dense table)
    ngram_mixer: str = "global"  # `NGramConfig.mixer`
    ema: EMAConfig | None = None  # an average of the weights, evaluated beside the live ones


@dataclass(frozen=True)
class Recipe:
    name: str
    summary: str
    features: Features
    parent: str | None = None
    # A model size of the recipe's own, per profile (profile name -> Profile fields such as n_layer, n_embd,
    # n_head, n_kv_head): the size a sweep chose for it. A sweep's `resolve(..., sizes=)` goes over it. (The n-gram
    # tables' size is a feature, `Features.ngram_wider_log2`: a model size trades steps, in the ladder's rule.)
    sizes: dict = dataclasses.field(default_factory=dict)
    # Optimiser settings of the recipe's own (`OptimConfig` field -> value), over the defaults: what a sweep chose.
    optim: dict = dataclasses.field(default_factory=dict)

    def derive(self, name: str, summary: str, sizes: dict | None = None, optim: dict | None = None,
               **changes) -> "Recipe":
        """This recipe plus one change (`changes` to its features; `sizes`: a model size of its own, per profile,
        by default the parent's; `optim`: optimiser settings changed over the parent's)."""
        return Recipe(name, summary, dataclasses.replace(self.features, **changes), parent=self.name,
                      sizes=self.sizes if sizes is None else sizes, optim={**self.optim, **(optim or {})})


def sized_profile(r: Recipe, p: Profile, sizes: dict | None = None) -> Profile:
    """`p` with the recipe's own size for it (`Recipe.sizes`), then the caller's `sizes` (a sweep) over both."""
    both = {**r.sizes.get(p.name, {}), **(sizes or {})}
    return dataclasses.replace(p, **both) if both else p


BASELINE = Recipe(
    "baseline",
    "the competition baseline: RMSNorm, RoPE, QK-norm, ReLU^2, softcap; Muon + AdamW; eager",
    Features(),
)

COMPILE = BASELINE.derive(
    "compile", "torch.compile of the model (Inductor on CPU and CUDA, the neuron backend on native Neuron)", compile=True
)
COMPILE_OPT = COMPILE.derive("compile-opt", "torch.compile of the model and of Muon's Newton-Schulz step",
                             compile_optimizer=True)
BIGRAM = COMPILE.derive("bigram", "a hashed bigram embedding table, updated sparsely (only touched rows)", bigram=True)
BIGRAM_DENSE = BIGRAM.derive("bigram-dense", "the bigram table with the naive dense AdamW update (the slow path)",
                             bigram_update="dense")
NGRAM = BIGRAM.derive("ngram", "an n-gram model (contexts up to 16 tokens) counted from the train shards, cross-fitted, "
                      "mixed into the logits", ngram=True, ngram_counting="shards")
NGRAM_STREAM = NGRAM.derive("ngram-stream", "the n-gram mix counted from batches as they stream past (first epoch)",
                            ngram_counting="stream")
NGRAM_INSAMPLE = NGRAM.derive("ngram-insample", "the n-gram counts read in-sample (one fold): the leak cross-fitting "
                              "prevents", ngram_folds=1)
EMA = NGRAM.derive("ema", "an exponential moving average of the weights, its half-life a share of the run; "
                   "evaluated as 0.6 average + 0.4 live (the live weights and the average alone are scored too)",
                   ema=EMAConfig(EMA_START_FRAC, EMA_HALF_LIFE_FRAC, EMA_EVERY, EMA_MIX))
# The n-gram tables the n-gram model alone chose on the earlier corpus (`frontier ngram-orders`, runs/cpu/bench/ngram-orders-*): check bits (no
# false hits), modified absolute discounting, 256 continuations per token and 8 per hashed context.
NGRAM_TABLES_FEATURES = dict(ngram_check_bits=31, ngram_smoothing="absolute-modified", ngram_slots_short=256,
                             ngram_slots=8)
NGRAM_TABLES = NGRAM.derive("ngram-tables", "the n-gram mix with better tables: check bits, modified absolute "
                            "discounting, more continuations kept", **NGRAM_TABLES_FEATURES)
NGRAM_CTX = NGRAM_TABLES.derive("ngram-ctx", "the better tables, mixed per position: the weights over context "
                                "lengths and the bias scale from the contexts' counts", ngram_mixer="counts")
# The hidden-state mixer runs eager: its bias, computed between the network and the head, splits a compiled model
# into two graphs, which the kernels' call tally does not survive (`RunConfig` refuses it).
NGRAM_HIDDEN = NGRAM.derive("ngram-hidden", "the n-gram mix weighed per position by the network: the weights over "
                            "context lengths and the bias scale from its last hidden state (eager)",
                            ngram_mixer="hidden", compile=False)
NGRAM_TABLES_HIDDEN = NGRAM_TABLES.derive("ngram-tables-hidden", "the better tables, weighed per position by the "
                                          "network's last hidden state (eager)", ngram_mixer="hidden", compile=False)
GATE = EMA.derive("gate", "gated attention: a per-head gate 2*sigmoid(W x[:12]) on the attention output, W "
                  "zero-initialised (every gate 1 at the start), on top of `ema`", attn_gate=True)
# The size chapter 07's sweep chose for the n-gram recipe at the cpu profile: a smaller model's extra steps were worth
# more than its capacity (docs/log.md; runs/cpu/ngram-size-*).
NGRAM_SIZED_CPU = dict(n_layer=3, n_embd=128, n_head=2, n_kv_head=2)
NGRAM_SIZED = NGRAM.derive("ngram-sized", "the n-gram recipe at the size chapter 07 chose for a profile (cpu: "
                           "3 x 128 instead of 3 x 192)", sizes={"cpu": NGRAM_SIZED_CPU})
# The sized recipe tuned for the few hundred steps a cpu run takes: the bigram table's Adam rate 0.01 instead of 0.05,
# Muon's momentum warmed up over 0.75 of the run (so that a run of any length reaches the target momentum) instead of
# 300 steps (docs/log.md; runs/cpu/sweeps/sweep-bigram-lr-400-20261203-013822.json, runs/cpu/ngram-sized-*-400steps).
NGRAM_TUNED_CPU = dict(NGRAM_SIZED_CPU, bigram_lr=0.01)
NGRAM_TUNED = NGRAM_SIZED.derive("ngram-tuned", "the sized n-gram recipe tuned for a few hundred steps: the bigram "
                                 "table's rate 0.01 (cpu), Muon's momentum warm-up over 0.75 of the run",
                                 sizes={"cpu": NGRAM_TUNED_CPU}, optim={"muon_momentum_warmup_frac": 0.75})
# Muon's momentum warmed up from 0.85 to 0.95 over the whole run instead of its first 300 steps: +0.0019 val and test
# at 375 steps, p < 0.001 over 5 paired seeds (docs/log.md; runs/cpu/drivers/2026-12-05-schedule-375/).
NGRAM_MOMENTUM = NGRAM.derive("ngram-momentum", "the n-gram recipe with Muon's momentum warmed up over the whole run "
                              "(0.85 to 0.95) instead of its first 300 steps",
                              optim={"muon_momentum_warmup_frac": 1.0})
# The final's tables reaching further on the templated docstrings text: contexts up to 32 tokens, or four times the
# buckets a context length (docs/log.md; runs/cpu/drivers/2026-12-05-ngram-reach/).
NGRAM_LONG = NGRAM_MOMENTUM.derive("ngram-long", "ngram-momentum with n-gram tables counting contexts of up to 32 "
                                   "tokens instead of 16 (twice the table sets and the counting)", ngram_max_order=32)
NGRAM_WIDE = NGRAM_MOMENTUM.derive("ngram-wide", "ngram-momentum with four times the n-gram buckets a context length "
                                   "(cpu: 2^22 instead of 2^20; 5,313 MiB of tables)", ngram_wider_log2=2)
NGRAM_ONLY = Recipe("ngram-only", "the n-gram model alone, counted from the train shards (no network)",
                    Features(network=False, ngram=True, ngram_counting="shards"))
NGRAM_ONLY_TABLES = NGRAM_ONLY.derive("ngram-only-tables", "the n-gram model alone, with the better tables",
                                     **NGRAM_TABLES_FEATURES)
NGRAM_ONLY_CTX = NGRAM_ONLY_TABLES.derive("ngram-only-ctx", "the n-gram model alone, better tables, mixed per "
                                          "position from the counts", ngram_mixer="counts")

RECIPES: dict[str, Recipe] = {r.name: r for r in [BASELINE, COMPILE, COMPILE_OPT, BIGRAM, BIGRAM_DENSE, NGRAM, NGRAM_STREAM, NGRAM_INSAMPLE,
                                         NGRAM_ONLY, EMA, GATE, NGRAM_MOMENTUM, NGRAM_LONG, NGRAM_WIDE, NGRAM_SIZED, NGRAM_TUNED, NGRAM_TABLES, NGRAM_CTX, NGRAM_HIDDEN, NGRAM_TABLES_HIDDEN, NGRAM_ONLY_TABLES, NGRAM_ONLY_CTX]}
# The final recipe (chapter 07): the last rung of the ladder whose every part the rule keeps (frontier.study.compare:
# p < 0.01 over 5 paired seeds at equal steps); `final` and `best` are names for it (what `make demo` trains), its
# runs recorded under its own name. On the docstrings corpus the weight average (`ema`) is not shown: at equal steps
# its live weights score as well or better (docs/log.md, 4 and 5 December); the momentum warm-up over the whole run
# is kept (+0.0019, p < 0.001 at the same 375 steps; runs/cpu/drivers/2026-12-05-momentum-rung/), and so are its
# n-gram tables with four times the buckets (`ngram-wide`: at equal steps and at equal budget, docs/log.md;
# runs/cpu/drivers/2026-12-05-ngram-reach/, -ngram-reach-budget/, -wide-leave-one-out/).
FINAL = "ngram-wide"
BEST = FINAL
ALIASES = {"final": FINAL, "best": BEST}


def get_recipe(name: str) -> Recipe:
    name = ALIASES.get(name, name)
    try:
        return RECIPES[name]
    except KeyError:
        raise UserError(
            f"unknown recipe {name!r}", f"choose one of {', '.join(RECIPES)}, 'final' or 'best' (see `frontier recipes`)"
        ) from None


def resolve(recipe: str | Recipe, profile: str | Profile, budget_s: float | None = None,
            vocab_size: int | None = None, ema: EMAConfig | None = None, kernels: str = "reference",
            ngram: dict | None = None, sizes: dict | None = None, optim: dict | None = None,
            clock: str | None = None) -> RunConfig:
    """The full configuration of `recipe` at the scale of `profile` (optionally with another budget).

    `vocab_size` is the data's vocabulary, which the model takes; None means the profile's (the embedded corpus is
    prepared at it). A profile with `fixed_vocab` (trn2) refuses any other size with a one-line `UserError`.
    `ema` replaces the recipe's EMA settings (None: the recipe's own); a recipe without an EMA refuses it with a
    one-line `UserError`. `kernels` chooses the implementation of the fused ops (`frontier.kernels`; the command
    line's default is `nki` on a Neuron device, `reference` elsewhere). `ngram` changes fields of the recipe's
    `NGramConfig` (a sweep: `{"slots_short": 256}`); a recipe without an n-gram model, or a field it does not
    have, is a one-line `UserError`. `sizes` changes Profile fields (a size sweep: `{"n_layer": 4}`) over the
    profile's and the recipe's own size (`Recipe.sizes`). `optim` changes `OptimConfig` fields (a sweep:
    `{"matrix_lr": 0.04}`) over the recipe's own (`Recipe.optim`); an unknown field is a one-line `UserError`.
    `clock` chooses how the budget is charged, "wall", "reference" or "steps" (`frontier.train.clock`; None: the
    profile's); the reference clock and the steps rule need a profile that states its probe's reference time.
    """
    r = get_recipe(recipe) if isinstance(recipe, str) else recipe
    p = sized_profile(r, get_profile(profile), sizes)
    f = r.features
    if ema is not None and f.ema is None:
        with_ema = ", ".join(n for n, x in RECIPES.items() if x.features.ema is not None)
        raise UserError(f"recipe {r.name!r} has no EMA of the weights to set",
                        f"EMA settings (ema=, --ema-*) change the EMA of a recipe that has one: use {with_ema}")
    if ngram and not f.ngram:
        raise UserError(f"recipe {r.name!r} has no n-gram model to set",
                        f"n-gram settings change the n-gram model of a recipe that has one: use "
                        f"{', '.join(n for n, x in RECIPES.items() if x.features.ngram)}")
    if vocab_size is None:
        vocab_size = p.vocab_size
    elif p.fixed_vocab and vocab_size != p.vocab_size:
        raise UserError(
            f"profile {p.name!r} fixes the vocabulary at {p.vocab_size} (the competition's) but the data has a "
            f"{vocab_size}-token vocabulary",
            f"prepare the data with `frontier prepare --profile {p.name}` (--vocab-size {p.vocab_size}) "
            f"or pick another profile",
        )
    model = ModelConfig(
        vocab_size=vocab_size,
        n_layer=p.n_layer,
        n_embd=p.n_embd,
        n_head=p.n_head,
        n_kv_head=p.n_kv_head,
        attn_gate=f.attn_gate,
        network=f.network,
        bigram=BigramConfig(rows=p.bigram_rows, lr=p.bigram_lr, update=f.bigram_update) if f.bigram else None,
        ngram=(
            NGramConfig(max_order=f.ngram_max_order, buckets_log2=p.ngram_buckets_log2 + f.ngram_wider_log2,
                        seen_log2=p.ngram_seen_log2, counting=f.ngram_counting, folds=f.ngram_folds,
                        check_bits=f.ngram_check_bits, eval_counts=f.ngram_eval_counts,
                        smoothing=f.ngram_smoothing, slots=f.ngram_slots, slots_short=f.ngram_slots_short,
                        mixer=f.ngram_mixer)
            if f.ngram
            else None
        ),
    )
    if ngram:
        known = {fl.name for fl in dataclasses.fields(NGramConfig)}
        if set(ngram) - known:
            raise UserError(f"the n-gram model has no setting {', '.join(sorted(set(ngram) - known))}",
                            f"choose among {', '.join(sorted(known))}")
        model = dataclasses.replace(model, ngram=dataclasses.replace(model.ngram, **ngram))
    clock = clock or p.clock
    if clock not in CLOCKS:
        raise UserError(f"unknown clock {clock!r}", f"choose one of {', '.join(CLOCKS)} (see frontier.train.clock)")
    if clock != "wall" and not p.probe_ref_s:
        raise UserError(f"profile {p.name!r} states no reference probe time for the {clock} clock",
                        f"use clock='wall' (its default is {p.clock}), or pick smoke or cpu",
                        f"train {p.name!r} with --clock wall (its default is {p.clock}), or pick smoke or cpu")
    train = TrainConfig(
        seq_len=p.seq_len,
        batch_size=p.batch_size,
        budget_s=float(p.budget_s if budget_s is None else budget_s),
        uncharged_steps=p.uncharged_steps,
        startup_allowance_s=p.startup_allowance_s,
        compile=f.compile,
        compile_optimizer=f.compile_optimizer,
        eval_batch_size=p.eval_batch_size,
        log_every=p.log_every,
        ema=f.ema if ema is None else ema,
        kernels=kernels,
        clock=clock,
        probe=p.probe if clock != "wall" else None,
        probe_ref_s=p.probe_ref_s if clock != "wall" else None,
    )
    return RunConfig(recipe=r.name, profile=p.name, model=model, optim=optim_config({**r.optim, **(optim or {})}),
                     train=train)


def optim_config(changes: dict) -> OptimConfig:
    """`OptimConfig` with `changes` (field -> value) over its defaults; an unknown field is a one-line error."""
    known = {f.name for f in dataclasses.fields(OptimConfig)}
    if set(changes) - known:
        raise UserError(f"the optimiser has no setting {', '.join(sorted(set(changes) - known))}",
                        f"choose among {', '.join(sorted(known))} (frontier.config.OptimConfig)")
    if "adam_betas" in changes:
        changes = {**changes, "adam_betas": tuple(changes["adam_betas"])}
    return OptimConfig(**changes)


def ema_label(ema: EMAConfig) -> str:
    """A folder label for an EMA setting of a sweep: `ema-start0.5-hl0.1`, plus `-every4`, `-mix0.5` where those
    are not 1."""
    return (f"ema-start{ema.start_frac:g}-hl{ema.half_life_frac:g}" + (f"-every{ema.every}" if ema.every != 1 else "")
            + (f"-mix{ema.mix:g}" if ema.mix != 1.0 else ""))


def ngram_label(recipe: str, ngram: dict) -> str:
    """A folder label for an n-gram setting of a sweep: `ngram-only-max_order4-slots8`."""
    return recipe + "".join(f"-{k}{v}" for k, v in sorted(ngram.items()))


def settings_label(recipe: str, **settings: dict | None) -> str:
    """A folder label for a sweep's changes of several kinds: `final-optim.matrix_lr0.04-sizes.batch_size8`."""
    return recipe + "".join(f"-{kind}.{k}{v}" for kind, changes in sorted(settings.items())
                            for k, v in sorted((changes or {}).items()))


def variant_label(recipe: str, ema: EMAConfig | None = None, ngram: dict | None = None,
                  optim: dict | None = None) -> str | None:
    """The label of a variant of `recipe` (`frontier train --ema-*/--ngram/--optim`), naming each setting changed:
    `ema-start0.6-hl0.05`, `ngram-slots_short256`, `final-optim.matrix_lr0.04`; None for the recipe itself."""
    label = ema_label(ema) if ema is not None else None
    if ngram is not None:
        label = ngram_label(label or recipe, ngram)
    if optim is not None:
        label = settings_label(label or recipe, optim=optim)
    return label

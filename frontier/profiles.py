"""Profiles: how big everything is on a given machine. Recipes say what is trained; profiles say at what scale.

- `smoke`: seconds, for tests and CI.
- `cpu`: a real mini-competition on a 2-core laptop CPU (a few minutes a run); the committed notebooks show it.
- `gpu`: the competition baseline's size on one CUDA GPU.
- `trn2`: the competition itself: one Trn2 chip, 1,800 charged seconds, vocabulary 8,192, depth 10 (~60M parameters),
  trained data-parallel by 4 processes (one per logical NeuronCore; `nproc`) sharing each batch of 32.
- `trn2-dry`: the `trn2` profile at tiny shapes (depth 2, width 32, 4 x 32 tokens a step, a one-second wall-clock
  budget, 2 seeds): everything else is trn2's (the fixed vocabulary of 8,192, the wall clock, 4 processes), so that
  the book runs through trn2's code paths on a CPU (`tests/test_notebooks_trn2.py` runs every chapter at
  it on a stand-in Neuron device, on a small data folder prepared at 8,192; without `--data` it trains on the
  embedded corpus). Its numbers say that code runs, never what it finds.

A profile's `corpus` is the named corpus (`frontier.data.corpus.CORPORA`) it trains on without `--data`: the
docstrings corpus for `cpu`, `gpu` and `trn2` (8.0M training tokens at vocabulary 1,024, a test split; a `cpu` run
reads under a quarter of it, the write-up's regime: docs/corpus.md), the small embedded corpus for `smoke` (its runs
check that code runs, in seconds). Its `vocab_size` is the default vocabulary of `frontier prepare --profile NAME`
and the vocabulary that corpus is prepared at; with `--data` the model takes the data's vocabulary. Only a profile
with `fixed_vocab` (trn2: the competition fixes 8,192) refuses data of another vocabulary.

The clock (`frontier.train.clock`): `smoke` and `cpu` buy their budget as steps (the steps rule,
`frontier.train.cost`): budget / the recipe's step cost in reference seconds, from the committed cost table, which
was measured against the speed probe `gpt-step-1` (`frontier.train.probes`) at their shapes and its reference time
stated here; so a budget buys the same steps on any machine. `gpu` and `trn2` keep the competition's wall clock (its
hardware is fixed, and its records are wall-clock records). `frontier train --clock` chooses another.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .errors import UserError


@dataclass(frozen=True)
class Profile:
    name: str
    summary: str
    vocab_size: int
    n_layer: int
    n_embd: int
    n_head: int
    n_kv_head: int
    seq_len: int
    batch_size: int
    budget_s: float
    bigram_rows: int
    bigram_lr: float  # the table's Adam learning rate: lower where the data is read many times (cpu, smoke)
    ngram_buckets_log2: int
    ngram_seen_log2: int
    eval_batch_size: int
    seeds: int  # how many seeds the chapters, the ladder and the ablations train per recipe
    log_every: int = 1
    uncharged_steps: int = 5
    startup_allowance_s: float = 900.0
    fixed_vocab: bool = False  # the vocabulary is part of the setting reproduced: data of another size is refused
    nproc: int = 1  # data-parallel processes `frontier train` launches by default (frontier.train.distributed)
    corpus: str = "docstrings"  # the named corpus trained on without --data (`frontier.data.corpus.CORPORA`)
    corpus_bytes: int | None = None  # the named corpora cut to their first documents up to N bytes (smoke: tiny data)
    clock: str = "wall"  # how a budget is charged by default: "wall", "reference" or "steps" (`frontier.train.clock`)
    probe: str | None = None  # the speed probe of the reference clock (`frontier.train.probes`) ...
    probe_ref_s: float | None = None  # ... and its time on the reference machine at this profile's shapes (seconds)
    # its runs check that code runs, not what it finds (smoke, trn2-dry): the chapters take their short branches (a
    # few steps for an equal-steps comparison, benches at the profile's own tiny shapes)
    dry_run: bool = False


# The competition's setting (trn2); the gpu profile is the same run on one CUDA GPU, its vocabulary not fixed and
# one process.
COMPETITION = Profile(
    name="trn2",
    summary="the competition: one Trn2 chip, 1,800 charged seconds, the baseline's model (depth 10, ~60M)",
    vocab_size=8192,
    n_layer=10,
    n_embd=640,
    n_head=5,
    n_kv_head=5,
    seq_len=2048,
    batch_size=32,
    budget_s=1800.0,
    bigram_rows=2**19,
    bigram_lr=0.05,
    ngram_buckets_log2=20,
    ngram_seen_log2=28,
    eval_batch_size=32,
    seeds=3,
    log_every=10,
    fixed_vocab=True,
    nproc=4,  # one process per logical NeuronCore: a Trn2 chip shows 4 (8 physical cores, 2 each)
)

# The reference clock's machine is the one that timed these: gpt-step-1 at the smoke and cpu profiles' shapes, the
# median of 20 timings (`frontier clock-check --probe-only`; docs/log.md; its hardware in the records
# runs/bench/smoke/clock-check-probe-20261203-013837.json and runs/bench/cpu/clock-check-probe-20261203-013838.json).
SMOKE_PROBE_REF_S = 0.0080
CPU_PROBE_REF_S = 0.1472
# The cpu profile's n-gram tables until 2026-12-05, sized for the embedded corpus's 650k training tokens: on the
# docstrings split's 8.0M they report 99.8% of the unseen validation contexts as seen; 2^20 buckets and 2^28 seen bits
# gain 0.0377 val_bpb at equal steps (5 seeds; docs/log.md, runs/cpu/docstrings/ngram-buckets_log220-seen_log228-389steps).
# Records made before keep these sizes in their configs; `resolve(..., ngram=CPU_NGRAM_TABLES_BEFORE)` rebuilds them.
CPU_NGRAM_TABLES_BEFORE = {"buckets_log2": 18, "seen_log2": 24}

# The book's dry run: trn2's setting at shapes that run in seconds on a CPU (a stand-in Neuron device in the tests).
DRY_RUN = dataclasses.replace(
    COMPETITION, name="trn2-dry", summary="the trn2 profile at tiny shapes, seconds a run: the book's dry run of trn2's "
    "code paths (fixed vocabulary 8,192, wall clock), numbers that say nothing", n_layer=2, n_embd=32, n_head=2,
    n_kv_head=2, seq_len=32, batch_size=4, budget_s=1.0, bigram_rows=2**10, ngram_buckets_log2=10, ngram_seen_log2=12,
    eval_batch_size=4, seeds=2, log_every=1, uncharged_steps=2, corpus="embedded", dry_run=True)

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in [
        Profile(
            name="smoke",
            summary="seconds per run: a tiny model for tests and CI",
            vocab_size=512,
            n_layer=2,
            n_embd=64,
            n_head=2,
            n_kv_head=2,
            seq_len=64,
            batch_size=8,
            budget_s=1.0,  # about 100 steps a run: enough to run the chapters, short enough for the suite (docs/log.md)
            bigram_rows=2**12,
            bigram_lr=0.005,
            ngram_buckets_log2=12,
            ngram_seen_log2=16,
            eval_batch_size=16,
            seeds=2,
            uncharged_steps=2,
            corpus="embedded",  # small and quick to prepare: the suite's runs check that code runs, not what it finds
            corpus_bytes=400_000,  # a quarter of the embedded corpus: CI checks that the chapters run, not what they find
            clock="steps",
            probe="gpt-step-1",
            probe_ref_s=SMOKE_PROBE_REF_S,
            dry_run=True,
        ),
        Profile(
            name="cpu",
            summary="a few minutes per run on 2 CPU cores; the numbers the committed notebooks show",
            vocab_size=1024,
            n_layer=3,
            n_embd=192,
            n_head=3,
            n_kv_head=3,
            seq_len=256,
            batch_size=16,
            budget_s=180.0,
            bigram_rows=2**16,
            bigram_lr=0.005,
            ngram_buckets_log2=20,  # 1.7 GB of tables for `ngram` (CPU_NGRAM_TABLES_BEFORE: what it had)
            ngram_seen_log2=28,
            eval_batch_size=32,
            seeds=5,  # the rule keeps a learning change at p < 0.01 over at least 5 paired seeds
            log_every=5,
            clock="steps",
            probe="gpt-step-1",
            probe_ref_s=CPU_PROBE_REF_S,
        ),
        dataclasses.replace(COMPETITION, name="gpu", summary="one CUDA GPU: the competition baseline's model "
                            "(depth 10, width 640, ~60M parameters)", fixed_vocab=False, nproc=1),
        COMPETITION,
        DRY_RUN,
    ]
}


def get_profile(name: "str | Profile") -> Profile:
    """The profile of that name (a `Profile` is returned as it is, so callers may take either)."""
    if isinstance(name, Profile):
        return name
    try:
        return PROFILES[name]
    except KeyError:
        raise UserError(
            f"unknown profile {name!r}", f"choose one of {', '.join(PROFILES)} (see `frontier profiles`)"
        ) from None

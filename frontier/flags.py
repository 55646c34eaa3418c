"""The command lines' arguments (`frontier.cli`, `frontier.study.cli`): their types, one-line errors for bad ones,
and what `frontier train`'s flags choose over a recipe."""

from __future__ import annotations

import argparse
import dataclasses

from .errors import UserError


def positive_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not a number") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be positive (got {s}); pass a number of seconds > 0")
    return v


def positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not a whole number") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive (got {s})")
    return v


class Parser(argparse.ArgumentParser):
    """argparse with bad arguments reported on one line (`error: ...; see --help`), exit status 2."""

    def error(self, message: str):
        self.exit(2, f"error: {self.prog}: {message}; see `{self.prog} --help`\n")


EMA_FLAGS = {"ema_start": "start_frac", "ema_half_life": "half_life_frac", "ema_every": "every", "ema_mix": "mix"}


def ema_override(a, recipe):
    """The recipe's EMA with the --ema-* flags given applied (None without flags). The flags change the EMA of a
    recipe that has one; for any other recipe they are an error."""
    given = {field: getattr(a, flag) for flag, field in EMA_FLAGS.items() if getattr(a, flag) is not None}
    if not given:
        return None
    if recipe.features.ema is None:
        raise UserError(f"recipe {recipe.name!r} has no EMA of the weights for --ema-* to change",
                        "use a recipe with one (--recipe ema), or drop the --ema-* flags")
    return dataclasses.replace(recipe.features.ema, **given)


def field_changes(items: list[str] | None, flag: str, example: str) -> dict | None:
    """FIELD=VALUE flags (`--ngram`, `--optim`) as config field changes (numbers read as numbers); None without
    any."""
    if not items:
        return None
    from .config import field_value

    out = {}
    for item in items:
        field, eq, value = item.partition("=")
        if not eq or not field:
            raise UserError(f"{flag} {item!r} is not FIELD=VALUE", f"pass e.g. {flag} {example}")
        out[field] = field_value(value)
    return out


def train_settings(a):
    """What `frontier train`'s arguments `a` choose over the recipe: (recipe, profile, EMA, n-gram changes, optimiser
    changes)."""
    from .profiles import get_profile
    from .recipes import get_recipe

    recipe = get_recipe(a.recipe)
    return (recipe, get_profile(a.profile), ema_override(a, recipe),
            field_changes(a.ngram, "--ngram", "slots_short=256"), field_changes(a.optim, "--optim", "matrix_lr=0.04"))


def train_config(a, vocab_size: int, kernels: str):
    """The config `frontier train` trains for its parsed arguments `a` (a new run, not --resume), on data of
    `vocab_size` tokens, its fused ops run by `kernels`."""
    from .recipes import resolve

    recipe, profile, ema, ngram, optim = train_settings(a)
    return resolve(recipe, profile, budget_s=a.budget, vocab_size=vocab_size, ema=ema, kernels=kernels, ngram=ngram,
                   optim=optim, clock=a.clock)


def add_setting_flags(s) -> None:
    """`frontier train`'s flags that change a recipe's settings (read by `train_settings`): --ngram, --optim and the
    EMA's --ema-*."""
    s.add_argument("--ngram", action="append", metavar="FIELD=VALUE",
                   help="change a field of the recipe's n-gram model (frontier.config.NGramConfig), e.g. "
                        "--ngram slots_short=256 (repeatable; recorded in the run's config)")
    s.add_argument("--optim", action="append", metavar="FIELD=VALUE",
                   help="change an optimiser setting (frontier.config.OptimConfig), e.g. --optim matrix_lr=0.04 or "
                        "--optim muon_momentum_warmup_frac=0.2 (repeatable; recorded in the run's config)")
    e = s.add_argument_group("weight average (EMA)", "change the EMA of a recipe that has one (ema); any other recipe "
                             "refuses these. They are recorded in the config (and its hash); the run is labelled "
                             "like ema-start0.6-hl0.05. The half-life and start are shares of the run (charged "
                             "seconds / budget, or steps / --steps).")
    e.add_argument("--ema-start", type=float, metavar="FRAC",
                   help="the average starts as a copy of the live weights at the first update at or after this "
                        "share of the run, in [0, 1)")
    e.add_argument("--ema-half-life", type=float, metavar="FRAC", help="half-life of the average, a share of the run")
    e.add_argument("--ema-every", type=positive_int, metavar="N", help="update the average every N steps")
    e.add_argument("--ema-mix", type=float, metavar="W", help="evaluate W * EMA + (1 - W) * live weights, W in [0, 1]")


def resumed_run(a):
    """`frontier train --resume RUN_DIR`: (the run's record, its config), once no flag asks to change what the run
    continues (its recipe, profile, seed, steps or budget, folder, kernels, EMA, n-gram and optimiser settings, its
    clock)."""
    from .config import RunConfig
    from .records import load_record

    for flag, given in (("--recipe", a.recipe), ("--profile", a.profile), ("--seed", a.seed is not None),
                        ("--steps", a.steps), ("--budget", a.budget), ("--out", a.out), ("--kernels", a.kernels),
                        ("--ema-* flags", any(getattr(a, f) is not None for f in EMA_FLAGS)),
                        ("--ngram", a.ngram), ("--optim", a.optim)):
        if given:
            them = "them" if flag.endswith("flags") else "it"
            raise UserError(f"{flag} cannot change a run being resumed", f"drop {them}: --resume continues the run's "
                            "own config")
    rec = load_record(a.resume)
    resumed = RunConfig.from_dict(rec["config"])
    if a.clock and a.clock != resumed.train.clock:
        raise UserError(f"the run in {a.resume!r} ran under the {resumed.train.clock} clock, not --clock {a.clock}",
                        f"drop --clock (or pass --clock {resumed.train.clock}): --resume continues its own clock")
    return rec, resumed

"""The steps rule: a budget bought as a number of steps, decided before the run from what a step costs.

Under the steps rule (`TrainConfig.clock == "steps"`, the `smoke` and `cpu` profiles' default) a run of `budget_s`
reference seconds takes

    steps = floor((budget_s - fixed_s - count_s_per_token * counted_tokens) / step_s)

where `step_s` is what one step of the recipe costs in reference seconds (forward, backward, update, and whatever
else the step charges: streamed n-gram counting, the EMA's update), `fixed_s` what the run charges once (warm-up
beyond the start-up allowance) and `count_s_per_token` what counting the train shards costs a token (a recipe that
counts them up front: `counted_tokens` is the training split's size, so a bigger corpus charges more counting and
buys fewer steps). All three come from the committed cost table (`costs.json`
beside this file), built by `measure_cost` on one machine and normalised by the speed probe timed between the
steps (`frontier.train.probes`): a reference second is `probe_ref_s / probe_s` wall seconds of that machine. So the
same recipe, seed and budget train the same steps on any machine, at any thread count and under any load; a speed
change still buys steps, through its own entry. A config the table does not hold is measured on the spot, and its
record says so (`budget.source`): its steps are then this machine's.

An entry is found by `cost_key`: the config's fields that decide how long a step takes (the model, the batch, the
compile and kernel choices, the EMA's start and cadence, Muon's Newton-Schulz steps), not those that only change
what a step computes (learning rates, the EMA's half-life, the budget itself).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..config import RunConfig, stable_hash
from ..errors import UserError

TABLE = Path(__file__).with_name("costs.json")
ROUNDS = 3  # probe timings interleaved with the timed steps
STEPS_PER_ROUND = 8  # timed steps a round (after the warm-up steps, each at its own share of the run)

# Fields that change what a step computes but not how long it takes: left out of `cost_key`.
SPEED_NEUTRAL = {
    "": ("recipe", "profile"),
    "optim": ("matrix_lr", "embed_lr", "head_lr", "scalar_lr", "adam_lr_scale_dim", "adam_betas", "adam_eps",
              "weight_decay", "muon_momentum", "muon_momentum_start", "muon_momentum_warmup_steps",
              "muon_momentum_warmup_frac", "warmdown_frac", "final_lr_frac"),
    "model": ("rope_base", "logit_softcap"),
    "model.bigram": ("lr", "scale_init"),
    "model.ngram": ("mix_lr",),
    "train": ("budget_s", "eval_batch_size", "bpb_convention", "log_every", "clock"),
    "train.ema": ("half_life_frac", "mix"),
}


def cost_key(cfg: RunConfig) -> str:
    """A hash of what decides a step's cost (`SPEED_NEUTRAL` lists what does not)."""
    d = cfg.to_dict()
    for path, names in SPEED_NEUTRAL.items():
        section = d
        for key in filter(None, path.split(".")):
            section = section.get(key) if isinstance(section, dict) else None
        if isinstance(section, dict):
            for name in names:
                section.pop(name, None)
    return stable_hash(d)


@dataclass(frozen=True)
class StepCost:
    """What a recipe's step costs, in reference seconds, and where that was measured."""

    key: str
    recipe: str
    profile: str
    step_s: float  # reference seconds a step
    fixed_s: float  # reference seconds charged once a run (warm-up beyond the start-up allowance)
    record: str | None = None  # the bench record it was read from (runs/bench/...), None when measured on the spot
    count_s_per_token: float = 0.0  # reference seconds a token of the train shards costs to count (0: no counting)

    def once_s(self, counted_tokens: int = 0) -> float:
        """What a run charges once, counting `counted_tokens` tokens of train shards."""
        return self.fixed_s + self.count_s_per_token * counted_tokens

    def steps_for(self, budget_s: float, counted_tokens: int = 0) -> int:
        """The steps `budget_s` reference seconds buy (at least one), after counting `counted_tokens` tokens."""
        return max(1, math.floor((budget_s - self.once_s(counted_tokens)) / self.step_s))


def counted_tokens(cfg: RunConfig, dataset) -> int:
    """The tokens a run of `cfg` counts up front: the whole training split where its n-gram model counts the train
    shards, else none (streamed counting is part of the step)."""
    ngram = cfg.model.ngram
    return int(dataset.manifest["train"]["tokens"]) if ngram is not None and ngram.counting == "shards" else 0


def load_table(path: Path = TABLE) -> dict[str, StepCost]:
    """The committed cost table: `cost_key` -> `StepCost`."""
    if not path.is_file():
        return {}
    entries = json.loads(path.read_text(encoding="utf-8"))["entries"]
    return {key: StepCost(key=key, **entry) for key, entry in entries.items()}


def write_table(costs: list[StepCost], path: Path = TABLE) -> None:
    """Write the cost table (sorted by profile and recipe), keeping the entries of configs not in `costs`."""
    table = {**load_table(path), **{c.key: c for c in costs}}
    entries = {c.key: {k: v for k, v in asdict(c).items() if k != "key"}
               for c in sorted(table.values(), key=lambda c: (c.profile, c.recipe, c.key))}
    about = ("What a step of each recipe costs in reference seconds (frontier.train.cost): written by "
             "`frontier bench --costs --write-table`, each entry naming the bench record it was read from.")
    path.write_text(json.dumps({"about": about, "entries": entries}, indent=1) + "\n", encoding="utf-8")


def measure_cost(cfg: RunConfig, dataset, device, probe_timer=None, rounds: int = ROUNDS,
                 steps_per_round: int = STEPS_PER_ROUND, log=print) -> tuple[StepCost, dict]:
    """Measure `cfg`'s step cost here: its warm-up steps, then `rounds` rounds of (a probe timing, then
    `steps_per_round` steps), the steps of round r at shares (i * rounds + r) / (rounds * steps_per_round) of the
    run, so each round sees the schedule's whole range (the EMA starts part-way). A step's cost is the round's mean
    step over its probe time, times the probe's reference time; the median over the rounds is taken. Returns the
    cost and the measurement (every timing) for a bench record."""
    from ..profiles import get_profile
    from .clock import PROBE_REPEATS
    from .probes import ProbeShapes, time_probe
    from .step import setup_training, train_step

    if not (cfg.train.probe and cfg.train.probe_ref_s):
        raise UserError(f"{cfg.recipe!r} / {cfg.profile!r} names no speed probe to measure its step cost against",
                        "use a profile with a probe (smoke, cpu), or clock='wall'")
    timer = probe_timer or time_probe
    shapes = ProbeShapes.of(get_profile(cfg.profile))
    t = setup_training(cfg, dataset, device, seed=0)
    counting_s, n_counted = 0.0, counted_tokens(cfg, dataset)
    if n_counted:
        counting_s = t.ngram.count_tokens(dataset.train_tokens(), cfg.train.seq_len)

    def step(frac: float, n: int) -> float:
        t0 = time.perf_counter()
        train_step(t.step_model, t.opts, t.loader, device, frac, n, t.ngram, t.ema)
        return time.perf_counter() - t0

    warmup = [step(0.0, n) for n in range(cfg.train.uncharged_steps)]
    n_total, done, timed = rounds * steps_per_round, len(warmup), []
    for r in range(rounds):
        probe_s = timer(cfg.train.probe, shapes, PROBE_REPEATS)["probe_s"]
        steps_s = [step((i * rounds + r) / n_total, done + r * steps_per_round + i) for i in range(steps_per_round)]
        timed.append({"probe_s": probe_s, "steps_s": steps_s, "ratio": statistics.mean(steps_s) / probe_s})
    ref = cfg.train.probe_ref_s
    scale = ref / statistics.median(r["probe_s"] for r in timed)  # reference seconds per wall second here
    warm_excess = max(sum(warmup) - cfg.train.startup_allowance_s, 0.0)
    cost = StepCost(key=cost_key(cfg), recipe=cfg.recipe, profile=cfg.profile,
                    step_s=statistics.median(r["ratio"] for r in timed) * ref,
                    fixed_s=warm_excess * scale,
                    count_s_per_token=counting_s * scale / n_counted if n_counted else 0.0)
    counting = (f", counting {n_counted:,} tokens {counting_s * scale:.2f} s ({n_counted / counting_s:,.0f} tokens/s here)"
                if n_counted else "")
    log(f"cost of {cfg.recipe} / {cfg.profile}: {cost.step_s * 1e3:.2f} reference ms a step, {cost.fixed_s:.2f} s "
        f"once{counting} ({rounds} rounds of {steps_per_round} steps, probe {statistics.median(r['probe_s'] for r in timed) * 1e3:.1f} "
        f"ms here against {ref * 1e3:.1f} ms reference)")
    measured = {"warmup_s": warmup, "counting_s": counting_s, "counted_tokens": n_counted, "rounds": timed, "threads": torch.get_num_threads(),
                "probe": cfg.train.probe, "probe_ref_s": ref}
    return cost, measured


def cost_for(cfg: RunConfig, dataset, device, table: dict[str, StepCost] | None = None, measure: bool = True,
             probe_timer=None, log=print) -> tuple[StepCost | None, str]:
    """`cfg`'s step cost and where it came from: "table" (the committed table, or `table` where given), or
    "measured here" (`measure_cost`, when the table lacks it and `measure`); (None, "none") otherwise."""
    table = load_table() if table is None else table
    key = cost_key(cfg)
    if key in table:
        return table[key], "table"
    if not measure:
        return None, "none"
    log(f"no committed cost for {cfg.recipe} / {cfg.profile} (key {key}): measuring it on this machine")
    return measure_cost(cfg, dataset, device, probe_timer=probe_timer, log=log)[0], "measured here"

"""The budget clock, charged the way the competition charged it.

Only training steps are timed. The first `uncharged_steps` steps (compilation, warm-up) are free up to the
start-up allowance; whatever they take beyond it is charged. Evaluation and checkpointing are never timed. Work
inside the budget that is not a step (counting the n-gram tables from the train shards) is charged through
`add_charged`. The run stops once the charged seconds (steps and other work together) reach the budget: at the
first step that reaches it, so less than that step's charged seconds past it (unless work outside the steps
reached it before any step). With `max_steps` it stops after that many steps instead. `wall_s` (charged + uncharged) is the
laptop's view, in which everything counts.

Three rules (`TrainConfig.clock`). Under the wall clock (the competition's, trn2's and gpu's) a charged second is a
second of wall time. Under the reference clock (smoke's and cpu's) a speed probe (`frontier.train.probes`) is timed
before the first step and again at every `PROBE_EVERY` of the run (uncharged), and each charged wall second counts
`scale` = reference probe time / probe time now reference seconds: on a machine, or in an hour, where the probe
takes twice as long, a step is charged half as much, so the budget buys about the same steps everywhere.
`charged_s` (what the budget stops on, and the schedules' elapsed fraction) is then in reference seconds, and
`charged_wall_s` keeps the wall seconds of the same work; under the wall clock the two are equal.

The steps rule (`TrainConfig.clock == "steps"`, smoke's and cpu's default; `frontier.train.cost`) decides the steps
before the run: `max_steps` is what the budget buys at the recipe's step cost, every step is charged that cost
(`step_cost_s`, reference seconds) whatever it took here, and what the run charges once is charged at the start
(`charge_fixed`). No probe is timed during the run; the wall seconds are kept as under the other clocks.

Throughput is the steps' own: `tokens_per_s` divides the tokens of the charged steps by the charged seconds of
those steps only, never by the charged seconds of other work. A warm-up step that the allowance covers in part
counts as the charged share of a step (its charged seconds over its seconds), so it enters the throughput at its
own rate.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field

PROBE_EVERY = 0.125  # the probe is timed again each time the run's elapsed fraction passes a multiple of this
PROBE_REPEATS = 3  # timed runs of the probe per timing (after one untimed), their median taken
# The probe's noise, measured (`frontier clock-check --probe-only`, records named in `frontier.profiles`): 20 single
# runs of it in one process on the reference machine had a standard deviation of 10.5% (smoke) and 11.9% (cpu) of
# their median, and a range (slowest - fastest) of 43% and 49%. A timing is the median of `PROBE_REPEATS` runs.
# A run's drift compares the median of the later half of its timings (about 9: the start, each eighth, the end) with
# that of the earlier half (`BudgetClock.probe_summary`): one noisy timing cannot set it, as it sets the range
# (slowest / fastest - 1), which reached 14-42% in runs of 60 and 180 s on the quiet reference machine
# (runs/bench/cpu/clock-check-*-20261203-0141*.json, -015529.json), whose halves differed by at most 11%. A run
# whose drift is larger than this is flagged `drifted`: beyond that noise, its machine changed speed as it trained.
DRIFT_LIMIT = 0.15
# How far apart two runs' median probe times may be by chance (relative; a run's median over its ~9 timings): runs
# whose probe ratios (`frontier.study.compare`) differ by more ran on machines, or in hours, of different speed.
PROBE_NOISE = 0.10


@dataclass
class BudgetClock:
    budget_s: float
    uncharged_steps: int
    allowance_s: float
    charged_s: float = 0.0  # all charged seconds: charged_step_s + charged_other_s; the budget stops on it
    uncharged_s: float = 0.0
    steps: int = 0
    charged_steps: float = 0.0  # charged steps, a partly charged step counting as its charged share
    first_step_s: float = 0.0
    max_steps: int | None = None  # --steps N: stop after N steps whatever the clock says
    recent_steps_s: list = field(default_factory=list)  # the last few step times, for a typical step
    charged_step_s: float | None = None  # charged seconds of steps (None only while loading an old state)
    charged_other_s: float = 0.0  # charged seconds of work that is not a step (`add_charged`)
    max_charged_step_s: float = 0.0  # the most charged seconds of any one step
    scale: float = 1.0  # charged seconds per charged wall second: reference probe time / probe time now (1: wall)
    charged_wall_s: float | None = None  # wall seconds of the charged work (None only while loading an old state)
    charged_step_wall_s: float | None = None  # wall seconds of the charged steps (likewise)
    probes: list = field(default_factory=list)  # every probe timing of the run (reference clock), in order
    step_cost_s: float | None = None  # the steps rule: every step is charged this (reference seconds), whatever it took

    def __post_init__(self):
        # A state saved before `charged_step_s` existed: take all its charged seconds as step seconds.
        if self.charged_step_s is None:
            self.charged_step_s = self.charged_s - self.charged_other_s
        # A state saved before the reference clock existed ran on the wall clock: its charged seconds are wall seconds.
        if self.charged_wall_s is None:
            self.charged_wall_s = self.charged_s
        if self.charged_step_wall_s is None:
            self.charged_step_wall_s = self.charged_step_s

    def add_step(self, seconds: float) -> None:
        if self.steps == 0:
            self.first_step_s = seconds
        elif self.steps >= self.uncharged_steps:
            self.recent_steps_s = (self.recent_steps_s + [seconds])[-64:]
        if self.step_cost_s is not None:  # the steps rule: the cost decided before the run, the wall time kept
            wall, share, charged = seconds, 1.0, self.step_cost_s
        elif self.steps < self.uncharged_steps:
            free = min(seconds, max(self.allowance_s - self.uncharged_s, 0.0))  # the allowance is wall seconds
            self.uncharged_s += free
            wall = seconds - free
            share = wall / seconds if wall > 0 else 0.0
            charged = wall * self.scale
        else:
            wall, share = seconds, 1.0
            charged = wall * self.scale
        self.charged_wall_s += wall
        self.charged_step_wall_s += wall
        self.charged_s += charged
        self.charged_step_s += charged
        self.charged_steps += share
        self.max_charged_step_s = max(self.max_charged_step_s, charged)
        self.steps += 1

    def add_charged(self, seconds: float) -> None:
        """Work inside the budget that is not a step (e.g. counting n-grams from the train shards): it counts
        towards the budget (`charged_s`) and is kept in `charged_other_s`, out of the steps' throughput. `seconds`
        are wall seconds, charged at the clock's `scale` like a step's."""
        self.charged_wall_s += seconds
        if self.step_cost_s is not None:  # the steps rule charged it before the run (`charge_fixed`)
            return
        self.charged_s += seconds * self.scale
        self.charged_other_s += seconds * self.scale

    def charge_fixed(self, seconds: float) -> None:
        """The steps rule: what a run charges once (`frontier.train.cost.StepCost.fixed_s`), charged at the start."""
        self.charged_s += seconds
        self.charged_other_s += seconds

    @property
    def fraction(self) -> float:
        """Elapsed share of the run: steps / max_steps with --steps, else charged seconds / budget."""
        if self.max_steps:
            return self.steps / self.max_steps
        return self.charged_s / self.budget_s

    @property
    def done(self) -> bool:
        return self.fraction >= 1.0

    @property
    def step_s_median(self) -> float | None:
        """A typical step after warm-up (the median of the last 64)."""
        return statistics.median(self.recent_steps_s) if self.recent_steps_s else None

    @property
    def compile_s(self) -> float | None:
        """What the first step cost beyond a typical one: the compile (and other one-time set-up)."""
        typical = self.step_s_median
        return None if typical is None else max(self.first_step_s - typical, 0.0)

    def tokens_per_s(self, tokens_per_step: int) -> float:
        """Tokens of the charged steps per charged second of those steps: charged_steps * tokens_per_step /
        charged_step_s (a partly charged step counts as its charged share; seconds of `add_charged` work are not
        in it). 0 before any charged step."""
        return self.charged_steps * tokens_per_step / self.charged_step_s if self.charged_step_s else 0.0

    def tokens_per_wall_s(self, tokens_per_step: int) -> float:
        """As `tokens_per_s`, per wall second of the charged steps: this machine's own throughput (equal to
        `tokens_per_s` under the wall clock)."""
        return self.charged_steps * tokens_per_step / self.charged_step_wall_s if self.charged_step_wall_s else 0.0

    @property
    def wall_s(self) -> float:
        """Wall seconds of the steps and the charged work: charged (as wall seconds) + uncharged."""
        return self.charged_wall_s + self.uncharged_s

    def add_probe(self, timing: dict, ref_s: float) -> None:
        """A probe timing (`frontier.train.probes.time_probe`): kept, with where in the run it was taken, and from
        now on each charged wall second counts `ref_s / probe_s` reference seconds."""
        self.scale = ref_s / timing["probe_s"]
        self.probes.append({**timing, "step": self.steps, "charged_s": self.charged_s,
                            "charged_wall_s": self.charged_wall_s, "scale": self.scale})

    def probe_due(self) -> bool:
        """Whether the run has passed a multiple of `PROBE_EVERY` of its elapsed fraction since the last probe
        timing (never after the run is done: the closing timing is the trainer's)."""
        if not self.probes or self.done:
            return not self.probes
        last = self.probes[-1]
        frac_then = (last["step"] / self.max_steps if self.max_steps else last["charged_s"] / self.budget_s)
        return math.floor(self.fraction / PROBE_EVERY) > math.floor(frac_then / PROBE_EVERY)

    def probe_summary(self) -> dict:
        """How the probe timings moved over the run: `drift`, the median of the later half of the timings over the
        median of the earlier half, minus 1 (+0.2: the probe ran 20% slower in the second half; a middle timing of
        an odd count is in neither; None with fewer than 2), `drifted` when its size is over `DRIFT_LIMIT`; and
        `range`, slowest / fastest - 1, which a single noisy timing sets."""
        times = [p["probe_s"] for p in self.probes]
        half = len(times) // 2
        drift = (statistics.median(times[-half:]) / statistics.median(times[:half]) - 1.0) if half else None
        return {"timings": len(times), "probe_s_median": statistics.median(times) if times else None,
                "drift": drift, "drift_limit": DRIFT_LIMIT, "drifted": drift is not None and abs(drift) > DRIFT_LIMIT,
                "range": max(times) / min(times) - 1.0 if times else None}

    def state_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict) -> "BudgetClock":
        return cls(**state)

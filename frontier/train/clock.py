"""The budget clock, charged the way the competition charged it.

Only training steps are timed. The first `uncharged_steps` steps (compilation, warm-up) are free up to the
start-up allowance; whatever they take beyond it is charged. Evaluation and checkpointing are never timed. Work
inside the budget that is not a step (counting the n-gram tables from the train shards) is charged through
`add_charged`. The run stops once the charged seconds (steps and other work together) reach the budget: at the
first step that reaches it, so less than that step's charged seconds past it (unless work outside the steps
reached it before any step). With `max_steps` it stops after that many steps instead. `wall_s` (charged + uncharged) is the
laptop's view, in which everything counts.

Throughput is the steps' own: `tokens_per_s` divides the tokens of the charged steps by the charged seconds of
those steps only, never by the charged seconds of other work. A warm-up step that the allowance covers in part
counts as the charged share of a step (its charged seconds over its seconds), so it enters the throughput at its
own rate.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field


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

    def __post_init__(self):
        # A state saved before `charged_step_s` existed: take all its charged seconds as step seconds.
        if self.charged_step_s is None:
            self.charged_step_s = self.charged_s - self.charged_other_s

    def add_step(self, seconds: float) -> None:
        if self.steps == 0:
            self.first_step_s = seconds
        elif self.steps >= self.uncharged_steps:
            self.recent_steps_s = (self.recent_steps_s + [seconds])[-64:]
        if self.steps < self.uncharged_steps:
            free = min(seconds, max(self.allowance_s - self.uncharged_s, 0.0))
            self.uncharged_s += free
            charged = seconds - free
            share = charged / seconds if charged > 0 else 0.0
        else:
            charged, share = seconds, 1.0
        self.charged_s += charged
        self.charged_step_s += charged
        self.charged_steps += share
        self.max_charged_step_s = max(self.max_charged_step_s, charged)
        self.steps += 1

    def add_charged(self, seconds: float) -> None:
        """Work inside the budget that is not a step (e.g. counting n-grams from the train shards): it counts
        towards the budget (`charged_s`) and is kept in `charged_other_s`, out of the steps' throughput."""
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

    @property
    def wall_s(self) -> float:
        return self.charged_s + self.uncharged_s

    def state_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict) -> "BudgetClock":
        return cls(**state)

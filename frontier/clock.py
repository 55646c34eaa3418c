"""The budget clock, charged the way the competition charged it.

Only training steps are timed. The first `uncharged_steps` steps (compilation, warm-up) are free up to the
start-up allowance; whatever they take beyond it is charged. Evaluation and checkpointing are never timed. The
run stops once the charged seconds reach the budget. `wall_s` (charged + uncharged) is the laptop's view, in
which everything counts.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field


@dataclass
class BudgetClock:
    budget_s: float
    uncharged_steps: int
    allowance_s: float
    charged_s: float = 0.0
    uncharged_s: float = 0.0
    steps: int = 0
    charged_steps: int = 0
    first_step_s: float = 0.0
    max_steps: int | None = None  # --steps N: stop after N steps whatever the clock says
    recent_steps_s: list = field(default_factory=list)  # the last few step times, for a typical step

    def add_step(self, seconds: float) -> None:
        if self.steps == 0:
            self.first_step_s = seconds
        elif self.steps >= self.uncharged_steps:
            self.recent_steps_s = (self.recent_steps_s + [seconds])[-64:]
        if self.steps < self.uncharged_steps:
            free = min(seconds, max(self.allowance_s - self.uncharged_s, 0.0))
            self.uncharged_s += free
            self.charged_s += seconds - free
            self.charged_steps += int(seconds - free > 0)
        else:
            self.charged_s += seconds
            self.charged_steps += 1
        self.steps += 1

    def add_charged(self, seconds: float) -> None:
        """Work inside the budget that is not a step (e.g. counting n-grams from the train shards)."""
        self.charged_s += seconds

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
        """Tokens of charged steps per charged second (0 before any charged step)."""
        return self.charged_steps * tokens_per_step / self.charged_s if self.charged_s else 0.0

    @property
    def wall_s(self) -> float:
        return self.charged_s + self.uncharged_s

    def state_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict) -> "BudgetClock":
        return cls(**state)

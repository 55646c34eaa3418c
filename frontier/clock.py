"""The budget clock, charged the way the competition charged it.

Only training steps are timed. The first `uncharged_steps` steps (compilation, warm-up) are free up to the
start-up allowance; whatever they take beyond it is charged. Evaluation and checkpointing are never timed. The
run stops once the charged seconds reach the budget. `wall_s` (charged + uncharged) is the laptop's view, in
which everything counts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


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

    def add_step(self, seconds: float) -> None:
        if self.steps == 0:
            self.first_step_s = seconds
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
    def wall_s(self) -> float:
        return self.charged_s + self.uncharged_s

    def state_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict) -> "BudgetClock":
        return cls(**state)

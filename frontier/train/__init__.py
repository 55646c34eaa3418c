"""Training and scoring a run under a budget.

`trainer` (train a recipe, leave a run folder; resume; evaluate a run), `clock` (the budget, charged as the
competition charged it, in wall or reference seconds), `probes` (the speed probes the reference clock times: plain
torch, never the package's model or kernels), `compile` (torch.compile and recompile detection), `distributed` (data parallelism under
torchrun), `ema` (an exponential moving average of the weights), `bpb` (bits per byte on the validation split).

May import: the run's vocabulary, `frontier.data`, `frontier.model`, `frontier.optim` and `frontier.kernels`.
Never the study tools.
"""

import sys
import types


class _Package(types.ModuleType):
    """`frontier.train` is both this package and the public `train` function (`frontier/__init__.py` exports it
    under the same name): once the package is imported, `from frontier import train` finds the package, so calling
    it calls `frontier.train.trainer.train`."""

    def __call__(self, *args, **kwargs):
        from .trainer import train

        return train(*args, **kwargs)


sys.modules[__name__].__class__ = _Package

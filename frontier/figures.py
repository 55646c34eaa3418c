"""The figures' helpers live in `frontier.study.figures`. This name stays only while the trainer draws its run's loss
curve (`frontier.train.trainer`) and the chapters import the helpers from here."""

from .study.figures import loss_curve_figure, new_figure, save_figure

__all__ = ["loss_curve_figure", "new_figure", "save_figure"]

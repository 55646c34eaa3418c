"""Figures, saved one way: PNG without the software stamp, so re-running a chapter does not churn bytes.

Figures are plain `matplotlib.figure.Figure` objects (no pyplot state, no GUI backend): the CLI saves them,
and a notebook displays them by ending a cell with the figure.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure


def new_figure(width: float = 6.4, height: float = 3.8, ncols: int = 1):
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, ncols)
    return fig, axes


def save_figure(fig, path: str | Path, dpi: int = 110) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, metadata={"Software": None})
    return path


def loss_curve_figure(recs: list[dict], x: str = "charged_s", smooth: int = 1, ax=None, label_by: str = "run"):
    """Training loss against charged seconds (or steps) for one or more run records."""
    if ax is None:
        fig, ax = new_figure()
    else:
        fig = ax.figure
    for rec in recs:
        curve = rec["curve"]
        xs, ys = curve[x], curve["train_loss"]
        if smooth > 1 and len(ys) > smooth:
            import numpy as np

            ys = np.convolve(ys, np.ones(smooth) / smooth, mode="valid")
            xs = xs[smooth - 1 :]
        label = f"{rec['recipe']} s{rec['seed']}" if label_by == "run" else rec[label_by]
        ax.plot(xs, ys, lw=1, label=label)
    ax.set_xlabel("charged seconds" if x == "charged_s" else x)
    ax.set_ylabel("train loss (nats/token)")
    ax.grid(alpha=0.3)
    if len(recs) <= 12:
        ax.legend(fontsize=8)
    return fig

"""Figures, saved one way and shown one way.

Figures are plain `matplotlib.figure.Figure` objects (no pyplot state, no GUI backend). `save_figure` writes a
PNG without the software stamp, so re-running a chapter does not churn bytes. A bare `Figure` has no IPython
formatter of its own (a notebook would print `<Figure size 640x380 with 1 Axes>`), so importing this module
inside IPython registers one: a cell that ends with a figure displays it as an `image/png` output, the same
pixels `save_figure` writes. Outside IPython nothing is registered.
"""

from __future__ import annotations

import io
from pathlib import Path

from matplotlib.figure import Figure

DPI = 110


def new_figure(width: float = 6.4, height: float = 3.8, ncols: int = 1):
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, ncols)
    return fig, axes


def save_figure(fig, path: str | Path, dpi: int = DPI) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, metadata={"Software": None})
    return path


def figure_png(fig: Figure, dpi: int = DPI) -> bytes:
    """The figure as PNG bytes, as `save_figure` writes it."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue()


def register_notebook_display() -> bool:
    """Make IPython display a `Figure` as an image (True when running inside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    shell.display_formatter.formatters["image/png"].for_type(Figure, figure_png)
    return True


register_notebook_display()


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

"""Figures, saved one way and shown one way.

Figures are plain `matplotlib.figure.Figure` objects (no pyplot state, no GUI backend). `save_figure` writes a
PNG without the software stamp, so re-running a chapter does not churn bytes, and refuses a figure whose title,
labels, tick labels or legend run past its canvas (`texts_outside`): a cut-off title is what a reader would see.
It also refuses bars that mislead (`bars_that_mislead`): a bar's length is read as its value, so bars stand on a
linear axis whose limits include zero (bars on a log axis, or on an axis cut just below the data, make a small
ratio look large); values that need a log axis are drawn as dots or lines. A bare `Figure` has no IPython
formatter of its own (a notebook would print `<Figure size 640x380 with 1 Axes>`), so importing this module
inside IPython registers one: a cell that ends with a figure displays it as an `image/png` output, the same
pixels `save_figure` writes. Outside IPython nothing is registered.
"""

from __future__ import annotations

import io
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

from ..errors import UserError

DPI = 110


def new_figure(width: float = 6.4, height: float = 3.8, ncols: int = 1, width_ratios=None):
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, ncols, width_ratios=width_ratios)
    return fig, axes


def texts_outside(fig: Figure, tolerance_px: float = 1.0) -> list[str]:
    """The drawn texts of `fig` (titles, axis and tick labels, legend entries, annotations) that do not lie wholly
    inside its canvas, as laid out for a PNG (tick labels only where their tick is inside the axis's limits: the
    others are never drawn)."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()  # the layout a PNG gets (constrained layout included)
    renderer = canvas.get_renderer()
    tick_labels, drawn = set(), []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                labels = (tick.label1, tick.label2)
                tick_labels.update(map(id, labels))
                if lo - 1e-9 * (hi - lo) <= tick.get_loc() <= hi + 1e-9 * (hi - lo):
                    drawn += [label for label in labels if label.get_visible()]
    drawn += [t for t in fig.findobj(Text) if id(t) not in tick_labels and t.get_visible()]
    x0, y0, x1, y1 = fig.bbox.extents
    out = []
    for text in drawn:
        if not text.get_text().strip():
            continue
        e = text.get_window_extent(renderer)
        if e.x0 < x0 - tolerance_px or e.y0 < y0 - tolerance_px or e.x1 > x1 + tolerance_px or e.y1 > y1 + tolerance_px:
            out.append(text.get_text())
    return out


def bars_that_mislead(fig: Figure) -> list[str]:
    """One line per axes of `fig` whose bars a reader would misread: bars on a log value axis (there is no zero to
    stand on, so a bar's length depends on where the axis is cut), or bars on a linear value axis whose limits do
    not include zero (the cut base magnifies the differences)."""
    from matplotlib.container import BarContainer

    out = []
    for i, ax in enumerate(fig.axes):
        bars = [c for c in ax.containers if isinstance(c, BarContainer)]
        if not bars:
            continue
        name = repr(ax.get_title()) if ax.get_title() else f"axes {i}"
        for orientation, axis in (("vertical", ax.yaxis), ("horizontal", ax.xaxis)):
            if not any(getattr(c, "orientation", "vertical") == orientation for c in bars):
                continue
            which = "y" if axis is ax.yaxis else "x"
            if axis.get_scale() != "linear":
                out.append(f"{name}: bars on a {axis.get_scale()} {which} axis")
                continue
            lo, hi = sorted(axis.get_view_interval())
            if lo > 0 or hi < 0:
                out.append(f"{name}: bars on a {which} axis from {lo:.4g} to {hi:.4g}, which leaves out zero")
    return out


def save_figure(fig, path: str | Path, dpi: int = DPI) -> Path:
    """Write `fig` as a PNG (no software stamp); refuse one with a text past its canvas, naming the text, or with
    bars that mislead (on a log axis, or on an axis that leaves out zero), naming the axes."""
    cut = texts_outside(fig)
    if cut:
        raise UserError(f"figure {Path(path).name}: {len(cut)} text(s) run past the canvas ({cut[0]!r})",
                        "shorten the text, break it over lines, or make the figure wider")
    bad = bars_that_mislead(fig)
    if bad:
        raise UserError(f"figure {Path(path).name}: {bad[0]}, so a bar's length misstates its value",
                        "draw bars on a linear axis from zero, or draw the values as dots or lines (a log axis is "
                        "fine for those, with the ratio said in the title)")
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

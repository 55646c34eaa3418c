"""Figures: saved without churn, and never with a title or a tick label cut off at the canvas's edge."""

import pytest

from frontier.errors import UserError
from frontier.study.figures import bars_that_mislead, new_figure, save_figure, texts_outside


def test_a_figure_that_fits_is_saved(tmp_path):
    fig, ax = new_figure()
    ax.plot([1, 2, 3], [3, 1, 2])
    ax.set_title("a short title")
    ax.set_xlabel("step")
    assert texts_outside(fig) == []
    assert save_figure(fig, tmp_path / "ok.png").stat().st_size > 0


def test_a_title_past_the_canvas_is_refused_and_named(tmp_path):
    fig, ax = new_figure(width=3.0)
    ax.plot([1, 2], [1, 2])
    title = "val_bpb per recipe, mean ± std over three seeds, paired by seed, at equal steps and at equal budget"
    ax.set_title(title)
    assert title in texts_outside(fig)
    with pytest.raises(UserError, match="run past the canvas"):
        save_figure(fig, tmp_path / "cut.png")
    assert not (tmp_path / "cut.png").exists()


def test_a_tick_label_past_the_canvas_is_found():
    fig, ax = new_figure(width=3.0)
    ax.bar([0, 1], [1, 2])
    ax.set_xticks([0, 1], ["short", "a tick label far too long to fit under a three-inch-wide figure, by far"],
                  rotation=0)
    assert any("far too long" in t for t in texts_outside(fig))


def test_bars_on_a_log_axis_are_refused_and_named(tmp_path):
    fig, ax = new_figure()
    ax.bar(["reference", "fallback"], [4800, 1370])
    ax.set_yscale("log")
    ax.set_title("a fallback")
    assert bars_that_mislead(fig) == ["'a fallback': bars on a log y axis"]
    with pytest.raises(UserError, match="03_fallback.png: 'a fallback': bars on a log y axis.*linear axis from zero"):
        save_figure(fig, tmp_path / "03_fallback.png")
    assert not (tmp_path / "03_fallback.png").exists()


def test_horizontal_bars_on_a_log_axis_are_refused():
    fig, ax = new_figure()
    ax.barh([0, 1], [10, 1000])
    ax.set_xscale("log")
    assert bars_that_mislead(fig) == ["axes 0: bars on a log x axis"]


def test_bars_on_an_axis_cut_above_zero_are_refused(tmp_path):
    fig, ax = new_figure()
    ax.bar([0, 1], [1.00, 1.06])
    ax.set_ylim(0.98, 1.07)  # a 6% difference drawn as a 5x taller bar
    assert bars_that_mislead(fig) == ["axes 0: bars on a y axis from 0.98 to 1.07, which leaves out zero"]
    with pytest.raises(UserError, match="leaves out zero"):
        save_figure(fig, tmp_path / "cut.png")


def test_bars_from_zero_and_dots_on_a_log_axis_are_saved(tmp_path):
    fig, axes = new_figure(ncols=2)
    axes[0].bar([0, 1], [1.00, 1.06])
    axes[0].bar([2], [-0.3])  # negative bars stand on zero too
    axes[1].plot([1, 2, 4], [10, 1000, 1e5], "o")
    axes[1].set_yscale("log")
    assert bars_that_mislead(fig) == []
    assert save_figure(fig, tmp_path / "ok.png").exists()

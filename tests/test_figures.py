"""Figures: saved without churn, and never with a title or a tick label cut off at the canvas's edge."""

import pytest

from frontier.errors import UserError
from frontier.figures import new_figure, save_figure, texts_outside


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

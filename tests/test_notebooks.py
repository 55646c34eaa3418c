"""The book: pairs in sync, committed notebooks run top to bottom, every chapter runs with the smoke profile."""

from pathlib import Path

import jupytext
import nbformat
import pytest

from frontier.study.book import NOTEBOOKS, run_book

CHAPTERS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def _saved_figures(ipynb) -> int:
    return ipynb.with_suffix(".py").read_text().count("save_figure(")


def _images(nb) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))


def _cells(nb):
    return [(c.cell_type, c.source.strip(), tuple(c.get("metadata", {}).get("tags", []))) for c in nb.cells]


def test_there_are_chapters():
    assert CHAPTERS and all(p.with_suffix(".py").exists() for p in CHAPTERS)


@pytest.mark.parametrize("ipynb", CHAPTERS, ids=lambda p: p.stem)
def test_pair_in_sync(ipynb):
    py = jupytext.read(ipynb.with_suffix(".py"))
    nb = nbformat.read(ipynb, as_version=4)
    assert _cells(py) == _cells(nb), f"{ipynb.name} and its .py differ: run `jupytext --sync {ipynb}`"


@pytest.mark.parametrize("ipynb", CHAPTERS, ids=lambda p: p.stem)
def test_committed_notebook_ran_top_to_bottom(ipynb):
    nb = nbformat.read(ipynb, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), "re-run the chapter top to bottom"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, errors[0].get("evalue")
    assert nb.metadata.get("papermill", {}).get("parameters", {}).get("profile") == "cpu"
    tagged = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1
    assert _images(nb) >= _saved_figures(ipynb), "every figure the chapter saves must also show as an image"


def test_every_committed_figure_is_drawn_by_a_chapter_or_a_readme_command():
    """A figure nothing draws any more is stale: a reader browsing figures/ would take it for a current result. A
    figure is current when a chapter draws it, or when a `frontier ... --figure figures/X.png` command the README
    shows draws it (the ladder figure, from the committed runs)."""
    import re

    sources = "".join(p.with_suffix(".py").read_text() for p in CHAPTERS)
    readme = (NOTEBOOKS.parent / "README.md").read_text()
    by_readme = set(re.findall(r"--figure (figures/\S+\.png)", readme))
    figures = sorted((NOTEBOOKS.parent / "figures").glob("*.png"))
    assert figures
    stale = [f.name for f in figures
             if f"{f.stem.rsplit('_', 1)[0]}_" not in sources and f"figures/{f.name}" not in by_readme]
    assert not stale, f"nothing draws {stale}: delete them (git rm) or draw them again"
    assert all((NOTEBOOKS.parent / f).exists() for f in by_readme), "a README command draws a figure not committed"


def test_every_chapter_runs_with_the_smoke_profile(tmp_path):
    assert run_book(profile="smoke", out=str(tmp_path)) == 0
    for ipynb in CHAPTERS:
        out = nbformat.read(tmp_path / ipynb.name, as_version=4)
        assert out.metadata["papermill"]["parameters"]["profile"] == "smoke"
        code = [c for c in out.cells if c.cell_type == "code"]
        assert all(c.execution_count is not None for c in code)
        saved = _saved_figures(ipynb)
        assert saved and _images(out) >= saved, f"{ipynb.name}: saves {saved} figures, shows {_images(out)} images"

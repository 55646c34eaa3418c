"""The book: pairs in sync, committed notebooks run top to bottom, every section of every chapter runs alone at the
smoke profile after its set-up, and a chapter runs under papermill on a data folder of other text."""

import json
from pathlib import Path

import jupytext
import nbformat
import pytest

from frontier.study.book import NOTEBOOKS, run_book, run_section, sections
from frontier.study.chapter import BOX_CHARS

CHAPTERS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
# Chapters built on the one set-up call (frontier.study.chapter.setup): each of their sections stands alone after it.
STANDALONE = [p for p in CHAPTERS if "frontier.study.chapter import" in p.with_suffix(".py").read_text()]
SECTIONS = [(p.with_suffix(".py"), title) for p in STANDALONE for title, _ in sections(p.with_suffix(".py"))[1]]


def _saved_figures(ipynb) -> int:
    """The figures a chapter saves: `save_figure(...)` calls, and `ch.figure(...)` (the set-up call's helper)."""
    text = ipynb.with_suffix(".py").read_text()
    return text.count("save_figure(") + text.count("ch.figure(")


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


@pytest.mark.parametrize("ipynb", CHAPTERS, ids=lambda p: p.stem)
def test_committed_outputs_name_paths_as_the_repository_does(ipynb):
    """A reader sees `runs/...`: not the notebook's own folder in front of a stored name, nor the checkout that
    happened to execute the chapter."""
    nb = nbformat.read(ipynb, as_version=4)
    text = json.dumps([o for c in nb.cells if c.cell_type == "code" for o in c.outputs])
    for wrong in ("notebooks/runs/", "/tmp/wt-", str(NOTEBOOKS.parent) + "/"):
        assert wrong not in text, f"{ipynb.name} shows a path as {wrong!r}...: print paths through records.shown_path"


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
    def drawn(f) -> bool:  # `..._{profile}` in a path, or `ch.figure(fig, "NAME")` for figures/NAME_PROFILE.png
        name = f.stem.rsplit("_", 1)[0]
        return f"{name}_" in sources or f'"{name}"' in sources or f"figures/{f.name}" in by_readme

    stale = [f.name for f in figures if not drawn(f)]
    assert not stale, f"nothing draws {stale}: delete them (git rm) or draw them again"
    assert all((NOTEBOOKS.parent / f).exists() for f in by_readme), "a README command draws a figure not committed"


@pytest.fixture(scope="module")
def section_root(tmp_path_factory):
    """One run root for every section of every chapter: a run one section trains, another reuses (what sections may
    share is records on disk, never variables), so each smoke run is trained once in the suite."""
    return tmp_path_factory.mktemp("book")


@pytest.mark.parametrize("py,title", SECTIONS, ids=[f"{p.stem[:2]}: {t}"[:50] for p, t in SECTIONS])
def test_each_section_runs_alone_after_the_set_up(py, title, section_root):
    run_section(py, title, {"profile": "smoke", "run_root": str(section_root / "runs"),
                            "figures_dir": str(section_root / "figures" / py.stem), "data": None})


@pytest.mark.parametrize("ipynb", STANDALONE, ids=lambda p: p.stem)
def test_a_standalone_chapter_opens_with_its_box_and_ends_with_its_records(ipynb):
    """The first screen: the title, the parameters, the set-up and the box (at most BOX_CHARS characters in the
    executed notebook); the last section: the records, its output collapsed."""
    nb = nbformat.read(ipynb, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", [])
    assert "setup(" in code[1].source and ".box()" in code[1].source, "the set-up cell makes the box"
    box = [o for o in code[1].outputs if "text/markdown" in o.get("data", {})]
    assert box, "the set-up cell shows the box"
    text = box[-1]["data"]["text/markdown"]
    assert "filled in when" not in text, "the box was never filled: run the chapter to its end"
    assert len(text) <= BOX_CHARS + 2 * text.count("\n") + 2  # the box's text, quoted line by line
    headings = [c.source.lstrip() for c in nb.cells if c.cell_type == "markdown" and c.source.lstrip().startswith("## ")]
    assert headings[-1].startswith("## Records")
    assert code[-1].metadata.get("jupyter", {}).get("outputs_hidden") is True


def test_every_chapter_is_built_on_the_set_up_call():
    assert STANDALONE == CHAPTERS, "a chapter opens with `ch = setup(profile, run_root, figures_dir, data)`"


def test_a_chapter_runs_under_papermill_on_a_data_folder_of_other_text(smoke_data, tmp_path):
    """The book promises re-execution on other data (the competition's web text on trn2): a chapter run by the book
    runner with `data` pointing at a small prepared folder of other text trains and scores on that folder."""
    chapter = STANDALONE[0]
    assert run_book(profile="smoke", chapters=chapter.name[:2], out=str(tmp_path), data=str(smoke_data.folder)) == 0
    out = nbformat.read(tmp_path / chapter.name, as_version=4)
    assert out.metadata["papermill"]["parameters"]["data"] == str(smoke_data.folder)
    text = "".join(o.get("text", "") for c in out.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert smoke_data.folder.name in text  # the set-up line names the data it runs on
    saved = _saved_figures(chapter)
    assert _images(out) >= saved
    runs = list((tmp_path / "runs").rglob("result.json"))
    assert runs and all(json.loads(p.read_text())["data"]["manifest_hash"] == smoke_data.manifest_hash for p in runs)
    timing = [json.loads(p.read_text()) for p in (tmp_path / "runs" / "bench" / "smoke").glob("book-smoke-*.json")]
    assert [[t["chapter"] for t in r["chapters"]] for r in timing] == [[chapter.stem]]  # what the chapter took
    assert timing[0]["chapters"][0]["ok"] and timing[0]["seconds"] > 0 and "frontier book" in " ".join(timing[0]["command"])

"""The chapters' one set-up call (frontier.study.chapter) and the runner of one section alone (frontier.study.book)."""

import pytest

from frontier.errors import UserError
from frontier.study.book import run_section, sections
from frontier.study.chapter import BOX_CHARS, Box, setup

CHAPTER = '''# %% [markdown]
# # Chapter 9: a toy

# %% tags=["parameters"]
profile = "cpu"
run_root = None
figures_dir = None
data = None

# %%
from frontier.study.chapter import setup

ch = setup(profile, run_root, figures_dir, data)
box = ch.box()

# %% [markdown]
# ## One
#
# A section that makes its own variables.

# %%
x = 2

# %%
assert ch.profile.name == "smoke" and x == 2

# %% [markdown]
# ## Two

# %%
print(x)  # x belongs to section One: alone, this section fails
'''


def test_sections_split_the_set_up_from_each_section(tmp_path):
    py = tmp_path / "09_toy.py"
    py.write_text(CHAPTER)
    setup_cells, found = sections(py)
    assert len(setup_cells) == 2 and "setup(" in setup_cells[1]
    assert [(t, len(c)) for t, c in found] == [("One", 2), ("Two", 1)]


def test_a_section_runs_alone_after_the_set_up_with_the_given_parameters(tmp_path, smoke_data, capsys):
    py = tmp_path / "09_toy.py"
    py.write_text(CHAPTER)
    params = {"profile": "smoke", "run_root": str(tmp_path / "runs"), "figures_dir": str(tmp_path / "f"),
              "data": str(smoke_data.folder)}
    run_section(py, "One", params)
    assert "profile smoke" in capsys.readouterr().out
    with pytest.raises(NameError, match="'x'"):
        run_section(py, "Two", params)
    with pytest.raises(UserError, match="no section 'Three'"):
        run_section(py, "Three", params)


def test_the_box_holds_at_most_its_characters(capsys):
    box = Box()
    box.update("A finding.\nIts steps and seeds.")
    assert box.text == "A finding.\nIts steps and seeds." and "> A finding." in capsys.readouterr().out
    with pytest.raises(UserError, match=f"over {BOX_CHARS}"):
        box.update("x" * (BOX_CHARS + 1))


def test_set_up_refuses_a_missing_data_folder_in_one_line(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        setup("smoke", data=tmp_path / "nowhere")


def test_set_up_on_given_data_keeps_its_runs_apart_from_the_profiles_corpus(smoke_data, tmp_path):
    ch = setup("smoke", tmp_path / "runs", tmp_path / "figures", smoke_data.folder)
    assert ch.given_data and ch.data.manifest_hash == smoke_data.manifest_hash
    rec = ch.run("baseline", steps=2)
    assert rec["steps"] == 2 and rec["data"]["manifest_hash"] == smoke_data.manifest_hash
    assert str(tmp_path / "runs" / "smoke" / "baseline") in rec["run_dir"]


def test_the_records_cell_prints_paths_inside_the_repository_relative_to_it(smoke_data, tmp_path, monkeypatch,
                                                                            capsys):
    from frontier.study import chapter

    monkeypatch.setattr(chapter, "REPO", tmp_path)  # as if this checkout lay at tmp_path
    ch = setup("smoke", tmp_path / "runs", tmp_path / "figures", smoke_data.folder)
    rec = {"recipe": "baseline", "seed": 0, "run_dir": str(tmp_path / "runs" / "smoke" / "baseline" / "s0"),
           "code": {"git_sha": "abcdef123456", "dirty": False}}
    ch.log_lines.append(f"{tmp_path}/runs/smoke/baseline/s0: reusing")
    ch.records([rec], [{"path": str(tmp_path / "runs" / "smoke" / "bench" / "b.json"), "code": None, "created": "t"}])
    out = capsys.readouterr().out
    assert str(tmp_path) not in out
    assert "baseline s0: runs/smoke/baseline/s0" in out and "bench record runs/smoke/bench/b.json" in out
    assert "runs/smoke/baseline/s0: reusing" in out
    monkeypatch.setattr(chapter, "REPO", tmp_path / "elsewhere")  # a run root outside the repository, named runs
    ch.records([rec])
    out = capsys.readouterr().out
    assert "baseline s0: runs/smoke/baseline/s0" in out
    assert f"data {smoke_data.folder}" in out  # the data folder beside the run root keeps its whole path


def test_executing_in_place_writes_what_ran_into_the_parameters_cell_and_keeps_its_comments():
    import nbformat

    from frontier.study.book import _set_parameters

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('profile = "smoke"\nrun_root = "/tmp/x"   # None: the repository\'s runs/\n'
                                     'figures_dir = None\ndata = None          # None: the profile\'s corpus')
    cell.metadata["tags"] = ["parameters"]
    nb.cells.append(cell)
    _set_parameters(nb, {"profile": "cpu", "run_root": None, "figures_dir": None, "data": "/d"})
    assert cell.source.splitlines() == ['profile = "cpu"', "run_root = None   # None: the repository's runs/",
                                        "figures_dir = None", "data = \"/d\"          # None: the profile's corpus"]

"""Every command the README shows works on a clean checkout: each `frontier` line parses with the real parser, every
run folder or record it names is committed, and the commands that only read records run here."""

import re
import shlex
from pathlib import Path

import pytest

from frontier.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
# Commands that read committed records only (no training, no data folder): run as the README shows them.
READ_ONLY = ("card", "compare", "recipes", "profiles")


def _commands() -> list[list[str]]:
    """The `frontier ...` lines of the README's bash blocks, comments dropped, continuation lines joined."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", README, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("frontier "):
                out.append(shlex.split(line)[1:])
    return out


COMMANDS = _commands()


def test_the_readme_shows_commands():
    assert len(COMMANDS) >= 5 and any(c[0] == "train" for c in COMMANDS)


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(c)[:60] for c in COMMANDS])
def test_each_readme_command_parses_and_names_what_is_committed(argv):
    args = build_parser().parse_args(argv)
    for word in argv:
        if word.startswith("runs/") and "*" not in word:
            assert (ROOT / word).exists(), f"`frontier {' '.join(argv)}` names {word}, which is not committed"
    for name in ("recipe",):
        if getattr(args, name, None):
            from frontier.recipes import get_recipe

            get_recipe(getattr(args, name))
    if getattr(args, "profile", None):
        from frontier.profiles import get_profile

        get_profile(args.profile)


@pytest.mark.parametrize("argv", [c for c in COMMANDS if c[0] in READ_ONLY],
                         ids=[" ".join(c)[:60] for c in COMMANDS if c[0] in READ_ONLY])
def test_the_read_only_readme_commands_run(argv, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert main(argv) == 0
    assert capsys.readouterr().out.strip()


def _lines(tool: str) -> list[list[str]]:
    out = []
    for block in re.findall(r"```bash\n(.*?)```", README, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith(tool + " "):
                out.append(shlex.split(line)[1:])
    return out


def test_each_papermill_command_names_a_chapter_and_its_parameters():
    """`papermill NB OUT -k KERNEL -p NAME VALUE ...`: the chapter exists, and every NAME is a line of its parameters
    cell (papermill would add an unknown one silently)."""
    import jupytext

    commands = _lines("papermill")
    assert commands, "the README shows how to re-execute a chapter with papermill"
    for argv in commands:
        nb = ROOT / argv[0]
        assert nb.is_file() and nb.with_suffix(".py").is_file(), f"{argv[0]} is not a chapter"
        cell = next(c for c in jupytext.read(nb.with_suffix(".py")).cells if "parameters" in c.metadata.get("tags", []))
        names = {line.split("=")[0].strip() for line in cell.source.splitlines() if "=" in line}
        given = [argv[i + 1] for i, a in enumerate(argv) if a == "-p"]
        assert given and set(given) <= names, f"{argv[0]} takes {sorted(names)}, the README passes {given}"


def test_each_make_command_is_a_target_with_the_variables_it_reads():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, flags=re.M))
    for argv in _lines("make"):
        assert argv[0] in targets, f"`make {argv[0]}` is not a target"
        for var in (a.split("=")[0] for a in argv[1:] if "=" in a):
            assert f"$({var})" in makefile, f"`make {' '.join(argv)}`: the Makefile reads no {var}"

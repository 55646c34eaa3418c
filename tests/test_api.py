"""The public API as docs/reference.md shows it: its example runs as written, and the names it promises exist."""

import re
from pathlib import Path

import pytest
import torch

import frontier

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "reference.md"
README = ROOT / "README.md"


def api_example(path: Path, heading: str) -> str:
    text = path.read_text(encoding="utf-8")
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, f"{heading} holds one example"
    return blocks[0]


@pytest.mark.parametrize("path,heading", [(DOCS, "## The Python API"), (README, "## From Python")],
                         ids=["reference", "readme"])
def test_the_documented_example_runs(tmp_path, monkeypatch, path, heading):
    monkeypatch.chdir(tmp_path)  # the example names its own run folder, under the current folder: as pasted
    scope = {}
    exec(compile(api_example(path, heading), str(path), "exec"), scope)
    assert scope["rec"]["status"] == "finished" and scope["rec"]["steps"] == 4
    assert (tmp_path / scope["run_dir"] / "checkpoint.pt").is_file()


def test_the_documented_way_to_test_an_idea_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # its runs go to build/idea under the current folder
    scope = {}
    exec(compile(api_example(DOCS, "## Testing an idea"), str(DOCS), "exec"), scope)
    assert len(scope["runs"]) == 2 and all(r["steps"] == 3 for r in scope["base"] + scope["runs"])
    assert (tmp_path / "build" / "idea" / "smoke" / "ngram-wide-slots8-3steps" / "s1").is_dir()
    assert "screen only (2 seeds" in capsys.readouterr().out


def test_every_public_name_resolves():
    for name in frontier.__all__:
        assert getattr(frontier, name) is not None, name
    with pytest.raises(AttributeError):
        frontier.no_such_name  # noqa: B018


def test_train_takes_a_device_name_and_refuses_one_it_does_not_know(smoke_data, tmp_path):
    from frontier.errors import UserError

    cfg = frontier.resolve("baseline", "smoke")
    with pytest.raises(UserError, match="unknown device"):
        frontier.train(cfg, smoke_data, tmp_path / "r", device="tpu", steps=1, progress=False)
    assert not (tmp_path / "r").exists()  # nothing written for a call refused


def test_errors_speak_of_arguments_and_the_cli_of_flags(smoke_data, tmp_path):
    from frontier.cli import main
    from frontier.errors import UserError

    cfg = frontier.resolve("baseline", "smoke")
    with pytest.raises(UserError) as e:
        frontier.train(cfg, smoke_data, tmp_path / "r", steps=0, progress=False)
    assert "steps=N" in str(e.value) and "--steps" not in str(e.value)
    assert "--steps" in e.value.for_cli()


def test_optimizers_step_without_the_batch_is_refused_for_a_bigram_model():
    from frontier.errors import UserError

    cfg = frontier.resolve("bigram", "smoke", vocab_size=512)
    model = frontier.build_model(cfg)
    opts = frontier.Optimizers(model, cfg)
    x = torch.randint(0, 512, (cfg.train.batch_size, cfg.train.seq_len))
    model(x, x).backward()
    with pytest.raises(UserError, match="inputs=x"):
        opts.step()
    base = frontier.resolve("baseline", "smoke", vocab_size=512)
    plain = frontier.build_model(base)
    popts = frontier.Optimizers(plain, base)
    plain(x, x).backward()
    assert popts.step() == 1.0 and popts.updates == 1  # frac 0: the full learning rate; the step counted

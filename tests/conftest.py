"""Shared fixtures: a small corpus on disk (pydoc topics plus a multilingual document) and its dataset."""

from __future__ import annotations

import json

import pytest

UNICODE_DOC = (
    "Café, naïve façade, Ångström, Ελληνικά, русский текст.\n"
    "日本語のテキスト、中文文本、한국어 텍스트.\n"
    "Emoji: 🎉🚀👍🏽 👩‍👩‍👧 and a flag 🇫🇷.\n"
    "A literal lower one-eighth block ▁ inside ▁▁ words, tabs\tand\r\nCRLF, NUL \x00 too.\n"
)


@pytest.fixture
def rule_of_three(monkeypatch):
    """Tests of how verdicts are composed, on three-seed fixtures, run under the rule's thresholds set to three seeds
    and p < 0.05; the rule itself (5 seeds, p < 0.01) is tested in test_sweep.py and by
    `test_the_rule_at_five_seeds_keeps_only_below_p_001` in test_ladder.py."""
    from frontier.study import compare

    monkeypatch.setattr(compare, "MIN_SEEDS", 3)
    monkeypatch.setattr(compare, "KEEP_ALPHA", 0.05)


# Started first, so that a run cut short by a CI time limit has already told whether the book runs.
LONGEST = ("test_a_chapter_runs_under_papermill_on_a_data_folder_of_other_text",)


def pytest_addoption(parser):
    parser.addoption("--trn2-dry", action="store_true",
                     help="also execute every chapter at trn2-dry on the stand-in Neuron host (tests/test_notebooks_trn2.py: "
                     "tens of minutes on 2 cores; `make test-trn2-dry`)")


def pytest_collection_modifyitems(config, items):
    items[:] = [i for i in items if i.name in LONGEST] + [i for i in items if i.name not in LONGEST]
    if not config.getoption("--trn2-dry"):
        skip = pytest.mark.skip(reason="the book's trn2 dry run takes tens of minutes: pass --trn2-dry (make test-trn2-dry)")
        for item in items:
            if item.nodeid.startswith("tests/test_notebooks_trn2.py"):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory):
    """A folder of 80 .txt documents: the pydoc topics plus one multilingual document."""
    import pydoc_data.topics

    d = tmp_path_factory.mktemp("corpus")
    for i, (key, text) in enumerate(sorted(pydoc_data.topics.topics.items())):
        (d / f"{i:03d}_{key}.txt").write_text(text, encoding="utf-8")
    (d / "999_unicode.txt").write_text(UNICODE_DOC * 20, encoding="utf-8")
    return d


@pytest.fixture(scope="session")
def val_dir(tmp_path_factory):
    """A separate validation set with accents, CJK and emoji, as .md and .jsonl."""
    d = tmp_path_factory.mktemp("valtext")
    (d / "a.md").write_text(UNICODE_DOC, encoding="utf-8")
    with open(d / "b.jsonl", "w", encoding="utf-8") as fh:
        for t in ["Ünïcödé line one 😀", " leading space doc", "中文 and English ▁ mixed\n"]:
            fh.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
    return d


@pytest.fixture(scope="session")
def smoke_data(tmp_path_factory, corpus_dir, val_dir):
    """A dataset prepared at the smoke profile's vocabulary, validation from `val_dir`."""
    from frontier.data.dataset import prepare

    out = tmp_path_factory.mktemp("data") / "smoke"
    return prepare(out, text=[str(corpus_dir)], val_text=[str(val_dir)], vocab_size=512, log=lambda m: None)


@pytest.fixture(scope="session")
def split_data(tmp_path_factory, corpus_dir):
    """A dataset whose validation split is the deterministic document-hash split."""
    from frontier.data.dataset import prepare

    out = tmp_path_factory.mktemp("data") / "split"
    return prepare(out, text=[str(corpus_dir)], vocab_size=512, val_fraction=0.1, log=lambda m: None)

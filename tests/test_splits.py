"""The three splits (train, val, test), the near-duplicate audit, and the pinned docstrings corpus."""

import inspect
import random

import numpy as np
import pytest

from frontier.data import audit, corpus
from frontier.data.dataset import Dataset, prepare, split_of
from frontier.errors import UserError

WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau "
         "upsilon phi chi psi omega array matrix vector tensor module function class method value return").split()


def _doc(rng: random.Random, n: int = 120) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)) + "."


def _decoded(ds: Dataset, split: str) -> list[str]:
    tok = ds.tokenizer
    ids = np.concatenate(ds.train_tokens()) if split == "train" else ds.heldout_tokens(split)
    cuts = list(np.flatnonzero(ids == tok.bos_id)) + [len(ids)]
    return [tok.decode(ids[a + 1 : b]) for a, b in zip(cuts, cuts[1:])]


def test_the_split_by_hash_has_three_parts_and_keeps_the_two_it_had():
    texts = [f"document {i} " * 5 for i in range(400)]
    two = [split_of(t, 0, 0.1)[0] for t in texts]
    three = [split_of(t, 0, 0.1, 0.2)[0] for t in texts]
    assert set(three) == {"train", "val", "test"}
    assert [a for a, b in zip(two, three) if b == "val"] == ["val"] * three.count("val")  # val is what it was
    assert all(a == "train" for a, b in zip(two, three) if b == "test")  # test comes out of train
    assert 40 < three.count("test") < 120


def test_shingles_are_distinct_runs_of_words_and_the_same_every_time():
    text = " ".join(f"w{i}" for i in range(20))
    s = audit.shingles(text)
    assert len(s) == 20 - audit.SHINGLE_WORDS + 1 and np.all(np.diff(s.astype(np.float64)) >= 0)
    assert np.array_equal(s, audit.shingles("  " + text.replace(" ", "\n  ")))  # words: split at whitespace
    assert len(audit.shingles("too few words here")) == 0
    assert len(audit.shingles((text + " ") * 3)) < 3 * len(s)  # repeats count once


def test_the_audit_moves_near_duplicates_and_the_chains_they_start():
    rng = random.Random(0)
    train = [_doc(rng) for _ in range(5)]
    planted = train[2].split()
    planted[40] = "CHANGED"  # one word in 120: 13 of the 108 shingles differ
    held = {"a": " ".join(planted), "b": _doc(rng), "c": None}
    chain = held["a"].split()[:60] + _doc(rng, 60).split()  # half of it is the planted copy's first half
    held["c"] = " ".join(chain)
    a = audit.Audit()
    for k, t in held.items():
        a.add_heldout(k, t)
    for t in train:
        a.scan(t)
    first, moved = a.move(0.4)
    assert first["a"] > 0.8 and first["b"] == 0.0 and first["c"] > 0.3
    assert moved == ["a", "c"]  # c reaches the threshold only against a, once a is in train


def test_prepare_audits_a_planted_near_duplicate_out_of_the_held_out_splits(tmp_path):
    rng = random.Random(1)
    docs = [_doc(rng, 150) for _ in range(60)]
    held = next(d for d in docs if split_of(d, 0, 0.2, 0.2)[0] != "train")
    words = held.split()
    for n in range(1000):  # a near-copy (two words changed) that the hash puts in train
        copy = " ".join(words[:10] + [f"planted{n}"] + words[11:100] + ["x"] + words[101:])
        if split_of(copy, 0, 0.2, 0.2)[0] == "train":
            break
    docs.append(copy)
    src = tmp_path / "src"
    src.mkdir()
    for i, d in enumerate(docs):
        (src / f"{i:03d}.txt").write_text(d)
    ds = prepare(tmp_path / "out", text=[str(src)], vocab_size=300, val_fraction=0.2, test_fraction=0.2,
                 log=lambda m: None)
    m = ds.manifest
    moved = m["audit"]["moved"]
    assert [x["source"] for x in moved] == [str(src / f"{docs.index(held):03d}.txt")]
    assert moved[0]["from"] == split_of(held, 0, 0.2, 0.2)[0]
    assert m["audit"]["moved_to_train"][moved[0]["from"]] == 1
    assert m["audit"]["before"][moved[0]["from"]]["max"] > 0.7 and m["audit"]["after"][moved[0]["from"]]["max"] < 0.5
    decoded = {s: _decoded(ds, s) for s in ("train", "val", "test")}
    assert held in decoded["train"] and held not in decoded["val"] + decoded["test"]
    expected = {s: [d for d in docs if d != held and split_of(d, 0, 0.2, 0.2)[0] == s] for s in ("val", "test")}
    assert decoded["val"] == expected["val"] and decoded["test"] == expected["test"]
    for s in ("train", "val", "test"):
        assert m[s]["documents"] == len(decoded[s])
        assert m[s]["bytes"] == sum(len(t.encode()) for t in decoded[s])
        assert m[s]["tokens"] == (len(np.concatenate(ds.train_tokens())) if s == "train" else len(ds.heldout_tokens(s)))
    assert ds.test_bytes == ds.heldout_bytes("test") == m["test"]["bytes"]
    assert m["split"]["test_fraction"] == 0.2 and m["audit"]["shingle_words"] == 13


def test_a_folder_without_a_test_split_opens_and_says_so_when_asked(split_data):
    assert "test" not in split_data.manifest and "audit" not in split_data.manifest and not split_data.has_test
    assert len(split_data.val_tokens()) > 0 and split_data.heldout_bytes("val") == split_data.val_bytes
    for ask in (split_data.test_tokens, lambda: split_data.test_bytes, lambda: split_data.heldout_tokens("test")):
        with pytest.raises(UserError, match="has no test split"):
            ask()
    with pytest.raises(UserError, match="unknown held-out split"):
        split_data.heldout_tokens("train")


def test_bad_fractions_are_one_clear_error(tmp_path, corpus_dir, val_dir):
    with pytest.raises(UserError, match="leaves no training split"):
        prepare(tmp_path / "a", text=[str(corpus_dir)], val_fraction=0.5, test_fraction=0.5, log=lambda m: None)
    with pytest.raises(UserError, match="--test-fraction was given with --val-text"):
        prepare(tmp_path / "b", text=[str(corpus_dir)], val_text=[str(val_dir)], test_fraction=0.1, log=lambda m: None)


def _fake_package(tmp_path, monkeypatch) -> str:
    pkg = tmp_path / "site" / "fakepkg"
    (pkg / "tests").mkdir(parents=True)
    (pkg / "sub").mkdir()
    long = "A docstring long enough to be kept, " * 4
    (pkg / "__init__.py").write_text(f'"""{long}\n\n    indented second paragraph.\n    """\n'
                                     f'def f():\n    """short"""\n\nclass C:\n    """{long} (C)"""\n')
    (pkg / "sub" / "m.py").write_text(f'def g():\n    """{long} (C)"""\n')  # C's, again: dropped
    (pkg / "sub" / "n.py").write_text('"""\tTabbed start, and enough words to pass the rule of one hundred '
                                      'characters, which this line now does."""\n')
    (pkg / "tests" / "test_x.py").write_text(f'"""{long} (a test)"""\n')
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return "fakepkg"


def test_the_docstrings_rule_on_a_package(tmp_path, monkeypatch):
    name = _fake_package(tmp_path, monkeypatch)
    docs = corpus.docstring_documents(((name, "1.0"),))
    assert [d.source for d in docs] == ["docstrings:fakepkg/__init__.py", "docstrings:fakepkg/sub/n.py"]
    first = docs[0].text.split("\n\n")
    assert len(first) == 3 and first[1] == "indented second paragraph." and first[2].endswith("(C)")
    assert docs[1].text.startswith("Tabbed start")
    for raw in ["  x\n    y\n      z\n", "\n\n\tline\n\t  more\n\n", "one line"]:
        assert corpus._cleandoc(raw) == inspect.cleandoc(raw)  # the copy agrees with this Python's
    with pytest.raises(UserError, match="not installed"):
        corpus.docstring_documents((("no_such_package_here", "1.0"),))


def test_a_pinned_corpus_with_another_hash_is_refused_unless_accepted(tmp_path, monkeypatch):
    name = _fake_package(tmp_path, monkeypatch)
    monkeypatch.setattr(corpus, "DOCSTRING_PACKAGES", ((name, "1.0"),))
    rng = random.Random(2)
    docs = [corpus.Document(_doc(rng, 200), f"docstrings:fake/{i}.py") for i in range(40)]
    monkeypatch.setattr(corpus, "docstring_documents", lambda packages=None: docs)
    sha = corpus.documents_sha256(docs)
    monkeypatch.setitem(corpus.PINNED_SHA256, "docstrings", "0" * 64)
    with pytest.raises(UserError) as e:
        prepare(tmp_path / "a", corpus_name="docstrings", vocab_size=300, log=lambda m: None)
    msg = str(e.value)
    assert sha in msg and "0" * 64 in msg and f"--accept-corpus-hash {sha}" in msg and "fakepkg" in msg
    ds = prepare(tmp_path / "b", corpus_name="docstrings", vocab_size=300, accept_corpus_hash=sha,
                 val_fraction=0.15, test_fraction=0.15, log=lambda m: None)
    pinned = ds.manifest["sources"]["pinned"]
    assert pinned["sha256"] == pinned["accepted_sha256"] == sha and pinned["pinned_sha256"] == "0" * 64
    assert ds.has_test and ds.manifest["split"]["test_fraction"] == 0.15
    monkeypatch.setitem(corpus.PINNED_SHA256, "docstrings", sha)
    ds = prepare(tmp_path / "c", corpus_name="docstrings", vocab_size=300, log=lambda m: None)  # the corpus's own
    assert ds.manifest["split"]["test_fraction"] == 0.05 and "accepted_sha256" not in ds.manifest["sources"]["pinned"]
    assert ds.manifest["test"]["documents"] >= 1 and "audit" in ds.manifest


def _pinned_versions_installed() -> bool:
    return all((corpus.installed_version(n) or "").split("+")[0] == v for n, v in corpus.DOCSTRING_PACKAGES)


@pytest.mark.skipif(not _pinned_versions_installed(), reason="the docstrings corpus is pinned to other versions")
def test_the_docstrings_corpus_is_the_pinned_text():
    docs = corpus.docstring_documents()
    assert corpus.documents_sha256(docs) == corpus.PINNED_SHA256["docstrings"]
    assert len(docs) > 2500 and sum(len(d.text.encode()) for d in docs) > 15_000_000


def test_pyproject_pins_the_packages_the_corpus_is_pinned_to():
    import tomllib
    from pathlib import Path

    from frontier.data.dataset import embedded_folder_name

    meta = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    extras = meta["project"]["optional-dependencies"]
    pins = dict(p.split("==") for p in extras["corpus"])
    assert pins == {n: v for n, v in corpus.DOCSTRING_PACKAGES if n != "torch"}  # torch: the Makefile's TORCH
    assert set(extras["corpus"]) <= set(extras["dev"])  # what `make venv` installs
    makefile = (Path(__file__).resolve().parent.parent / "Makefile").read_text()
    assert f"torch=={dict(corpus.DOCSTRING_PACKAGES)['torch']}" in makefile
    assert embedded_folder_name(1024, "docstrings") == "docstrings-v1024"  # the same under every Python
    assert embedded_folder_name(1024, "embedded", python="3.11.7") == "embedded-py3.11.7-v1024"


def test_the_prepare_command_takes_a_test_fraction_and_a_hash_to_accept(tmp_path, corpus_dir, val_dir, capsys,
                                                                         monkeypatch):
    from test_cli import assert_one_line_error, main_cli

    code, out, err = main_cli(capsys, "prepare", "--out", str(tmp_path / "a"), "--text", str(corpus_dir),
                              "--vocab-size", "300", "--test-fraction", "0.1")
    assert code == 0, err
    ds = Dataset(tmp_path / "a")
    assert f"test {ds.manifest['test']['tokens']:,} tokens" in out and ds.manifest["audit"]["shingle_words"] == 13
    code, out, err = main_cli(capsys, "prepare", "--out", str(tmp_path / "b"), "--text", str(corpus_dir),
                              "--val-text", str(val_dir), "--test-fraction", "0.1")
    assert_one_line_error(code, err, "--test-fraction was given with --val-text")
    rng = random.Random(3)
    docs = [corpus.Document(_doc(rng, 200), f"docstrings:fake/{i}.py") for i in range(30)]
    monkeypatch.setattr(corpus, "docstring_documents", lambda packages=None: docs)
    code, out, err = main_cli(capsys, "prepare", "--out", str(tmp_path / "c"), "--corpus", "docstrings",
                              "--vocab-size", "300")
    sha = corpus.documents_sha256(docs)
    assert_one_line_error(code, err, sha, corpus.PINNED_SHA256["docstrings"], f"--accept-corpus-hash {sha}")
    code, out, err = main_cli(capsys, "prepare", "--out", str(tmp_path / "c"), "--corpus", "docstrings",
                              "--vocab-size", "300", "--accept-corpus-hash", sha, "--val-fraction", "0.15",
                              "--test-fraction", "0.15")
    assert code == 0, err
    assert Dataset(tmp_path / "c").manifest["sources"]["pinned"]["accepted_sha256"] == sha


def test_compressors_score_both_held_out_splits_given_the_training_text(tmp_path):
    from frontier.study.compressors import compressor_bpb, split_text

    rng = random.Random(2)
    src = tmp_path / "src"
    src.mkdir()
    for i in range(40):
        (src / f"{i:03d}.txt").write_text(_doc(rng, 120))
    ds = prepare(tmp_path / "out", text=[str(src)], vocab_size=300, val_fraction=0.2, test_fraction=0.2,
                 log=lambda m: None)
    rows = {r["compressor"]: r for r in compressor_bpb(ds)}
    xz = rows["xz -9e"]
    for s in ("val", "test"):
        assert xz[f"{s}_bytes"] == ds.heldout_bytes(s) == len(split_text(ds, s))
        # the words come from one small vocabulary: the training text as context helps every compressor
        assert 0 < xz[f"{s}_bpb"] < xz[f"{s}_bpb_alone"]
    val_only = compressor_bpb(ds, splits=("val",))[0]
    assert "test_bpb" not in val_only and val_only["val_bpb"] == pytest.approx(xz["val_bpb"])

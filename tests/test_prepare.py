import gzip
import json
import sys

import numpy as np
import pytest

from frontier.data.corpus import document_files, read_documents
from frontier.data.dataset import Dataset, prepare, split_of
from frontier.errors import UserError


def _docs(folder):
    return [d.text for f in document_files(folder) for d in read_documents(f)]


def _decoded_docs(ds, split):
    tok = ds.tokenizer
    ids = np.concatenate(ds.train_tokens()) if split == "train" else ds.val_tokens()
    cuts = list(np.flatnonzero(ids == tok.bos_id)) + [len(ids)]
    return [tok.decode(ids[a + 1 : b]) for a, b in zip(cuts, cuts[1:])]


def test_val_text_split_is_exact(smoke_data, corpus_dir, val_dir):
    m = smoke_data.manifest
    val_docs, train_docs = _docs(val_dir), _docs(corpus_dir)
    assert m["val"]["documents"] == len(val_docs) and m["train"]["documents"] == len(train_docs)
    assert smoke_data.val_bytes == sum(len(t.encode("utf-8")) for t in val_docs)
    assert _decoded_docs(smoke_data, "val") == val_docs
    assert _decoded_docs(smoke_data, "train") == train_docs
    assert m["tokenizer"]["vocab_size"] == 512 and m["tokenizer"]["trained_on"] == "train split only"
    assert len(m["sources"]["train_files"]) == len(document_files(corpus_dir))
    assert all(len(f["sha256"]) == 64 for f in m["sources"]["val_files"])


def test_document_hash_split_is_deterministic(split_data, corpus_dir):
    docs = _docs(corpus_dir)
    expected_val = [t for t in docs if split_of(t, 0, 0.1)[0] == "val"]
    assert _decoded_docs(split_data, "val") == expected_val
    assert split_data.val_bytes == sum(len(t.encode()) for t in expected_val)
    assert split_data.manifest["split"]["val_fraction"] == 0.1


def test_tokenizer_never_sees_validation_text(tmp_path, corpus_dir):
    (tmp_path / "val").mkdir()
    (tmp_path / "val" / "v.txt").write_text("zqxjvk " * 3000)
    ds = prepare(tmp_path / "out", text=[str(corpus_dir)], val_text=[str(tmp_path / "val")], vocab_size=512, log=lambda m: None)
    pieces = [ds.tokenizer.piece(i) for i in range(ds.vocab_size)]
    assert not [p for p in pieces if "zq" in p or "xj" in p or "vk" in p]


def test_jsonl_and_gzip_inputs(tmp_path):
    docs = [f"document number {i}: " + "some words here " * (i + 3) for i in range(40)]
    with open(tmp_path / "a.jsonl", "w") as fh:
        for d in docs[:20]:
            fh.write(json.dumps({"text": d, "id": 1}) + "\n")
    with gzip.open(tmp_path / "b.jsonl.gz", "wt") as fh:
        for d in docs[20:]:
            fh.write(json.dumps({"text": d}) + "\n")
    ds = prepare(tmp_path / "out", text=[str(tmp_path)], vocab_size=300, val_fraction=0.2, log=lambda m: None)
    assert ds.manifest["train"]["documents"] + ds.manifest["val"]["documents"] == 40
    assert sorted(_decoded_docs(ds, "train") + _decoded_docs(ds, "val")) == sorted(docs)


def test_reopen_checks_and_refuses_overwrite(smoke_data):
    again = Dataset(smoke_data.folder)
    assert again.manifest_hash == smoke_data.manifest_hash
    with pytest.raises(UserError, match="already holds a dataset"):
        prepare(smoke_data.folder, text=["/nonexistent"], log=lambda m: None)


@pytest.mark.parametrize("case", ["missing", "empty_folder", "not_utf8", "bad_json", "no_text_field", "one_doc", "unwritable"])
def test_bad_input_is_one_clear_error(tmp_path, case):
    src = tmp_path / "src"
    src.mkdir()
    out = tmp_path / "out"
    if case == "missing":
        text = str(tmp_path / "nope")
    elif case == "empty_folder":
        (src / "x.csv").write_text("not a document")
        text = str(src)
    elif case == "not_utf8":
        (src / "a.txt").write_bytes("café".encode("latin-1"))
        (src / "b.txt").write_text("fine")
        text = str(src)
    elif case == "bad_json":
        (src / "a.jsonl").write_text('{"text": "ok"}\n{broken\n')
        text = str(src)
    elif case == "no_text_field":
        (src / "a.jsonl").write_text('{"body": "ok"}\n')
        text = str(src)
    elif case == "one_doc":
        (src / "a.txt").write_text("only one document")
        text = str(src)
    else:
        (src / "a.txt").write_text("one")
        (src / "b.txt").write_text("two")
        (tmp_path / "afile").write_text("")
        out = tmp_path / "afile" / "out"
        text = str(src)
    with pytest.raises(UserError) as e:
        prepare(out, text=[text], vocab_size=300, log=lambda m: None)
    assert "\n" not in str(e.value) and ";" in str(e.value)
    assert not out.exists()


# ----------------------------------------------------------------------------- the vocabulary and the text


def _write_docs(folder, docs):
    folder.mkdir()
    for i, d in enumerate(docs):
        (folder / f"{i:03d}.txt").write_text(d, encoding="utf-8")
    return folder


def test_more_distinct_characters_than_the_vocabulary_prepares_byte_exact(tmp_path):
    from test_tokenizer import many_character_docs

    from frontier.train.bpb import scored_bytes

    docs = many_character_docs()
    src = _write_docs(tmp_path / "src", docs)
    ds = prepare(tmp_path / "out", text=[str(src)], vocab_size=512, val_fraction=0.2, log=lambda m: None)
    m = ds.manifest["tokenizer"]
    assert ds.vocab_size == 512 and "requested_vocab_size" not in m
    assert m["rare_characters"]["distinct"] > 600 and m["rare_characters"]["with_piece"] <= 127
    val = _decoded_docs(ds, "val")
    assert sorted(_decoded_docs(ds, "train") + val) == sorted(docs)
    ids, tok = ds.val_tokens(), ds.tokenizer
    assert any(tok.sp.is_byte(int(i)) for i in ids)
    assert int(tok.token_bytes[ids].sum()) == ds.val_bytes == sum(len(t.encode("utf-8")) for t in val)
    for convention, less in [("nanochat", 0), ("parameter-golf", sum(t.startswith(" ") for t in val))]:
        mask, nbytes = scored_bytes(tok, ids[:-1], ids[1:], convention)
        first = int(tok.token_bytes[ids[0]])  # the stream's first token is a BOS, never a target
        assert first == 0 and int(nbytes.sum()) == ds.val_bytes - less, convention


TINY = ["hello world, this is a tiny text. " * 3, "another small document about nothing much."] * 2


def test_too_small_text_names_the_largest_size_that_works(tmp_path):
    src = _write_docs(tmp_path / "src", TINY)
    with pytest.raises(UserError, match=r"too small for a vocabulary of 1024: the largest that works is \d+") as e:
        prepare(tmp_path / "a", text=[str(src)], vocab_size=1024, log=lambda m: None)
    assert "\n" not in str(e.value) and not (tmp_path / "a").exists()
    largest = int(str(e.value).split("the largest that works is ")[1].split(";")[0])
    assert f"--vocab-size {largest}" in e.value.fix
    ds = prepare(tmp_path / "b", text=[str(src)], vocab_size=largest, log=lambda m: None)
    assert ds.vocab_size == largest and "requested_vocab_size" not in ds.manifest["tokenizer"]


def test_too_small_text_steps_down_when_asked(tmp_path):
    src = _write_docs(tmp_path / "src", TINY)
    logged = []
    ds = prepare(tmp_path / "out", text=[str(src)], vocab_size=1024, shrink_vocab=True, log=logged.append)
    assert 258 < ds.vocab_size < 1024 and ds.manifest["tokenizer"]["requested_vocab_size"] == 1024
    assert any(f"using {ds.vocab_size}, the largest that works" in line for line in logged)
    assert sorted(_decoded_docs(ds, "train") + _decoded_docs(ds, "val")) == sorted(TINY)


@pytest.mark.skipif(sys.version.split()[0] != "3.11.7", reason="the embedded corpus differs between Pythons")
def test_embedded_corpus_prepares_as_the_committed_records_did(tmp_path):
    """The run records were made on this data: the manifest (and so the tokens) must not change."""
    ds = prepare(tmp_path / "v1024", vocab_size=1024, log=lambda m: None)
    assert ds.manifest_hash == "c41c679ef15f124d"  # as in runs/cpu/*/result.json
    assert "rare_characters" not in ds.manifest["tokenizer"]


def test_the_stdlib_source_corpus_is_code_and_fixed(monkeypatch, tmp_path):
    from frontier.data.dataset import corpus

    docs = corpus.stdlib_source_documents(200_000)
    assert docs == corpus.stdlib_source_documents(200_000)  # deterministic
    assert sum(len(d.text.encode()) for d in docs) <= 200_000 and len(docs) > 3
    assert all(d.source.startswith("stdlib-source:") for d in docs)
    code = [d for d in docs if "def " in d.text or "import " in d.text or "class " in d.text]
    assert len(code) >= 0.8 * len(docs)  # Python code, not prose
    monkeypatch.setattr(corpus, "SOURCE_MAX_BYTES", 120_000)
    ds = prepare(tmp_path / "src", vocab_size=300, log=lambda m: None, corpus_name="stdlib-source")
    assert ds.manifest["sources"]["corpus"] == "stdlib-source"
    assert ds.manifest["train"]["bytes"] + ds.manifest["val"]["bytes"] <= 120_000
    with pytest.raises(UserError, match="unknown corpus"):
        prepare(tmp_path / "x", corpus_name="novels", log=lambda m: None)
    with pytest.raises(UserError, match="both --corpus"):
        prepare(tmp_path / "y", text=[str(tmp_path)], corpus_name="stdlib-source", log=lambda m: None)


def test_the_smoke_profile_trains_on_the_first_documents_of_a_named_corpus(tmp_path, corpus_dir):
    from frontier.data.dataset import prepare
    from frontier.errors import UserError
    from frontier.profiles import get_profile

    cap = get_profile("smoke").corpus_bytes
    assert cap and get_profile("cpu").corpus_bytes is None  # the chapters' numbers come from whole corpora
    ds = prepare(tmp_path / "cut", vocab_size=300, corpus_bytes=60_000, log=lambda m: None)
    m = ds.manifest
    assert m["sources"]["corpus_bytes"] == 60_000
    assert 0 < m["train"]["bytes"] + m["val"]["bytes"] <= 60_000 and m["train"]["documents"] > 1
    with pytest.raises(UserError, match="corpus_bytes"):
        prepare(tmp_path / "both", text=[str(corpus_dir)], vocab_size=300, corpus_bytes=60_000, log=lambda m: None)


def test_a_runs_data_is_found_where_its_folder_is_gone(tmp_path):
    """A record names its data folder on the machine that trained it; on another (a clean checkout) a named corpus
    is prepared here and used when its manifest is the record's, and anything else is one error naming the fix."""
    from frontier.data.dataset import profile_dataset, run_dataset
    from frontier.errors import UserError

    ds = profile_dataset("smoke", log=lambda m: None)
    gone = str(tmp_path / "elsewhere" / ds.folder.name)
    said = []
    assert run_dataset({"folder": gone, "manifest_hash": ds.manifest_hash}, log=said.append).folder == ds.folder
    assert "not here" in said[0]
    assert run_dataset({"folder": str(ds.folder), "manifest_hash": "x"}).folder == ds.folder  # its own folder
    with pytest.raises(UserError, match="is not the data the run trained on") as e:
        run_dataset({"folder": gone, "manifest_hash": "0" * 16}, log=lambda m: None)
    assert "frontier prepare --corpus embedded" in e.value.for_cli() and "--data DIR" in e.value.for_cli()
    with pytest.raises(UserError, match="not a named corpus"):
        run_dataset({"folder": str(tmp_path / "my-text"), "manifest_hash": ds.manifest_hash})
    assert run_dataset({"folder": gone, "manifest_hash": "x"}, ds.folder).folder == ds.folder  # an explicit folder

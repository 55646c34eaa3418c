import gzip
import json

import numpy as np
import pytest

from frontier.corpus import document_files, read_documents
from frontier.data import Dataset, prepare, split_of
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

import random

import pytest
from conftest import UNICODE_DOC

from frontier.data.tokenizer import Tokenizer, character_budget, character_counts, rare_characters

SAMPLES = [
    "",
    "plain ascii text",
    " leading space",
    "  two leading spaces and trailing  ",
    "line\nbreaks\n\nand\r\nCRLF\ttabs",
    "Café naïve 東京 🎉 👍🏽 👩‍👩‍👧",
    "the character ▁ (U+2581) is SentencePiece's space marker: ▁▁ ▁x x▁",
    "\x00\x01\x7f control characters",
    UNICODE_DOC,
]


def random_unicode(rng: random.Random, n: int) -> str:
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.5:
            out.append(rng.choice("abcdefghij  \n\t.,"))
        elif r < 0.8:
            out.append(chr(rng.randint(0x80, 0x2FFF)))
        else:
            cp = rng.randint(0x3000, 0x10FFFF)
            if 0xD800 <= cp <= 0xDFFF:
                cp = 0x2581
            out.append(chr(cp))
    return "".join(out)


@pytest.fixture(scope="module")
def tok(smoke_data):
    return smoke_data.tokenizer


@pytest.mark.parametrize("text", SAMPLES)
def test_lossless_and_byte_exact(tok, text):
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert int(tok.token_bytes[ids].sum()) == len(text.encode("utf-8"))


def test_random_unicode_is_lossless_and_byte_exact(tok):
    rng = random.Random(0)
    for _ in range(300):
        text = random_unicode(rng, rng.randint(1, 60))
        ids = tok.encode(text)
        assert tok.decode(ids) == text, repr(text)
        assert int(tok.token_bytes[ids].sum()) == len(text.encode("utf-8")), repr(text)


def test_special_tokens_have_no_bytes(tok):
    assert tok.token_bytes[tok.bos_id] == 0
    assert tok.is_special[tok.bos_id]
    doc = tok.encode_document("hi")
    assert doc[0] == tok.bos_id and tok.decode(doc) == "hi"


def test_save_load_roundtrip(tok, tmp_path):
    tok.save(tmp_path / "t.model")
    again = Tokenizer.load(tmp_path / "t.model")
    assert again.sha256 == tok.sha256
    assert again.encode(UNICODE_DOC) == tok.encode(UNICODE_DOC)


# ----------------------------------------------------------------------------- more characters than pieces

POOL = [chr(c) for c in [*range(0x391, 0x3CA), *range(0x410, 0x450), *range(0x2200, 0x2280), *range(0x4E00, 0x4FC0)]]
WORDS = "the of and to in is that for it as with was on be by this are from or have an they which one".split()


def many_character_docs(n_docs: int = 40, seed: int = 0) -> list[str]:
    """English-like documents that hold, together, 700+ distinct characters: Greek, Cyrillic, maths symbols and CJK
    woven into the words (about 15% of the characters), each pool character in at least one document."""
    rng = random.Random(seed)
    docs = []
    for i in range(n_docs):
        own = POOL[i::n_docs]
        words = []
        for _ in range(500):
            w = rng.choice(WORDS)
            if rng.random() < 0.3:
                w += "".join(rng.choice(POOL) for _ in range(rng.randint(1, 3)))
            words.append(w)
        words += own
        rng.shuffle(words)
        docs.append((" " if i % 3 == 0 else "") + " ".join(words) + ".\n")
    return docs


def test_more_distinct_characters_than_the_vocabulary_is_lossless_and_byte_exact():
    docs = many_character_docs()
    counts = character_counts(docs)
    assert len(counts) > 600 > character_budget(512)
    tok = Tokenizer.train(docs, 512)  # before: "the training text is too small" (SentencePiece's required_chars)
    assert tok.vocab_size == 512
    rare = tok.rare_characters
    assert rare["distinct"] == len(counts) and rare["budget"] == character_budget(512) == 127
    assert rare["with_piece"] <= rare["budget"]
    used_bytes = 0
    for text in docs + [UNICODE_DOC, "".join(POOL)]:
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        assert int(tok.token_bytes[ids].sum()) == len(text.encode("utf-8"))
        used_bytes += sum(tok.sp.is_byte(i) for i in ids)
    assert used_bytes > 0
    rng = random.Random(1)
    for _ in range(100):
        text = random_unicode(rng, rng.randint(1, 60))
        ids = tok.encode(text)
        assert tok.decode(ids) == text and int(tok.token_bytes[ids].sum()) == len(text.encode("utf-8"))


def test_characters_that_fit_train_exactly_as_before():
    """Text within the character budget trains as SentencePiece did before the budget existed."""
    import io
    import pydoc_data.topics

    import sentencepiece as spm

    from frontier.data.tokenizer import SETTINGS, _sentences

    docs = [text for _, text in sorted(pydoc_data.topics.topics.items())][:20] + SAMPLES[:5]
    assert len(character_counts(docs)) <= character_budget(512)
    tok = Tokenizer.train(docs, 512)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=_sentences(docs), model_writer=model, vocab_size=512,
                                   num_threads=1, minloglevel=2, **SETTINGS)
    assert tok.model_proto == model.getvalue() and tok.rare_characters is None


def test_rare_characters_are_the_least_frequent_beyond_the_budget():
    from collections import Counter

    counts = Counter({"a": 5, "b": 3, "c": 3, "\u2581": 1, "d": 1})
    assert rare_characters(counts, 5) == set()
    assert rare_characters(counts, 3) == {"\u2581", " ", "d"}  # ties: lower code point first; the marker is a space
    assert rare_characters(counts, 2) == {"c", "\u2581", " ", "d"}


def test_a_coverage_rule_keeps_the_fewest_characters_that_cover_the_share():
    from collections import Counter

    counts = Counter({"a": 90, "b": 6, "c": 3, "d": 1})  # a 90%, a+b 96%, a+b+c 99%, all 100%
    assert rare_characters(counts, 4, coverage=0.95) == {"c", "d"}
    assert rare_characters(counts, 4, coverage=0.99) == {"d"}
    assert rare_characters(counts, 1, coverage=0.99) == {"b", "c", "d"}  # the budget still bounds it
    assert rare_characters(counts, 4, coverage=1.0) == set()


def test_character_rules_are_checked_and_bound_the_pieces():
    from frontier.data.tokenizer import EARLIER_RULE, CharacterRule
    from frontier.errors import UserError

    assert CharacterRule().budget(1024) == character_budget(1024) == 383 == EARLIER_RULE.budget(1024)
    assert CharacterRule(max_share=0.25).budget(1024) == 191
    for bad in (dict(coverage=0.0), dict(coverage=1.5), dict(max_share=0)):
        with pytest.raises(UserError):
            CharacterRule(**bad)


def test_a_coverage_rule_is_lossless_and_gives_fewer_characters_a_piece():
    from frontier.data.tokenizer import CharacterRule

    docs = many_character_docs()
    rule = CharacterRule(coverage=0.99, max_share=0.25)
    tok = Tokenizer.train(docs, 400, rule)
    assert tok.rule == rule and tok.rare_characters["budget"] == rule.budget(400)
    assert tok.character_pieces() <= rule.budget(400) < Tokenizer.train(docs, 400).character_pieces()
    for text in docs[:20] + [UNICODE_DOC, "".join(POOL)]:
        ids = tok.encode(text)
        assert tok.decode(ids) == text and int(tok.token_bytes[ids].sum()) == len(text.encode("utf-8"))


def test_the_manifest_records_a_rule_other_than_the_earlier_one(tmp_path):
    from frontier.data.dataset import prepare
    from frontier.data.tokenizer import CharacterRule

    docs = tmp_path / "docs"
    docs.mkdir()
    for i, text in enumerate(many_character_docs()[:60]):
        (docs / f"{i}.txt").write_text(text, encoding="utf-8")
    earlier = prepare(tmp_path / "a", text=[str(docs)], vocab_size=512, log=lambda *a: None)
    assert "characters" not in earlier.manifest["tokenizer"]
    ruled = prepare(tmp_path / "b", text=[str(docs)], vocab_size=512, log=lambda *a: None,
                    characters=CharacterRule(coverage=0.99))
    assert ruled.manifest["tokenizer"]["characters"] == {"coverage": 0.99, "max_share": 0.5}


def test_the_rule_study_measures_each_rule_on_a_folder_of_documents(corpus_dir, tmp_path):
    """`run_rule_study` on a user's folder: every rule prepared and trained, its record says what each rule gave a
    piece and how many bytes a token holds (the corpus has 153 distinct characters: more than either rule gives a
    piece at a vocabulary of 512, 127 and 63)."""
    from frontier.study.bench_records import load_bench_record
    from frontier.study.tokenizer_rules import RULES, run_rule_study

    rules = {k: RULES[k] for k in ("every character (earlier)", "at most a quarter")}
    rec = run_rule_study([str(corpus_dir)], rules=rules, vocab_size=512, recipe="baseline", profile="smoke", steps=2,
                         data_root=tmp_path / "data", root=tmp_path / "runs", out=tmp_path / "bench",
                         log=lambda *a: None)
    rows = {r["rule"]: r for r in rec["rows"]}
    assert set(rows) == set(rules)
    assert rows["at most a quarter"]["with_piece"] < rows["every character (earlier)"]["with_piece"]  # 153 distinct
    assert rows["at most a quarter"]["with_piece"] <= RULES["at most a quarter"].budget(512)
    for r in rows.values():
        assert r["val_bytes_per_token"] > 1.0 and r["runs"]["0"]["steps"] == 2 and r["runs"]["0"]["val_bpb"] > 0
    assert load_bench_record(rec["path"])["rows"] == rec["rows"]

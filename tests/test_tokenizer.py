import random

import pytest

from frontier.tokenizer import Tokenizer
from conftest import UNICODE_DOC

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

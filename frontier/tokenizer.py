"""A lossless SentencePiece BPE tokenizer, and how many bytes of text each token stands for.

Lossless means `decode(encode(text)) == text` for any Unicode text: identity normalisation (no NFKC), spaces
kept as they are, no dummy prefix, and byte fallback for anything outside the vocabulary. SentencePiece writes
spaces as U+2581 ("▁"), so a literal U+2581 in the text would come back as a space; `encode` spells that
character with its three byte pieces instead, which decode to the character itself.

Because every token decodes to a fixed byte string, `token_bytes[id]` summed over a document's tokens equals the
UTF-8 length of the document exactly; bits per byte relies on that.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from .errors import UserError

SPACE = "\u2581"
MAX_SENTENCE_BYTES = 1 << 15

# Everything that decides the tokenizer besides its training text; recorded in the data manifest.
SETTINGS = dict(
    model_type="bpe",
    byte_fallback=True,
    normalization_rule_name="identity",
    add_dummy_prefix=False,
    remove_extra_whitespaces=False,
    split_digits=True,
    allow_whitespace_only_pieces=True,
    character_coverage=1.0,
    unk_id=0,
    bos_id=1,
    eos_id=-1,
    pad_id=-1,
    max_sentence_length=MAX_SENTENCE_BYTES,
    hard_vocab_limit=True,
)


def _sentences(texts: Iterable[str]) -> Iterator[str]:
    """SentencePiece trains on 'sentences' of bounded length: paragraphs, split further where too long."""
    for text in texts:
        for para in text.split("\n\n"):
            while len(para.encode("utf-8")) > MAX_SENTENCE_BYTES // 2:
                cut = para.rfind("\n", 0, MAX_SENTENCE_BYTES // 8)
                cut = cut if cut > 0 else MAX_SENTENCE_BYTES // 8
                yield para[:cut]
                para = para[cut:]
            if para:
                yield para


class Tokenizer:
    def __init__(self, model_proto: bytes):
        import sentencepiece as spm

        self.model_proto = model_proto
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        self.vocab_size = self.sp.get_piece_size()
        self.bos_id = self.sp.bos_id()
        self._space_ids = [self.sp.piece_to_id(f"<0x{b:02X}>") for b in SPACE.encode("utf-8")]
        pieces = [self.sp.id_to_piece(i) for i in range(self.vocab_size)]
        special = np.array([self.sp.is_control(i) or self.sp.is_unknown(i) for i in range(self.vocab_size)])
        byte = np.array([self.sp.is_byte(i) for i in range(self.vocab_size)])
        nbytes = [len(p.replace(SPACE, " ").encode("utf-8")) for p in pieces]
        #: bytes of text each token stands for (0 for special tokens, 1 for byte-fallback pieces)
        self.token_bytes = np.where(special, 0, np.where(byte, 1, nbytes)).astype(np.int64)
        #: whether a token's text starts with a space (the parameter-golf convention needs it)
        self.leading_space = np.array([p.startswith(SPACE) and not b for p, b in zip(pieces, byte)])
        self.is_special = special

    # ------------------------------------------------------------------ training and files
    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int) -> "Tokenizer":
        import sentencepiece as spm

        model = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=_sentences(texts),
                model_writer=model,
                vocab_size=vocab_size,
                num_threads=1,
                minloglevel=2,
                **SETTINGS,
            )
        except RuntimeError as e:
            msg = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            if "Vocabulary size" in msg or "vocab_size" in msg:
                raise UserError(
                    f"the training text is too small for a vocabulary of {vocab_size} ({msg})",
                    "give more text or a smaller --vocab-size",
                ) from None
            raise
        return cls(model.getvalue())

    @classmethod
    def load(cls, path: str | Path) -> "Tokenizer":
        return cls(Path(path).read_bytes())

    def save(self, path: str | Path) -> None:
        Path(path).write_bytes(self.model_proto)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.model_proto).hexdigest()

    # ------------------------------------------------------------------ text <-> ids
    def encode(self, text: str) -> list[int]:
        if SPACE not in text:
            return self.sp.encode(text)
        ids: list[int] = []
        for i, part in enumerate(text.split(SPACE)):
            if i:
                ids.extend(self._space_ids)
            ids.extend(self.sp.encode(part))
        return ids

    def encode_document(self, text: str) -> list[int]:
        """A document as it lies in a shard: BOS, then its tokens."""
        return [self.bos_id] + self.encode(text)

    def decode(self, ids: Iterable[int]) -> str:
        return self.sp.decode([int(i) for i in ids])

    def piece(self, token_id: int) -> str:
        return self.sp.id_to_piece(int(token_id))

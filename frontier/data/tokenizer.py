"""A lossless SentencePiece BPE tokenizer, and how many bytes of text each token stands for.

Lossless means `decode(encode(text)) == text` for any Unicode text: identity normalisation (no NFKC), spaces
kept as they are, no dummy prefix, and byte fallback for anything outside the vocabulary. SentencePiece writes
spaces as U+2581 ("▁"), so a literal U+2581 in the text would come back as a space; `encode` spells that
character with its three byte pieces instead, which decode to the character itself.

Because every token decodes to a fixed byte string, `token_bytes[id]` summed over a document's tokens equals the
UTF-8 length of the document exactly; bits per byte relies on that.

Rare characters: SentencePiece gives every character of its training text a piece of its own before it learns any
merge (`character_coverage=1.0`), and fails when they do not fit. So `Tokenizer.train` decides which characters get
a piece (`CharacterRule`): the most frequent ones, as few as cover a share (`coverage`) of the text's characters,
and at most a share (`max_share`) of the pieces left after `<unk>`, `<s>` and the 256 byte pieces. The others
(`rare_characters`) are cut out of the sentences SentencePiece sees (each sentence is split at them, so no merge
spans them); encoding spells them with their UTF-8 byte pieces (`<0xNN>`, one byte each), as it does any character
unseen in training, so the tokenizer stays lossless and byte-exact whatever the rule. (Lowering `character_coverage` would do the same, but SentencePiece
accepts no value below 0.98, too little where rare characters are more than 2% of the text.) Text whose
characters fit trains exactly as before.

Too little text: with `hard_vocab_limit` SentencePiece refuses a vocabulary larger than the pieces it can learn
and states the largest it can; `Tokenizer.train` raises `TextTooSmall` with that size, and
`Tokenizer.train_largest` trains at the largest size that works instead.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

from ..errors import UserError

SPACE = "\u2581"
MAX_SENTENCE_BYTES = 1 << 15
META_PIECES = 2 + 256  # <unk>, <s> and the 256 byte-fallback pieces

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


@dataclass(frozen=True)
class CharacterRule:
    """Which characters of the training text get a piece of their own: the most frequent ones, as few as cover
    `coverage` of the text's characters (1.0: all of them), and at most `max_share` of the pieces left after
    `META_PIECES`. The others are spelled in UTF-8 byte pieces (lossless and byte-exact either way)."""

    coverage: float = 1.0
    max_share: float = 0.5

    def __post_init__(self):
        for name in ("coverage", "max_share"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0.0 < v <= 1.0):
                raise UserError(f"character rule {name} {v!r} is out of range", f"pass a share in (0, 1] for {name}")

    def budget(self, vocab_size: int) -> int:
        """The most characters that may have a piece at `vocab_size` (at least 1)."""
        return max(1, int((vocab_size - META_PIECES) * self.max_share))


# The rule data was prepared with before rules could be chosen (every character up to half the pieces): a manifest
# records its tokenizer's rule only where it differs from this one.
EARLIER_RULE = CharacterRule(coverage=1.0, max_share=0.5)


def character_budget(vocab_size: int, rule: CharacterRule = EARLIER_RULE) -> int:
    """How many distinct characters may have a piece of their own under `rule` (by default half of the pieces
    left after `META_PIECES`: vocabulary 512 gives 127, 1024 gives 383, 8192 gives 3967)."""
    return rule.budget(vocab_size)


def character_counts(texts: Iterable[str]) -> Counter:
    """How often each character occurs in the sentences SentencePiece trains on, counted as it counts them: a
    space is the space marker U+2581, and NUL is skipped."""
    counts: Counter = Counter()
    for sentence in _sentences(texts):
        counts.update(sentence)
    spaces = counts.pop(" ", 0)
    if spaces:
        counts[SPACE] += spaces
    counts.pop("\x00", None)
    return counts


def rare_characters(counts: Counter, budget: int, coverage: float = 1.0) -> set[str]:
    """The characters of `counts` beyond its `budget` most frequent ones (ties: lower code point first), and beyond
    the fewest of those that cover `coverage` of all characters counted, as they appear in text (the space marker
    stands for itself and the space); empty when all of them are kept."""
    ranked = sorted(counts, key=lambda c: (-counts[c], c))
    keep = min(len(ranked), budget)
    if coverage < 1.0:
        total, covered = sum(counts.values()), 0
        for i, c in enumerate(ranked[:keep]):
            covered += counts[c]
            if covered >= coverage * total:
                keep = i + 1
                break
    if keep >= len(ranked):
        return set()
    rare = set(ranked[keep:])
    if SPACE in rare:
        rare.add(" ")
    return rare


def _cut_at(sentences: Iterable[str], rare: set[str]) -> Iterator[str]:
    """`sentences` cut at every run of characters in `rare` (which are dropped), so that no merge spans them;
    the sentences themselves when `rare` is empty."""
    if not rare:
        yield from sentences
        return
    cut = re.compile("[" + "".join(re.escape(c) for c in sorted(rare)) + "]+")
    for sentence in sentences:
        for part in cut.split(sentence):
            if part:
                yield part


class TextTooSmall(UserError):
    """The training text cannot fill a vocabulary of `vocab_size`. `largest` is the largest size SentencePiece's
    message `detail` says it can learn at the same settings (None when it does not say)."""

    def __init__(self, vocab_size: int, largest: int | None, detail: str):
        self.vocab_size = vocab_size
        self.largest = largest
        super().__init__(f"the training text is too small for a vocabulary of {vocab_size} ({detail})",
                         "give more text or a smaller --vocab-size")


def _training_error(e: RuntimeError, vocab_size: int) -> Exception:
    """SentencePiece's error as the problem it is: too little text (`TextTooSmall`), too many distinct
    characters (a `UserError` naming them), or the original error."""
    msg = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
    if "Vocabulary size too high" in msg:
        m = re.search(r"<=\s*(\d+)", msg)
        return TextTooSmall(vocab_size, int(m.group(1)) if m else None, msg)
    if "required_chars" in msg:
        return UserError(
            f"the training text has more distinct characters than a vocabulary of {vocab_size} can give pieces "
            f"to ({msg})",
            "pass a larger --vocab-size",
        )
    return e


class Tokenizer:
    #: set by `train` when rare characters were left to byte pieces: {"distinct": distinct characters of the
    #: training text, "budget": `character_budget`, "with_piece": how many got a piece}; None otherwise
    rare_characters: dict | None = None
    #: the rule `train` gave pieces to characters by (a tokenizer loaded from a file does not know it)
    rule: CharacterRule | None = None

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
    def train(cls, texts: Sequence[str], vocab_size: int, rule: CharacterRule = EARLIER_RULE) -> "Tokenizer":
        """Train on `texts` (read twice: once to count characters, once by SentencePiece) with `SETTINGS`, the
        `rare_characters` that `rule` gives no piece cut out of the sentences. Raises `TextTooSmall` when the text
        cannot fill `vocab_size` pieces."""
        import sentencepiece as spm

        counts = character_counts(texts)
        budget = rule.budget(vocab_size)
        rare = rare_characters(counts, budget, rule.coverage)
        model = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=_cut_at(_sentences(texts), rare),
                model_writer=model,
                vocab_size=vocab_size,
                num_threads=1,
                minloglevel=2,
                **SETTINGS,
            )
        except RuntimeError as e:
            raise _training_error(e, vocab_size) from None
        tok = cls(model.getvalue())
        if rare:
            tok.rare_characters = {"distinct": len(counts), "budget": budget, "with_piece": tok.character_pieces()}
        tok.rule = rule
        return tok

    @classmethod
    def train_largest(cls, texts: Sequence[str], vocab_size: int, rule: CharacterRule = EARLIER_RULE) -> "Tokenizer":
        """Train at `vocab_size`, or, when the text is too small for it, at the largest size that works: the size
        SentencePiece states, tried in turn until one trains (each try can only be smaller; its rare-character
        budget is recomputed). Where SentencePiece does not state a size, a bisection finds it."""
        size = vocab_size
        while True:
            try:
                return cls.train(texts, size, rule)
            except TextTooSmall as e:
                if e.largest is None:
                    return cls._bisect_largest(texts, size, rule)
                if not META_PIECES < e.largest < size:
                    raise
                size = e.largest

    @classmethod
    def _bisect_largest(cls, texts: Sequence[str], too_large: int, rule: CharacterRule = EARLIER_RULE) -> "Tokenizer":
        """The tokenizer of the largest size below `too_large` that trains, by bisection (the largest size that
        works is assumed to be the only boundary). Raises `TextTooSmall` when none does."""
        best, lo, hi = None, META_PIECES + 1, too_large - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            try:
                best, lo = cls.train(texts, mid, rule), mid + 1
            except TextTooSmall:
                hi = mid - 1
        if best is None:
            raise TextTooSmall(too_large, None, "no vocabulary size works")
        return best

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

    def character_pieces(self) -> int:
        """How many pieces are one character of text (neither special nor a byte piece)."""
        return sum(1 for i in range(self.vocab_size)
                   if not self.is_special[i] and not self.sp.is_byte(i) and len(self.piece(i)) == 1)

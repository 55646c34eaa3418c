"""Dataset folders: `prepare` builds one (tokenizer, train and val shards, manifest); `Dataset` opens one.

A dataset folder holds `tokenizer.model`, `train_000000.bin ...`, `val_000000.bin ...`, where it has one
`test_000000.bin ...`, and `manifest.json` (input hashes, documents, bytes and tokens per split, tokenizer settings,
and with a test split the near-duplicate audit: `frontier.data.audit`). Folders without a test split (all of them
before test splits existed) open as before; only asking for their test split is an error. Preparing streams the
documents twice (once to split them and train the tokenizer on a sample of the train split, once to tokenize
them; with a test split once more in between, the training documents past the held-out ones' shingles), so inputs
of hundreds of MB never sit in memory whole. The folder is written under a temporary name and renamed at the end:
a failed `prepare` leaves nothing half-written, and an existing dataset is never overwritten.

The vocabulary belongs to the data: the model trained on a folder takes `Dataset.vocab_size`. When the train
split is too small for the asked `vocab_size`, `prepare` fails naming the largest size that works, or, with
`shrink_vocab=True` (the CLI's choice when the size came from a profile's default), prepares at that size and
records the asked size as `tokenizer.requested_vocab_size`. When the text has more distinct characters than the
vocabulary can give pieces to, the rare ones are spelled in UTF-8 byte pieces (see `frontier.data.tokenizer`), recorded
as `tokenizer.rare_characters`. Both keys appear only when they apply, so the manifest of data that needs neither
is as before.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from ..errors import UserError
from . import audit as audit_mod
from . import corpus
from .shards import ShardWriter, read_shard
from .tokenizer import SETTINGS as TOKENIZER_SETTINGS
from .tokenizer import EARLIER_RULE, CharacterRule, Tokenizer

MANIFEST = "manifest.json"
# The share of documents a named corpus holds out as its test split (`prepare`'s default `test_fraction`): the
# docstrings corpus has one; the embedded and stdlib-source corpora keep the two splits their records were made on.
TEST_FRACTION = {"docstrings": 0.05}
TOKENIZER_FILE = "tokenizer.model"
TOKENIZER_SAMPLE_CHARS = 50_000_000  # the tokenizer trains on at most this much of the train split
FORMAT_VERSION = 1


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "frontier"


def split_of(text: str, seed: int, val_fraction: float, test_fraction: float = 0.0) -> tuple[str, float]:
    """Deterministic document-level split: a document goes to val when its seeded hash u falls below
    `val_fraction`, to test when u falls in [val_fraction, val_fraction + test_fraction), else to train (without a
    test split, val and train as they always were)."""
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8, key=str(seed).encode()).digest()
    u = int.from_bytes(digest, "little") / 2**64
    if u < val_fraction:
        return "val", u
    return ("test" if u < val_fraction + test_fraction else "train"), u


# ----------------------------------------------------------------------------- sources


@dataclass
class _Source:
    """Where documents come from: the embedded corpus, or files (optionally a separate validation set)."""

    text: Sequence[str] | None
    val_text: Sequence[str] | None
    corpus: str = "embedded"  # the named corpus (`corpus.CORPORA`) read when there is no `text`
    max_bytes: int | None = None  # only the named corpus's first documents, up to this many bytes (None: all)
    accept_sha256: str | None = None  # a pinned corpus's hash accepted though it is not the pinned one

    def __post_init__(self):
        self.embedded, self.pinned = None, None
        if not self.text:
            docs = corpus.corpus_documents(self.corpus)
            if self.corpus in corpus.PINNED_SHA256:  # the whole corpus's hash, checked before any cut
                self.pinned = corpus.pinned_corpus_info(self.corpus, docs, self.accept_sha256)
            self.embedded = _first_bytes(docs, self.max_bytes)
        self.train_files = [f for p in self.text for f in corpus.document_files(p)] if self.text else []
        self.val_files = [f for p in self.val_text for f in corpus.document_files(p)] if self.val_text else []

    def documents(self) -> Iterator[tuple[corpus.Document, str | None]]:
        """(document, forced split or None) in a fixed order."""
        if self.embedded is not None:
            for d in self.embedded:
                yield d, ("train" if self.val_files else None)
        for f in self.train_files:
            for d in corpus.read_documents(f):
                yield d, ("train" if self.val_files else None)
        for f in self.val_files:
            for d in corpus.read_documents(f):
                yield d, "val"

    def describe(self) -> dict:
        def files(fs):
            return [{"path": str(f), "sha256": _sha256_file(f), "bytes": f.stat().st_size} for f in fs]

        named = {"corpus": self.corpus} if self.corpus != "embedded" and not self.text else {}  # embedded: as before
        cut = {"corpus_bytes": self.max_bytes} if self.max_bytes is not None and not self.text else {}
        pinned = {"pinned": self.pinned} if self.pinned is not None else {}
        return {
            **named,
            **cut,
            **pinned,
            "embedded": corpus.embedded_corpus_info(self.embedded) if self.embedded is not None else None,
            "text": [str(p) for p in self.text] if self.text else [],
            "val_text": [str(p) for p in self.val_text] if self.val_text else [],
            "train_files": files(self.train_files),
            "val_files": files(self.val_files),
        }


def _first_bytes(docs: list, max_bytes: int | None) -> list:
    """The first documents whose UTF-8 text adds up to at most `max_bytes` (at least one; None: all)."""
    if max_bytes is None:
        return docs
    out, total = [], 0
    for d in docs:
        total += len(d.text.encode("utf-8"))
        if out and total > max_bytes:
            break
        out.append(d)
    return out


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ----------------------------------------------------------------------------- prepare


def prepare(
    out: str | Path,
    text: Sequence[str] | None = None,
    val_text: Sequence[str] | None = None,
    val_fraction: float = 0.05,
    vocab_size: int = 1024,
    seed: int = 0,
    log: Callable[[str], None] = print,
    shrink_vocab: bool = False,
    corpus_name: str = "embedded",
    corpus_bytes: int | None = None,
    characters: CharacterRule = EARLIER_RULE,
    test_fraction: float | None = None,
    accept_corpus_hash: str | None = None,
    near_duplicate_share: float = audit_mod.NEAR_DUPLICATE_SHARE,
) -> "Dataset":
    """Build the dataset folder `out` from `text` (default: the named corpus `corpus_name`, `corpus.CORPORA`: the
    embedded one, or the standard library's source) with a `vocab_size` tokenizer; `corpus_bytes`: only the named
    corpus's first documents up to that many bytes (the smoke profile's tiny data).

    When the train split is too small for `vocab_size`: with `shrink_vocab`, the tokenizer takes the largest size
    that works (and says so through `log`); without, a `UserError` names that size. `characters`: which characters
    get a piece of their own (`frontier.data.tokenizer.CharacterRule`; recorded in the manifest where it differs
    from the rule data was prepared with before rules could be chosen).

    `test_fraction` (default: the named corpus's `TEST_FRACTION`, 0 for text files): the share of documents held
    out as a test split beside validation (by the same document hash: `split_of`). With a test split, the
    near-duplicate audit (`frontier.data.audit`) runs: validation and test documents sharing
    `near_duplicate_share` or more of their 13-word shingles with the training split move to it; the manifest
    records the audit and `documents`, `bytes`, `tokens` of each of train, val and test. Without one the folder
    is as it always was. `accept_corpus_hash`: a pinned corpus (`corpus.PINNED_SHA256`) read with this hash,
    though it is not the pinned one, is accepted (and recorded as accepted).
    """
    out = Path(out)
    if text and corpus_name != "embedded":
        raise UserError(f"both --corpus {corpus_name} and --text were given", "pass one: a named corpus or your files")
    if corpus_name not in corpus.CORPORA:
        raise UserError(f"unknown corpus {corpus_name!r}", f"choose one of {', '.join(corpus.CORPORA)}")
    if corpus_bytes is not None and (text or corpus_bytes < 1):
        raise UserError(f"corpus_bytes={corpus_bytes} cuts a named corpus to its first documents up to that size",
                        "pass a positive number, and no text files with it")
    if not 0.0 < val_fraction < 1.0:
        raise UserError(f"--val-fraction must be between 0 and 1 (got {val_fraction})", "pass e.g. --val-fraction 0.05")
    if test_fraction is None:
        test_fraction = 0.0 if text else TEST_FRACTION.get(corpus_name, 0.0)
    if not 0.0 <= test_fraction < 1.0 or val_fraction + test_fraction >= 1.0:
        raise UserError(f"--test-fraction {test_fraction} with --val-fraction {val_fraction} leaves no training split",
                        "pass fractions that add up to less than 1, e.g. --test-fraction 0.05")
    if test_fraction and val_text:
        raise UserError("--test-fraction was given with --val-text", "pass one: your own validation files, or "
                        "fractions of --text for validation and test")
    if not 0.0 < near_duplicate_share <= 1.01:
        raise UserError(f"near_duplicate_share={near_duplicate_share} is not a share of shingles",
                        "pass a share in (0, 1], e.g. 0.5 (above 1: audit without moving)")
    if not 256 + 2 < vocab_size <= 65535:
        raise UserError(f"--vocab-size {vocab_size} is out of range", "use a size between 259 and 65535 (uint16 shards)")
    if (out / MANIFEST).exists():
        raise UserError(f"{str(out)!r} already holds a dataset", "choose another --out or delete that folder first")
    if out.exists() and any(out.iterdir()):
        raise UserError(f"{str(out)!r} exists and is not empty", "choose another --out or an empty folder")
    parent = out.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
    except OSError as e:
        raise UserError(f"cannot write to {str(parent)!r} ({e.strerror})", "choose a writable --out folder") from None
    try:
        source = _Source(text, val_text, corpus_name, corpus_bytes, accept_corpus_hash)
        manifest = _prepare_into(work, source, val_fraction, vocab_size, shrink_vocab, seed, log, characters,
                                 test_fraction, near_duplicate_share)
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        try:
            if out.exists():
                out.rmdir()
            work.rename(out)
        except OSError:
            if (out / MANIFEST).exists():  # another process prepared it meanwhile: its dataset stands, ours goes
                raise UserError(f"{str(out)!r} already holds a dataset", "choose another --out") from None
            raise
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return Dataset(out)


def _train_tokenizer(texts: list[str], vocab_size: int, shrink_vocab: bool, log,
                     characters: CharacterRule = EARLIER_RULE) -> Tokenizer:
    """The tokenizer of `texts` at `vocab_size`; when they are too small for it, at the largest size that works
    if `shrink_vocab` (logged), else a `UserError` naming that size."""
    tok = Tokenizer.train_largest(texts, vocab_size, characters)
    if tok.vocab_size == vocab_size:
        return tok
    if not shrink_vocab:
        raise UserError(
            f"the training text is too small for a vocabulary of {vocab_size}: the largest that works is {tok.vocab_size}",
            f"pass --vocab-size {tok.vocab_size} or give more text",
        )
    log(f"prepare: the training text is too small for a vocabulary of {vocab_size}; "
        f"using {tok.vocab_size}, the largest that works")
    return tok


def _tokenizer_manifest(tok: Tokenizer, vocab_size: int) -> dict:
    """The manifest's `tokenizer` section; `rare_characters` and `requested_vocab_size` only where they apply."""
    m = {
        "file": TOKENIZER_FILE,
        "vocab_size": tok.vocab_size,
        "bos_id": tok.bos_id,
        "sha256": tok.sha256,
        "trained_on": "train split only",
        "settings": {k: v for k, v in TOKENIZER_SETTINGS.items()},
    }
    if tok.rule is not None and tok.rule != EARLIER_RULE:
        m["characters"] = dataclasses.asdict(tok.rule)
    if tok.rare_characters is not None:
        m["rare_characters"] = {**tok.rare_characters, "others_as": "UTF-8 byte pieces <0xNN>, 1 byte each"}
    if tok.vocab_size != vocab_size:
        m["requested_vocab_size"] = vocab_size
    return m


def _prepare_into(work: Path, source: _Source, val_fraction: float, vocab_size: int, shrink_vocab: bool, seed: int,
                  log, characters: CharacterRule = EARLIER_RULE, test_fraction: float = 0.0,
                  near_duplicate_share: float = audit_mod.NEAR_DUPLICATE_SHARE) -> dict:
    t0 = time.time()
    # Pass 1: assign splits, count, and sample the train split for the tokenizer (and keep the held-out texts for
    # the audit, when there is a test split).
    splits, hashes, sample, sample_chars, heldout = [], [], [], 0, {}
    for doc, forced in source.documents():
        split, u = split_of(doc.text, seed, val_fraction, test_fraction)
        splits.append(forced or split)
        hashes.append(u)
        if splits[-1] == "train" and sample_chars < TOKENIZER_SAMPLE_CHARS:
            sample.append((len(splits) - 1, doc.text))
            sample_chars += len(doc.text)
        elif splits[-1] != "train" and test_fraction:
            heldout[len(splits) - 1] = doc
    n_needed = 3 if test_fraction else 2
    if len(splits) < n_needed:
        raise UserError(f"found {len(splits)} non-empty document(s)",
                        f"give at least {n_needed} documents (one goes to each held-out split)")
    if "val" not in splits:  # tiny inputs: the document with the smallest hash goes to val
        i = int(np.argmin(hashes))
        splits[i] = "val"
        if test_fraction:
            heldout[i] = _document_at(source, i)
    if test_fraction and "test" not in splits:  # ... and the training document with the smallest hash to test
        train_at = [i for i, s in enumerate(splits) if s == "train"]
        if train_at:
            i = min(train_at, key=lambda j: hashes[j])
            splits[i] = "test"
            heldout[i] = _document_at(source, i)
    if "train" not in splits:
        raise UserError("every document landed in a held-out split",
                        "lower --val-fraction (and --test-fraction) or add --text documents")
    audit = None
    if test_fraction:
        log(f"prepare: auditing {len(heldout)} held-out documents for near-duplicates of the training split")
        moved, audit = audit_mod.audit_splits(
            splits, lambda i: heldout[i].text,
            (doc.text for (doc, _), s in zip(source.documents(), splits) if s == "train"), near_duplicate_share)
        audit["moved"] = [{"document": i, "source": heldout[i].source, "from": splits[i]} for i in sorted(moved)]
        for i in moved:
            splits[i] = "train"
        del heldout
        if "val" not in splits or "test" not in splits:
            raise UserError("the near-duplicate audit moved every document of a held-out split to train",
                            "raise --val-fraction and --test-fraction, or give more distinct documents")
    names = ("train", "val", "test") if test_fraction else ("train", "val")
    counts = ", ".join(f"{splits.count(s)} {s}" for s in names)
    log(f"prepare: {counts} documents; training the tokenizer")
    tok = _train_tokenizer([text for i, text in sample if splits[i] == "train"], vocab_size, shrink_vocab, log,
                           characters)
    del sample
    tok.save(work / TOKENIZER_FILE)
    # Pass 2: tokenize into shards.
    writers = {s: ShardWriter(work, s) for s in names}
    stats = {s: {"documents": 0, "bytes": 0} for s in names}
    for (doc, _), split in zip(source.documents(), splits):
        writers[split].add(tok.encode_document(doc.text))
        stats[split]["documents"] += 1
        stats[split]["bytes"] += len(doc.text.encode("utf-8"))
    for s, w in writers.items():
        w.flush()
        stats[s]["tokens"] = w.tokens
        stats[s]["shards"] = [p.name for p in w.paths]
    log(
        "prepare: " + ", ".join(f"{stats[s]['tokens']:,} {s}" for s in names) + " tokens ("
        + " / ".join(f"{stats[s]['bytes']:,}" for s in names) + f" bytes) in {time.time() - t0:.1f}s"
    )
    split = {
        "method": "val_text" if source.val_files else "document hash (blake2b keyed by seed) < val_fraction",
        "seed": seed,
        "val_fraction": None if source.val_files else val_fraction,
    }
    if test_fraction:  # only then: folders without a test split keep the manifest they always had
        split["method"] = ("document hash u (blake2b keyed by seed): val if u < val_fraction, test if u < "
                           "val_fraction + test_fraction, else train; then the near-duplicate audit")
        split["test_fraction"] = test_fraction
    manifest = {
        "format_version": FORMAT_VERSION,
        "python_version": sys.version.split()[0],
        "sources": source.describe(),
        "split": split,
        "tokenizer": _tokenizer_manifest(tok, vocab_size),
        "train": stats["train"],
        "val": stats["val"],
    }
    if test_fraction:
        manifest["test"] = stats["test"]
        manifest["audit"] = audit
    return manifest


def _document_at(source: "_Source", i: int) -> corpus.Document:
    """The i-th document of `source` (one more pass: only for the tiny inputs' fallbacks)."""
    for j, (doc, _) in enumerate(source.documents()):
        if j == i:
            return doc
    raise IndexError(i)


# ----------------------------------------------------------------------------- opening a dataset


class Dataset:
    """A prepared dataset folder, checked on open."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        fix = "run `frontier prepare --out DIR` and pass that DIR as --data"
        if not self.folder.is_dir():
            raise UserError(f"data folder {str(self.folder)!r} does not exist", fix)
        mpath = self.folder / MANIFEST
        if not mpath.is_file():
            raise UserError(f"{str(self.folder)!r} is not a dataset folder (no {MANIFEST})", fix)
        raw = mpath.read_bytes()
        try:
            self.manifest = json.loads(raw)
        except json.JSONDecodeError:
            raise UserError(f"{str(mpath)!r} is not valid JSON", "re-create the data folder with `frontier prepare`") from None
        self.manifest_hash = hashlib.sha256(raw).hexdigest()[:16]
        tpath = self.folder / self.manifest["tokenizer"]["file"]
        if not tpath.is_file():
            raise UserError(f"tokenizer {str(tpath)!r} is missing", "re-create the data folder with `frontier prepare`")
        self.tokenizer = Tokenizer.load(tpath)
        if self.tokenizer.sha256 != self.manifest["tokenizer"]["sha256"]:
            raise UserError(f"tokenizer {str(tpath)!r} does not match its manifest", "re-create the data folder with `frontier prepare`")
        self.train_shards = [self.folder / n for n in self.manifest["train"]["shards"]]
        self.val_shards = [self.folder / n for n in self.manifest["val"]["shards"]]
        # A folder prepared without a test split (or before there were test splits) has no "test" section.
        self.test_shards = [self.folder / n for n in self.manifest["test"]["shards"]] if self.has_test else []
        self._train = [read_shard(p) for p in self.train_shards]  # validates every shard now
        self._val = [read_shard(p) for p in self.val_shards]
        self._test = [read_shard(p) for p in self.test_shards]

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    @property
    def val_bytes(self) -> int:
        """The UTF-8 length of the validation documents, counted from the text when the folder was prepared."""
        return int(self.manifest["val"]["bytes"])

    @property
    def has_test(self) -> bool:
        """Whether the folder holds a test split (prepared with one: `prepare(test_fraction=...)`)."""
        return "test" in self.manifest

    @property
    def test_bytes(self) -> int:
        """The UTF-8 length of the test documents (`val_bytes`'s counterpart); a clear error without a test split."""
        self._need_test()
        return int(self.manifest["test"]["bytes"])

    def train_tokens(self) -> list[np.ndarray]:
        return self._train

    def val_tokens(self) -> np.ndarray:
        return np.concatenate(self._val) if len(self._val) != 1 else np.asarray(self._val[0])

    def test_tokens(self) -> np.ndarray:
        """The test split as one token stream, exactly as `val_tokens` gives validation (BOS + tokens per
        document); a clear error without a test split."""
        self._need_test()
        return np.concatenate(self._test) if len(self._test) != 1 else np.asarray(self._test[0])

    def heldout_tokens(self, split: str) -> np.ndarray:
        """The tokens of held-out split `split` ("val" or "test"), so that a test split is scored as validation is."""
        if split == "val":
            return self.val_tokens()
        if split == "test":
            return self.test_tokens()
        raise UserError(f"unknown held-out split {split!r}", "choose val or test")

    def heldout_bytes(self, split: str) -> int:
        """The UTF-8 length of held-out split `split` ("val" or "test"): the bytes of bits per byte."""
        if split == "val":
            return self.val_bytes
        if split == "test":
            return self.test_bytes
        raise UserError(f"unknown held-out split {split!r}", "choose val or test")

    def _need_test(self) -> None:
        if not self.has_test:
            raise UserError(
                f"data folder {str(self.folder)!r} has no test split (prepared without one)",
                "prepare a folder with a test split: `frontier prepare --corpus docstrings`, or --test-fraction 0.05 "
                "with --text",
            )

    def check_vocab(self, vocab_size: int, what: str) -> None:
        """A one-line `UserError` unless the folder's vocabulary is `vocab_size` (what `what` needs)."""
        if self.vocab_size != vocab_size:
            raise UserError(
                f"data folder {str(self.folder)!r} has a {self.vocab_size}-token vocabulary but {what} needs {vocab_size}",
                f"build the model for the data's vocabulary (resolve(..., vocab_size={self.vocab_size})) "
                f"or use data prepared with --vocab-size {vocab_size}",
            )


def embedded_dataset(vocab_size: int, log: Callable[[str], None] = print, root: Path | None = None,
                     corpus_name: str = "embedded", max_bytes: int | None = None) -> Dataset:
    """The embedded corpus (or another named one, `corpus.CORPORA`) prepared for `vocab_size`, cached under
    ~/.cache/frontier/data (built on first use); `max_bytes`: only its first documents up to that many bytes (a
    folder of its own)."""
    folder = (root or cache_dir() / "data") / embedded_folder_name(vocab_size, corpus_name, max_bytes)
    if not (folder / MANIFEST).exists():
        log(f"prepare: building the {corpus_name} corpus for vocabulary {vocab_size} in {folder}")
        try:
            prepare(folder, vocab_size=vocab_size, log=log, corpus_name=corpus_name, corpus_bytes=max_bytes)
        except UserError as e:
            if "already holds a dataset" not in e.problem:  # another process finished it first
                raise
    return Dataset(folder)


def embedded_folder_name(vocab_size: int, corpus_name: str = "embedded", max_bytes: int | None = None,
                         python: str | None = None) -> str:
    """The name of the folder `embedded_dataset` prepares a named corpus in (under Python `python`, default this
    one: the embedded corpus is read from its standard library; a pinned corpus, `corpus.PINNED_SHA256`, is the
    same under every Python and its name says none)."""
    cut = f"-b{max_bytes}" if max_bytes else ""
    if corpus_name in corpus.PINNED_SHA256:
        return f"{corpus_name}-v{vocab_size}{cut}"
    return f"{corpus_name}-py{python or sys.version.split()[0]}-v{vocab_size}{cut}"


def profile_dataset(profile, log: Callable[[str], None] = print, corpus_name: str | None = None) -> Dataset:
    """The named corpus `corpus_name` (default: the profile's own, `Profile.corpus`) as `profile` (a name or a
    `Profile`) trains on: at its vocabulary, cut to its first documents up to its `corpus_bytes` where it sets them
    (smoke: tiny data)."""
    from ..profiles import get_profile

    p = get_profile(profile)
    return embedded_dataset(p.vocab_size, log=log, corpus_name=corpus_name or p.corpus, max_bytes=p.corpus_bytes)


def run_dataset(data: dict, folder: str | Path | None = None, log: Callable[[str], None] = print) -> Dataset:
    """The dataset a run trained on, from its record's `data` section (`folder`, `manifest_hash`): `folder` when
    given; else the record's folder where it exists; else, when that folder was one `embedded_dataset` prepares (a
    named corpus in the cache, on another machine), that corpus prepared here, if its manifest is the record's."""
    if folder is not None:
        return Dataset(folder)
    old = Path(data["folder"])
    if (old / MANIFEST).is_file():
        return Dataset(old)
    import re

    named = re.fullmatch(r"(.+?)-(?:py\d[\d.]*-)?v(\d+)(?:-b(\d+))?", old.name)
    if not named or named.group(1) not in corpus.CORPORA:
        raise UserError(f"the run's data folder {str(old)!r} is not on this machine, and it is not a named corpus",
                        "pass the folder it was prepared in as data=DIR (`frontier prepare --text ... --out DIR`)",
                        "pass the folder it was prepared in as --data DIR (`frontier prepare --text ... --out DIR`)")
    name, vocab, cut = named.group(1), int(named.group(2)), int(named.group(3)) if named.group(3) else None
    log(f"the run's data folder {old} is not here: using the {name} corpus prepared on this machine")
    here = embedded_dataset(vocab, log=log, corpus_name=name, max_bytes=cut)
    if here.manifest_hash != data["manifest_hash"]:
        how = f"frontier prepare --corpus {name} --vocab-size {vocab}" + (f", cut to {cut} bytes," if cut else "")
        raise UserError(f"the {name} corpus prepared here ({here.folder}, manifest {here.manifest_hash}) is not the "
                        f"data the run trained on (manifest {data['manifest_hash']}; its folder {str(old)!r} is "
                        "not here)", f"pass that data as data=DIR (`{how} --out DIR` under the run's Python)",
                        f"pass that data as --data DIR (`{how} --out DIR` under the run's Python)")
    return here

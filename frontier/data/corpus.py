"""Documents: the embedded corpus that ships inside every Python, and the user's own text.

The embedded corpus is English prose about Python: the pydoc topics (`pydoc_data.topics`) and the long
docstrings of the standard library's pure-Python modules, read from source with `ast` (nothing is imported).
It is built deterministically, but it differs between Python versions, so its manifest records the version
and a hash. On Python 3.11 it is about 1.7 MB. A second corpus, different in kind, is the standard library's
source code itself (`stdlib-source`, about 2 MB of modules; `frontier prepare --corpus stdlib-source`).

User text: a `.txt` or `.md` file is one document; each line of a `.jsonl` (or `.jsonl.gz`) file with a
`"text"` field is one document. Documents stream one at a time; nothing holds the whole corpus.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import json
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..errors import UserError

TEXT_SUFFIXES = (".txt", ".md")
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz")

# Standard-library folders that are tests, demos, vendored tools or GUI code rather than documentation.
_STDLIB_SKIP = {"test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "tkinter",
                "turtledemo", "ensurepip", "pydoc_data", "__pycache__", "distutils"}
MIN_DOCSTRING_CHARS = 100


@dataclass(frozen=True)
class Document:
    text: str
    source: str  # file path (with ":line" for JSONL) or "embedded:<name>"


# ----------------------------------------------------------------------------- the embedded corpus


def _docstrings_in_source_order(tree: ast.AST) -> Iterator[str]:
    if isinstance(tree, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        doc = ast.get_docstring(tree, clean=True)
        if doc:
            yield doc
    for child in ast.iter_child_nodes(tree):
        yield from _docstrings_in_source_order(child)


def _stdlib_modules() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if set(rel.parts[:-1]) & _STDLIB_SKIP or rel.parts[0].startswith("test"):
            continue
        files.append(path)
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def embedded_documents() -> list[Document]:
    """The embedded corpus: one document per pydoc topic, one per stdlib module with long docstrings."""
    import pydoc_data.topics

    docs = [Document(text, f"embedded:topic:{key}") for key, text in sorted(pydoc_data.topics.topics.items())]
    root = Path(sysconfig.get_paths()["stdlib"])
    seen: set[str] = set()
    for path in _stdlib_modules():
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        parts = []
        for doc in _docstrings_in_source_order(tree):
            if len(doc) >= MIN_DOCSTRING_CHARS and doc not in seen:
                seen.add(doc)
                parts.append(doc)
        if parts:
            docs.append(Document("\n\n".join(parts), f"embedded:module:{path.relative_to(root).as_posix()}"))
    return docs


# The corpora every Python carries, by the name `frontier prepare --corpus` takes: the embedded one (prose about
# Python) and a second one, different in kind (Python code).
CORPORA = ("embedded", "stdlib-source")
SOURCE_MAX_BYTES = 2_000_000  # the stdlib-source corpus: about the embedded corpus's size


def stdlib_source_documents(max_bytes: int | None = None) -> list[Document]:
    """The standard library's own source code: one document per pure-Python module (those the embedded corpus
    reads docstrings from), whole, comments and docstrings included. The modules are taken in the order of the
    SHA-256 of their relative path (a fixed sample across the library, not its first letters) until `max_bytes`
    of UTF-8 text (default `SOURCE_MAX_BYTES`); deterministic for one Python version."""
    max_bytes = max_bytes or SOURCE_MAX_BYTES
    root = Path(sysconfig.get_paths()["stdlib"])
    paths = sorted(_stdlib_modules(), key=lambda p: hashlib.sha256(p.relative_to(root).as_posix().encode()).hexdigest())
    docs, size = [], 0
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, ValueError):
            continue
        n = len(text.encode("utf-8"))
        if not text.strip() or size + n > max_bytes:
            continue
        docs.append(Document(text, f"stdlib-source:{path.relative_to(root).as_posix()}"))
        size += n
    return docs


def corpus_documents(name: str) -> list[Document]:
    """The documents of a named corpus (`CORPORA`); an unknown name is one clear error."""
    if name == "embedded":
        return embedded_documents()
    if name == "stdlib-source":
        return stdlib_source_documents()
    raise UserError(f"unknown corpus {name!r}", f"choose one of {', '.join(CORPORA)}, or pass --text files")


def embedded_corpus_info(docs: list[Document]) -> dict:
    h = hashlib.sha256()
    for d in docs:
        h.update(d.text.encode("utf-8"))
        h.update(b"\x00")
    return {
        "python_version": sys.version.split()[0],
        "documents": len(docs),
        "bytes": sum(len(d.text.encode("utf-8")) for d in docs),
        "sha256": h.hexdigest(),
    }


# ----------------------------------------------------------------------------- the user's own text


def document_files(path: str | Path) -> list[Path]:
    """The document files under `path` (a file or a folder), sorted; a clear error if there are none."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"data path {str(p)!r} does not exist", "pass a file or folder of .txt/.md/.jsonl documents")
    if p.is_file():
        if not _is_document_file(p):
            raise UserError(
                f"{str(p)!r} is not a .txt, .md or .jsonl file",
                "rename it or pass a folder of .txt/.md/.jsonl documents",
            )
        return [p]
    files = sorted((f for f in p.rglob("*") if f.is_file() and _is_document_file(f)), key=lambda f: f.as_posix())
    if not files:
        raise UserError(f"folder {str(p)!r} holds no .txt, .md or .jsonl files", "point --text at a folder of documents")
    return files


def _is_document_file(p: Path) -> bool:
    name = p.name.lower()
    return name.endswith(TEXT_SUFFIXES) or name.endswith(JSONL_SUFFIXES)


def read_documents(path: Path) -> Iterator[Document]:
    """Stream the documents of one file. Empty documents are skipped."""
    name = path.name.lower()
    if name.endswith(TEXT_SUFFIXES):
        raw = path.read_bytes()
        text = _decode(raw, path)
        if text:
            yield Document(text, str(path))
        return
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                obj = json.loads(_decode(line, where))
            except json.JSONDecodeError as e:
                raise UserError(f"{where} is not valid JSON ({e.msg})", "fix or remove that line") from None
            text = obj.get("text") if isinstance(obj, dict) else None
            if not isinstance(text, str):
                raise UserError(f"{where} has no string field \"text\"", "export one JSON object per line with a \"text\" field")
            if text:
                yield Document(text, where)


def _decode(raw: bytes, where) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(
            f"{where} is not UTF-8 (byte {e.start}: {raw[e.start:e.start + 1]!r})",
            "convert it to UTF-8, e.g. `iconv -f latin1 -t utf-8`",
        ) from None

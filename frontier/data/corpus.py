"""Documents: the embedded corpus that ships inside every Python, and the user's own text.

The embedded corpus is English prose about Python: the pydoc topics (`pydoc_data.topics`) and the long
docstrings of the standard library's pure-Python modules, read from source with `ast` (nothing is imported).
It is built deterministically, but it differs between Python versions, so its manifest records the version
and a hash. On Python 3.11 it is about 1.7 MB. A second corpus, different in kind, is the standard library's
source code itself (`stdlib-source`, about 2 MB of modules; `frontier prepare --corpus stdlib-source`).

The docstrings corpus (`docstrings`) is the same rule applied to six scientific packages this project installs at
pinned versions (`DOCSTRING_PACKAGES`: torch, scipy, sympy, numpy, matplotlib, networkx): about 19 MB, one
document per module. It does not depend on the Python version (only on those packages' sources, read with `ast`
and cleaned by the project's own copy of `inspect.cleandoc`), and its content hash is pinned
(`PINNED_SHA256`): other package versions give another hash, which `prepare` refuses unless it is accepted by
name (`frontier prepare --accept-corpus-hash HASH`). docs/corpus.md says why this corpus and what it measures.

User text: a `.txt` or `.md` file is one document; each line of a `.jsonl` (or `.jsonl.gz`) file with a
`"text"` field is one document. Documents stream one at a time; nothing holds the whole corpus.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import importlib.metadata
import importlib.util
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


def _long_and_new(docstrings, seen: set[str]) -> list[str]:
    """The docstrings of at least `MIN_DOCSTRING_CHARS` characters not in `seen`, in order; each kept one joins
    `seen` (a corpus drops exact duplicates across its modules)."""
    parts = []
    for doc in docstrings:
        if len(doc) >= MIN_DOCSTRING_CHARS and doc not in seen:
            seen.add(doc)
            parts.append(doc)
    return parts


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
        parts = _long_and_new(_docstrings_in_source_order(tree), seen)
        if parts:
            docs.append(Document("\n\n".join(parts), f"embedded:module:{path.relative_to(root).as_posix()}"))
    return docs


# ----------------------------------------------------------------------------- the docstrings of pinned packages

# The packages whose long docstrings make the docstrings corpus, in the order they are read (an exact duplicate
# is kept where it is first read), at the versions this project installs (pyproject's `corpus` extra; torch is
# installed by `make venv` at this version). Only the release is compared: torch's "+cpu" is the same source.
DOCSTRING_PACKAGES = (("torch", "2.13.0"), ("scipy", "1.17.1"), ("sympy", "1.14.0"), ("numpy", "2.4.6"),
                      ("matplotlib", "3.11.2"), ("networkx", "3.6.1"))
# Folders of those packages that are tests, test helpers or vendored code rather than their documentation.
_PACKAGE_SKIP = {"test", "tests", "testing", "_vendor", "vendored", "_vendored", "__pycache__"}


def _cleandoc(doc: str) -> str:
    """`inspect.cleandoc` as Python 3.11 has it (tabs expanded, the common indentation of the lines after the
    first removed, blank lines at both ends dropped): kept here so that the corpus does not change with the
    Python that reads it."""
    lines = doc.expandtabs().split("\n")
    margin = sys.maxsize
    for line in lines[1:]:
        content = len(line.lstrip())
        if content:
            margin = min(margin, len(line) - content)
    if lines:
        lines[0] = lines[0].lstrip()
    if margin < sys.maxsize:
        for i in range(1, len(lines)):
            lines[i] = lines[i][margin:]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


def _raw_docstrings(tree: ast.AST) -> Iterator[str]:
    """The docstrings of a module, its classes and functions, in source order, as written (uncleaned)."""
    if isinstance(tree, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        body = tree.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            yield body[0].value.value
    for child in ast.iter_child_nodes(tree):
        yield from _raw_docstrings(child)


def package_root(name: str) -> Path:
    """The folder of an installed package, found without importing it; one clear error if it is not installed."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"package {name!r} is not installed (the docstrings corpus reads it)",
                        "run `make venv`, which installs the pinned versions")
    return Path(list(spec.submodule_search_locations)[0])


def installed_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def package_modules(name: str) -> list[Path]:
    """The package's .py files outside test and vendored folders, sorted by their path inside it."""
    root = package_root(name)
    files = [p for p in root.rglob("*.py") if not set(p.relative_to(root).parts[:-1]) & _PACKAGE_SKIP]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def docstring_documents(packages=DOCSTRING_PACKAGES) -> list[Document]:
    """The docstrings corpus: for each package (`DOCSTRING_PACKAGES`), one document per module with docstrings
    of at least `MIN_DOCSTRING_CHARS` characters, those docstrings in source order, exact duplicates dropped."""
    docs: list[Document] = []
    seen: set[str] = set()
    for name, _ in packages:
        root = package_root(name)
        for path in package_modules(name):
            try:
                tree = ast.parse(path.read_bytes())
            except (SyntaxError, ValueError):
                continue
            parts = _long_and_new((_cleandoc(raw) for raw in _raw_docstrings(tree)), seen)
            if parts:
                docs.append(Document("\n\n".join(parts), f"docstrings:{name}/{path.relative_to(root).as_posix()}"))
    return docs


def without_examples(text: str) -> str:
    """`text` without its doctest examples: from a line starting with ">>>" to the next blank line (the prompts
    and their printed output)."""
    out, in_example = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith(">>>"):
            in_example = True
        if in_example:
            if line.strip():
                continue
            in_example = False
        out.append(line)
    return "\n".join(out).strip("\n")


def documents_sha256(docs: list[Document]) -> str:
    """The content hash of a list of documents: SHA-256 of their UTF-8 texts, each followed by a NUL byte."""
    h = hashlib.sha256()
    for d in docs:
        h.update(d.text.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


# The corpora every Python carries, by the name `frontier prepare --corpus` takes: the embedded one (prose about
# Python), a second one, different in kind (Python code), and the docstrings of the pinned packages (the largest).
CORPORA = ("embedded", "stdlib-source", "docstrings")
# The content hash (`documents_sha256`) of the corpora whose inputs are pinned: another is refused by `prepare`
# unless accepted by name. The embedded and stdlib-source corpora follow the Python that reads them (their
# manifests record its version and their hash instead).
PINNED_SHA256 = {"docstrings": "a436eba931738e9b5e30b8ef08adbea00c9b9056dc71cb32b48c3d5e2d8890e8"}
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
    if name == "docstrings":
        return docstring_documents()
    raise UserError(f"unknown corpus {name!r}", f"choose one of {', '.join(CORPORA)}, or pass --text files")


def embedded_corpus_info(docs: list[Document]) -> dict:
    return {
        "python_version": sys.version.split()[0],
        "documents": len(docs),
        "bytes": sum(len(d.text.encode("utf-8")) for d in docs),
        "sha256": documents_sha256(docs),
    }


def pinned_corpus_info(name: str, docs: list[Document], accept_sha256: str | None = None) -> dict:
    """The manifest's description of a pinned corpus (`PINNED_SHA256`): its packages with the versions pinned
    and installed, documents, bytes, and its hash against the pinned one. A hash other than the pinned one is one
    clear error naming both, unless it is `accept_sha256` (recorded as accepted)."""
    sha = documents_sha256(docs)
    pinned = PINNED_SHA256.get(name)
    info = {
        "packages": [{"name": n, "pinned": v, "installed": installed_version(n)} for n, v in DOCSTRING_PACKAGES],
        "documents": len(docs),
        "bytes": sum(len(d.text.encode("utf-8")) for d in docs),
        "sha256": sha,
        "pinned_sha256": pinned,
    }
    if pinned is not None and sha != pinned:
        if accept_sha256 != sha:
            differ = [f"{p['name']} {p['installed']} (pinned {p['pinned']})" for p in info["packages"]
                      if (p["installed"] or "").split("+")[0] != p["pinned"]]
            why = f"; installed versions differ: {', '.join(differ)}" if differ else ""
            raise UserError(
                f"the {name} corpus read here has sha256 {sha}, not the pinned {pinned}{why}",
                f"install the pinned packages (`make venv`), or accept this text with --accept-corpus-hash {sha}",
            )
        info["accepted_sha256"] = sha
    return info


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

"""`corpus_candidates`: what each candidate corpus offers the mini-competition, measured the same way, into one
bench record (kind `corpus-candidates`).

For each candidate: its documents and bytes; the three splits by document (`frontier.data.dataset.split_of`, the
same fractions and seed for every candidate); the near-duplicate audit (`frontier.data.audit`) at a threshold
(the candidate's own; 1.01 audits without moving anything); the share of doctest lines and of the largest
held-out document; and what classical compressors reach on the test split given the training split as context
(`frontier.study.compressors.conditional_bpb`: xz preset 9 extreme, PPMd order 6 through pyppmd where it is
installed). A compressor that scores far below a trained model says the text is templated: its test documents
repeat passages of the training ones, which a match finder copies and a small model cannot.

Candidates are named `CANDIDATES`; `run_corpus_candidates(names=...)` measures some of them.
"""

from __future__ import annotations

import time
from pathlib import Path

from .. import records
from ..data import audit as audit_mod
from ..data import corpus
from ..data.dataset import split_of
from ..errors import UserError
from .compressors import _ppmd, _xz, conditional_bpb

# name -> what it is (its documents: `candidate_documents`; its audit's threshold: `THRESHOLDS`, else the default)
CANDIDATES = {
    "embedded": "the embedded corpus: pydoc topics and the standard library's long docstrings",
    "docstrings": "the long docstrings of torch, scipy, sympy, numpy, matplotlib, networkx (the docstrings corpus)",
    "docstrings-no-audit": "the docstrings corpus, the audit measured but nothing moved",
    "docstrings-audit-0.5": "the docstrings corpus, held-out documents moved at 0.5 overlap",
    "docstrings-no-examples": "the docstrings corpus without its doctest examples (prompts and their output)",
    "docstrings-installed": "the docstrings rule on every package installed beside the six (their versions unpinned)",
    "docstrings-wide": "the six and the twelve other installed packages with the most docstring text (`WIDE_EXTRA`)",
}
# The installed packages after the six with 100 KB or more of long docstrings (pip and setuptools left out: the
# set-up upgrades or bootstraps them, unpinned).
WIDE_EXTRA = ("mpl_toolkits", "fontTools", "mpmath", "PIL", "pyparsing", "IPython", "tornado", "prompt_toolkit",
              "pygments", "babel", "fsspec", "click")
THRESHOLDS = {"docstrings-no-audit": 1.01, "docstrings-audit-0.5": 0.5}


def candidate_documents(name: str) -> list[corpus.Document]:
    if name == "embedded":
        return corpus.embedded_documents()
    if name == "docstrings-wide":
        return corpus.docstring_documents(corpus.DOCSTRING_PACKAGES + tuple((n, None) for n in WIDE_EXTRA))
    if name == "docstrings-installed":
        return corpus.docstring_documents(corpus.DOCSTRING_PACKAGES + tuple((n, None) for n in installed_packages()))
    docs = corpus.docstring_documents()
    if name == "docstrings-no-examples":
        docs = [corpus.Document(t, d.source) for d in docs if (t := corpus.without_examples(d.text))]
    return docs


def installed_packages() -> list[str]:
    """The other top-level packages installed where numpy is (folders with an `__init__.py`), sorted by name."""
    site = corpus.package_root("numpy").parent
    six = {n for n, _ in corpus.DOCSTRING_PACKAGES}
    return sorted(p.name for p in site.iterdir() if p.is_dir() and (p / "__init__.py").is_file()
                  and p.name not in six and p.name.isidentifier())


def measure(name: str, docs: list[corpus.Document], val_fraction: float, test_fraction: float, seed: int,
            threshold: float, compressors: bool, log=print) -> dict:
    t0 = time.perf_counter()
    splits = [split_of(d.text, seed, val_fraction, test_fraction)[0] for d in docs]
    moved, audit = audit_mod.audit_splits(splits, lambda i: docs[i].text,
                                          (d.text for d, s in zip(docs, splits) if s == "train"), threshold)
    for i in moved:
        splits[i] = "train"
    audit_s = time.perf_counter() - t0
    text = {s: [docs[i].text.encode("utf-8") for i in range(len(docs)) if splits[i] == s] for s in ("train", "val", "test")}
    row = {"candidate": name, "summary": CANDIDATES[name], "documents": len(docs),
           "bytes": sum(len(t) for ts in text.values() for t in ts), "sha256": corpus.documents_sha256(docs),
           "audit_s": round(audit_s, 2), "audit": audit}
    lines = [ln for d in docs for ln in d.text.split("\n")]
    row["doctest_line_share"] = round(sum(1 for ln in lines if ln.lstrip().startswith((">>>", "... "))) / max(1, len(lines)), 4)
    for s, ts in text.items():
        row[s] = {"documents": len(ts), "bytes": sum(len(t) for t in ts),
                  "largest_document_share": round(max(map(len, ts)) / max(1, sum(map(len, ts))), 4) if ts else None}
    if compressors:
        train, test = b"".join(text["train"]), b"".join(text["test"])
        row["test_bpb"] = {}
        fns = {"xz": _xz}
        try:
            import pyppmd  # noqa: F401

            fns["ppmd-o6"] = _ppmd(6)
        except ImportError:
            pass
        for cname, fn in fns.items():
            t1 = time.perf_counter()
            row["test_bpb"][cname] = round(conditional_bpb(fn, train, test), 4)
            log(f"  {name}: {cname} {row['test_bpb'][cname]:.4f} bpb on test ({time.perf_counter() - t1:.0f}s)")
    log(f"{name}: {row['documents']} documents, {row['bytes']:,} bytes; train/val/test documents "
        f"{row['train']['documents']}/{row['val']['documents']}/{row['test']['documents']}, bytes "
        f"{row['train']['bytes']:,}/{row['val']['bytes']:,}/{row['test']['bytes']:,}; moved {audit['moved_to_train']}")
    return row


def run_corpus_candidates(names=tuple(CANDIDATES), val_fraction: float = 0.05, test_fraction: float = 0.05,
                          seed: int = 0, compressors: bool = True, out: str | Path | None = None, log=print) -> dict:
    """Measure each candidate in `names` (see the module's docstring); `out`: a folder or a new .json file for the
    bench record (`frontier.records.new_record_path`)."""
    names = tuple(names)
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown or not names:
        raise UserError(f"unknown corpus candidate(s) {', '.join(unknown) or '(none)'}",
                        f"choose from {', '.join(CANDIDATES)}")
    arguments = {"names": list(names), "val_fraction": val_fraction, "test_fraction": test_fraction, "seed": seed,
                 "compressors": compressors}
    path = records.new_record_path(out, "corpus-candidates", ["+".join(names)]) if out is not None else None
    rows = []
    for name in names:
        t0 = time.perf_counter()
        docs = candidate_documents(name)
        read_s = time.perf_counter() - t0
        row = measure(name, docs, val_fraction, test_fraction, seed,
                      THRESHOLDS.get(name, audit_mod.NEAR_DUPLICATE_SHARE), compressors, log)
        row["read_s"] = round(read_s, 2)
        rows.append(row)
    pinned = {"packages": [{"name": n, "pinned": v, "installed": corpus.installed_version(n)}
                           for n, v in corpus.DOCSTRING_PACKAGES]}
    body = {"inputs": pinned, "rows": rows}
    return records.bench_record("corpus-candidates", arguments, None,
                                "frontier.study.corpus_candidates.run_corpus_candidates", body, path, cpu=True)


def run_prepare_record(corpus_name: str = "docstrings", vocab_size: int = 1024, out: str | Path | None = None,
                       reads: list[str] | None = None, log=print) -> dict:
    """Prepare a named corpus into a temporary folder as `frontier prepare --corpus NAME` does, timed, and record
    what it made (kind `corpus-prepare`): the seconds taken, documents, bytes and tokens of each split, bytes per
    token, the audit and the sources (its hash); the folder is removed afterwards. `reads`: run folders whose
    records' training tokens are set against the new training split (`epochs`: the share of it such a run reads;
    `max_epochs` the largest)."""
    import json
    import shutil
    import tempfile

    from ..data.dataset import prepare

    arguments = {"corpus_name": corpus_name, "vocab_size": vocab_size, "reads": reads}
    path = records.new_record_path(out, "corpus-prepare", [corpus_name, f"v{vocab_size}"]) if out is not None else None
    work = Path(tempfile.mkdtemp(prefix="frontier-prepare-"))
    try:
        t0 = time.perf_counter()
        ds = prepare(work / "data", corpus_name=corpus_name, vocab_size=vocab_size, log=log)
        seconds = time.perf_counter() - t0
        m = json.loads((ds.folder / "manifest.json").read_text())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    splits = {s: {k: m[s][k] for k in ("documents", "bytes", "tokens")} for s in ("train", "val", "test") if s in m}
    for s in splits.values():
        s["bytes_per_token"] = round(s["bytes"] / max(1, s["tokens"] - s["documents"]), 4)  # BOS not counted
    read = []
    for run in reads or []:
        rec = records.load_record(run)
        read.append({"run": str(run), "recipe": rec.get("recipe"), "steps": rec.get("steps"), "tokens": rec.get("tokens"),
                     "epochs": round(rec["tokens"] / splits["train"]["tokens"], 4)})
    if read:
        read = {"runs": read, "max_tokens": max(r["tokens"] for r in read),
                "max_epochs": max(r["epochs"] for r in read),
                "train_tokens_over_max": round(splits["train"]["tokens"] / max(r["tokens"] for r in read), 3)}
    body = {"prepare_s": round(seconds, 1), "splits": splits, "reads": read or None, "audit": m.get("audit"), "sources": m["sources"],
            "split": m["split"], "tokenizer": {k: m["tokenizer"][k] for k in ("vocab_size", "sha256")}}
    return records.bench_record("corpus-prepare", arguments, None,
                                "frontier.study.corpus_candidates.run_prepare_record", body, path, cpu=True)

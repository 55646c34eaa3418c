"""Which characters deserve a piece of their own: tokenizer rules (`frontier.data.tokenizer.CharacterRule`)
measured by bytes per token and by a short equal-steps val_bpb, corpus by corpus.

Per corpus and rule the data is prepared as `frontier prepare` would (the same document split, the tokenizer trained
on the train split), so the manifest gives the bytes per token of the validation split; then `recipe` is trained
for `steps` steps on each (val_bpb does not depend on the tokenizer's units: bits per byte of the same text). A corpus
is a named one (`embedded`, `stdlib-source`) or a folder of documents (`--text`), such as a user's own.

A many-character corpus a reader can rebuild (Debian's translated manual pages, as a new user would gather their
documents into a folder; the manual-page records in runs/cpu/bench/ were made from it):

    apt-get install manpages-fr manpages-ru manpages-ja manpages-zh
    python -m frontier.study.tokenizer_rules --gather-manpages DIR   # fr, ru, ja, zh_CN: about 2.25 MB each
"""

from __future__ import annotations

import dataclasses
import gzip
import sys
from pathlib import Path

from .. import records
from ..data.dataset import MANIFEST, Dataset, prepare
from ..data.tokenizer import EARLIER_RULE, CharacterRule
from ..recipes import get_recipe
from . import bench_records
from . import experiments

KIND = "tokenizer-rules"
RULES = {
    "every character (earlier)": EARLIER_RULE,
    "cover 99.99%": CharacterRule(coverage=0.9999),
    "cover 99.95%": CharacterRule(coverage=0.9995),
    "cover 99.9%": CharacterRule(coverage=0.999),
    "at most a quarter": CharacterRule(max_share=0.25),
    "up to three quarters": CharacterRule(max_share=0.75),
    "cover 99.9%, up to three quarters": CharacterRule(coverage=0.999, max_share=0.75),
}


def rule_tag(rule: CharacterRule) -> str:
    return f"c{rule.coverage:g}-s{rule.max_share:g}"


def prepared(corpus: str, rule: CharacterRule, vocab_size: int, root: Path, log=print) -> Dataset:
    """`corpus` (a named corpus, or a folder of documents) prepared at `vocab_size` under `rule`, cached in `root`."""
    named = not Path(corpus).is_dir()
    folder = root / f"{Path(corpus).name if not named else corpus}-v{vocab_size}-{rule_tag(rule)}"
    if not (folder / MANIFEST).exists():
        prepare(folder, text=None if named else [corpus], corpus_name=corpus if named else "embedded",
                vocab_size=vocab_size, characters=rule, log=log)
    return Dataset(folder)


def run_rule_study(corpora: list[str], rules: dict[str, CharacterRule] | None = None, vocab_size: int = 1024,
                   recipe: str = "baseline", profile: str = "cpu", steps: int = 300, seeds=(0,),
                   data_root: str | Path = "~/.cache/frontier/rules", root: str | Path = "runs",
                   out: str | Path | None = None, log=print) -> dict:
    """Every corpus under every rule: characters given a piece, bytes per validation token, and `recipe`'s val_bpb
    after `steps` steps (per seed). Written as a bench record to `out` (a folder or a new .json) when given."""
    rules = RULES if rules is None else rules
    data_root = Path(data_root).expanduser()
    rows = []
    arguments = {"corpora": list(corpora), "rules": {k: dataclasses.asdict(r) for k, r in rules.items()},
                 "vocab_size": vocab_size, "recipe": recipe, "profile": profile, "steps": steps, "seeds": list(seeds)}
    path = bench_records.new_record_path(out, KIND, [Path(c).name for c in corpora]) if out is not None else None
    for corpus in corpora:
        for name, rule in rules.items():
            ds = prepared(corpus, rule, vocab_size, data_root, log)
            m = ds.manifest
            runs = {}
            for seed in seeds:
                rec = experiments.run(recipe, profile, seed=seed, root=root, steps=steps, data=ds,
                                      label=f"{get_recipe(recipe).name}-tok-{Path(corpus).name}-{rule_tag(rule)}"
                                            f"-{steps}steps", log=log)
                runs[str(seed)] = {"val_bpb": rec["val_bpb"], "steps": rec["steps"], "run_dir": rec.get("run_dir")}
            row = {"corpus": corpus, "rule": name, "characters": dataclasses.asdict(rule),
                   "distinct": (m["tokenizer"].get("rare_characters") or {}).get("distinct"),
                   "with_piece": ds.tokenizer.character_pieces(),
                   "val_bytes_per_token": m["val"]["bytes"] / m["val"]["tokens"],
                   "train_bytes_per_token": m["train"]["bytes"] / m["train"]["tokens"],
                   "data": {"folder": records.repo_named(ds.folder), "manifest_hash": ds.manifest_hash}, "runs": runs}
            rows.append(row)
            log(format_row(row))
    return bench_records.bench_record(KIND, arguments, None, f"{__name__}.run_rule_study", {"rows": rows}, path)


def format_row(r: dict) -> str:
    bpb = ", ".join(f"s{s} {v['val_bpb']:.4f} ({v['steps']} steps)" for s, v in r["runs"].items())
    return (f"{Path(r['corpus']).name:<16}{r['rule']:<28}{r['with_piece']:>6} characters with a piece"
            f"{r['val_bytes_per_token']:>8.3f} bytes/token (val)   val_bpb {bpb}")


def gather_manpages(out: str | Path, languages=("fr", "ru", "ja", "zh_CN"), per_language: int = 2_250_000) -> int:
    """Debian's translated manual pages of `languages` (installed under /usr/share/man/LANG), their roff source as
    .txt documents in `out`, up to `per_language` bytes each, in file-name order; returns the documents written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    for lang in languages:
        size = 0
        for p in sorted(Path(f"/usr/share/man/{lang}").rglob("*.gz")):
            try:
                text = gzip.open(p).read().decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if size + len(text.encode("utf-8")) > per_language:
                continue
            (out / f"{lang}-{p.parent.name}-{p.name[:-3]}.txt").write_text(text, encoding="utf-8")
            size += len(text.encode("utf-8"))
            written += 1
    return written


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--gather-manpages":
    print(f"{gather_manpages(sys.argv[2])} documents written to {sys.argv[2]}")

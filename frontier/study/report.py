"""Small helpers the chapters use to show run records: Markdown tables and mean ± spread summaries."""

from __future__ import annotations

from statistics import mean, stdev
from typing import Iterable, Sequence

from .compare import run_label


def fmt(value, spec: str = ".4f") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return format(value, spec)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value).replace("|", "\\|")


def markdown_table(rows: Sequence[dict], columns: Sequence[str] | dict[str, str], specs: dict[str, str] | None = None) -> str:
    """rows of dicts -> a Markdown table; `columns` maps keys to headers (or lists keys)."""
    cols = columns if isinstance(columns, dict) else {c: c for c in columns}
    specs = specs or {}
    lines = ["| " + " | ".join(cols.values()) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(fmt(r.get(k), specs.get(k, ".4f")) for k in cols) + " |")
    return "\n".join(lines)


def mean_std(values: Iterable[float]) -> tuple[float, float, int]:
    vs = [v for v in values if v is not None]
    return mean(vs), (stdev(vs) if len(vs) > 1 else float("nan")), len(vs)


def pm(values: Iterable[float], digits: int = 4) -> str:
    """'1.2345 ± 0.0012 (n=3)': mean ± sample standard deviation."""
    m, s, n = mean_std(values)
    return f"{m:.{digits}f} ± {s:.{digits}f} (n={n})" if n > 1 else f"{m:.{digits}f} (n=1)"


def short_code(code: dict | None) -> str:
    """'1a2b3c4d' (git SHA), '+dirty' when tracked files differed from it, or the source hash without git."""
    code = code or {}
    if code.get("git_sha"):
        return code["git_sha"][:8] + ("+dirty" if code.get("dirty") else "")
    return f"source {code.get('source_sha256') or '?'}"


def code_of(rec: dict) -> str:
    """Which code produced a record's numbers: the version that trained it, and for a reused record the current
    version that reproduced it (`frontier.study.replay`)."""
    own = short_code(rec.get("code"))
    check = rec.get("replay") or {}
    if check.get("reproduced") and (check.get("code") or {}).get("source_sha256") != (rec.get("code") or {}).get(
            "source_sha256"):
        return f"{own}, reproduced by {short_code(check['code'])}"
    return own


def provenance(recs: Sequence[dict]) -> str:
    """One line per code version behind `recs`: which runs it trained, and what reproduced them."""
    by: dict[str, list[str]] = {}
    for r in recs:
        by.setdefault(code_of(r), []).append(f"{run_label(r)} s{r['seed']}")
    return "\n".join(f"  - code {k}: {', '.join(v)}" for k, v in by.items())


# ----------------------------------------------------------------------------- what a chapter found, first


def bpb(rec: dict, digits: int = 4) -> str:
    """A run's val_bpb with its step count beside it, as every number in the book is printed: '1.7361 (400 steps)'."""
    return f"{rec['val_bpb']:.{digits}f} ({rec['steps']:,} steps)"


def bpb_group(recs: Sequence[dict], digits: int = 4) -> str:
    """A group's val_bpb as mean ± std over its seeds, with its steps (their range where they differ):
    '1.7361 ± 0.0014 (3 seeds, 400 steps)'."""
    steps = sorted({r["steps"] for r in recs})
    span = f"{steps[0]:,} steps" if len(steps) == 1 else f"{steps[0]:,}-{steps[-1]:,} steps"
    m, s, n = mean_std(r["val_bpb"] for r in recs)
    spread = f" ± {s:.{digits}f}" if n > 1 else ""
    return f"{m:.{digits}f}{spread} ({n} seed{'s' if n != 1 else ''}, {span})"


def epochs(rec: dict, train_tokens: int) -> float:
    """How many times a run read its training split: tokens seen / training tokens."""
    return rec["steps"] * rec["config"]["train"]["batch_size"] * rec["config"]["train"]["seq_len"] / train_tokens


def source_of(*objects, lines: tuple[int, int] | None = None) -> str:
    """The package's own source of `objects` (functions, classes, methods) as a Markdown code block, so a chapter
    shows the lines that are the idea without defining them again; `lines`: only that (first, last) range of the
    first object's lines, counted from 1."""
    import inspect
    import textwrap

    parts = []
    for obj in objects:
        src = textwrap.dedent(inspect.getsource(obj))
        if lines is not None and obj is objects[0]:
            src = "\n".join(src.splitlines()[lines[0] - 1 : lines[1]])
        where = f"{obj.__module__}.{obj.__qualname__}"
        parts.append(f"# {where}\n{src.rstrip()}")
    return "```python\n" + "\n\n".join(parts) + "\n```"

"""Small helpers the chapters use to show run records: Markdown tables and mean ± spread summaries."""

from __future__ import annotations

from statistics import mean, stdev
from typing import Iterable, Sequence


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


def run_rows(recs: Sequence[dict]) -> list[dict]:
    """One row per run with the fields every chapter shows."""
    return [
        {
            "run": f"{r['recipe']} s{r['seed']}",
            "val_bpb": r.get("val_bpb"),
            "steps": r.get("steps"),
            "tokens_per_s": round(r["tokens_per_s"]) if r.get("tokens_per_s") else None,
            "charged_s": r.get("charged_s"),
            "uncharged_s": r.get("uncharged_s"),
            "code": (r.get("code", {}).get("git_sha") or "?")[:8] + ("+dirty" if r.get("code", {}).get("dirty") else ""),
        }
        for r in recs
    ]


RUN_COLUMNS = {"run": "run", "val_bpb": "val_bpb", "steps": "steps", "tokens_per_s": "tokens/s",
               "charged_s": "charged s", "uncharged_s": "uncharged s", "code": "code"}
RUN_SPECS = {"charged_s": ".1f", "uncharged_s": ".1f"}


def runs_table(recs: Sequence[dict]) -> str:
    return markdown_table(run_rows(recs), RUN_COLUMNS, RUN_SPECS)

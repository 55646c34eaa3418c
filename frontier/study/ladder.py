"""The ladder: the write-up's path from the baseline to its final model, one recipe per rung, with its noise.

`LADDER` lists the rungs in the write-up's order of discovery where our recipes allow it (ours stack the EMA on
the n-gram mix, since chapter 05 measured it there; the write-up added its EMA before its n-gram mix). A rung
without a recipe (the NKI kernels) changes how fast the same arithmetic runs on a NeuronCore, not what is
trained; on a machine without one it has nothing to measure, and the table says so instead of repeating the
rung below it.

`run_ladder` trains (or reuses, `frontier.study.experiments.run`) every rung for seeds 0..n-1 and `ladder_rows` turns
the records into the table: per rung the mean and spread of val_bpb, and its gain over the nearest rung below
that its recipe is built on (the final recipe skips the EMA, which was not kept), paired by seed (a paired t-test, `frontier.study.compare.paired_test`) with the verdict of the noise rule. `write_ladder_record`
keeps the table beside the runs (`runs/PROFILE/ladder/CORPUS-TIME.json`), naming every run folder and the code
that made it; the README's table is read from such a record. `frontier ladder` is the command.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import records
from .compare import Group, paired_test
from .report import short_code

LADDER_KIND = "ladder"


@dataclass(frozen=True)
class Rung:
    name: str  # what the write-up calls the step
    recipe: str | None  # our recipe for it; None: nothing to train differently (see `why_none`)
    change: str
    chapter: str
    why_none: str = ""


LADDER: tuple[Rung, ...] = (
    Rung("baseline", "baseline", "the competition baseline, eager PyTorch", "01"),
    Rung("torch.compile", "compile", "the model compiled (Inductor here, the neuron backend on Trn2)", "02"),
    Rung("NKI kernels", None, "fused ops as NKI kernels", "03",
         why_none="the same arithmetic as the reference ops, faster only on a NeuronCore; without one there is "
                  "nothing to train differently (chapter 03 checks the kernels in the interpreter)"),
    Rung("embedding fix", "bigram", "the 2^k-row hashed bigram table, updated sparsely", "04"),
    Rung("n-gram mix", "ngram", "an n-gram model counted from the train shards, mixed into the logits", "06"),
    Rung("EMA", "ema", "an exponential moving average of the weights over the warm-down", "05"),
    Rung("final", "final", "the final recipe: `frontier.recipes.FINAL` (chapter 07)", "07"),
)

# The write-up's own figures (one Trn2 chip, 1,800 charged seconds, ClimbMix, 8,192-token BPE), quoted, not ours.
WRITEUP_TRN2 = {"baseline": 1.259, "final": 0.959, "ngram_gain": 0.007, "noise": 0.0003}


def recipe_name(recipe: str) -> str:
    """The recipe a rung trains under its own name (`final` names another recipe, `frontier.recipes.FINAL`)."""
    from ..recipes import get_recipe

    return get_recipe(recipe).name


def corpus_label(recipe: str, corpus: str = "embedded") -> str | None:
    """The run folder label of a rung: the recipe's own folder on the embedded corpus, `CORPUS/RECIPE` on another
    (RECIPE: the name it is recorded under)."""
    return None if corpus == "embedded" else f"{corpus}/{recipe_name(recipe)}"


def run_ladder(profile, seeds: int, root: str | Path = "runs", corpus: str = "embedded", log=print) -> dict[str, list[dict]]:
    """Train or reuse every rung's recipe for seeds 0..seeds-1 on `corpus` (`frontier.data.corpus.CORPORA`); returns
    recipe -> records, in seed order. Seeds are interleaved across rungs (seed 0 of every rung, then seed 1),
    so a drift of the machine's speed during the session touches every rung alike."""
    from ..data.dataset import profile_dataset
    from ..profiles import get_profile
    from . import experiments as ex

    p = get_profile(profile)
    data = None if corpus == "embedded" else profile_dataset(p, log=log, corpus_name=corpus)
    out: dict[str, list[dict]] = {r.recipe: [] for r in LADDER if r.recipe}
    for seed in range(seeds):
        for recipe in out:
            out[recipe].append(ex.run(recipe, p, seed=seed, root=root, data=data, label=corpus_label(recipe, corpus),
                                      log=log))
    return out


def _group(recipe: str, recs: list[dict]) -> Group:
    return Group(recipe, tuple(r["val_bpb"] for r in recs), tuple(str(r.get("run_dir", "")) for r in recs),
                 tuple(r.get("seed") for r in recs))


def ladder_rows(results: dict[str, list[dict]]) -> list[dict]:
    """One row per rung: mean, spread and count of val_bpb, and the gain over the nearest measured rung below it
    that its recipe is built on (`over`; a rung whose change was not kept is skipped: the final recipe's gain is
    over what it stands on). `gain` = that rung's mean minus this one's, so positive is better, paired by seed
    (the paired t-test's p and verdict); `total` likewise against the baseline. A rung without a recipe, or
    without runs, is a row with its reason."""
    rows, measured, base = [], [], None
    for rung in LADDER:
        recs = results.get(rung.recipe or "", [])
        name = recipe_name(rung.recipe) if rung.recipe else "-"
        row = {"rung": rung.name, "recipe": name, "chapter": rung.chapter, "change": rung.change}
        if not recs:
            rows.append({**row, "note": rung.why_none or "not run"})
            continue
        g = _group(rung.recipe, recs)
        same = next((m for m in measured if m[1] == name), None)
        if same is not None:
            row["note"] = f"the same recipe as the {same[0]} rung"
        # the gain over the nearest rung below whose recipe this one is built on (a rung not kept is skipped)
        line = ancestors(rung.recipe)
        below = next((m[2] for m in reversed(measured) if m[1] in line), None)
        row.update(n=g.n, mean=g.mean, std=g.std, values=list(g.values), seeds=list(g.seeds),
                   steps=sum(r["steps"] for r in recs) / len(recs),
                   runs=[repo_path(r.get("run_dir", "")) for r in recs],
                   code=sorted({short_code(r.get("code")) for r in recs}))
        for key, other in (("gain", below), ("total", base)):
            if other is None:
                continue
            d = paired_test(other, g)
            row[key] = -d.delta
            if key == "gain":
                row.update(gain_std=d.diff_std, p=d.p, verdict=d.verdict, over=other.name)
        rows.append(row)
        measured.append((rung.name, name, g))
        base = base or g
    return rows


def repo_path(path) -> str:
    """A path under a `runs` folder as the repository names it (`runs/cpu/ngram/s0`), however it was reached
    (`../runs/...` from notebooks/, an absolute path); any other path as it is."""
    parts = Path(str(path)).parts
    return str(Path(*parts[len(parts) - 1 - parts[::-1].index("runs"):])) if "runs" in parts else str(path)


def ancestors(recipe: str) -> list[str]:
    """The recipes `recipe` is built on, nearest first (its parent, the parent's parent, ...), not itself."""
    from ..recipes import RECIPES, get_recipe

    out, r = [], get_recipe(recipe)
    while r.parent:
        out.append(r.parent)
        r = RECIPES[r.parent]
    return out


def ladder_figure(rows: list[dict], title: str = "", writeup: bool = True):
    """val_bpb per rung (mean with the seeds' spread as error bars, every seed as a dot) and each rung's gain
    over the one below with its verdict (a gain from one seed, which has no spread, is labelled "one seed"). Where
    `writeup`, the write-up's Trn2 endpoints are drawn in a panel of their own, on their own axis: never on ours
    (a second axis scaled to overlay them would make any two lines look alike)."""
    from ..figures import new_figure

    measured = [r for r in rows if "mean" in r]
    if writeup:
        fig, (ax, ax_theirs, ax_gain) = new_figure(12.5, 3.9, ncols=3, width_ratios=(4, 1.2, 4))
    else:
        fig, (ax, ax_gain) = new_figure(10.5, 3.9, ncols=2)
    xs = range(len(measured))
    one_seed = all(r["n"] == 1 for r in measured)
    ax.errorbar(xs, [r["mean"] for r in measured], yerr=[0 if r["std"] != r["std"] else r["std"] for r in measured],
                fmt="o-", capsize=4, color="C0", label="ours, one seed" if one_seed else "ours (mean ± std over seeds)")
    for x, r in zip(xs, measured):
        ax.scatter([x] * r["n"], r["values"], s=10, color="C0", alpha=0.45)
    ax.set_xticks(list(xs), [r["rung"] for r in measured], rotation=30, ha="right")
    ax.set_ylabel("val_bpb (lower is better)")
    ax.set_title(title or "the ladder")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    if writeup:
        theirs = [WRITEUP_TRN2["baseline"], WRITEUP_TRN2["final"]]
        ax_theirs.plot([0, 1], theirs, "s--", color="C3")
        for x, v in enumerate(theirs):
            ax_theirs.annotate(f"{v:.3f}", (x, v), textcoords="offset points", xytext=(7, 0), ha="left",
                               va="center", fontsize=8)
        ax_theirs.set_xticks([0, 1], ["baseline", "final"], rotation=30, ha="right")
        ax_theirs.set_xlim(-0.5, 1.5)
        ax_theirs.set_ylabel("val_bpb on their data (Trn2)")
        ax_theirs.set_title("the write-up's\nendpoints (quoted)", fontsize=10)
        ax_theirs.grid(alpha=0.3)
    gains = [r for r in measured if "gain" in r]
    colors = ["C2" if str(r.get("verdict", "")).startswith("better") else
              "C3" if str(r.get("verdict", "")).startswith("worse") else "0.6" for r in gains]
    spread = [None if r.get("n", 0) < 2 or r.get("gain_std") != r.get("gain_std") else r.get("gain_std")
              for r in gains]
    ax_gain.bar(range(len(gains)), [r["gain"] for r in gains], color=colors, capsize=4,
                yerr=None if all(s is None for s in spread) else [float("nan") if s is None else s for s in spread])
    ax_gain.margins(y=0.12)
    for i, (r, s) in enumerate(zip(gains, spread)):
        if s is None:
            ax_gain.annotate("one seed", (i, r["gain"]), textcoords="offset points",
                             xytext=(0, 3 if r["gain"] >= 0 else -3), ha="center",
                             va="bottom" if r["gain"] >= 0 else "top", fontsize=7)
    ax_gain.axhline(0, color="k", lw=0.8)
    ax_gain.set_xticks(range(len(gains)), [r["rung"] for r in gains], rotation=30, ha="right")
    ax_gain.set_ylabel("gain over the rung it is built on (bpb)")
    ax_gain.set_title("gain per rung (green: beyond the noise,\ngrey: inside it, red: worse)", fontsize=10)
    ax_gain.grid(alpha=0.3, axis="y")
    return fig


def write_ladder_record(rows: list[dict], profile: str, corpus: str, root: str | Path = "runs",
                        extra: dict | None = None) -> Path:
    """Keep the table as a record of its own, `ROOT/PROFILE/ladder/CORPUS-YYYYmmdd-HHMMSS.json`, beside the runs it
    summarises (never over an older one)."""
    folder = Path(root) / profile / "ladder"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = folder / f"{corpus}-{stamp}.json"
    n = 2
    while path.exists():
        path, n = folder / f"{corpus}-{stamp}-{n}.json", n + 1
    rec = {"kind": LADDER_KIND, "profile": profile, "corpus": corpus, "rows": rows,
           "rungs": [asdict(r) for r in LADDER], "writeup_trn2": WRITEUP_TRN2, "code": records.code_version(),
           "hardware": records.hardware(), "created": time.strftime("%Y-%m-%dT%H:%M:%S"), **(extra or {})}
    return records.write_json(path, rec)


def latest_ladder_record(profile: str, corpus: str = "embedded", root: str | Path = "runs") -> dict | None:
    """The newest ladder record of this profile and corpus (None if there is none)."""
    import json
    import re

    def when(path: Path):
        m = re.fullmatch(re.escape(corpus) + r"-(\d{8}-\d{6})(?:-(\d+))?\.json", path.name)
        return (m.group(1), int(m.group(2) or 1)) if m else None

    found = sorted((p for p in (Path(root) / profile / "ladder").glob(f"{corpus}-*.json") if when(p)), key=when)
    return {**json.loads(found[-1].read_text()), "path": str(found[-1])} if found else None


LADDER_COLUMNS = {"rung": "rung", "recipe": "recipe", "n": "seeds", "mean": "val_bpb (mean)", "std": "std",
                  "over": "built on", "gain": "gain over it", "p": "p (paired)", "verdict": "verdict", "total": "gain over baseline",
                  "note": "note"}


def format_ladder(rows: list[dict]) -> str:
    """The ladder as a Markdown table (`LADDER_COLUMNS`)."""
    from .report import markdown_table

    return markdown_table(rows, LADDER_COLUMNS, {"n": "d", "p": ".3f"})


README_BEGIN = "<!-- ladder table: generated from {path} by frontier.study.ladder.readme_table; do not edit by hand -->"
README_END = "<!-- end of ladder table -->"


def plain_verdict(verdict: str) -> str:
    """A verdict without its threshold ("better beyond the noise (p < 0.05)" -> "better beyond the noise"), for
    tables that give p beside it."""
    return verdict.split(" (p ")[0]


def readme_table(record: dict) -> str:
    """The ladder record as the README shows it: one row per rung, ours with spread and verdict, the write-up's
    endpoints beside (quoted), between markers naming the record (tests/test_ladder.py checks the README holds
    exactly this for the record it names)."""
    w = record["writeup_trn2"]
    theirs = {"baseline": f"{w['baseline']}", "final": f"{w['final']}", "n-gram mix": f"gain ~{w['ngram_gain']}"}
    lines = [README_BEGIN.format(path=repo_path(record["path"])),
             "| rung | recipe | val_bpb here (mean ± std, seeds) | gain over the rung it is built on (paired by seed) | "
             "the write-up's (Trn2) |", "|---|---|---|---|---|"]
    for r in record["rows"]:
        if "mean" not in r:
            ours, gain = "not measured here", r.get("note", "")
        else:
            ours = (f"{r['mean']:.4f} ± {r['std']:.4f} ({r['n']})" if r["n"] > 1 else f"{r['mean']:.4f} (1)")
            gain = "" if "gain" not in r else f"{r['gain']:+.4f} over `{r['over']}`, {plain_verdict(r['verdict'])}" + (
                f" (p = {r['p']:.3f})" if r.get("p") == r.get("p") and r.get("p") is not None else "")
        lines.append(f"| {r['rung']} | `{r['recipe']}` | {ours} | {gain} | {theirs.get(r['rung'], '')} |")
    return "\n".join(lines + [README_END])

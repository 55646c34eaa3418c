"""The book runner: execute the chapters (`notebooks/NN_*.ipynb`) with papermill and a profile's parameters.

Each chapter's `parameters` cell holds literals only: `profile`, `run_root`, `figures_dir` and `data` (a prepared
data folder; None: the profile's own corpus, `frontier.study.chapter.setup`). By default the executed copies,
their runs and figures go to `build/book/PROFILE/`; `in_place=True` refreshes the committed
notebooks, `runs/` and `figures/` (and re-syncs the paired `.py` files). A failing chapter names the chapter and
the cell, and the executed notebook keeps every cell that ran.

The package never imports the notebooks; the notebooks import the package.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from ..errors import UserError
from ..records import REPO

NOTEBOOKS = REPO / "notebooks"
KERNEL = "python3"
_PER_CELL_PAPERMILL_KEYS = ("start_time", "end_time", "duration", "status", "exception")


def chapters(selection: str | None = None) -> list[Path]:
    found = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if not found:
        raise UserError(f"no chapters in {NOTEBOOKS}", "run the book from a checkout of the repository")
    if not selection:
        return found
    wanted = [s.strip().zfill(2) for s in selection.split(",") if s.strip()]
    by_number = {p.name[:2]: p for p in found}
    missing = [w for w in wanted if w not in by_number]
    if missing:
        raise UserError(f"no chapter numbered {', '.join(missing)}", f"choose from {', '.join(by_number)}")
    return [by_number[w] for w in wanted]


def _set_parameters(nb, params: dict) -> None:
    """Rewrite the literals of the `parameters` cell (used in place, so the committed cell shows what ran); a
    comment after a literal stays."""
    for cell in nb.cells:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            src = cell.source
            for k, v in params.items():
                literal = json.dumps(v) if isinstance(v, str) else repr(v)
                src, n = re.subn(rf"^{k}\s*=[^#\n]*?(\s*#.*)?$", lambda m: f"{k} = {literal}{m.group(1) or ''}", src,
                                 flags=re.M)
                if n == 0 and v is None:
                    continue  # a parameter this chapter does not take, left at its default
                if n != 1:
                    raise RuntimeError(f"parameters cell has no single line `{k} = ...`")
            cell.source = src
            return
    raise RuntimeError("chapter has no cell tagged `parameters`")


def _strip_cell_timings(nb) -> None:
    for cell in nb.cells:
        pm = cell.get("metadata", {}).get("papermill")
        if pm is not None:
            for k in _PER_CELL_PAPERMILL_KEYS:
                pm.pop(k, None)
            if not pm:
                del cell.metadata["papermill"]
        cell.get("metadata", {}).pop("execution", None)
        if cell.get("metadata", {}).get("tags") == []:  # papermill adds empty tag lists
            del cell.metadata["tags"]
    nb.metadata.get("papermill", {}).pop("duration", None)
    for k in ("start_time", "end_time", "input_path", "output_path", "environment_variables", "version"):
        nb.metadata.get("papermill", {}).pop(k, None)


def run_chapter(src: Path, dst: Path, params: dict, in_place: bool, log=print) -> bool:
    import nbformat
    import papermill as pm

    nb = nbformat.read(src, as_version=4)
    if in_place:
        _set_parameters(nb, params)
        pm_params = {}
    else:
        pm_params = params
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp_in = dst.with_name(f".{dst.stem}.input.ipynb")
    nbformat.write(nb, tmp_in)
    ok = True
    try:
        pm.execute_notebook(str(tmp_in), str(dst), parameters=pm_params, kernel_name=KERNEL, cwd=str(NOTEBOOKS),
                            progress_bar=False, log_output=False)
    except pm.PapermillExecutionError as e:
        ok = False
        log(f"chapter {src.stem} failed in code cell {e.exec_count} ({e.ename}: {e.evalue}); "
            f"what ran is in {dst}")
    except Exception as e:  # the kernel died, or papermill could not start it
        ok = False
        log(f"chapter {src.stem} failed ({type(e).__name__}: {e}); what ran is in {dst}")
    finally:
        tmp_in.unlink(missing_ok=True)
    if dst.exists():
        out = nbformat.read(dst, as_version=4)
        _strip_cell_timings(out)
        out.metadata["papermill"] = {"parameters": params}
        nbformat.write(out, dst)
    if ok and in_place:
        subprocess.run([sys.executable, "-m", "jupytext", "--sync", str(dst)], check=True, capture_output=True)
    return ok


def run_book(profile: str = "smoke", chapters: str | None = None, out: str | None = None, in_place: bool = False,
             data: str | None = None, log=print) -> int:
    """Execute the selected chapters (all by default) with `profile`'s parameters and `data` (a prepared data
    folder; None: the profile's corpus); 0 when every chapter ran, 1 at the first that failed (named)."""
    from ..profiles import get_profile

    get_profile(profile)
    if data is not None:
        if not (Path(data) / "manifest.json").is_file():
            raise UserError(f"--data {data}: not a prepared data folder (no manifest.json)",
                            "prepare one with `frontier prepare --text ... --out DIR`")
        data = str(Path(data).resolve())
    selected = globals()["chapters"](chapters)
    if in_place:
        if out:
            raise UserError("--in-place and --out do not go together", "pass one of them")
        params = {"profile": profile, "run_root": None, "figures_dir": None, "data": data}  # the repository's own
    else:
        root = Path(out) if out else REPO / "build" / "book" / profile
        root = root.resolve()
        params = {"profile": profile, "run_root": str(root / "runs"), "figures_dir": str(root / "figures"), "data": data}
    timed: list[dict] = []
    try:
        for src in selected:
            dst = src if in_place else Path(params["run_root"]).parent / src.name
            log(f"book: {src.stem} with profile {profile} -> {dst}")
            t0 = time.perf_counter()
            ok = run_chapter(src, dst, params, in_place, log)
            timed.append({"chapter": src.stem, "seconds": round(time.perf_counter() - t0, 1), "ok": ok})
            log(f"book: {src.stem} {'ran' if ok else 'failed'} in {timed[-1]['seconds']:.0f} s")
            if not ok:
                return 1
        return 0
    finally:
        if timed:
            _timing_record(profile, chapters, in_place, data, timed, REPO / "runs" if in_place else Path(params["run_root"]), log)


def _timing_record(profile: str, chapters: str | None, in_place: bool, data: str | None, timed: list[dict], runs: Path,
                   log) -> None:
    """What each chapter took, as a bench record beside the book's runs (`runs/bench/PROFILE/book-*.json`): the
    book's cost on this machine, with the code and hardware that paid it (runs reused or trained are in the outputs)."""
    from ..profiles import get_profile
    from .bench_records import bench_record, cli_command, new_record_path

    arguments = {"profile": profile, "chapters": chapters, "in_place": in_place, "data": data}
    command = cli_command("book", [], {"--profile": profile, "--chapters": chapters, "--in-place": in_place,
                                       "--data": data})
    path = new_record_path(runs / "bench" / profile, "book", [profile])
    bench_record("book", arguments, command, "frontier.study.book.run_book",
                 {"profile": profile, "chapters": timed, "seconds": round(sum(t["seconds"] for t in timed), 1)},
                 path, cpu=get_profile(profile).clock == "steps")  # the steps profiles run on this CPU
    log(f"book: timings in {path}")


# ----------------------------------------------------------------------------- sections, one at a time

SECTION = "## "  # a markdown cell opening with this heading starts a section


def sections(py: Path) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """A chapter's (`notebooks/NN_*.py`) set-up code cells (every code cell before its first section: the
    parameters and the set-up call) and each section's title and code cells, in order."""
    import jupytext

    nb = jupytext.read(py)
    setup_cells: list[str] = []
    found: list[tuple[str, list[str]]] = []
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith(SECTION):
            found.append((cell.source.lstrip()[len(SECTION):].splitlines()[0].strip(), []))
        elif cell.cell_type == "code":
            (found[-1][1] if found else setup_cells).append(cell.source)
    return setup_cells, found


def run_section(py: Path, title: str, params: dict) -> None:
    """Run the chapter's set-up, then the section `title` alone, in a fresh namespace (as a reader who copies that
    section's cells into a new notebook after the set-up cell would); `params` replace the parameters cell's values.
    Raises what a cell raised, with the chapter, the section and the cell's number in its traceback's file name."""
    setup_cells, found = sections(py)
    cells = dict(found).get(title)
    if cells is None:
        raise UserError(f"{py.name} has no section {title!r}", f"choose from {[t for t, _ in found]}")
    ns: dict = {"__name__": "__main__"}
    for i, src in enumerate(setup_cells):
        exec(compile(src, f"<{py.stem}: set-up cell {i + 1}>", "exec"), ns)
        if i == 0:
            ns.update(params)  # the first cell is the parameters cell
    for i, src in enumerate(cells):
        exec(compile(src, f"<{py.stem}: {title}: cell {i + 1}>", "exec"), ns)

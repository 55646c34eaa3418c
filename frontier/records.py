"""Records: what a run or a bench leaves behind, as plain JSON, and what identifies the code and machine that made it.

Run records, `RUN_DIR/result.json`, are written by the trainer and read by the chapters, `compare` and `eval`. A
run record holds the recipe, profile and fully resolved config, the seed, the hardware and software, the code
version (git SHA, dirty or not), the data manifest's hash and the training split's tokens (`data.train_tokens`),
the clock (budget, charged and uncharged seconds), the score (val_bpb with its convention, val_loss, val_tokens,
val_bytes, and its bits and bytes per validation document, `val_by_document`), the status (finished, interrupted,
diverged, running), the implementation that ran for each op, and the loss curve. Records written before
`data.train_tokens` and `val_by_document` were kept lack them, and load as they are. `frontier card RUN_DIR` shows a
record on one page (`frontier.study.card`).

Bench records (`frontier bench`, `bench-table`, `bench-head`, `bench-ngram`, `ngram-orders`, `kernels --census`,
`kernels --roofline`) are one JSON file each: `record` ("frontier-bench"), `kind`, `created` (local time, ISO
8601), `command`, `arguments`, `code` (`code_version()`), then the bench's own fields, and `path`. `out` is a
folder, where a new file `<kind>-<names>-<YYYYmmdd-HHMMSS>.json` is made beside the older ones (the CLI's default
folder: `runs/bench/<profile>/`), or a `.json` file, which must not exist: a record is never overwritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import torch

from .errors import UserError

RECORD = "result.json"
REPO = Path(__file__).resolve().parent.parent  # the checkout the package runs from (where git, notebooks and runs are)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def hardware(device: torch.device | None = None) -> dict:
    info = {
        "cpu": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "system": platform.system(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
    }
    if device is not None and device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
    return info


def source_sha256() -> str:
    """A hash of the package's own source files: identifies the code even where there is no git."""
    h = hashlib.sha256()
    pkg = Path(__file__).resolve().parent
    for path in sorted(pkg.rglob("*.py")):
        h.update(path.relative_to(pkg).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def code_version() -> dict:
    """The git SHA of the checkout this package runs from, whether tracked files differ from it, and a hash of
    the package's source."""

    def git(*args) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    sha = git("rev-parse", "HEAD")
    if sha is None:
        from . import __version__

        return {"git_sha": None, "dirty": None, "package_version": __version__, "source_sha256": source_sha256()}
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "frontier", "pyproject.toml")
    return {"git_sha": sha, "dirty": bool(dirty), "source_sha256": source_sha256()}


def write_record(run_dir: str | Path, record: dict) -> Path:
    return write_json(Path(run_dir) / RECORD, record)


def write_json(path: str | Path, obj: dict) -> Path:
    """Write `obj` as indented JSON, atomically (a reader never sees half a file)."""
    path = Path(path)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=_jsonable) + "\n")
    tmp.replace(path)
    return path


def _jsonable(x):
    if hasattr(x, "tolist"):
        return x.tolist()
    if isinstance(x, Path):
        return str(x)
    raise TypeError(f"cannot store {type(x).__name__} in a run record")


def load_record(run: str | Path) -> dict:
    """A record from a run folder (or its result.json); one clear error if there is none."""
    p = Path(run)
    path = p / RECORD if p.is_dir() else p
    if not path.is_file():
        raise UserError(f"{str(p)!r} holds no run record ({RECORD})", "pass a run folder written by `frontier train`")
    try:
        rec = json.loads(path.read_text())
    except json.JSONDecodeError:
        raise UserError(f"{str(path)!r} is not valid JSON", "re-run or re-evaluate that run") from None
    rec["run_dir"] = str(path.parent)
    return upgrade(rec)


EXCLUDED = "excluded.json"


def exclude(run_dir: str | Path, reason: str) -> Path:
    """Mark a run as not to be quoted, with the reason, in a file beside its record (the record stays as it is).
    `frontier.study.experiments` never reuses an excluded run; a new run goes beside it."""
    return write_json(Path(run_dir) / EXCLUDED, {"reason": reason, "code": code_version(),
                                                 "excluded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})


def excluded(run_dir: str | Path) -> str | None:
    """The reason a run was excluded, or None."""
    path = Path(run_dir) / EXCLUDED
    return json.loads(path.read_text())["reason"] if path.is_file() else None


def upgrade(rec: dict) -> dict:
    """A record written by older code, brought to today's fields from what it stored; each field derived here is
    named in `rec["derived"]` with how. Two bookkeeping bugs of that code are undone (the losses and scores are
    untouched):

    - Its `tokens_per_s` divided by all charged seconds, the n-gram shard counting included. Today's is the
      steps' own: the first `uncharged_steps` steps were free (inside the start-up allowance), so
      charged_steps = steps - uncharged_steps, charged_step_s = charged_s - the counting seconds.
    - Its compile statistics were process-global: a compiled run that found the model already compiled in its
      process (a second seed, a bench before it) recorded 0 frames and a short first step that were not its own.
      Those fields become None.
    """
    if "charged_step_s" in rec or rec.get("status") != "finished":
        return rec
    derived = {}
    cfg = rec.get("config", {})
    counting = (rec.get("ngram") or {}).get("counting_s") or 0.0
    steps, uncharged = rec.get("steps") or 0, cfg.get("train", {}).get("uncharged_steps", 0)
    if rec.get("uncharged_s", 0) < cfg.get("train", {}).get("startup_allowance_s", 0) and steps > uncharged:
        rec["charged_other_s"] = counting
        rec["charged_step_s"] = rec["charged_s"] - counting
        rec["charged_steps"] = steps - uncharged
        tokens = cfg["train"]["batch_size"] * cfg["train"]["seq_len"]
        rec["tokens_per_s"] = rec["charged_steps"] * tokens / rec["charged_step_s"]
        if counting:
            derived["tokens_per_s"] = "(steps - uncharged_steps) x tokens per step / (charged_s - n-gram counting_s)"
    comp = rec.get("compile")
    if comp and comp.get("frames_compiled_in_warmup") == 0:
        rec["compile"], rec["first_step_s"], rec["compile_s"] = None, None, None
        derived["compile"] = "unknown: this run reused a compile made earlier in its process (global counters)"
    if derived:
        rec["derived"] = derived
    return rec


# ----------------------------------------------------------------------------- bench records

BENCH_RECORD = "frontier-bench"


def record_header(kind: str, arguments: dict, command: list[str]) -> dict:
    """The fields every bench record starts with: what it is, when, how it was asked for, and which code."""
    return {"record": BENCH_RECORD, "kind": kind, "created": datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": list(command), "arguments": arguments, "code": code_version()}


def python_call(fn: str, arguments: dict) -> str:
    """`fn` (its qualified name) called with `arguments`, written as Python: the command of a record made from
    Python rather than the command line."""
    return f"{fn}(" + ", ".join(f"{k}={v!r}" for k, v in arguments.items()) + ")"


def cli_command(subcommand: str, positional: list[str], options: dict) -> list[str]:
    """The `frontier` command line that reproduces a bench: `options` {"--flag": value}; True is a bare flag,
    False and None are left out."""
    argv = ["frontier", subcommand, *positional]
    for flag, v in options.items():
        if v is True:
            argv.append(flag)
        elif v is not None and v is not False:
            argv += [flag, str(v)]
    return argv


def default_record_dir(profile: str) -> Path:
    """Where the CLI keeps bench records when no --out is given: runs/bench/<profile>/ (under the current folder)."""
    return Path("runs") / "bench" / profile


def new_record_path(out: str | Path, kind: str, names) -> Path:
    """The file a new record goes to. `out` ending in .json: that file, which must not exist. Otherwise a folder
    (made when the record is written), and in it `<kind>-<names joined by +>-<YYYYmmdd-HHMMSS>.json`, with -2,
    -3 ... added when that name is taken: never an existing file."""
    out = Path(out)
    if out.suffix == ".json":
        if out.exists():
            raise UserError(f"bench record {str(out)!r} already exists", "pass a new file, or a folder to add a record to")
        return out
    if out.exists() and not out.is_dir():
        raise UserError(f"{str(out)!r} is neither a folder nor a .json file", "pass a folder or a new .json file")
    stem = f"{kind}-{'+'.join(names)}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, n = out / f"{stem}.json", 1
    while path.exists():
        n += 1
        path = out / f"{stem}-{n}.json"
    return path


def write_bench_record(result: dict, path: str | Path) -> Path:
    """Write `result` as JSON to `path` (its folder made if missing), refusing to replace a file; sets
    `result["path"]` and returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    result["path"] = str(path)
    text = json.dumps(result, indent=1, default=_jsonable) + "\n"
    try:
        with open(path, "x") as fh:
            fh.write(text)
    except FileExistsError:
        raise UserError(f"bench record {str(path)!r} already exists", "pass a new file, or a folder to add a record to") from None
    return path


def load_bench_record(path: str | Path) -> dict:
    """A bench record written by `write_bench_record` (its `path` set to where it was read from); one clear error
    if `path` holds none."""
    path = Path(path)
    try:
        rec = json.loads(path.read_text())
    except (FileNotFoundError, IsADirectoryError):
        raise UserError(f"no bench record at {str(path)!r}", "pass a file written by `frontier bench` or `bench-table`") from None
    except json.JSONDecodeError:
        raise UserError(f"{str(path)!r} is not valid JSON", "re-run the bench") from None
    if not isinstance(rec, dict) or rec.get("record") != BENCH_RECORD:
        raise UserError(f"{str(path)!r} is not a bench record", "pass a file written by `frontier bench` or `bench-table`")
    rec["path"] = str(path)
    return rec


def bench_record(kind: str, arguments: dict, command: list[str] | None, fn: str, body: dict, path: Path | None,
                 cpu: bool = False) -> dict:
    """A finished bench record: the header (`record_header`; `command` None: the call of `fn` with `arguments`, as
    Python), then `body`, then `path`; written there when `path` is given. `path` comes from `new_record_path`,
    asked for before the bench runs, so that a bad `out` fails before the work. `cpu`: a bench of the CPU alone,
    whose `device` and `hardware` are this machine's CPU."""
    result = record_header(kind, arguments, command or [python_call(fn, arguments)])
    if cpu:
        result.update(device={"backend": "cpu"}, hardware=hardware(torch.device("cpu")))
    result.update(body, path=None)
    if path is not None:
        write_bench_record(result, path)
    return result

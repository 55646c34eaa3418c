"""Bench records, and runs excluded from quotation: what the study tools leave behind, as plain JSON.

Bench records (`frontier bench`, `bench-table`, `bench-head`, `bench-ngram`, `ngram-orders`, `kernels --census`,
`kernels --roofline`, the sweeps and the ladder's tables) are one JSON file each: `record` ("frontier-bench"),
`kind`, `created` (local time, ISO 8601), `command`, `arguments`, `code` (`frontier.records.code_version()`), then
the bench's own fields, and `path`. `out` is a folder, where a new file `<kind>-<names>-<YYYYmmdd-HHMMSS>.json` is
made beside the older ones (the CLI's default folder: `runs/bench/<profile>/`), or a `.json` file, which must not
exist: a record is never overwritten.

An excluded run keeps its record; a note beside it (`excluded.json`, with the reason) keeps it out of quotation.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import torch

from ..errors import UserError
from ..records import code_version, hardware, jsonable, repo_named, write_json


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
    `result["path"]` and returns the path. The file keeps the path relative to the repository where it lies inside
    it (`runs/...`: not the checkout that wrote it); `load_bench_record` sets it to where the record was read from."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    result["path"] = str(path)
    text = json.dumps({**result, "path": repo_named(path)}, indent=1, default=jsonable) + "\n"
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
    if isinstance(rec, dict) and rec.get("kind") == "retrain" and "retrained" in rec and "run" not in rec:
        rec = {**rec, "run": rec["record"], "record": BENCH_RECORD}  # the first retrain records named the run there
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


def records(folder: str | Path, kind: str, names=(), match=None) -> list[dict]:
    """The bench records of `kind` in `folder`, newest first (by their `created` time, then, within one second, the
    one `new_record_path` named last: `-3` before `-2` before none), each read back (`load_bench_record`): only files
    named as `new_record_path` names them, for exactly `names` where given (`bench-baseline+compile-...` is not
    `bench-baseline+compile-opt-...`), and only records for which `match(record)` holds where given."""
    import re

    folder = Path(folder)
    if not folder.is_dir():
        return []
    middle = re.escape("+".join(names)) if names else ".+"
    pattern = re.compile(rf"{re.escape(kind)}-{middle}-\d{{8}}-\d{{6}}(?:-(\d+))?\.json")
    found = []
    for path in folder.iterdir():
        named = pattern.fullmatch(path.name)
        if not named:
            continue
        try:
            rec = load_bench_record(path)
        except UserError:
            continue
        if rec.get("kind") == kind and (match is None or match(rec)):
            found.append((str(rec.get("created")), int(named.group(1) or 1), rec))
    return [rec for *_, rec in sorted(found, key=lambda x: x[:2], reverse=True)]


def newest_record(folder: str | Path, kind: str, names=(), match=None) -> dict | None:
    """The newest bench record of `kind` in `folder` (`records`' first), or None where there is none. A chapter quotes
    a committed record with it, and runs the bench only where it finds none."""
    return next(iter(records(folder, kind, names, match)), None)

"""Records: what a run or a bench leaves behind, as plain JSON, and what identifies the code and machine that made it.

Run records, `RUN_DIR/result.json`, are written by the trainer and read by the chapters, `compare` and `eval`. A
run record holds the recipe, profile and fully resolved config, the seed, the hardware and software, the code
version (git SHA, dirty or not), the data manifest's hash and the training split's tokens (`data.train_tokens`),
the clock (budget, charged and uncharged seconds), the score (val_bpb with its convention, val_loss, val_tokens,
val_bytes, and its bits and bytes per validation document, `val_by_document`), the status (finished, interrupted,
diverged, running), the implementation that ran for each op, and the loss curve. Records written before
`data.train_tokens` and `val_by_document` were kept lack them, and load as they are. `frontier card RUN_DIR` shows a
record on one page (`frontier.study.card`). `frontier eval --record` keeps an evaluation record beside the run.

Bench records and the exclusion of runs from quotation are the study's (`frontier.study.bench_records`).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

from .errors import UserError

RECORD = "result.json"
REPO = Path(__file__).resolve().parent.parent  # the checkout the package runs from (where git, notebooks and runs are)


def _in_repo(path) -> str | None:
    """`path` relative to the repository (`runs/cpu/...`), or None when it lies outside it."""
    try:
        return Path(path).resolve().relative_to(REPO).as_posix()
    except ValueError:
        return None


def repo_named(path) -> str | None:
    """A path under the repository as the repository names it (`runs/cpu/...`), so a record reads the same from any
    checkout (`REPO / name` finds it again); another path as it is (None as None)."""
    return None if path is None else _in_repo(path) or str(path)


def shown_path(path) -> str | None:
    """A path as a reader is shown it: a relative one without `..` as it is (records store names relative to the
    repository, whichever folder reads them: a notebook runs in notebooks/), one under the repository as
    `repo_named` names it, one outside it that lies under a `runs` folder (another checkout's, a `frontier book --out
    DIR` folder's) from that folder on (`runs/cpu/ngram/s0`), any other as it is. For printing and tables only:
    unlike `repo_named`'s, the name may not lead back to the path."""
    if path is None:
        return None
    if not Path(path).is_absolute() and ".." not in Path(path).parts:  # a stored name (`repo_named`): as it is
        return Path(path).as_posix()
    named = _in_repo(path)
    if named is not None:
        return named
    parts = Path(str(path)).parts  # outside the repository: from its `runs` folder on, if it has one
    return Path(*parts[len(parts) - 1 - parts[::-1].index("runs"):]).as_posix() if "runs" in parts else str(path)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_id() -> str | None:
    """The CPU's family, model and stepping numbers (`6/167/1`): tells apart two models one brand string names
    alike ("Intel(R) Xeon(R) Processor" covers several generations); None where /proc/cpuinfo does not say."""
    fields = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("cpu family", "model", "stepping") and key.strip() not in fields:
                fields[key.strip()] = value.strip()
            if not line.strip() and fields:
                break
    except OSError:
        return None
    return "/".join(fields.get(k, "?") for k in ("cpu family", "model", "stepping")) if fields else None


# The libraries' own switches that hold a CPU's vector kernels back to an older set (torch's ATen, oneDNN, MKL).
# They change how a step rounds, not what is trained, so a record that ran under them names them (`isa_caps`).
ISA_CAPS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")


def hardware(device: torch.device | None = None) -> dict:
    info = {
        "cpu": cpu_model(),
        "cpu_id": cpu_id(),
        "cpu_isa": torch.backends.cpu.get_cpu_capability(),  # the vector kernels torch dispatches to (AVX512, AVX2, ...)
        "cpu_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "system": platform.system(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
    }
    caps = {k: os.environ[k] for k in ISA_CAPS if os.environ.get(k)}
    if caps:  # the machine's own kernels held back (a stand-in for an older CPU): say so beside cpu_isa
        info["isa_caps"] = caps
    if device is not None and device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
    return info


# What a run's numbers cannot depend on: the study tools (nothing in data, model, optim, train or kernels imports
# them) and the figures, except the replay rule that judges a record; `training_sha256` leaves them out.
NOT_TRAINING = ("study/", "figures.py")
TRAINING_ALSO = ("study/replay.py",)


def _hashes() -> tuple[str, str]:
    """(source_sha256, training_sha256) of the package's own source files."""
    every, training = hashlib.sha256(), hashlib.sha256()
    pkg = Path(__file__).resolve().parent
    for path in sorted(pkg.rglob("*.py")):
        rel, text = path.relative_to(pkg).as_posix(), path.read_bytes()
        hashes = [every] if rel.startswith(NOT_TRAINING) and rel not in TRAINING_ALSO else [every, training]
        for h in hashes:
            h.update(rel.encode())
            h.update(text)
    return every.hexdigest()[:16], training.hexdigest()[:16]


def training_sha256() -> str:
    """A hash of the source a run's numbers depend on: the package without its study tools and figures
    (`NOT_TRAINING`), with the replay rule. Two versions of the code with the same one train the same runs and judge
    a record the same way, so a replay by one stands for the other (`frontier.study.replay`)."""
    return _hashes()[1]


def code_version() -> dict:
    """The git SHA of the checkout this package runs from, whether tracked files differ from it, a hash of the
    package's source and one of the source its training depends on (`training_sha256`)."""

    def git(*args) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    source, training = _hashes()
    sha = git("rev-parse", "HEAD")
    if sha is None:
        from . import __version__

        return {"git_sha": None, "dirty": None, "package_version": __version__, "source_sha256": source,
                "training_sha256": training}
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "frontier", "pyproject.toml")
    return {"git_sha": sha, "dirty": bool(dirty), "source_sha256": source, "training_sha256": training}


def write_record(run_dir: str | Path, record: dict) -> Path:
    return write_json(Path(run_dir) / RECORD, record)


def write_json(path: str | Path, obj: dict) -> Path:
    """Write `obj` as indented JSON, atomically (a reader never sees half a file)."""
    path = Path(path)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=jsonable) + "\n")
    tmp.replace(path)
    return path


def jsonable(x):
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



def write_evaluation_record(run_dir, rec: dict, score: dict, dev, weights: str | None, adaptive: bool, data,
                            command: list[str]) -> Path:
    """`frontier eval --record`: the scores beside the run, `RUN_DIR/eval-YYYYmmdd-HHMMSS.json` (a new file each
    time, never over an older one), with the run's steps, the weights (`weights`, None: the declared ones) and data
    (`data`, a `Dataset`; None: the run's own) scored, the code, the hardware, and the `command` that made it."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path, n = Path(run_dir) / f"eval-{stamp}.json", 2
    while path.exists():
        path, n = Path(run_dir) / f"eval-{stamp}-{n}.json", n + 1
    out = {"kind": "evaluation", "run_dir": str(run_dir), "recipe": rec.get("recipe"), "seed": rec.get("seed"),
           "steps": rec.get("steps"), "config_hash": rec.get("config_hash"), "weights": weights or "declared",
           "adaptive": adaptive, "data": {"folder": str(data.folder) if data else rec.get("data", {}).get("folder"),
                                          "manifest_hash": data.manifest_hash if data else
                                          rec.get("data", {}).get("manifest_hash")},
           "scores": {k: v for k, v in score.items() if k != "val_by_document"},
           "val_by_document": score.get("val_by_document"), "code": code_version(),
           "hardware": hardware(dev.device), "device": dev.backend, "command": command,
           "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
    return write_json(path, out)

def epochs_read(rec: dict) -> float | None:
    """How many times a run read its training split: tokens trained on / tokens in the split."""
    split = (rec.get("data") or {}).get("train_tokens")
    return rec["tokens"] / split if split and rec.get("tokens") is not None else None


def manifest_corpus(manifest: dict) -> str:
    """The named corpus a data folder was prepared from (`frontier.data.corpus.CORPORA`), or "text" (the user's)."""
    sources = manifest.get("sources") or {}
    return sources.get("corpus") or ("embedded" if sources.get("embedded") else "text")


def record_corpus(rec: dict) -> str:
    """The corpus a run, ladder or sweep record was made on. Run records before they named it: read from their data
    folder's name (`embedded-py3.11.7-v1024`, `docstrings-v1024`: `frontier.data.dataset.embedded_folder_name`)."""
    if rec.get("corpus"):
        return rec["corpus"]
    data = rec.get("data") or {}
    if data.get("corpus"):
        return data["corpus"]
    if "folder" in data:
        import re

        named = re.fullmatch(r"(.+?)-(?:py\d[\d.]*-)?v\d+(?:-b\d+)?", Path(data["folder"]).name)
        return named.group(1) if named else "text"
    return "embedded"  # ladder and sweep records before they named a corpus were all on the embedded corpus


# The ground a profile's numbers stand on now (`Profile.corpus`, `Profile.clock`), and since when (docs/log.md).
GROUND_SINCE = "2026-12-04"


def superseded(rec: dict) -> str | None:
    """Why a smoke or cpu run, ladder or sweep record no longer stands on its profile's ground, or None where it
    does (or the profile keeps the competition's wall clock: gpu, trn2). A superseded record stays in `runs/` as it is: what it measured
    is still true of its ground, but no longer comparable with the profile's numbers: another corpus, a clock that
    moves with the machine, or a steps budget that charged counting the train shards at another split's size."""
    from .profiles import PROFILES

    if "config" not in rec and rec.get("kind") not in ("ladder", "sweep"):
        return None  # a bench record: measured on its machine, judged by what it names
    name = rec.get("profile") or (rec.get("config") or {}).get("profile")
    p = PROFILES.get(name)
    if p is None or p.clock != "steps":
        return None
    corpus = record_corpus(rec)
    if corpus != p.corpus and corpus != "text":
        return f"made on the {corpus} corpus; the {p.name} profile's ground is the {p.corpus} corpus since {GROUND_SINCE}"
    if "config" not in rec:
        return None
    clock = rec["config"]["train"].get("clock", "wall")
    if clock != "steps":
        return f"its budget ran under the {clock} clock, which moves with the machine; the {p.name} profile's " \
               f"budgets are fixed steps (the steps rule)"
    budget, ngram = rec.get("budget") or {}, rec["config"]["model"].get("ngram") or {}
    if (ngram.get("counting") == "shards" and not budget.get("explicit_steps") and budget.get("cost")
            and "counted_tokens" not in budget):
        return "its steps rule charged counting the train shards at the size of the split the cost was benched on, " \
               "not its own"
    return None


def train_loss_end(rec: dict, share: float = 0.1) -> float | None:
    """The mean training loss (nats a token) over the last `share` of a run's logged steps (None without a curve)."""
    losses = ((rec.get("curve") or {}).get("train_loss") or [])
    tail = [x for x in losses[-max(1, round(len(losses) * share)):] if x is not None] if losses else []
    return sum(tail) / len(tail) if tail else None


def loss_gap(rec: dict) -> float | None:
    """Validation loss minus the training loss at the end of the run (`train_loss_end`), in nats a token: how far
    the run's training text scores better than text it never read (memorisation shows as a large gap)."""
    end = train_loss_end(rec)
    return rec["val_loss"] - end if end is not None and rec.get("val_loss") is not None else None


def summary_lines(rec: dict) -> list[str]:
    """A finished run in a few lines, as `frontier train` prints it: steps, epochs read, the clock, the scores."""
    epochs = epochs_read(rec)
    lines = [f"steps {rec['steps']}" + (f" ({epochs:.3f} epochs of the training split)" if epochs else "")
             + f", charged {rec['charged_s']:.1f}s (uncharged {rec['uncharged_s']:.1f}s), "
             f"{rec['tokens_per_s'] or 0:,.0f} tok/s, val_bytes {rec['val_bytes']:,} ({rec['bpb_convention']})"]
    if superseded(rec):
        lines.append(f"SUPERSEDED: {superseded(rec)}")
    if rec.get("probe"):
        pr = rec["probe"]
        drifted = f" (DRIFTED: over {pr['drift_limit']:.0%})" if pr["drifted"] else ""
        lines.append(f"reference clock: {rec['charged_s']:.1f} reference s for {rec['charged_wall_s']:.1f} wall s; "
                     f"probe {pr['name']} {pr['probe_s_median'] * 1e3:.1f} ms (reference {pr['ref_s'] * 1e3:.1f} ms), "
                     f"drift {pr['drift']:.1%}{drifted}")
    budget = rec.get("budget") or {}
    if budget.get("cost"):
        c = budget["cost"]
        lines.append(f"steps rule: {budget['steps']} steps at {c['step_s'] * 1e3:.2f} reference ms a step + "
                     f"{budget.get('once_s', c['fixed_s']):.2f} s once (cost {budget['source']}; {rec['charged_wall_s']:.1f} wall s here)")
    if "val_bpb_ema" in rec:
        mix = rec["config"]["train"]["ema"]["mix"]
        lines.append(f"val_bpb_live={rec['val_bpb_live']:.6f} val_bpb_ema={rec['val_bpb_ema']:.6f} "
                     f"(val_bpb: mix {mix:g} of the EMA)")
    if rec.get("test_bpb") is not None:
        lines.append(f"test_bpb={rec['test_bpb']:.6f}")
    lines.append(f"val_bpb={rec['val_bpb']:.6f}")
    return lines


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


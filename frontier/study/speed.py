"""Training throughput across code versions, and where a step's time goes.

`frontier bench-versions VERSION... --recipes R...`: the same recipes timed under several versions of the code,
side by side, interleaved. A VERSION is a checkout (a folder holding `frontier/__main__.py`) or a commit of this
repository (checked out into a temporary git worktree, removed afterwards). Old code is never imported here: each
execution is that checkout's own command line, `python -m frontier bench R... --out FILE` in a fresh process with
PYTHONPATH set to the checkout (module paths differ across versions: before the layout the package was flat), and
its bench record is read back. Executions alternate A B C A B C ... (`rounds` of each version), so that a machine
that speeds up or slows down during the comparison affects every version alike; per version and recipe the record
keeps every round's tokens/s samples, their median, and the ratio of that median to the first version's. A recipe a
version does not know is recorded as absent for it (with the version's recipe list), not dropped silently.

`frontier profile-step RECIPE`: a recipe built as the bench builds it, warmed up, then `steps` steps under
torch.profiler (CPU activity): each op's self CPU time, summed into groups (matrix multiplies, attention, the
compiled graphs' fused kernels, the fused ops' own nodes, copies, other aten ops), as shares of the profiled time.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import records
from ..errors import UserError

from . import bench_records

# ------------------------------------------------------------------------------------------------ bench-versions


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)


def repo_root() -> Path:
    """The git checkout this package runs from."""
    here = Path(__file__).resolve().parent
    out = _git(here, "rev-parse", "--show-toplevel")
    if out.returncode != 0:
        raise UserError("bench-versions needs the package in a git checkout to resolve commits",
                        "pass checkout folders instead of commits")
    return Path(out.stdout.strip())


def resolve_version(spec: str, repo: Path | None = None) -> dict:
    """{'spec', 'folder' (a checkout) or 'commit' (full sha)}: a folder holding frontier/__main__.py, else a commit
    of `repo`; one clear error for anything else."""
    if not spec.strip():
        raise UserError("an empty version", "pass a checkout folder or a commit, e.g. HEAD~1")
    folder = Path(spec)
    if folder.is_dir():
        if not (folder / "frontier" / "__main__.py").is_file():
            raise UserError(f"{spec!r} is a folder but not a checkout of frontier (no frontier/__main__.py)",
                            "pass the root folder of a checkout, or a commit")
        return {"spec": spec, "folder": str(folder.resolve())}
    repo = repo or repo_root()
    out = _git(repo, "rev-parse", "--verify", "--quiet", f"{spec}^{{commit}}")
    if out.returncode != 0:
        raise UserError(f"{spec!r} is neither a checkout folder nor a commit of {repo}",
                        "pass a folder holding frontier/__main__.py, or a commit (git log --oneline)")
    return {"spec": spec, "commit": out.stdout.strip()}


def check_arguments(versions: list[str], recipes: list[str], rounds: int, steps: int, repeats: int) -> None:
    if len(versions) < 2:
        raise UserError(f"bench-versions compares versions: got {len(versions)}", "pass two or more, e.g. HEAD~1 HEAD")
    if len(set(versions)) != len(versions):
        raise UserError(f"a version is named twice in {' '.join(versions)}", "name each version once")
    if not recipes:
        raise UserError("no recipes to time", "pass --recipes, e.g. --recipes baseline compile")
    for name, v in (("--rounds", rounds), ("--steps", steps), ("--repeats", repeats)):
        if v < 1:
            raise UserError(f"{name} {v} is not a positive count", f"pass {name} 1 or more")


def _env(folder: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = folder  # this checkout's package, not the one running the bench
    return env


def _cli(folder: str, args: list[str], python: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", "frontier", *args], capture_output=True, text=True, env=_env(folder),
                          cwd=cwd)


def version_facts(folder: str, python: str, cwd: str) -> dict:
    """What a checkout's command line offers: its recipe names and whether its bench takes --no-memory."""
    listing = _cli(folder, ["recipes"], python, cwd)
    if listing.returncode != 0:
        raise UserError(f"`frontier recipes` fails in {folder}: {(listing.stderr.strip().splitlines() or ['?'])[-1]}",
                        "check that the checkout runs with this Python")
    names = [line.split()[0] for line in listing.stdout.splitlines() if line.strip() and not line.startswith(" ")]
    helptext = _cli(folder, ["bench", "--help"], python, cwd).stdout
    return {"recipes": names, "no_memory": "--no-memory" in helptext}


def run_bench_versions(versions: list[str], recipes: list[str], profile: str = "cpu", steps: int = 10,
                       repeats: int = 2, rounds: int = 2, device: str = "cpu", out: str | Path | None = None,
                       command: list[str] | None = None, log=print, python: str = sys.executable) -> dict:
    """Time `recipes` under each of `versions` (module docstring); the bench record (written to `out`, a folder or a
    new .json file)."""
    check_arguments(versions, recipes, rounds, steps, repeats)
    arguments = {"versions": list(versions), "recipes": list(recipes), "profile": profile, "steps": steps,
                 "repeats": repeats, "rounds": rounds, "device": device}
    resolved = [resolve_version(v) for v in versions]  # every version checked before any work
    path = bench_records.new_record_path(out, "bench-versions", [v.replace("/", "_")[-20:] for v in versions]) \
        if out is not None else None
    made: list[str] = []
    repo = None
    with tempfile.TemporaryDirectory(prefix="frontier-versions-") as tmp:
        try:
            for v in resolved:
                if "commit" in v:
                    repo = repo or repo_root()
                    folder = str(Path(tmp) / f"wt-{v['commit'][:12]}")
                    add = _git(repo, "worktree", "add", "--detach", folder, v["commit"])
                    if add.returncode != 0:
                        raise UserError(f"cannot check out {v['spec']}: {add.stderr.strip()[:200]}",
                                        "pass a checkout folder instead")
                    made.append(folder)
                    v["folder"] = folder
                v.update(version_facts(v["folder"], python, tmp))
                head = _git(Path(v["folder"]), "rev-parse", "HEAD")
                v["head"] = head.stdout.strip() if head.returncode == 0 else None
                v["runs"] = [r for r in recipes if r in v["recipes"]]
                v["absent"] = [r for r in recipes if r not in v["recipes"]]
                if not v["runs"]:
                    raise UserError(f"version {v['spec']!r} knows none of {', '.join(recipes)}",
                                    f"its recipes: {', '.join(v['recipes'])}")
                if v["absent"]:
                    log(f"bench-versions: {v['spec']} has no recipe {', '.join(v['absent'])} (recorded as absent)")
            executions = []
            for rnd in range(rounds):
                for i, v in enumerate(resolved):
                    rec_path = Path(tmp) / f"v{i}-round{rnd}.json"
                    args = ["bench", *v["runs"], "--profile", profile, "--steps", str(steps), "--repeats",
                            str(repeats), "--device", device, "--out", str(rec_path)]
                    if v["no_memory"]:
                        args.append("--no-memory")
                    log(f"bench-versions: round {rnd + 1}/{rounds}, {v['spec']}: frontier {' '.join(args[:-2])}")
                    t0 = time.perf_counter()
                    proc = _cli(v["folder"], args, python, tmp)
                    if proc.returncode != 0:
                        last = ([l for l in proc.stderr.splitlines() if l.strip()] or ["no message"])[-1]
                        raise UserError(f"the bench of version {v['spec']!r} failed ({last.strip()[:300]})",
                                        f"run it alone: PYTHONPATH={v['folder']} python -m frontier {' '.join(args)}")
                    job = json.loads(rec_path.read_text())
                    executions.append({"round": rnd, "version": v["spec"], "wall_s": time.perf_counter() - t0,
                                       "code": job.get("code"), "rows": job["rows"], "command": job.get("command"),
                                       "device": job.get("device")})
        finally:
            for folder in made:
                _git(repo, "worktree", "remove", "--force", folder)
    body = summarise_versions(resolved, recipes, executions)
    body.update(profile=profile, steps=steps, repeats=repeats, rounds=rounds,
                hardware=records.hardware(), executions=executions,
                versions=[{k: v.get(k) for k in ("spec", "commit", "head", "folder", "runs", "absent", "no_memory")}
                          for v in resolved])
    for v in body["versions"]:
        if "commit" in next(r for r in resolved if r["spec"] == v["spec"]):
            v["folder"] = "(a temporary git worktree, removed)"
    return bench_records.bench_record("bench-versions", arguments, command, f"{__name__}.run_bench_versions", body, path)


def summarise_versions(resolved: list[dict], recipes: list[str], executions: list[dict]) -> dict:
    """Per recipe and version: every tokens/s sample (all rounds of all executions), the median, and the ratio
    to the first version's median (None where either is absent)."""
    table = []
    for r in recipes:
        cells = {}
        for v in resolved:
            samples = [s for e in executions if e["version"] == v["spec"] for row in e["rows"]
                       if row["recipe"] == r for s in row["samples"]]
            cells[v["spec"]] = {"samples": samples,
                                "median": statistics.median(samples) if samples else None,
                                "per_execution": [row["tokens_per_s_median"] for e in executions
                                                  if e["version"] == v["spec"] for row in e["rows"]
                                                  if row["recipe"] == r]}
        base = cells[resolved[0]["spec"]]["median"]
        for c in cells.values():
            c["ratio"] = c["median"] / base if c["median"] and base else None
        table.append({"recipe": r, "versions": cells})
    return {"table": table}


def format_versions(result: dict) -> str:
    specs = [v["spec"] for v in result["versions"]]
    rows = []
    for row in result["table"]:
        cells = []
        for s in specs:
            c = row["versions"][s]
            cells.append("absent" if c["median"] is None else f"{c['median']:,.0f} ({c['ratio']:.2f}x)"
                         if c["ratio"] is not None else f"{c['median']:,.0f}")
        rows.append((row["recipe"], cells))
    # Every column at least two spaces wider than its widest entry, so that no two cells run together.
    width = max(14, *(len(s) + 2 for s in specs), *(len(c) + 2 for _, cells in rows for c in cells))
    lines = [f"bench-versions: profile {result['profile']}, {result['rounds']} alternating executions of each version "
             f"x {result['repeats']} rounds x {result['steps']} steps; median tokens/s (ratio to {specs[0]})",
             f"{'recipe':<14}" + "".join(f"{s:>{width}}" for s in specs)]
    lines += [f"{recipe:<14}" + "".join(f"{c:>{width}}" for c in cells) for recipe, cells in rows]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ profile-step
MATMUL = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_mkl_linear", "_linear_pointwise", "addmv", "mv"}
COPY = {"copy_", "clone", "contiguous", "cat", "stack", "to", "_to_copy", "empty_strided", "empty", "zeros", "zero_",
        "fill_", "index_select", "gather", "scatter_add", "scatter_add_", "index_put_", "embedding"}


def op_group(name: str) -> str:
    """The group an op's self time counts in (see the module docstring)."""
    op = name.split("::")[-1].split(".")[0]
    if name.startswith("frontier::") or "_frontier_" in name:
        return "fused ops (frontier::, opaque)"
    if op in MATMUL:
        return "matrix multiplies"
    if "scaled_dot_product" in name or "flash_attention" in name or "efficient_attention" in name:
        return "attention (sdpa)"
    if "Compiled" in name or "compiled" in name or name.startswith("graph_") or name.startswith("cpp_fused"):
        return "compiled graphs (fused kernels, bookkeeping)"
    if op in COPY:
        return "copies, layout, gather/scatter"
    if name.startswith("aten::"):
        return "other aten (elementwise, reductions)"
    return "other (optimiser, Python, profiler)"


def run_profile_step(recipe: str, profile: str = "cpu", steps: int = 5, device: str = "cpu", kernels: str = "reference",
                     out: str | Path | None = None, command: list[str] | None = None, log=print, top: int = 15) -> dict:
    """Profile `steps` training steps of `recipe` after its warm-up (module docstring); the bench record."""
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile

    from ..data.dataset import profile_dataset
    from ..devices import select_device
    from ..kernels import calls, reset_calls
    from ..profiles import get_profile
    from ..train.compile import CompileWatch
    from .bench import _step, build_entry

    if steps < 1:
        raise UserError(f"--steps {steps} is not a positive count", "pass --steps 1 or more")
    arguments = {"recipe": recipe, "profile": profile, "steps": steps, "device": device, "kernels": kernels}
    path = bench_records.new_record_path(out, "profile-step", [recipe]) if out is not None else None
    prof = get_profile(profile)
    dev = select_device(device)
    entry = build_entry(recipe, prof, dev, profile_dataset(prof, log=log), kernels=kernels)
    watch = CompileWatch(entry.cfg.train.compile, strict=False, log=log)
    for i in range(max(entry.cfg.train.uncharged_steps, 2)):
        _step(entry, dev, i)
    watch.warmup_done()
    reset_calls()
    with torch_profile(activities=[ProfilerActivity.CPU]) as p:
        t0 = time.perf_counter()
        for i in range(steps):
            _step(entry, dev, 1000 + i)
        wall = time.perf_counter() - t0
    ops = [(e.key, e.self_cpu_time_total / 1000.0, e.count) for e in p.key_averages()]
    total = sum(ms for _, ms, _ in ops) or 1.0
    groups: dict[str, float] = {}
    for name, ms, _ in ops:
        groups[op_group(name)] = groups.get(op_group(name), 0.0) + ms
    body = {
        "profile": prof.name, "recipe": recipe, "device": dev.describe(), "hardware": records.hardware(dev.device),
        "steps": steps, "step_ms": 1000 * wall / steps, "self_cpu_ms_per_step": total / steps,
        "groups": [{"group": g, "ms_per_step": ms / steps, "share": ms / total}
                   for g, ms in sorted(groups.items(), key=lambda kv: -kv[1])],
        "top_ops": [{"op": n, "ms_per_step": ms / steps, "share": ms / total, "calls_per_step": c / steps,
                     "group": op_group(n)} for n, ms, c in sorted(ops, key=lambda o: -o[1])[:top]],
        "kernel_calls": calls(), "compile": watch.summary(), "torch_threads": torch.get_num_threads(),
    }
    body["matmul_share"] = groups.get("matrix multiplies", 0.0) / total
    return bench_records.bench_record("profile-step", arguments, command, f"{__name__}.run_profile_step", body, path)


def format_profile(result: dict) -> str:
    lines = [f"profile-step: {result['recipe']} at profile {result['profile']}, {result['steps']} steps, "
             f"{result['step_ms']:.0f} ms a step under the profiler; self CPU time by group",
             f"{'group':<48}{'ms/step':>9}{'share':>8}"]
    lines += [f"{g['group']:<48}{g['ms_per_step']:>9.1f}{g['share']:>7.1%}" for g in result["groups"]]
    lines += ["", f"{'op':<48}{'ms/step':>9}{'share':>8}{'calls/step':>11}"]
    lines += [f"{o['op'][:47]:<48}{o['ms_per_step']:>9.1f}{o['share']:>7.1%}{o['calls_per_step']:>11.0f}"
              for o in result["top_ops"]]
    return "\n".join(lines)

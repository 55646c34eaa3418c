"""Runs as the chapters use them: train a recipe (or reuse its finished record) under a run root.

A run lives in `ROOT/PROFILE/LABEL/sSEED`, where LABEL is the recipe (or a name given for a variant). A finished
record there is reused when its config hash and data manifest match what would be trained now, so chapters share
runs (chapter 02's eager runs are chapter 01's baseline runs) and re-running the book trains only what changed.
Records keep the git SHA of the code that wrote them.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from . import records
from .config import RunConfig
from .data import Dataset, embedded_dataset
from .devices import select_device
from .profiles import Profile, get_profile
from .recipes import resolve
from .trainer import train


# The model sizes chapter 01 tries before fixing a profile's size (one seed each, at the profile's budget).
SIZE_SWEEPS: dict[str, list[dict]] = {
    "smoke": [dict(n_layer=1, n_embd=64, n_head=2, n_kv_head=2), dict(n_layer=2, n_embd=64, n_head=2, n_kv_head=2)],
    "cpu": [
        dict(n_layer=2, n_embd=128, n_head=2, n_kv_head=2),
        dict(n_layer=4, n_embd=128, n_head=2, n_kv_head=2),
        dict(n_layer=6, n_embd=128, n_head=2, n_kv_head=2),
        dict(n_layer=3, n_embd=192, n_head=3, n_kv_head=3),
        dict(n_layer=4, n_embd=192, n_head=3, n_kv_head=3),
        dict(n_layer=6, n_embd=192, n_head=3, n_kv_head=3),
        dict(n_layer=4, n_embd=256, n_head=4, n_kv_head=4),
        dict(n_layer=4, n_embd=192, n_head=3, n_kv_head=3, batch_size=8),
        dict(n_layer=4, n_embd=128, n_head=2, n_kv_head=2, batch_size=8),
    ],
}


def size_label(sizes: dict) -> str:
    return f"size-{sizes['n_layer']}x{sizes['n_embd']}" + (f"-b{sizes['batch_size']}" if "batch_size" in sizes else "")


def profile_with(profile: str | Profile, **sizes) -> Profile:
    """A profile with some sizes changed (for sweeps); it keeps its name, the config hash tells them apart."""
    p = get_profile(profile) if isinstance(profile, str) else profile
    return dataclasses.replace(p, **sizes) if sizes else p


def run_dir_for(root: str | Path, cfg: RunConfig, seed: int, label: str | None = None, steps: int | None = None) -> Path:
    name = label or cfg.recipe
    return Path(root) / cfg.profile / name / f"s{seed}"


def run(
    recipe: str,
    profile: str | Profile = "cpu",
    seed: int = 0,
    root: str | Path = "runs",
    budget_s: float | None = None,
    steps: int | None = None,
    label: str | None = None,
    sizes: dict | None = None,
    data: str | Path | Dataset | None = None,
    device: str = "auto",
    reuse: bool = True,
    log=print,
) -> dict:
    """Train `recipe` with `profile` (or return the matching finished record) and return its run record."""
    prof = profile_with(profile, **(sizes or {}))
    cfg = resolve(recipe, prof, budget_s=budget_s)
    if isinstance(data, Dataset):
        dataset = data
    else:
        dataset = Dataset(data) if data else embedded_dataset(cfg.model.vocab_size, log=log)
    dev = select_device(device)
    run_dir = run_dir_for(root, cfg, seed, label)
    if (run_dir / records.RECORD).exists():
        rec = records.load_record(run_dir)
        same = (
            rec.get("status") == "finished"
            and rec.get("config_hash") == cfg.digest()
            and rec.get("data", {}).get("manifest_hash") == dataset.manifest_hash
            and rec.get("max_steps") == steps
            and rec.get("device", {}).get("backend") == dev.backend
        )
        if reuse and same:
            log(f"{run_dir}: reusing finished run (val_bpb {rec['val_bpb']:.4f}, code {str(rec['code'].get('git_sha'))[:8]})")
            return rec
        log(f"{run_dir}: {'stale' if not same else 'reuse off'}; training again")
        shutil.rmtree(run_dir)
    log(f"{run_dir}: training {cfg.recipe} ({label or 'recipe'}), seed {seed}, "
        f"{f'{steps} steps' if steps else f'budget {cfg.train.budget_s:g}s'} on {dev.backend}")
    rec = train(cfg, dataset, run_dir, dev, seed=seed, steps=steps, progress=False,
                command=[f"frontier.experiments.run({recipe!r}, profile={prof.name!r}, seed={seed}, "
                         f"budget_s={budget_s}, steps={steps}, label={label!r}, sizes={sizes})"])
    log(f"{run_dir}: val_bpb {rec['val_bpb']:.4f}, {rec['steps']} steps, {rec['tokens_per_s'] or 0:,.0f} tok/s")
    return rec


def seeds(recipe: str, profile: str | Profile, n: int | None = None, **kw) -> list[dict]:
    """`run` for seeds 0..n-1 (n defaults to the profile's `seeds`)."""
    p = get_profile(profile) if isinstance(profile, str) else profile
    return [run(recipe, p, seed=s, **kw) for s in range(n or p.seeds)]

"""Runs as the chapters use them: train a recipe, or reuse a finished record that the current code reproduces.

A run lives in `ROOT/PROFILE/LABEL/sSEED`, where LABEL is the recipe (or a name given for a variant). A finished
record there is reused when (1) its config hash, data manifest, step limit and device backend match what would
be trained now (for a run under a wall-clock budget: on hardware as fast, the same CPU model, core and thread counts
and GPU, since the budget decides how many steps it takes; a run under the reference clock, `frontier.train.clock`,
took the steps its reference seconds buy on any machine, so it is comparable across machines), and (2) the current code reproduces it (`frontier.study.replay`: the first steps' losses bit for bit,
the same scorer). So chapters share runs (chapter 02's eager runs are chapter 01's baseline runs), re-running
the book trains only what changed, and every quoted number comes from code shown to produce it.

Nothing here deletes a record. A record that cannot be reused stays where it is, and the new run goes beside it
(`sSEED-2`, `sSEED-3`, ...); the newest reusable one of those folders is the one a chapter reads. A run can be
excluded from quotation by a note beside its record (`frontier.study.bench_records.exclude`, with the reason); it
is then never reused.
"""

from __future__ import annotations

from pathlib import Path

from .. import records
from ..config import EMAConfig, RunConfig
from ..data.dataset import Dataset, profile_dataset
from ..devices import select_device
from ..profiles import Profile, get_profile
from ..recipes import Recipe, resolve
from ..train.checkpoint import CHECKPOINT
from ..train import cost as step_costs
from ..train.trainer import train
from . import bench_records
from . import replay, report
from .bench import run_bench
from .bench_table import run_table_bench


def size(n_layer: int, n_embd: int, head_dim: int = 64, **more) -> dict:
    """A model size as profile fields: `n_layer` blocks of width `n_embd`, as many heads (query and key/value) of
    `head_dim` channels as fit, and any other profile field (`batch_size=8`)."""
    heads = n_embd // head_dim
    return dict(n_layer=n_layer, n_embd=n_embd, n_head=heads, n_kv_head=heads, **more)


# The model sizes chapter 01 screens beside a profile's own: one step either side of it in depth and in width, at
# the profile's budget, their steps bought from the committed cost table (`frontier bench --costs --sizes`). The
# cpu profile's 3 x 192 came from a wider sweep under the wall clock on the earlier corpus (docs/log.md).
SIZE_SWEEPS: dict[str, list[dict]] = {
    "smoke": [size(1, 64, head_dim=32), size(2, 64, head_dim=32)],
    "cpu": [size(2, 192), size(3, 192), size(4, 192), size(3, 128), size(3, 256)],
}


# The sizes chapter 07 tries for the final recipe around the profile's own (one seed each; the profile's size has
# the ladder's seeds): one step in depth and one in width either side.
FINAL_SIZE_SWEEPS: dict[str, list[dict]] = {
    "smoke": [size(1, 64, head_dim=32), size(2, 96, head_dim=32)],
    "cpu": [size(2, 192), size(4, 192), size(3, 128), size(3, 256)],
}


# The batch sizes chapter 07 screens for the final recipe at the budget, either side of the profile's own (half, double
# and, at cpu, four times its sequences a step), each buying its steps from the committed cost table (`frontier bench
# --costs --batches`): a step's cost moves with its tokens, so a batch size is judged at equal budget, like a model size.
BATCH_SWEEPS: dict[str, list[dict]] = {
    "smoke": [dict(batch_size=4), dict(batch_size=16)],
    "cpu": [dict(batch_size=8), dict(batch_size=32), dict(batch_size=64)],
}


def batch_screen(run, sizes: list[dict], seeds: int) -> tuple[list[dict], dict[int, list[dict]], dict[int, tuple]]:
    """Chapter 07's batch-size screen at the budget, through `run(seed, sizes)` (sizes None: the recipe at its own
    batch; a run buys its steps from the cost table): each size on seeds 0 and 1; a size better than the recipe on
    both gets seeds up to `seeds`; one whose gain the rule does not show at that many seeds (`compare.keep`, a change
    that trades steps) is trained again on fresh seeds `seeds`..2*`seeds`-1 beside the recipe's own, to be judged on
    those alone. Returns (the recipe's runs, {batch: the size's runs}, {batch: (recipe's, size's fresh runs)})."""
    base = [run(s, None) for s in range(seeds)]
    runs: dict[int, list[dict]] = {}
    replicated: dict[int, tuple] = {}
    for sz in sizes:
        v = runs[sz["batch_size"]] = [run(s, sz) for s in (0, 1)]
        if all(r["val_bpb"] < b["val_bpb"] for r, b in zip(v, base)):
            v += [run(s, sz) for s in range(2, seeds)]
        verdict = batch_verdict(base, v)
        # a near miss: better over every seed the screen gave it, short of the rule's p (not a screen of two seeds)
        if verdict["verdict"].startswith("equal budget: not shown") and verdict["gain"] > 0:
            fresh = range(seeds, 2 * seeds)
            replicated[sz["batch_size"]] = ([run(s, None) for s in fresh], [run(s, sz) for s in fresh])
    return base, runs, replicated


def batch_verdict(base: list[dict], runs: list[dict]) -> dict:
    """A batch size's runs against the recipe's, paired by seed (the seeds `runs` has) at equal budget, the only
    stage for a change that trades steps (`compare.keep`): `gain`, `p`, `seeds` on validation, which decides;
    `test_gain`, `test_p` where every run scored a test split (reported); `kept` (True, False, None: not shown) and
    `verdict`, the rule's words for the budget stage ("equal budget: not shown (p = 0.015; ...) (+0.0051, ...)")."""
    from .compare import keep, paired_gain

    paired = base[:len(runs)]
    gain, p, n = paired_gain(paired, runs)
    kept, why = keep(None, (gain, p, n), trades_steps=True)
    out = {"gain": gain, "p": p, "seeds": n, "kept": kept, "verdict": why.split("; equal steps")[0],
           "test_gain": None, "test_p": None}
    if all(r.get("test_bpb") is not None for r in paired + runs):
        out["test_gain"], out["test_p"], _ = paired_gain(paired, runs, "test_bpb")
    return out


# The weight average's settings chapter 06 screens at 400 steps (start, half-life as shares of the run), each scored
# as the average alone against the same run's live weights: shorter and longer half-lives than the recipe's 0.05,
# and a later start. smoke checks the code with two.
EMA_SCREEN: dict[str, list[tuple[float, float]]] = {
    "smoke": [(0.5, 0.01), (0.5, 0.02)],
    "cpu": [(0.5, 0.01), (0.5, 0.02), (0.5, 0.1), (0.5, 0.2), (0.75, 0.02), (0.75, 0.05)],
}


def size_label(sizes: dict) -> str:
    """A folder label for a run at other sizes: `size-3x128`, `size-3x128-b8`, or `batch-8` for a batch size alone."""
    if "n_layer" not in sizes:
        return f"batch-{sizes['batch_size']}"
    return f"size-{sizes['n_layer']}x{sizes['n_embd']}" + (f"-b{sizes['batch_size']}" if "batch_size" in sizes else "")


def seed_dirs(root: str | Path, cfg: RunConfig, seed: int, label: str | None = None) -> list[Path]:
    """The run folders of this label and seed that exist, newest first (`sSEED-3`, `sSEED-2`, `sSEED`)."""
    base = Path(root) / cfg.profile / (label or cfg.recipe)
    found = [p for p in [base / f"s{seed}", *base.glob(f"s{seed}-*")] if p.is_dir() and _version(p, seed) > 0]
    return sorted(found, key=lambda p: _version(p, seed), reverse=True)


def _version(path: Path, seed: int) -> int:
    if path.name == f"s{seed}":
        return 1
    tail = path.name[len(f"s{seed}-"):]
    return int(tail) if tail.isdigit() else 0


def new_run_dir(root: str | Path, cfg: RunConfig, seed: int, label: str | None = None) -> Path:
    """The next free folder for this label and seed: `sSEED`, then `sSEED-2`, `sSEED-3`, ..."""
    existing = seed_dirs(root, cfg, seed, label)
    base = Path(root) / cfg.profile / (label or cfg.recipe)
    return base / (f"s{seed}" if not existing else f"s{seed}-{_version(existing[0], seed) + 1}")


# What a run under a wall-clock budget depends on besides the code and config: how many steps fit in the budget.
SPEED_FIELDS = ("cpu", "cpu_cores", "torch_threads", "gpu")


def mismatch(rec: dict, cfg: RunConfig, dataset: Dataset, steps: int | None, backend: str,
             hardware: dict | None = None) -> str | None:
    """Why a record is not the run that would be trained now (None: it is). `hardware` (`records.hardware` of
    this machine): a run on a budget whose steps depend on the machine (the wall clock; the reference clock, whose
    probe normalises the machine's speed only roughly; the steps rule at a cost measured on the spot) is only the
    run of a machine like it, so such a record made on other hardware (`SPEED_FIELDS`) is not reused; a
    step-limited one is, and so is one under the steps rule at the committed table's cost (the same steps
    everywhere)."""
    if rec.get("status") != "finished":
        return f"status {rec.get('status')}"
    if rec.get("config_hash") != cfg.digest():
        return "another config"
    if rec.get("data", {}).get("manifest_hash") != dataset.manifest_hash:
        return "other data"
    budget = rec.get("budget") or {}
    limit = None if budget and not budget.get("explicit_steps") else rec.get("max_steps")  # the caller's step limit
    if limit != steps:
        return f"max_steps {limit} (wanted {steps})"
    if rec.get("device", {}).get("backend") != backend:
        return f"device {rec.get('device', {}).get('backend')} (wanted {backend})"
    fixed_steps = cfg.train.clock == "steps" and (rec.get("budget") or {}).get("source") == "table"
    if fixed_steps and steps is None:  # the same steps everywhere, as long as the table still buys them
        now = step_costs.load_table().get(step_costs.cost_key(cfg))
        want = now.steps_for(cfg.train.budget_s, step_costs.counted_tokens(cfg, dataset)) if now else None
        if want != rec.get("steps"):
            return f"{rec.get('steps')} steps; the committed cost table buys {want} now"
    if steps is None and hardware is not None and not fixed_steps:
        theirs = rec.get("hardware", {})
        other = [f"{k} {theirs.get(k)!r} (here {hardware.get(k)!r})" for k in SPEED_FIELDS
                 if theirs.get(k) != hardware.get(k)]
        if other:
            return "trained under a budget on other hardware: " + ", ".join(other)
    return None


def _placed(recipe, prof: Profile, label: str | None, data, log, **settings) -> tuple[RunConfig, Dataset, str | None]:
    """The config `run` trains, its dataset, and its folders' label (the profile's own corpus, when it is not the
    embedded one: under `CORPUS/`)."""
    cfg = resolve(recipe, prof, **settings)
    if isinstance(data, Dataset):
        dataset = data
    else:
        dataset = Dataset(data) if data else profile_dataset(prof, log=log)
    if data is None and prof.corpus != "embedded":  # the profile's own corpus: its runs under ROOT/PROFILE/CORPUS/
        label = f"{prof.corpus}/{label or cfg.recipe}"
    return cfg, dataset, label


def finished(recipe: "str | Recipe", profile: str | Profile = "cpu", seeds=None, root: str | Path = "runs",
             budget_s: float | None = None, steps: int | None = None, label: str | None = None,
             sizes: dict | None = None, ema: EMAConfig | None = None, ngram: dict | None = None,
             optim: dict | None = None, data: str | Path | Dataset | None = None, device: str = "auto",
             clock: str | None = None, log=lambda line: None) -> dict[int, dict]:
    """Each seed's newest finished record that `run` (the same arguments) would consider for reuse: config hash,
    data, step limit, device and, for a budget whose steps depend on the machine, the hardware; excluded runs are
    left out. Nothing is trained or replayed, so whether the current code reproduces a record is not checked (`run`
    replays before it reuses): what a driver's judge reads of what its jobs trained (`seeds`: default 0 .. the
    profile's seeds - 1). With `data` None the profile's corpus is prepared if it is not yet."""
    prof = get_profile(profile)
    cfg, dataset, label = _placed(recipe, prof, label, data, log, budget_s=budget_s, ema=ema, ngram=ngram, sizes=sizes,
                                  optim=optim, clock=clock)
    dev = select_device(device)
    out = {}
    for seed in range(prof.seeds) if seeds is None else seeds:
        rec = next((rec for _, rec, why in _considered(root, cfg, seed, label, dataset, steps, dev) if why is None),
                   None)
        if rec is not None:
            out[seed] = rec
    return out


def _considered(root, cfg: RunConfig, seed: int, label: str | None, dataset: Dataset, steps: int | None, dev):
    """Each run folder of this seed and label, newest first, with its record and why `run` would not reuse it
    (`mismatch`, or its exclusion; None: it would, if the current code reproduces it)."""
    hardware = records.hardware(dev.device)
    for run_dir in seed_dirs(root, cfg, seed, label):
        if bench_records.excluded(run_dir):  # said first: an excluded run is often one that was stopped
            yield run_dir, None, f"excluded: {bench_records.excluded(run_dir)}"
            continue
        rec = records.load_record(run_dir) if (run_dir / records.RECORD).is_file() else {"status": "empty"}
        yield run_dir, rec, mismatch(rec, cfg, dataset, steps, dev.backend, hardware)


def run(
    recipe: "str | Recipe",
    profile: str | Profile = "cpu",
    seed: int = 0,
    root: str | Path = "runs",
    budget_s: float | None = None,
    steps: int | None = None,
    label: str | None = None,
    sizes: dict | None = None,
    ema: EMAConfig | None = None,
    ngram: dict | None = None,
    optim: dict | None = None,
    data: str | Path | Dataset | None = None,
    device: str = "auto",
    reuse: bool = True,
    need_checkpoint: bool = False,
    log=print,
    clock: str | None = None,
) -> dict:
    """Train `recipe` (a name, or a `Recipe` such as one derived for a sweep) with `profile` (or return a finished
    record the current code reproduces) and return its run record. A reused record carries `replay` (the check's result, see `frontier.study.replay`); a new one does not.
    `sizes` changes profile fields, `ema` the recipe's EMA settings, `ngram` fields of its n-gram model, `optim`
    fields of its `OptimConfig` (`frontier.recipes.resolve`); give a variant a `label` (`size_label`, or
    `frontier.recipes`' `ema_label`, `ngram_label`, `settings_label`) so that it gets folders of its own.
    `need_checkpoint`: the caller loads the model, so a record without its checkpoint (checkpoints are not
    committed) is trained again. `clock`: "wall" or "reference" (None: the profile's; `frontier.train.clock`)."""
    prof = get_profile(profile)
    cfg, dataset, label = _placed(recipe, prof, label, data, log, budget_s=budget_s, ema=ema, ngram=ngram, sizes=sizes,
                                  optim=optim, clock=clock)
    dev = select_device(device)
    for run_dir, rec, why in _considered(root, cfg, seed, label, dataset, steps, dev) if reuse else []:
        if why is None and need_checkpoint and not (run_dir / CHECKPOINT).is_file():
            why = f"no {CHECKPOINT} (checkpoints are not committed), and this caller loads the model"
        if why is None:
            check = replay.verify(run_dir, rec, dataset, dev, log=log)
            if check["reproduced"]:
                log(f"{run_dir}: reusing (val_bpb {rec['val_bpb']:.4f}; trained by code "
                    f"{str(rec['code'].get('git_sha'))[:8]}, reproduced by {str(check['code'].get('git_sha'))[:8]})")
                return {**rec, "replay": check}
            why = f"not reproduced by the current code ({check['why']})"
        log(f"{run_dir}: not reused: {why}")
    run_dir = new_run_dir(root, cfg, seed, label)
    log(f"{run_dir}: training {cfg.recipe} ({label or 'recipe'}), seed {seed}, "
        f"{f'{steps} steps' if steps else f'budget {cfg.train.budget_s:g}s'} on {dev.backend}")
    rec = train(cfg, dataset, run_dir, dev, seed=seed, steps=steps, progress=False, label=label,
                command=[f"frontier.study.experiments.run({cfg.recipe!r}, profile={prof.name!r}, seed={seed}, "
                         f"budget_s={budget_s}, steps={steps}, label={label!r}, sizes={sizes}"
                         + (f", ema={ema!r}" if ema is not None else "")
                         + (f", ngram={ngram!r}" if ngram else "") + (f", optim={optim!r}" if optim else "")
                         + (f", clock={clock!r})" if clock else ")")])
    log(f"{run_dir}: val_bpb {rec['val_bpb']:.4f}, {rec['steps']} steps, {rec['tokens_per_s'] or 0:,.0f} tok/s")
    return rec


def seeds(recipe: str, profile: str | Profile, n: int | None = None, **kw) -> list[dict]:
    """`run` for seeds 0..n-1 (n defaults to the profile's `seeds`); the keywords (`label`, `sizes`, `ema`, ...)
    go to each `run`."""
    p = get_profile(profile)
    return [run(recipe, p, seed=s, **kw) for s in range(n or p.seeds)]


def code_banner() -> str:
    """Which code runs a chapter, and the rule for the records it quotes."""
    c = records.code_version()
    return (f"code {report.short_code(c)} (source {c['source_sha256']}, training source {c['training_sha256']}); a "
            f"run record written by other code is quoted only if this code reproduces it, or code of the same training "
            f"source did (frontier.study.replay)")


def bench(recipes: list[str], profile: str | Profile, root: str | Path = "runs", **kw) -> dict:
    """`frontier.study.bench.run_bench`, kept as a bench record in `ROOT/PROFILE/bench/` and read back from it."""
    p = get_profile(profile)
    result = run_bench(recipes, profile=p.name, out=Path(root) / p.name / "bench", **kw)
    return bench_records.load_bench_record(result["path"])


def table_bench(rows_list: list[int], dim: int, batch, profile: str | Profile, root: str | Path = "runs",
                **kw) -> dict:
    """`frontier.study.bench_table.run_table_bench` (the bigram table's update), kept in `ROOT/PROFILE/bench/`, read back."""
    p = get_profile(profile)
    result = run_table_bench(rows_list, dim, batch, profile=p.name, out=Path(root) / p.name / "bench", **kw)
    return bench_records.load_bench_record(result["path"])

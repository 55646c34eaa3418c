"""A run's record card: everything a reader needs to check one run, on one page, built from its record alone.

`record_card(rec)` writes Markdown: the score with its steps (and, where the record keeps per-document scores, how
much it depends on the validation documents: `frontier.study.bootstrap`), the one `frontier train` command that
reproduces the run, the recipe and its parents, every setting of the resolved config, the parameters (network,
bigram table, n-gram mixture) and the n-gram tables' memory, what the run read and how fast, the code, data and
hardware, and the loss log. `frontier card RUN_DIR` prints it.

The command is derived from the record's config, not copied from its `command` (a run started from Python has
none): the recipe, profile, seed and budget (or steps), the clock, kernels and device, and `--ngram`, `--optim`
and `--ema-*` for every setting where the config differs from what the recipe resolves to. It is then checked:
resolved again from those flags, the config must be the record's, field for field. A setting no flag reaches
(a model size of a sweep's own, say) is named on the card instead of being left out silently.

What the card derives rather than reads, it says: the split of the parameters into network and tables comes from
building the recorded config on PyTorch's `meta` device (no memory, no weights) with this code, checked against
the recorded total; the epochs read need the training split's size, which newer records keep
(`data.train_tokens`) and older ones leave to the data folder's manifest, where that folder is on this machine.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from ..config import LATER_FIELDS, RunConfig, field_value
from ..data.dataset import MANIFEST, embedded_folder_name
from ..devices import DEVICES
from ..errors import UserError
from ..profiles import get_profile
from .. import records
from ..records import load_record
from .bench_records import EXCLUDED, excluded
from ..recipes import RECIPES, resolve
from .bootstrap import bootstrap_bpb
from .report import fmt, short_code

EMA_FLAGS = {"start_frac": "--ema-start", "half_life_frac": "--ema-half-life", "every": "--ema-every",
             "mix": "--ema-mix"}
LOG_ROWS = 8  # rows of the loss log on the card (evenly spaced, the last step always among them)


# ----------------------------------------------------------------------------- the command that reproduces a run


@dataclass
class Reproduction:
    """The `frontier train` command for a record (`argv`), the config those flags resolve to here, and what
    differs between that config and the record's (`differs`: "section.field: record X, flags Y"; empty when the
    command reproduces it exactly)."""

    argv: list[str]
    config: RunConfig | None
    differs: list[str]

    @property
    def exact(self) -> bool:
        return self.config is not None and not self.differs

    def command(self) -> str:
        return " ".join(_quoted(a) for a in self.argv)


def _quoted(arg: str) -> str:
    return arg if arg and all(c.isalnum() or c in "-_=./:+," for c in arg) else json.dumps(arg)


def _as_flag_value(value) -> str | None:
    """`value` written as a FIELD=VALUE flag reads it back (`frontier.config.field_value`), or None where no text
    does (None, True/False, a tuple, a number written as text)."""
    text = repr(value) if isinstance(value, float) else str(value)
    back = field_value(text)
    return text if type(back) is type(value) and back == value else None


def _changed_fields(ours, base) -> dict:
    """{field: value} of the fields where dataclass instances `ours` and `base` differ and a flag can carry `ours`'s
    value (one it cannot is left to the check that follows)."""
    if ours is None or base is None:
        return {}
    return {f.name: getattr(ours, f.name) for f in dataclasses.fields(ours)
            if getattr(ours, f.name) != getattr(base, f.name) and _as_flag_value(getattr(ours, f.name)) is not None}


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _as_stored(config: dict) -> dict:
    """A config's fields, flat ("model.ngram.slots"), as a JSON record keeps them (a tuple is a list)."""
    return _flat(json.loads(json.dumps(config)))


def _differences(recorded: dict, again: RunConfig, recorded_hash: str | None) -> list[str]:
    """Where the config the flags resolve to (`again`) differs from the record's (`recorded`, as stored): a value, a
    field the record lacks (unless it is one added later, at the default older code ran with: `LATER_FIELDS`), a
    field this code lacks; and, where every field agrees, the config hash."""
    ours, theirs = _as_stored(recorded), _as_stored(again.to_dict())
    later = {f"{section}.{name}": default for section, fields in LATER_FIELDS.items() for name, default in fields.items()}
    out = []
    for k in sorted(set(ours) | set(theirs)):
        if k not in ours:
            if not (k in later and later[k] == theirs[k]):
                out.append(f"{k}: not in the record, flags {theirs[k]!r}")
        elif k not in theirs:
            out.append(f"{k}: record {ours[k]!r}, not in this code's config")
        elif ours[k] != theirs[k]:
            out.append(f"{k}: record {ours[k]!r}, flags {theirs[k]!r}")
    if not out and again.digest() != recorded_hash:
        out.append(f"config hash: record {recorded_hash}, flags {again.digest()}")
    return out


def _data_flag(rec: dict, profile) -> list[str]:
    """--data FOLDER, unless the run trained on the embedded corpus as its profile prepares it (the same folder name
    under the record's Python, wherever the cache lies)."""
    folder = Path(rec["data"]["folder"])
    default = embedded_folder_name(rec["config"]["model"]["vocab_size"], corpus_name=profile.corpus,
                                   max_bytes=profile.corpus_bytes, python=(rec.get("hardware") or {}).get("python"))
    return [] if folder.name == default else ["--data", str(folder)]


def reproduce(rec: dict) -> Reproduction:
    """The one `frontier train` command that trains `rec`'s config again, checked by resolving its flags here."""
    cfg = RunConfig.from_dict(rec["config"])
    t = cfg.train
    argv = ["frontier", "train", "--recipe", cfg.recipe, "--profile", cfg.profile, "--seed", str(rec["seed"])]
    steps = rec.get("max_steps")
    if (rec.get("budget") or {}).get("explicit_steps") is False:
        steps = None  # the steps rule's own steps: the budget bought them
    budget = None if steps else t.budget_s
    argv += ["--steps", str(steps)] if steps else ["--budget", f"{t.budget_s:g}"]
    argv += ["--clock", t.clock, "--kernels", t.kernels]
    kind = (rec.get("device") or {}).get("kind")
    argv += ["--device", kind] if kind in DEVICES else []
    argv += ["--nproc", str(rec["world_size"])] if rec.get("world_size", 1) > 1 else []
    argv += ["--strict"] if rec.get("strict") else []
    if cfg.recipe not in RECIPES:
        return Reproduction(argv, None, [f"recipe {cfg.recipe!r} is not one of this code's recipes"])
    profile = get_profile(cfg.profile)
    argv += _data_flag(rec, profile)
    base = resolve(cfg.recipe, profile, budget_s=budget, vocab_size=cfg.model.vocab_size, kernels=t.kernels,
                   clock=t.clock)
    ngram = _changed_fields(cfg.model.ngram, base.model.ngram)
    optim = _changed_fields(cfg.optim, base.optim)
    ema = _changed_fields(t.ema, base.train.ema)
    argv += [x for k, v in ngram.items() for x in ("--ngram", f"{k}={_as_flag_value(v)}")]
    argv += [x for k, v in optim.items() for x in ("--optim", f"{k}={_as_flag_value(v)}")]
    argv += [x for k, v in ema.items() for x in (EMA_FLAGS[k], _as_flag_value(v))]
    again = resolve(cfg.recipe, profile, budget_s=budget, vocab_size=cfg.model.vocab_size, kernels=t.kernels,
                    clock=t.clock, ngram=ngram or None, optim=optim or None,
                    ema=dataclasses.replace(base.train.ema, **ema) if ema else None)
    return Reproduction(argv, again, _differences(rec["config"], again, rec.get("config_hash")))


# ----------------------------------------------------------------------------- what the card derives


def parameter_parts(rec: dict) -> dict:
    """Trained parameters by part ("network": embeddings, blocks, head; "bigram table"; "n-gram mixture"), counted
    from the recorded config built on the `meta` device with this code (nothing allocated)."""
    from ..train.step import build_model

    cfg = RunConfig.from_dict(rec["config"])
    with torch.device("meta"):
        model = build_model(cfg)
    names = {"bigram": "bigram table", "ngram": "n-gram mixture"}
    parts = {"network": 0, "bigram table": 0, "n-gram mixture": 0}
    for name, p in model.named_parameters():
        if not name.endswith(".sink"):  # the sparse update's gradient sink is not a weight
            parts[names.get(name.split(".")[0], "network")] += p.numel()
    return parts


def artifact_bytes(rec: dict) -> dict:
    """What a run's scored model holds, in bytes, by part: "weights" (every trained parameter, in the dtype it is
    stored in), "n-gram tables" (the counts the mixture reads) and "other buffers"; from the recorded config built on
    the `meta` device with this code, its state dict as `frontier.train.checkpoint` saves it (the gradient sink of
    the sparse update left out: not a weight). An EMA run scores one set of weights (its mix), so it counts once."""
    from ..train.step import build_model

    cfg = RunConfig.from_dict(rec["config"])
    with torch.device("meta"):
        model = build_model(cfg)
    params = {n for n, _ in model.named_parameters()}
    parts = {"weights": 0, "n-gram tables": 0, "other buffers": 0}
    for name, t in model.state_dict().items():
        if name.endswith(".sink"):
            continue
        part = "weights" if name in params else "n-gram tables" if name.startswith("ngram.") else "other buffers"
        parts[part] += t.numel() * t.element_size()
    return parts


def training_split_tokens(rec: dict) -> tuple[int | None, str]:
    """The training split's tokens and where that number came from: the record, or the manifest of its data folder
    (when the folder is on this machine and its manifest hash is the record's); (None, why) otherwise."""
    data = rec.get("data") or {}
    if data.get("train_tokens"):
        return int(data["train_tokens"]), "recorded"
    path = Path(data.get("folder", "")) / MANIFEST
    if not path.is_file():
        return None, "not recorded, and its data folder is not on this machine"
    raw = path.read_bytes()
    if hashlib.sha256(raw).hexdigest()[:16] != data.get("manifest_hash"):
        return None, "not recorded, and the data folder here holds other data (manifest hash differs)"
    return int(json.loads(raw)["train"]["tokens"]), "not recorded: from the data folder's manifest"


# ----------------------------------------------------------------------------- the card


def _settings(d: dict) -> str:
    return " · ".join(f"{k} {'-' if v is None else v}" for k, v in d.items())


def _parents(recipe: str) -> list[str]:
    chain = []
    while recipe in RECIPES:
        r = RECIPES[recipe]
        chain.append(f"`{r.name}`: {r.summary}")
        recipe = r.parent
    return chain


def score_section(rec: dict) -> list[str]:
    steps = f"{rec['steps']:,} steps" if rec.get("steps") is not None else "steps not recorded"
    if rec.get("val_bpb") is None:
        return [f"**val_bpb: none** (status {rec.get('status')}, {steps})"]
    lines = [f"**val_bpb {rec['val_bpb']:.4f} ({steps})**, {rec.get('bpb_convention')} convention: "
             f"{fmt(rec.get('val_bytes'))} bytes, {fmt(rec.get('val_tokens'))} tokens scored; status "
             f"{rec.get('status')}"]
    why = excluded(rec["run_dir"]) if rec.get("run_dir") else None
    if why:
        lines.append(f"**Excluded from comparisons** (`{EXCLUDED}` beside the record): {why}")
    if "val_bpb_ema" in rec:
        lines.append(f"live weights {rec['val_bpb_live']:.4f}, EMA alone {rec['val_bpb_ema']:.4f}")
    if rec.get("val_by_document"):
        b = bootstrap_bpb(rec)
        lines.append(f"validation documents: {b['level']:.0%} of {b['resamples']:,} draws of its {b['documents']} "
                     f"documents (resampled whole, with replacement) score in [{b['low']:.4f}, {b['high']:.4f}] "
                     f"(width {b['high'] - b['low']:.4f}; `frontier.study.bootstrap`, seed {b['seed']})")
    else:
        lines.append("validation documents: no per-document scores in this record (written before they were "
                     "kept), so no interval over documents")
    return lines


def _steps_note(rec: dict) -> str:
    budget = rec.get("budget") or {}
    if budget.get("rule") == "steps" and not budget.get("explicit_steps"):
        return (f"The steps rule bought {fmt(rec.get('steps'))} steps at the step cost it read ({budget.get('source')}): "
                f"the same on any machine while the committed cost table holds that cost.")
    if rec.get("max_steps"):
        return f"This run took {fmt(rec.get('steps'))} steps."
    return f"The steps a budget buys depend on the machine and its clock; this run took {fmt(rec.get('steps'))}."


def reproduce_section(rec: dict) -> list[str]:
    r = reproduce(rec)
    lines = ["```", r.command(), "```"]
    if r.exact:
        lines.append(f"Checked: these flags resolve, with this code, to the record's config, field for field (hash "
                     f"{r.config.digest()}; recorded {rec.get('config_hash')}). " + _steps_note(rec))
    else:
        lines.append("**Not exact**: the flags do not reach this record's config: " + "; ".join(r.differs) + ".")
    if rec.get("command"):
        lines.append(f"Recorded command: `{' '.join(rec['command'])}`")
    return lines


def recipe_section(rec: dict) -> list[str]:
    chain = _parents(rec["recipe"])
    label = f" (label `{rec['label']}`)" if rec.get("label") not in (None, rec["recipe"]) else ""
    if not chain:
        return [f"`{rec['recipe']}`{label}: not one of this code's recipes"]
    return [f"{chain[0]}{label}"] + [f"- parent {c}" for c in chain[1:]]


def settings_section(rec: dict) -> list[str]:
    c = rec["config"]
    model = {k: v for k, v in c["model"].items() if k not in ("bigram", "ngram")}
    lines = [f"- **model**: {_settings(model)}"]
    for part in ("bigram", "ngram"):
        lines.append(f"- **{part}**: {_settings(c['model'][part]) if c['model'].get(part) else 'none'}")
    train = {k: v for k, v in c["train"].items() if k != "ema"}
    lines += [f"- **optimiser and schedule**: {_settings(c['optim'])}",
              f"- **EMA**: {_settings(c['train']['ema']) if c['train'].get('ema') else 'none'}",
              f"- **training and clock**: {_settings(train)}"]
    return lines


def parameters_section(rec: dict) -> list[str]:
    parts = parameter_parts(rec)
    total, recorded = sum(parts.values()), rec.get("params")
    check = ("agrees with the record's total" if total == recorded else
             f"**differs from the record's total {fmt(recorded)}**: this code builds another model from the config")
    lines = [" · ".join(f"{k} {v:,}" for k, v in parts.items()) + f" · total {total:,} (from the config built "
             f"with this code; {check})"]
    art = artifact_bytes(rec)
    lines.append(f"artifact (what is scored, as saved): {sum(art.values()):,} bytes = "
                 + " + ".join(f"{k} {v:,}" for k, v in art.items() if v))
    ngram = rec.get("ngram")
    if ngram and ngram.get("table_mib") is not None:
        folds = f", {ngram['folds']} folds" if "folds" in ngram else ""  # older records do not say
        lines.append(f"n-gram tables: {ngram['table_mib']:.1f} MiB (their buffers when the run was evaluated, "
                     f"recorded){folds}, {fmt(ngram.get('counted_tokens'))} tokens counted")
    return lines


def reading_section(rec: dict) -> list[str]:
    n, source = training_split_tokens(rec)
    epochs = f"{rec['tokens'] / n:.2f} epochs of {n:,} training tokens ({source})" if n and rec.get("tokens") else \
        f"epochs: unknown ({source})"
    tps = rec.get("tokens_per_s")
    clock = rec.get("clock") or rec["config"]["train"].get("clock", "wall")
    lines = [f"{fmt(rec.get('steps'))} steps ({fmt(rec.get('charged_steps'), ',.1f')} charged), {fmt(rec.get('tokens'))} "
             f"tokens seen, {epochs}",
             f"{fmt(tps, ',.0f')} tokens/s over {fmt(rec.get('charged_step_s'), '.1f')} charged s of steps "
             f"({clock} clock; budget {fmt(rec.get('budget_s'), 'g')} s, charged {fmt(rec.get('charged_s'), '.1f')} s, "
             f"uncharged {fmt(rec.get('uncharged_s'), '.1f')} s, wall {fmt(rec.get('wall_s'), '.1f')} s)"]
    probe = rec.get("probe")
    if probe:
        lines.append(f"reference clock: {fmt(rec.get('tokens_per_wall_s'), ',.0f')} tokens per wall second; probe "
                     f"`{probe['name']}` median {probe['probe_s_median'] * 1e3:.1f} ms against "
                     f"{probe['ref_s'] * 1e3:.1f} ms, drift {probe['drift']:.0%}"
                     f"{' (over its limit: steps bought unevenly)' if probe.get('drifted') else ''}")
    return lines


def provenance_section(rec: dict) -> list[str]:
    code, hw, data = rec.get("code") or {}, rec.get("hardware") or {}, rec.get("data") or {}
    share = rec.get("cpu_share")
    lines = [f"code {short_code(code)} (source hash {code.get('source_sha256', '?')})",
             f"data `{data.get('folder')}`, manifest {data.get('manifest_hash')}",
             f"hardware {hw.get('cpu')}, {hw.get('cpu_cores')} cores, {hw.get('torch_threads')} torch threads; "
             f"torch {hw.get('torch')}, Python {hw.get('python')}"
             + (f", {hw['gpu']}" if hw.get("gpu") else "")]
    if share is not None:
        lines.append(f"CPU share {share:.2f} (the process's CPU seconds over wall seconds x threads"
                     f"{'; well below 1: other work shared its cores' if share < 0.8 else ''})")
    return lines


def log_section(rec: dict) -> list[str]:
    curve = rec.get("curve") or {}
    steps = curve.get("step") or []
    if not steps:
        return ["no loss log in this record"]
    picks = sorted({round(i * (len(steps) - 1) / (LOG_ROWS - 1)) for i in range(LOG_ROWS)})
    lines = ["| step | charged s | train loss | lr mult |", "|---|---|---|---|"]
    for i in picks:
        lines.append(f"| {steps[i]:,} | {curve['charged_s'][i]:.1f} | {curve['train_loss'][i]:.4f} | "
                     f"{curve['lr_mult'][i]:.3f} |")
    png = Path(rec.get("run_dir", "")) / "loss.png"
    if png.is_file():
        lines.append(f"\nThe whole curve: `{png}`.")
    return lines


SECTIONS = (("Reproduce", reproduce_section), ("Recipe", recipe_section), ("Settings (the resolved config)",
            settings_section), ("Parameters and tables", parameters_section), ("What it read, how fast",
            reading_section), ("Code, data, hardware", provenance_section), ("Log", log_section))


def record_card(rec: dict) -> str:
    """The record card of a run record (`frontier.records.load_record`) as Markdown."""
    where = f" (`{rec['run_dir']}`)" if rec.get("run_dir") else ""
    lines = [f"## Record card: {rec.get('label') or rec['recipe']} / {rec['profile']}, seed {rec['seed']}{where}", ""]
    if records.superseded(rec):
        lines += [f"**Superseded**: {records.superseded(rec)}.", ""]
    lines += [line + "  " for line in score_section(rec)]
    for title, section in SECTIONS:
        lines += ["", f"### {title}", ""] + section(rec)
    return "\n".join(lines) + "\n"


def write_card(run_dir: str | Path, out: str | Path | None = None) -> str:
    """The record card of the run in `run_dir` (one clear error where it holds no record); written to `out` as
    well where given (a view of the record, rebuilt from it at any time: an older card there is replaced)."""
    card = record_card(load_record(run_dir))
    if out is not None:
        try:
            Path(out).write_text(card)
        except OSError as e:
            raise UserError(f"cannot write the card to {str(out)!r} ({e.strerror})", "pass a writable --out") from None
    return card

"""`frontier` / `python -m frontier`: the command line. It only wires the package's modules together.

Bad input ends in one line, `error: <problem>; <fix>`, and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .data.corpus import CORPORA
from .errors import UserError


def _positive_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not a number") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be positive (got {s}); pass a number of seconds > 0")
    return v


def _positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not a whole number") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive (got {s})")
    return v


def _load_dataset(data: str | None, profile):
    """The dataset folder `data`, whatever its vocabulary; without one, the embedded corpus as `profile` trains on
    (`frontier.data.dataset.profile_dataset`)."""
    from .data.dataset import Dataset, profile_dataset

    return Dataset(data) if data else profile_dataset(profile)


# ----------------------------------------------------------------------------- commands


def cmd_prepare(a) -> int:
    """`--vocab-size`, or the profile's vocabulary; only the profile's default may step down to the largest size
    the text allows (not for a profile that fixes its vocabulary: trn2)."""
    from .data.dataset import prepare
    from .profiles import get_profile

    profile = get_profile(a.profile)
    vocab_size = profile.vocab_size if a.vocab_size is None else a.vocab_size
    shrink = a.vocab_size is None and not profile.fixed_vocab
    from .data.tokenizer import EARLIER_RULE, CharacterRule

    rule = CharacterRule(coverage=EARLIER_RULE.coverage if a.char_coverage is None else a.char_coverage,
                         max_share=EARLIER_RULE.max_share if a.char_share is None else a.char_share)
    ds = prepare(a.out, text=a.text, val_text=a.val_text, val_fraction=a.val_fraction, vocab_size=vocab_size,
                 seed=a.seed, shrink_vocab=shrink, corpus_name=a.corpus,
                 corpus_bytes=None if a.text else profile.corpus_bytes, characters=rule,
                 test_fraction=a.test_fraction, accept_corpus_hash=a.accept_corpus_hash)
    m = ds.manifest
    test = f", test {m['test']['tokens']:,} tokens, test bytes {m['test']['bytes']:,}" if ds.has_test else ""
    print(f"dataset: {ds.folder} (vocabulary {ds.vocab_size}, train {m['train']['tokens']:,} tokens, "
          f"val {m['val']['tokens']:,} tokens, val bytes {m['val']['bytes']:,}{test})")
    return 0


EMA_FLAGS = {"ema_start": "start_frac", "ema_half_life": "half_life_frac", "ema_every": "every", "ema_mix": "mix"}


def _ema_override(a, recipe):
    """The recipe's EMA with the --ema-* flags given applied (None without flags). The flags change the EMA of a
    recipe that has one; for any other recipe they are an error."""
    given = {field: getattr(a, flag) for flag, field in EMA_FLAGS.items() if getattr(a, flag) is not None}
    if not given:
        return None
    if recipe.features.ema is None:
        raise UserError(f"recipe {recipe.name!r} has no EMA of the weights for --ema-* to change",
                        "use a recipe with one (--recipe ema), or drop the --ema-* flags")
    import dataclasses

    return dataclasses.replace(recipe.features.ema, **given)


def _field_changes(items: list[str] | None, flag: str, example: str) -> dict | None:
    """FIELD=VALUE flags (`--ngram`, `--optim`) as config field changes (numbers read as numbers); None without
    any."""
    if not items:
        return None
    from .config import field_value

    out = {}
    for item in items:
        field, eq, value = item.partition("=")
        if not eq or not field:
            raise UserError(f"{flag} {item!r} is not FIELD=VALUE", f"pass e.g. {flag} {example}")
        out[field] = field_value(value)
    return out


def _train_settings(a):
    """What `frontier train`'s arguments `a` choose over the recipe: (recipe, profile, EMA, n-gram changes, optimiser
    changes)."""
    from .profiles import get_profile
    from .recipes import get_recipe

    recipe = get_recipe(a.recipe)
    return (recipe, get_profile(a.profile), _ema_override(a, recipe),
            _field_changes(a.ngram, "--ngram", "slots_short=256"), _field_changes(a.optim, "--optim", "matrix_lr=0.04"))


def train_config(a, vocab_size: int, kernels: str):
    """The config `frontier train` trains for its parsed arguments `a` (a new run, not --resume), on data of
    `vocab_size` tokens, its fused ops run by `kernels`."""
    from .recipes import resolve

    recipe, profile, ema, ngram, optim = _train_settings(a)
    return resolve(recipe, profile, budget_s=a.budget, vocab_size=vocab_size, ema=ema, kernels=kernels, ngram=ngram,
                   optim=optim, clock=a.clock)


def cmd_train(a) -> int:
    """One process, or data parallelism: with N > 1 processes (--nproc, the profile's `nproc`, or a resumed run's
    `world_size`) this process launches torchrun and waits (`frontier.train.distributed.launch`); under torchrun each
    rank trains its share of every batch and rank 0 speaks for the job."""
    from .devices import select_device
    from .train import distributed
    from .train.trainer import train

    label = None
    if a.resume and a.kernels:
        raise UserError("--kernels cannot change a run being resumed", "drop it: --resume continues the run's own "
                        "config")
    if a.resume and any(getattr(a, flag) is not None for flag in EMA_FLAGS):
        raise UserError("--ema-* flags cannot change a run being resumed", "drop them: --resume continues the run's "
                        "own config")
    for flag in ("ngram", "optim"):
        if a.resume and getattr(a, flag):
            raise UserError(f"--{flag} cannot change a run being resumed", "drop it: --resume continues the run's "
                            "own config")
    if a.resume:
        from .config import RunConfig
        from .records import load_record

        rec = load_record(a.resume)
        resumed = RunConfig.from_dict(rec["config"])
        if a.clock and a.clock != resumed.train.clock:
            raise UserError(f"the run in {a.resume!r} ran under the {resumed.train.clock} clock, not --clock {a.clock}",
                            f"drop --clock (or pass --clock {resumed.train.clock}): --resume continues its own clock")
        # a resumed run reads its own data folder, so no profile is needed to find it
        data, profile, nproc = a.data or rec["data"]["folder"], None, a.nproc or rec.get("world_size", 1)
    else:
        if not a.recipe:
            raise UserError("train needs --recipe NAME (or --resume RUN_DIR)", "see `frontier recipes` for the names")
        recipe, profile, ema, ngram, optim = _train_settings(a)  # bad names fail before any data is read
        data, nproc = a.data, a.nproc or profile.nproc

    def config(dataset, kernels):
        return train_config(a, dataset.vocab_size, kernels)

    def default_run_dir(cfg) -> Path:
        return Path("runs") / cfg.profile / f"{cfg.recipe}-s{a.seed}-{time.strftime('%Y%m%d-%H%M%S')}"

    if nproc > 1 and not distributed.launched():  # the launcher: check what can be checked here, then torchrun
        dataset = _load_dataset(data, profile)  # prepared once, before the ranks open it
        cfg = resumed if a.resume else config(dataset, a.kernels or "reference")  # bad input fails here
        distributed.check_batch(cfg.train.batch_size, nproc)
        run_dir = Path(a.resume or a.out or default_run_dir(cfg))
        argv = list(a.argv) + ([] if a.resume or a.out else ["--out", str(run_dir)])
        return distributed.launch(argv, nproc, run_dir)

    device = select_device(a.device)
    dist, device = distributed.init(device, a.dist_timeout)
    if dist.enabled and a.nproc and a.nproc != dist.world_size:
        raise UserError(f"--nproc {a.nproc} but torchrun started {dist.world_size} processes",
                        "drop --nproc under torchrun, or pass torchrun's --nproc-per-node")
    # rank 0 prepares, the others open
    dataset = dist.main_first(lambda: _load_dataset(data, profile))
    if a.resume:
        cfg, run_dir, seed = resumed, Path(a.resume), rec["seed"]
    else:
        if ema is not None:  # a variant of the recipe: its label names the setting
            from .study.experiments import ema_label

            label = ema_label(ema)
        if ngram is not None:
            from .study.experiments import ngram_label

            label = ngram_label(label or recipe.name, ngram)
        if optim is not None:
            from .study.experiments import settings_label

            label = settings_label(label or recipe.name, optim=optim)
        # the model takes the data's vocabulary
        from .kernels import default_for

        cfg, seed = config(dataset, a.kernels or default_for(device)), a.seed
        run_dir = Path(a.out) if a.out else Path(dist.share(str(default_run_dir(cfg))))  # rank 0's folder
    if dist.is_main:
        procs = (f"; {dist.world_size} processes ({dist.backend}), {dist.rank_batch(cfg.train.batch_size)} of the "
                 f"batch's {cfg.train.batch_size} rows each" if dist.enabled else "")
        print(f"train: {cfg.recipe} / {cfg.profile} on {device.backend} ({device.dtype_policy}), kernels "
              f"{cfg.train.kernels}, {cfg.train.clock} clock; "
              f"{'steps ' + str(a.steps) if a.steps else f'budget {cfg.train.budget_s:g}s'}{procs}; run folder "
              f"{run_dir}", flush=True)
    rec = train(cfg, dataset, run_dir, device, seed=seed, steps=a.steps, resume=bool(a.resume), strict=a.strict,
                progress=not a.no_progress, command=sys.argv, label=label, dist=dist)
    if not dist.is_main:  # rank 0 reports for the job
        return 0
    print(f"run folder: {run_dir}")
    print(f"loss curve: {run_dir / 'loss.png'}")
    print(f"steps {rec['steps']}, charged {rec['charged_s']:.1f}s (uncharged {rec['uncharged_s']:.1f}s), "
          f"{rec['tokens_per_s'] or 0:,.0f} tok/s, val_bytes {rec['val_bytes']:,} ({rec['bpb_convention']})")
    if rec.get("probe"):
        pr = rec["probe"]
        print(f"reference clock: {rec['charged_s']:.1f} reference s for {rec['charged_wall_s']:.1f} wall s; probe "
              f"{pr['name']} {pr['probe_s_median'] * 1e3:.1f} ms (reference {pr['ref_s'] * 1e3:.1f} ms), drift "
              f"{pr['drift']:.1%}{' (DRIFTED: over ' + format(pr['drift_limit'], '.0%') + ')' if pr['drifted'] else ''}")
    if "val_bpb_ema" in rec:
        print(f"val_bpb_live={rec['val_bpb_live']:.6f} val_bpb_ema={rec['val_bpb_ema']:.6f} "
              f"(val_bpb: mix {cfg.train.ema.mix:g} of the EMA)")
    print(f"val_bpb={rec['val_bpb']:.6f}")
    return 0


def cmd_eval(a) -> int:
    from . import records
    from .devices import select_device
    from .train.trainer import evaluate_run

    dataset = None
    if a.data:
        from .data.dataset import Dataset

        dataset = Dataset(a.data)
    dev = select_device(a.device)
    score = evaluate_run(a.run, dataset, dev, weights=a.weights, adaptive=a.adaptive)
    rec = records.load_record(a.run)
    print(f"run {a.run}: {rec.get('recipe')} seed {rec.get('seed')}, trained {rec.get('steps'):,} steps"
          + (f", weights {a.weights}" if a.weights else ""))
    if a.record:
        print(f"evaluation record: {write_evaluation_record(a.run, rec, score, dev, a, dataset)}")
    print(f"val_loss={score['val_loss']:.6f} val_tokens={score['val_tokens']} val_bytes={score['val_bytes']} "
          f"({score['bpb_convention']})")
    if a.adaptive:
        print(f"val_bpb_adaptive={score['val_bpb_adaptive']:.6f} val_loss_adaptive={score['val_loss_adaptive']:.6f} "
              "(adaptive: each validation window scored, then counted into the n-gram tables; not the "
              "competition's score)")
    print(f"val_bpb={score['val_bpb']:.6f}")
    return 0


def write_evaluation_record(run_dir, rec: dict, score: dict, dev, a, data=None) -> Path:
    """`frontier eval --record`: the scores beside the run, `RUN_DIR/eval-YYYYmmdd-HHMMSS.json` (a new file each
    time, never over an older one), with the run's steps, the weights and data scored, the code and hardware."""
    from . import records

    stamp = time.strftime("%Y%m%d-%H%M%S")
    path, n = Path(run_dir) / f"eval-{stamp}.json", 2
    while path.exists():
        path, n = Path(run_dir) / f"eval-{stamp}-{n}.json", n + 1
    out = {"kind": "evaluation", "run_dir": str(run_dir), "recipe": rec.get("recipe"), "seed": rec.get("seed"),
           "steps": rec.get("steps"), "config_hash": rec.get("config_hash"), "weights": a.weights or "declared",
           "adaptive": a.adaptive, "data": {"folder": str(data.folder) if data else rec.get("data", {}).get("folder"),
                                            "manifest_hash": data.manifest_hash if data else
                                            rec.get("data", {}).get("manifest_hash")},
           "scores": {k: v for k, v in score.items() if k != "val_by_document"},
           "val_by_document": score.get("val_by_document"), "code": records.code_version(),
           "hardware": records.hardware(dev.device), "device": dev.backend,
           "command": ["frontier", "eval", "--run", str(run_dir), *(["--weights", a.weights] if a.weights else []),
                       *(["--data", str(a.data)] if a.data else []), *(["--adaptive"] if a.adaptive else []),
                       "--record", "--device", a.device],
           "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
    return records.write_json(path, out)


def cmd_card(a) -> int:
    from .study.card import write_card

    print(write_card(a.run, a.out), end="")
    return 0


def cmd_compare(a) -> int:
    from .study.compare import compare, format_comparison

    groups, diffs = compare(a.runs, by=a.by, metric=a.metric, paired=a.paired)
    print(format_comparison(groups, diffs, a.metric))
    return 0


def cmd_replay(a) -> int:
    from .data.dataset import Dataset
    from .devices import select_device
    from .records import load_record
    from .study.replay import verify

    device, failed = select_device(a.device), 0
    for run in a.runs:
        rec = load_record(run)
        check = verify(run, rec, Dataset(a.data or rec["data"]["folder"]), device, log=lambda m: None)
        failed += not check["reproduced"]
        print(f"{run}: {'reproduced' if check['reproduced'] else 'NOT reproduced'}: {check['why']}")
    return 1 if failed else 0


def cmd_recipes(a) -> int:
    from .recipes import BEST, RECIPES

    width = max(len(n) for n in RECIPES) + 2
    for name, r in RECIPES.items():
        parent = f" (= {r.parent} + ...)" if r.parent else ""
        star = "  <- final, best" if name == BEST else ""
        print(f"{name:<{width}}{r.summary}{parent}{star}")
    return 0


def cmd_profiles(a) -> int:
    from .profiles import PROFILES

    width = max(len(n) for n in PROFILES) + 2
    for name, p in PROFILES.items():
        print(f"{name:<{width}}{p.summary}; vocab {p.vocab_size}, {p.n_layer}x{p.n_embd}, "
              f"seq {p.seq_len} x batch {p.batch_size}, budget {p.budget_s:g}s ({p.clock} clock)"
              + (f", {p.nproc} processes" if p.nproc > 1 else ""))
    return 0


def cmd_kernels(a) -> int:
    from .devices import select_device
    from .kernels import status
    from .recipes import resolve

    if a.roofline:
        from .records import default_record_dir, write_bench_record
        from .study.roofline import format_roofline, record_path, roofline

        path = record_path(a.out or default_record_dir(a.roofline), a.roofline, a.layers, a.width)
        result = roofline(a.roofline, n_layer=a.layers, n_embd=a.width)
        result["command"] = ["frontier", *a.argv]
        print(format_roofline(result))
        print(f"roofline record: {write_bench_record(result, path)}")
        return 0
    if a.accuracy:
        from . import records
        from .data.dataset import profile_dataset
        from .kernels.verify import accuracy, format_accuracy
        from .records import default_record_dir, new_record_path, write_bench_record
        from .study.census import verify_trained

        path = new_record_path(a.out or default_record_dir(a.accuracy), "kernel-accuracy", [a.accuracy])
        code = records.code_version()
        result = {"record": "frontier-kernel-accuracy", "profile": a.accuracy,
                  **accuracy(resolve("baseline", a.accuracy), a.tokens),
                  "trained_smoke": verify_trained(profile_dataset("smoke", log=lambda *x: None), steps=150),
                  "code": code, "hardware": records.hardware(), "command": ["frontier", *a.argv]}
        print(format_accuracy(result))
        print(f"accuracy record: {write_bench_record(result, path)}")
        return 0
    if a.census:
        from .records import default_record_dir, new_record_path, write_bench_record
        from .study.census import census, format_census

        result = census(a.census, ops=a.ops.split(",") if a.ops else None)
        result["command"] = sys.argv
        path = new_record_path(a.out or default_record_dir(a.census), "kernel-census", [a.census])
        print(format_census(result))
        print(f"census record: {write_bench_record(result, path)}")
        return 0
    device = select_device(a.device) if a.device != "auto" else None
    rows = status(device)
    last = None
    for r in rows:
        if r["op"] != last:
            print(f"{r['op']}: {r['what']}")
            last = r["op"]
        runs = "can run here" if r["runs_here"] else f"cannot run here: {r['why_not']}"
        print(f"  {r['impl']:<12}{r['source']:<58}{runs}")
    print("attention: torch.nn.functional.scaled_dot_product_attention (not a frontier op; the vendor's kernel on "
          "Neuron)")
    print("choose with `frontier train --kernels reference|interpreter|nki` (default: nki on a Neuron device, "
          "reference elsewhere); each run checks, before training, that its choice runs every op at its shapes")
    from .kernels.verify import format_inventory, inventory
    from .profiles import get_profile

    trn2 = get_profile("trn2")
    print(format_inventory(inventory(resolve("baseline", "trn2"), trn2.batch_size // trn2.nproc)))
    return 0


def cmd_book(a) -> int:
    from .study.book import run_book

    return run_book(profile=a.profile, chapters=a.chapters, out=a.out, in_place=a.in_place)


def cmd_bench(a) -> int:
    from .records import cli_command, default_record_dir
    from .study.bench import format_bench, run_bench

    nproc = None
    if a.nproc is not None:
        try:
            nproc = [int(v) for v in a.nproc.split(",") if v.strip()]
        except ValueError:
            nproc = []
        if not nproc or min(nproc) < 1:
            raise UserError(f"--nproc {a.nproc!r} is not a list of process counts", "pass e.g. --nproc 1,2")
    command = cli_command("bench", a.recipes, {"--profile": a.profile, "--steps": a.steps, "--repeats": a.repeats,
                                                "--device": a.device, "--data": a.data, "--cold": a.cold,
                                                "--no-memory": a.no_memory, "--nproc": a.nproc,
                                                "--kernels": None if a.kernels == "reference" else a.kernels})
    result = run_bench(a.recipes, profile=a.profile, steps=a.steps, repeats=a.repeats, device=a.device, data=a.data,
                       cold=a.cold, memory=not a.no_memory, out=a.out or default_record_dir(a.profile),
                       command=command, nproc=nproc, kernels=a.kernels)
    if result["path"] is None:  # a rank other than 0 of a bench under torchrun: rank 0 reports
        return 0
    print(format_bench(result))
    print(f"bench record: {result['path']}")
    return 0


def cmd_bench_versions(a) -> int:
    from .records import cli_command
    from .study.speed import format_versions, run_bench_versions

    recipes = [r for r in (a.recipes or "").split(",") if r.strip()]
    command = cli_command("bench-versions", a.versions, {"--recipes": a.recipes, "--profile": a.profile,
                                                         "--steps": a.steps, "--repeats": a.repeats,
                                                         "--rounds": a.rounds, "--device": a.device})
    result = run_bench_versions(a.versions, recipes, profile=a.profile, steps=a.steps, repeats=a.repeats,
                                rounds=a.rounds, device=a.device,
                                out=a.out or Path("runs") / a.profile / "bench", command=command)
    print(format_versions(result))
    print(f"bench record: {result['path']}")
    return 0


def cmd_profile_step(a) -> int:
    from .records import cli_command
    from .study.speed import format_profile, run_profile_step

    command = cli_command("profile-step", [a.recipe], {"--profile": a.profile, "--steps": a.steps,
                                                      "--device": a.device, "--kernels": a.kernels})
    result = run_profile_step(a.recipe, profile=a.profile, steps=a.steps, device=a.device, kernels=a.kernels,
                              out=a.out or Path("runs") / a.profile / "bench", command=command)
    print(format_profile(result))
    print(f"bench record: {result['path']}")
    return 0


def cmd_bench_head(a) -> int:
    from .profiles import get_profile
    from .records import cli_command, default_record_dir
    from .study.bench_head import format_head_bench, run_head_bench

    names = [n.strip() for n in a.profiles.split(",") if n.strip()]
    for n in names:
        get_profile(n)
    command = cli_command("bench-head", [], {"--profiles": ",".join(names), "--steps": a.steps,
                                              "--repeats": a.repeats, "--no-memory": a.no_memory})
    result = run_head_bench(names, steps=a.steps, repeats=a.repeats, memory=not a.no_memory, log=lambda *x: None,
                            out=a.out or default_record_dir(names[0]), command=command)
    print(format_head_bench(result))
    print(f"bench record: {result['path']}")
    return 0


def cmd_ngram_orders(a) -> int:
    from .records import cli_command, default_record_dir
    from .study.ngram_orders import format_order_curve, run_order_curve

    command = cli_command("ngram-orders", [], {"--profile": a.profile, "--recipe": a.recipe, "--data": a.data})
    result = run_order_curve(a.profile, a.recipe, data=a.data, out=a.out or default_record_dir(a.profile),
                             command=command)
    print(format_order_curve(result))
    print(f"bench record: {result['path']}")
    return 0


def cmd_bench_ngram(a) -> int:
    from .records import cli_command, default_record_dir
    from .study.bench_ngram import VARIANTS, format_ngram_bench, run_ngram_bench

    variants = VARIANTS if not a.no_reference else ("numpy", "numpy-serial")
    command = cli_command("bench-ngram", [], {"--profile": a.profile, "--recipe": a.recipe,
                                               "--check-bits": a.check_bits, "--repeats": a.repeats,
                                               "--windows-per-call": a.windows_per_call, "--data": a.data,
                                               "--no-reference": a.no_reference})
    result = run_ngram_bench(a.profile, a.recipe, a.check_bits, a.repeats, a.windows_per_call, a.data, variants,
                             log=lambda *x: None, out=a.out or default_record_dir(a.profile), command=command)
    print(format_ngram_bench(result))
    print(f"bench record: {result['path']}")
    return 0


def cmd_clock_check(a) -> int:
    from .records import cli_command, default_record_dir
    from .study.clock_check import check_arguments, format_clock_check, run_clock_check

    conditions = tuple(c.strip() for c in a.conditions.split(",") if c.strip())
    check_arguments(a.recipes, a.profile, conditions, a.budget, a.probe_only)  # before anything is trained
    command = cli_command("clock-check", a.recipes, {"--profile": a.profile, "--seed": a.seed, "--budget": a.budget,
                                                     "--conditions": a.conditions,
                                                     "--spread-repeats": a.spread_repeats,
                                                     "--probe-only": a.probe_only})
    result = run_clock_check(a.recipes, a.profile, a.seed, a.budget, conditions, a.spread_repeats,
                             out=a.out or default_record_dir(a.profile), command=command, probe_only=a.probe_only)
    print(format_clock_check(result))
    print(f"bench record: {result['path']}")
    return 0


def cmd_ladder(a) -> int:
    from .profiles import get_profile
    from .study.ladder import format_ladder, ladder_rows, parse_equal_steps, run_ladder, write_ladder_record

    p = get_profile(a.profile)
    equal_steps = parse_equal_steps(a.equal_steps, a.root, p.name)  # before anything trains
    results = run_ladder(p, a.seeds or p.seeds, root=a.root, corpus=a.corpus)
    rows = ladder_rows(results, equal_steps=equal_steps)
    print(format_ladder(rows))
    path = write_ladder_record(rows, p.name, a.corpus, root=a.root,
                               extra={"command": ["frontier", "ladder", "--profile", p.name, "--corpus", a.corpus,
                                                  "--seeds", str(a.seeds or p.seeds), "--root", a.root]
                                      + [x for item in a.equal_steps for x in ("--equal-steps", item)]})
    print(f"ladder record: {path}")
    return 0


def cmd_ablate(a) -> int:
    from .profiles import get_profile
    from .study.ablation import run_ablation
    from .study.sweep import format_sweep

    p = get_profile(a.profile)
    rec = run_ablation(a.recipe, p, seeds=range(a.seeds or p.seeds), steps=a.steps, removes=a.remove or None,
                       corpus=a.corpus, root=a.root)
    print(format_sweep(rec))
    print(f"sweep record: {rec['path']}")
    return 0


def cmd_bench_table(a) -> int:
    import torch

    from .profiles import get_profile
    from .records import cli_command, default_record_dir
    from .study.bench_table import format_table_bench, run_table_bench

    p = get_profile(a.profile)
    try:
        sizes = [int(v) for v in a.rows_log2.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"--rows-log2 {a.rows_log2!r} is not a list of whole numbers", "pass e.g. --rows-log2 16,18,19") from None
    batch = torch.randint(0, p.vocab_size, (p.batch_size, p.seq_len), generator=torch.Generator().manual_seed(0))
    command = cli_command("bench-table", [], {"--profile": p.name, "--rows-log2": ",".join(map(str, sizes)),
                                              "--steps": a.steps, "--repeats": a.repeats})
    result = run_table_bench([1 << k for k in sizes], p.n_embd, batch, a.steps, a.repeats, profile=p.name,
                             out=a.out or default_record_dir(p.name), command=command)
    print(format_table_bench(result))
    print(f"bench record: {result['path']}")
    return 0


# ----------------------------------------------------------------------------- parser


class _Parser(argparse.ArgumentParser):
    """argparse with bad arguments reported on one line (`error: ...; see --help`), exit status 2."""

    def error(self, message: str):
        self.exit(2, f"error: {self.prog}: {message}; see `{self.prog} --help`\n")


_TABLES_PROFILE = "whose corpus, sequence length and table sizes (default cpu)"


def _bench_parser(sub, name: str, func, help: str, description: str, profile: str | None,
                  steps: tuple[int, str] | None = None, repeats: bool = True):
    """A bench command's parser with the options every bench shares: --profile (`profile`: its help; None: no such
    option), --steps (`steps`: its default and meaning; None: none), --repeats (alternation rounds) and --out (the
    JSON record)."""
    s = sub.add_parser(name, help=help, description=description)
    if profile is not None:
        s.add_argument("--profile", default="cpu", help=profile)
    if steps is not None:
        s.add_argument("--steps", type=_positive_int, default=steps[0], help=f"{steps[1]} (default {steps[0]})")
    if repeats:
        s.add_argument("--repeats", type=_positive_int, default=3, help="alternation rounds (default 3)")
    s.add_argument("--out", metavar="PATH", help="the JSON record: a new .json file, or a folder to add one to "
                                                 "(default runs/bench/PROFILE/, a new timestamped file)")
    s.set_defaults(func=func)
    return s


def build_parser() -> argparse.ArgumentParser:
    from .devices import DEVICES
    from .study.compare import NOISE_RULE

    p = _Parser(prog="frontier", description="Train, evaluate and compare the write-up's recipes.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    s = sub.add_parser("prepare", help="build a dataset folder (tokenizer, shards, manifest)",
                       description="Build a dataset folder from the embedded corpus or your own text. The "
                                   "vocabulary belongs to the data: `train --data` builds the model with it. By "
                                   "default it is the profile's; when the text is too small for that, prepare uses "
                                   "the largest size that works and says so (except for trn2, whose vocabulary is "
                                   "fixed). An explicit --vocab-size the text is too small for is an error naming "
                                   "that largest size. When the text has more distinct characters than half the "
                                   "pieces left after the 256 byte pieces, the rarest are spelled in UTF-8 byte "
                                   "pieces (still lossless; recorded in the manifest).")
    s.add_argument("--out", required=True, help="the dataset folder to create (must not exist or be empty)")
    s.add_argument("--text", action="append", metavar="PATH", help="file or folder of .txt/.md/.jsonl documents (repeatable); default: the embedded corpus")
    s.add_argument("--corpus", default="embedded", choices=CORPORA,
                   help="without --text, which named corpus: embedded (prose about Python, the default), "
                        "stdlib-source (the standard library's own source code) or docstrings (the long docstrings "
                        "of six pinned packages, ~19 MB, with a test split; docs/corpus.md)")
    s.add_argument("--val-text", action="append", metavar="PATH", help="documents for the validation split (repeatable); default: a deterministic split of --text")
    s.add_argument("--val-fraction", type=float, default=0.05, help="share of documents held out when there is no --val-text (default 0.05)")
    s.add_argument("--test-fraction", type=float, metavar="SHARE",
                   help="share of documents held out as a test split, with the near-duplicate audit (default: the "
                        "corpus's: 0.05 for docstrings, none for embedded, stdlib-source and --text)")
    s.add_argument("--accept-corpus-hash", metavar="SHA256",
                   help="accept a pinned corpus (docstrings) read with this content hash instead of the pinned one")
    s.add_argument("--profile", default="cpu", help="whose vocabulary is the default: smoke 512, cpu 1024, gpu and trn2 "
                                                    "8192 (default cpu)")
    s.add_argument("--vocab-size", type=int, help="tokenizer vocabulary, exactly (default: the profile's, stepped down "
                                                  "to the largest the text allows)")
    s.add_argument("--seed", type=int, default=0, help="seed of the document split")
    s.add_argument("--char-coverage", type=float, metavar="SHARE",
                   help="give a piece of its own only to the most frequent characters that cover this share of the "
                        "text (e.g. 0.9995; the rest are spelled in byte pieces; default 1.0: every character)")
    s.add_argument("--char-share", type=float, metavar="SHARE",
                   help="at most this share of the pieces left after the 256 byte pieces go to single characters "
                        "(default 0.5)")
    s.set_defaults(func=cmd_prepare)

    s = sub.add_parser("train", help="train a recipe within a budget", description="Train a recipe; the last line is val_bpb=<value>.")
    s.add_argument("--recipe", help="recipe name (see `frontier recipes`), or 'best'")
    s.add_argument("--profile", default="cpu", help="scale: smoke, cpu, gpu, trn2 (default cpu)")
    s.add_argument("--data", help="dataset folder from `frontier prepare`; the model takes its vocabulary (default: "
                                  "the embedded corpus at the profile's vocabulary)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--budget", type=_positive_float, metavar="SECONDS", help="charged seconds (default: the profile's)")
    g.add_argument("--steps", type=_positive_int, metavar="N", help="train exactly N steps instead of a budget")
    s.add_argument("--device", default="auto", choices=DEVICES)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", metavar="RUN_DIR", help="run folder (default runs/PROFILE/RECIPE-sSEED-TIME)")
    s.add_argument("--resume", metavar="RUN_DIR", help="continue an interrupted run")
    s.add_argument("--strict", action="store_true", help="make silent slow paths errors (e.g. recompiling after warm-up)")
    s.add_argument("--kernels", choices=("reference", "interpreter", "nki"),
                   help="what runs the fused ops (RMSNorm, RoPE, MLP, head + cross-entropy, Newton-Schulz, AdamW): "
                        "PyTorch, the NKI kernels in the interpreter (slow, for verification), or the NKI kernels on "
                        "Neuron (default: nki on a Neuron device, reference elsewhere); see `frontier kernels`")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument("--clock", choices=("wall", "reference"),
                   help="what a charged second is: wall, a second of wall time (the competition's), or reference, a "
                        "second of the reference machine, from a speed probe timed during the run (default: the "
                        "profile's: reference for smoke and cpu, wall for gpu and trn2; recorded in the config)")
    d = s.add_argument_group("data parallelism", "N processes on this machine share every batch: the profile's "
                             "batch_size stays the global batch, each process takes batch_size / N rows of it, "
                             "gradients are averaged (all-reduce), rank 0's clock decides when to stop and rank 0 "
                             "writes the record. It trains the same as one process (the config and its hash do "
                             "not change); the record keeps world_size. Under torchrun (`torchrun "
                             "--nproc-per-node N -m frontier train ...`) the ranks need no flag.")
    d.add_argument("--nproc", type=_positive_int, metavar="N",
                   help="processes: N > 1 launches torchrun (standalone) with N ranks; backend gloo on the CPU, "
                        "nccl on CUDA, neuron on Trainium (default: the profile's, 1 except trn2: 4, one per "
                        "logical NeuronCore of a Trn2 chip; with --resume: the run's)")
    d.add_argument("--dist-timeout", type=_positive_float, metavar="SECONDS",
                   help="how long a collective waits for a rank before the job fails (default 120)")
    s.add_argument("--ngram", action="append", metavar="FIELD=VALUE",
                   help="change a field of the recipe's n-gram model (frontier.config.NGramConfig), e.g. "
                        "--ngram slots_short=256 (repeatable; recorded in the run's config)")
    s.add_argument("--optim", action="append", metavar="FIELD=VALUE",
                   help="change an optimiser setting (frontier.config.OptimConfig), e.g. --optim matrix_lr=0.04 or "
                        "--optim muon_momentum_warmup_frac=0.2 (repeatable; recorded in the run's config)")
    e = s.add_argument_group("weight average (EMA)", "change the EMA of a recipe that has one (ema); any other recipe "
                             "refuses these. They are recorded in the config (and its hash); the run is labelled "
                             "like ema-start0.6-hl0.05. The half-life and start are shares of the run (charged "
                             "seconds / budget, or steps / --steps).")
    e.add_argument("--ema-start", type=float, metavar="FRAC",
                   help="the average starts as a copy of the live weights at the first update at or after this "
                        "share of the run, in [0, 1)")
    e.add_argument("--ema-half-life", type=float, metavar="FRAC", help="half-life of the average, a share of the run")
    e.add_argument("--ema-every", type=_positive_int, metavar="N", help="update the average every N steps")
    e.add_argument("--ema-mix", type=float, metavar="W", help="evaluate W * EMA + (1 - W) * live weights, W in [0, 1]")
    s.set_defaults(func=cmd_train)

    s = sub.add_parser("eval", help="re-score a run's checkpoint", description="Evaluate a run's checkpoint on the validation split.")
    s.add_argument("--run", required=True, metavar="RUN_DIR")
    s.add_argument("--weights", choices=("live", "ema"), help="for a run with an EMA: the live weights (val_bpb_live) "
                                                              "or the EMA alone (val_bpb_ema); default: the weights "
                                                              "its val_bpb scores")
    s.add_argument("--data", help="dataset folder (default: the one the run trained on)")
    s.add_argument("--adaptive", action="store_true",
                   help="also val_bpb_adaptive: score each validation window, then count it into the n-gram tables, "
                        "as a compressor adapts (not the competition's score; the tables are restored afterwards)")
    s.add_argument("--record", action="store_true",
                   help="also keep the scores as an evaluation record beside the run (RUN_DIR/eval-TIME.json: steps, "
                        "weights, data, code, hardware)")
    s.add_argument("--device", default="auto", choices=DEVICES)
    s.set_defaults(func=cmd_eval)

    s = sub.add_parser("card", help="a run's record card: score, reproducing command, settings, sizes, speed",
                       description="Print a run's record card (Markdown): val_bpb with its steps and its interval over "
                       "the validation documents, the one `frontier train` command that reproduces it (checked), the "
                       "recipe and its parents, every setting, parameters and n-gram table memory, tokens, epochs, "
                       "tokens/s, code, data, hardware and the loss log.")
    s.add_argument("run", metavar="RUN_DIR")
    s.add_argument("--out", metavar="FILE", help="also write the card to FILE (rebuilt from the record: replaces it)")
    s.set_defaults(func=cmd_card)

    s = sub.add_parser("compare", help="compare runs with their noise",
                       description="Mean, spread and Welch t-test of runs, grouped by what was run: the same recipe, "
                                   "config hash (budget and every config field), step limit and process count "
                                   "(world_size). Each metric has a "
                                   "direction (lower val_bpb is better, higher tokens_per_s is better); a difference "
                                   "is called better or worse only beyond the noise. --paired pairs the runs of "
                                   "two groups by seed and tests the per-seed differences (paired t-test). "
                                   + NOISE_RULE)
    s.add_argument("runs", nargs="+", metavar="RUN_DIR")
    s.add_argument("--by", default="run", help="how to group (default run: recipe + config hash + step limit + "
                                               "process count; coarser: "
                                               "recipe, config_hash, profile, recipe+budget, label, or a record field)")
    s.add_argument("--metric", default="val_bpb", help="record field to compare, with its direction (default val_bpb, "
                                                       "lower is better; e.g. tokens_per_s, higher is better)")
    s.add_argument("--paired", action="store_true", help="pair each group's runs with the first group's by seed "
                                                         "(each seed once in each group) and use a paired t-test")
    s.set_defaults(func=cmd_compare)

    s = sub.add_parser("replay", help="check that the current code reproduces run records",
                       description="Replay the first steps of each run and compare with its record (frontier/study/replay.py): "
                                   "the rule by which the book reuses a record written by other code. Exit 1 if any "
                                   "is not reproduced.")
    s.add_argument("runs", nargs="+", metavar="RUN_DIR")
    s.add_argument("--data", help="dataset folder (default: the one each run trained on)")
    s.add_argument("--device", default="auto", choices=DEVICES)
    s.set_defaults(func=cmd_replay)

    s = sub.add_parser("book", help="re-run the notebooks with papermill", description="Execute the chapters with a profile's parameters.")
    s.add_argument("--profile", default="smoke")
    s.add_argument("--chapters", help="comma-separated chapter numbers, e.g. 01,02 (default: all)")
    s.add_argument("--out", help="output folder (default build/book/PROFILE)")
    s.add_argument("--in-place", action="store_true", help="refresh the committed notebooks, figures and run records")
    s.set_defaults(func=cmd_book)

    s = _bench_parser(sub, "bench", cmd_bench, "time recipes side by side",
                      "Build each recipe once, warm up, then time them in alternation.",
                      profile="whose shapes and data (default cpu)", steps=(10, "timed steps per round"))
    s.add_argument("recipes", nargs="+", metavar="RECIPE", help="recipes to compare; RECIPE@IMPL runs its fused ops "
                   "by IMPL (reference, interpreter, nki), e.g. baseline baseline@interpreter")
    s.add_argument("--device", default="auto", choices=DEVICES)
    s.add_argument("--data", help="dataset folder (default: the embedded corpus)")
    s.add_argument("--cold", action="store_true", help="compile without Inductor's on-disk caches (time a cold compile)")
    s.add_argument("--no-memory", action="store_true", help="skip peak memory (on the CPU: a fresh process per "
                                                            "recipe, one process only)")
    s.add_argument("--kernels", choices=("reference", "interpreter", "nki"), default="reference",
                   help="the fused ops' implementation for every recipe (default reference; checked before the bench)")
    s.add_argument("--nproc", metavar="N[,N...]", help="process counts to compare, e.g. 1,2: each a job of its own "
                                                       "(N > 1 under torchrun, data-parallel), one after another, "
                                                       "rows side by side (default: this process)")

    s = _bench_parser(sub, "bench-table", cmd_bench_table, "time the bigram table's update: dense, sparse, torch "
                      "SparseAdam", "The bigram table's share of a step (gather, backward, update), dense AdamW "
                      "against the sparse row-wise Adam and torch.optim.SparseAdam, at several table sizes, timed in "
                      "alternation on the CPU.", profile="whose width and batch shape (default cpu)",
                      steps=(5, "table steps per round"))
    s.add_argument("--rows-log2", default="16,18,19", help="table sizes as powers of two (default 16,18,19)")

    s = _bench_parser(sub, "bench-ngram", cmd_bench_ngram, "time the n-gram tables' counting: NumPy against the "
                      "original torch", "Count a profile's train shards into fresh n-gram tables, the NumPy counting "
                      "(what count_tokens runs on the CPU) and the original torch counting in alternation, and check "
                      "that both give the same tables, every buffer.", profile=_TABLES_PROFILE)
    s.add_argument("--recipe", default="ngram", help="whose n-gram config (default ngram)")
    s.add_argument("--check-bits", type=int, default=None, metavar="N",
                   help="fingerprint bits per hashed context, overriding the recipe's (e.g. 31)")
    s.add_argument("--windows-per-call", type=_positive_int, default=128,
                   help="windows per observe call, as count_tokens cuts them (default 128)")
    s.add_argument("--data", metavar="DIR", help="a prepared data folder (default: the profile's embedded corpus)")
    s.add_argument("--no-reference", action="store_true", help="time the NumPy counting alone (no torch reference)")

    s = _bench_parser(sub, "ngram-orders", cmd_ngram_orders, "the n-gram model alone against its longest context, "
                      "per kind of table", "Count the train shards into tables with and without check bits, from "
                      "half or all of the text, for each smoothing, and score the validation split by the longest "
                      "context alone at every length (frontier.study.ngram_orders).", profile=_TABLES_PROFILE,
                      repeats=False)
    s.add_argument("--recipe", default="ngram-only", help="whose n-gram config (default ngram-only)")
    s.add_argument("--data", metavar="DIR", help="a prepared data folder (default: the profile's embedded corpus)")

    s = _bench_parser(sub, "bench-versions", cmd_bench_versions, "time recipes under several versions of the code, "
                      "side by side", "Each VERSION (a checkout folder, or a commit checked out into a temporary "
                      "worktree) runs its own `frontier bench` in a fresh process; executions alternate A B C A B C; "
                      "medians of tokens/s and ratios to the first version (default record folder "
                      "runs/PROFILE/bench/).", profile="whose shapes (default cpu)",
                      steps=(10, "timed steps per bench round"))
    s.add_argument("versions", nargs="+", metavar="VERSION", help="checkout folders or commits, the first the yardstick")
    s.add_argument("--recipes", required=True, help="comma-separated recipes, e.g. baseline,compile,ngram-sized")
    s.add_argument("--rounds", type=_positive_int, default=2, help="alternating executions of each version (default 2)")
    s.add_argument("--device", default="cpu", choices=DEVICES)

    s = _bench_parser(sub, "profile-step", cmd_profile_step, "where a recipe's training step spends its time",
                      "torch.profiler over a few steps after the warm-up: self CPU time by op group (matrix "
                      "multiplies' share first), written to a record (default folder runs/PROFILE/bench/).",
                      profile="whose shapes (default cpu)", steps=(5, "profiled steps"), repeats=False)
    s.add_argument("recipe", metavar="RECIPE")
    s.add_argument("--device", default="cpu", choices=DEVICES)
    s.add_argument("--kernels", choices=("reference", "interpreter", "nki"), default="reference")

    s = _bench_parser(sub, "bench-head", cmd_bench_head, "time and measure the fused head + cross-entropy against "
                      "plain PyTorch", "The fused head + softcap + cross-entropy op (chunked, logits never whole) "
                      "against plain PyTorch (logits made whole, F.cross_entropy) at profiles' shapes, the n-gram bias "
                      "off and on: forward + backward time in alternation and each one's peak memory in a fresh "
                      "process, on the CPU.", profile=None, steps=(1, "forward + backward calls per round"))
    s.add_argument("--profiles", default="cpu,gpu", help="whose shapes (positions = batch x sequence, width, "
                                                          "vocabulary), comma-separated (default cpu,gpu)")
    s.add_argument("--no-memory", action="store_true", help="skip peak memory (a fresh process per variant)")

    s = sub.add_parser("clock-check", help="does the reference clock buy the same steps at 2 threads, 1 thread "
                       "and under load?", description="Train each recipe with the same seed and reference budget at "
                       "2 threads, at 1 thread, and at 2 threads beside a CPU-bound process on one core; record "
                       "steps and wall seconds side by side, the probe's spread and each run's drift (a bench "
                       "record, kind clock-check; the run folders beside it).")
    s.add_argument("recipes", nargs="*", metavar="RECIPE")
    s.add_argument("--probe-only", action="store_true", help="time the probe's spread only (how a profile's "
                   "reference probe time is measured); no recipes")
    s.add_argument("--profile", default="cpu", help="a profile with the reference clock: smoke or cpu (default cpu)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--budget", type=_positive_float, metavar="SECONDS", help="reference seconds (default: the "
                                                                             "profile's)")
    s.add_argument("--conditions", default="2-threads,1-thread,loaded",
                   help="which, comma-separated (default 2-threads,1-thread,loaded)")
    s.add_argument("--spread-repeats", type=_positive_int, default=20, help="timings of the probe for its spread "
                                                                             "(default 20)")
    s.add_argument("--out", metavar="PATH", help="the JSON record: a new .json file, or a folder to add one to "
                                                 "(default runs/bench/PROFILE/)")
    s.set_defaults(func=cmd_clock_check)

    s = sub.add_parser("ladder", help="train (or reuse) every rung of the ladder and tabulate the gains",
                       description="Train or reuse each rung's recipe (baseline, compile, bigram, ngram, ema, final) "
                                   "for seeds 0..N-1 under ROOT/PROFILE/, print val_bpb per rung (with its steps) and "
                                   "judge each rung by the project's rule: a speed rung (compile) by its tokens/s and "
                                   "the steps it buys, a learning rung by its gain over the rung below paired by seed, "
                                   "at equal steps (--equal-steps) and at equal budget; keep the table as a ladder "
                                   "record in ROOT/PROFILE/ladder/.")
    s.add_argument("--profile", default="cpu", help="profile (default cpu)")
    s.add_argument("--corpus", default="embedded", choices=CORPORA,
                   help="the corpus (default embedded; another one is prepared at the profile's vocabulary)")
    s.add_argument("--seeds", type=_positive_int, default=None, help="seeds per rung (default: the profile's)")
    s.add_argument("--root", default="runs", help="where the run folders live (default runs)")
    s.add_argument("--equal-steps", action="append", default=[], metavar="RUNG=SWEEP:VARIANT[:removes]",
                   help="a learning rung's gain at equal steps, read from the newest sweep record SWEEP in "
                        "ROOT/PROFILE/sweeps/: its row VARIANT paired with the sweep's base (`removes`: the variant is "
                        "the base without the rung's change); repeatable, e.g. "
                        "--equal-steps ngram=ablation-final-420:bigram:removes --equal-steps ema=ablation-final-420:ema")
    s.set_defaults(func=cmd_ladder)

    s = sub.add_parser("ablate", help="leave-one-out: a recipe with each of its learning changes removed in turn",
                       description="Train or reuse RECIPE and, for each of its learning changes (bigram table, n-gram "
                                   "mix, weight average, attention gate) and for all of them at once (the baseline), "
                                   "the recipe without it, for seeds 0..N-1, at --steps N (equal steps) or at the "
                                   "profile's budget; print each part's paired gain, p and verdict, and keep the "
                                   "table as a sweep record in ROOT/PROFILE/sweeps/ (ablation-RECIPE-STEPS).")
    s.add_argument("--recipe", default="final", help="the recipe to take apart (default final)")
    s.add_argument("--profile", default="cpu", help="profile (default cpu)")
    s.add_argument("--steps", type=_positive_int, default=None,
                   help="equal steps: train exactly N steps (default: the profile's budget)")
    s.add_argument("--remove", action="append", default=[], metavar="PART",
                   help="only this part (bigram, ngram, average, gate, or all: the baseline); repeatable "
                        "(default: each part, then all)")
    s.add_argument("--corpus", default="embedded", choices=CORPORA,
                   help="the corpus (default embedded; another one is prepared at the profile's vocabulary)")
    s.add_argument("--seeds", type=_positive_int, default=None, help="seeds (default: the profile's)")
    s.add_argument("--root", default="runs", help="where the run folders live (default runs)")
    s.set_defaults(func=cmd_ablate)

    s = sub.add_parser("recipes", help="list the recipes")
    s.set_defaults(func=cmd_recipes)
    s = sub.add_parser("profiles", help="list the profiles")
    s.set_defaults(func=cmd_profiles)
    s = sub.add_parser("kernels", help="list the fused ops, their implementations, and which can run here")
    s.add_argument("--device", default="auto", choices=DEVICES, help="judge the nki implementation for this device")
    s.add_argument("--census", metavar="PROFILE", help="run every kernel once in the interpreter at PROFILE's shapes: "
                   "its counted HBM bytes, DMAs, FLOPs, per-engine work, and its error against the reference "
                   "(a JSON record; trn2's shapes take minutes)")
    s.add_argument("--ops", help="with --census: only these ops (comma-separated)")
    s.add_argument("--accuracy", metavar="PROFILE", help="every NKI kernel in the interpreter against float64, fp32 "
                   "and bf16, at PROFILE's widths, and on a smoke checkpoint's activations after 150 steps (a JSON "
                   "record; trn2's widths take a few minutes)")
    s.add_argument("--tokens", type=_positive_int, default=256, help="with --accuracy: positions at the activation "
                   "kernels (default 256)")
    s.add_argument("--roofline", metavar="PROFILE", help="predict one training step on a NeuronCore-v3 at PROFILE's "
                   "shapes, PyTorch reference against the NKI kernels, by a cost model from counted FLOPs and HBM "
                   "bytes (a JSON record; trn2's shapes take about ten minutes in the interpreter)")
    s.add_argument("--layers", type=_positive_int, help="with --roofline: another depth")
    s.add_argument("--width", type=_positive_int, help="with --roofline: another width (heads of the profile's size)")
    s.add_argument("--out", metavar="PATH", help="with --census or --roofline: the JSON record, a new .json file or a folder "
                   "(default runs/bench/PROFILE/)")
    s.set_defaults(func=cmd_kernels)
    return p


def main(argv: list[str] | None = None) -> int:
    from .train import distributed
    from .train.compile import RecompileError
    from .train.trainer import RunStopped

    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what was asked for (the launcher passes it on)
    quiet = distributed.env_rank() != 0  # under torchrun, rank 0 speaks for the job (the others raise the same)
    try:
        code = args.func(args)
        distributed.close(wait=True)  # every rank meets before any tears down (no-op outside torchrun)
        return code
    except UserError as e:
        if not (quiet and getattr(e, "everywhere", False)):
            print(f"error: {e}" if not quiet else f"error: rank {distributed.env_rank()}: {e}", file=sys.stderr)
        return 2
    except RunStopped as e:
        if not quiet:
            print(f"\n{e.status}: {e}", file=sys.stderr)
        return e.exit_code
    except RecompileError as e:  # --strict: a silent slow path made loud (the run's record says "failed")
        print(f"\nerror: {e}", file=sys.stderr)
        return 4
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a rank whose peer died: one line, not a traceback from inside torch.distributed
        if not (distributed.launched() and distributed.collective_failure(e)):
            raise
        print(f"error: {distributed.explain_failure(e)}", file=sys.stderr)
        return 1
    finally:
        distributed.close()

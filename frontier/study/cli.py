"""The study commands of `frontier`: benches, comparisons, replays, the ladder, the ablations, the book and the run
card, and the kernels command's records (`--census`, `--accuracy`, `--roofline`).

`register(sub)` adds them to the command line's subcommands (`frontier.cli.build_parser` calls it, the one place the
core command line reaches the study tools); each command imports what it runs when it runs.
"""

from __future__ import annotations

import sys

from ..data.corpus import CORPORA
from ..errors import UserError
from ..flags import positive_float, positive_int


def cmd_card(a) -> int:
    from .card import write_card

    print(write_card(a.run, a.out), end="")
    return 0


def cmd_compare(a) -> int:
    from .compare import compare, format_comparison

    groups, diffs = compare(a.runs, by=a.by, metric=a.metric, paired=a.paired, alpha=a.alpha)
    print(format_comparison(groups, diffs, a.metric))
    return 0


def cmd_replay(a) -> int:
    from ..data.dataset import run_dataset
    from ..devices import select_device
    from ..records import load_record
    from .replay import verify

    device, failed = select_device(a.device), 0
    for run in a.runs:
        rec = load_record(run)
        check = verify(run, rec, run_dataset(rec["data"], a.data), device, log=lambda m: None, write=not a.no_write)
        failed += not check["reproduced"]
        print(f"{run}: {'reproduced' if check['reproduced'] else 'NOT reproduced'}: {check['why']}")
    return 1 if failed else 0


def cmd_retrain(a) -> int:
    from .retrain import format_retrain, retrain

    if a.threads:
        import torch

        torch.set_num_threads(a.threads)
    print(format_retrain(retrain(a.run, a.out, data=a.data, device=a.device, record_dir=a.record_dir)))
    return 0


ACCURACY_TOKENS = 256  # `kernels --accuracy`: positions at the activation kernels


def cmd_kernel_record(a) -> int | None:
    """`frontier kernels --roofline/--accuracy/--census PROFILE`: the kernels measured, as a record (None when none
    of those flags is given: the kernels command then lists the ops)."""
    from ..recipes import resolve

    for flag, given, mode in (("--ops", a.ops, "--census"), ("--tokens", a.tokens, "--accuracy"),
                              ("--layers", a.layers, "--roofline"), ("--width", a.width, "--roofline")):
        if given is not None and not getattr(a, mode[2:]):
            raise UserError(f"{flag} chooses what {mode} measures, and {mode} is not given",
                            f"add {mode} PROFILE, or drop {flag}")
    if a.roofline:
        from .bench_records import default_record_dir, write_bench_record
        from .roofline import format_roofline, record_path, roofline

        path = record_path(a.out or default_record_dir(a.roofline), a.roofline, a.layers, a.width)
        result = roofline(a.roofline, n_layer=a.layers, n_embd=a.width)
        result["command"] = ["frontier", *a.argv]
        print(format_roofline(result))
        print(f"roofline record: {write_bench_record(result, path)}")
        return 0
    if a.accuracy:
        from .. import records
        from ..data.dataset import profile_dataset
        from ..kernels.verify import accuracy, format_accuracy
        from .bench_records import default_record_dir, new_record_path, write_bench_record
        from .census import verify_trained

        path = new_record_path(a.out or default_record_dir(a.accuracy), "kernel-accuracy", [a.accuracy])
        code = records.code_version()
        result = {"record": "frontier-kernel-accuracy", "profile": a.accuracy,
                  **accuracy(resolve("baseline", a.accuracy), a.tokens or ACCURACY_TOKENS),
                  "trained_smoke": verify_trained(profile_dataset("smoke", log=lambda *x: None), steps=150),
                  "code": code, "hardware": records.hardware(), "command": ["frontier", *a.argv]}
        print(format_accuracy(result))
        print(f"accuracy record: {write_bench_record(result, path)}")
        return 0
    if a.census:
        from .bench_records import default_record_dir, new_record_path, write_bench_record
        from .census import census, format_census

        result = census(a.census, ops=[o.strip() for o in a.ops.split(",") if o.strip()] if a.ops else None)
        result["command"] = sys.argv
        path = new_record_path(a.out or default_record_dir(a.census), "kernel-census", [a.census])
        print(format_census(result))
        print(f"census record: {write_bench_record(result, path)}")
        return 0
    return None


def cmd_book(a) -> int:
    from .book import run_book

    return run_book(profile=a.profile, chapters=a.chapters, out=a.out, in_place=a.in_place, data=a.data)


def cmd_bench(a) -> int:
    from .bench_records import cli_command, default_record_dir
    from .bench import format_bench, run_bench

    if a.costs:
        return cmd_bench_costs(a)
    if a.write_table:
        raise UserError("--write-table writes the cost table, which only --costs measures", "add --costs")
    if a.sizes or a.batches is not None:
        raise UserError(f"{'--sizes' if a.sizes else '--batches'} chooses what --costs measures", "add --costs")
    if not a.recipes:
        raise UserError("bench needs recipes to compare", "name them, e.g. `frontier bench baseline compile`, or pass "
                        "--costs (every recipe)")

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
    from .bench_records import cli_command, default_record_dir
    from .speed import format_versions, run_bench_versions

    recipes = [r for r in (a.recipes or "").split(",") if r.strip()]
    command = cli_command("bench-versions", a.versions, {"--recipes": a.recipes, "--profile": a.profile,
                                                         "--steps": a.steps, "--repeats": a.repeats,
                                                         "--rounds": a.rounds, "--device": a.device})
    result = run_bench_versions(a.versions, recipes, profile=a.profile, steps=a.steps, repeats=a.repeats,
                                rounds=a.rounds, device=a.device,
                                out=a.out or default_record_dir(a.profile), command=command)
    print(format_versions(result))
    print(f"bench record: {result['path']}")
    return 0


def cmd_profile_step(a) -> int:
    from .bench_records import cli_command, default_record_dir
    from .speed import format_profile, run_profile_step

    command = cli_command("profile-step", [a.recipe], {"--profile": a.profile, "--steps": a.steps,
                                                      "--device": a.device, "--kernels": a.kernels})
    result = run_profile_step(a.recipe, profile=a.profile, steps=a.steps, device=a.device, kernels=a.kernels,
                              out=a.out or default_record_dir(a.profile), command=command)
    print(format_profile(result))
    print(f"bench record: {result['path']}")
    return 0


def cmd_bench_head(a) -> int:
    from ..profiles import get_profile
    from .bench_records import cli_command, default_record_dir
    from .bench_head import format_head_bench, run_head_bench

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
    from .bench_records import cli_command, default_record_dir
    from .ngram_orders import format_order_curve, run_order_curve

    command = cli_command("ngram-orders", [], {"--profile": a.profile, "--recipe": a.recipe, "--data": a.data})
    result = run_order_curve(a.profile, a.recipe, data=a.data, out=a.out or default_record_dir(a.profile),
                             command=command)
    print(format_order_curve(result))
    print(f"bench record: {result['path']}")
    return 0


def cmd_compressors(a) -> int:
    from ..data.dataset import Dataset, profile_dataset
    from .bench_records import cli_command, default_record_dir
    from .compressors import run_compressor_bench

    dataset = Dataset(a.data) if a.data else profile_dataset(a.profile)
    command = cli_command("compressors", [], {"--profile": a.profile, "--data": a.data})
    result = run_compressor_bench(dataset, a.profile, a.out or default_record_dir(a.profile), command=command)
    print(f"bench record: {result['path']}")
    return 0


def cmd_count_model(a) -> int:
    from ..data.dataset import Dataset, profile_dataset
    from .bench_records import cli_command, default_record_dir
    from .count_model import run_count_model_bench, run_counting_bench, run_mix_screen

    orders = _orders(a.orders)
    if a.counting and a.mix:
        raise UserError("--counting times counting alone, and --mix scores a run", "pass one of them")
    dataset = Dataset(a.data) if a.data else profile_dataset(a.profile)
    command = cli_command("count-model", [], {"--profile": a.profile, "--orders": a.orders, "--data": a.data,
                                              "--counting": a.counting, "--mix": a.mix})
    out = a.out or default_record_dir(a.profile)
    if a.counting:
        result = run_counting_bench(dataset, a.profile, out, command=command, order=max(orders))
    elif a.mix:
        result = run_mix_screen(a.mix, dataset, a.profile, out, command=command, order=max(orders))
    else:
        result = run_count_model_bench(dataset, a.profile, out, command=command, orders=orders)
    print(f"bench record: {result['path']}")
    return 0


def _orders(text: str) -> tuple[int, ...]:
    """The --orders of `count-model`: whole numbers >= 1, comma-separated; anything else is one error line."""
    try:
        orders = tuple(sorted({int(v) for v in text.split(",")}))
    except ValueError:
        orders = ()
    if not orders or orders[0] < 1:
        raise UserError(f"--orders {text!r} is not a list of context lengths",
                        "pass whole numbers >= 1 separated by commas, e.g. --orders 4,8,16")
    return orders


def cmd_bench_ngram(a) -> int:
    from .bench_records import cli_command, default_record_dir
    from .bench_ngram import VARIANTS, format_ngram_bench, run_ngram_bench

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
    from .bench_records import cli_command, default_record_dir
    from .clock_check import check_arguments, format_clock_check, run_clock_check

    conditions = tuple(c.strip() for c in a.conditions.split(",") if c.strip())
    check_arguments(a.recipes, a.profile, conditions, a.budget, a.probe_only)  # before anything is trained
    command = cli_command("clock-check", a.recipes, {"--profile": a.profile, "--seed": a.seed, "--budget": a.budget,
                                                     "--conditions": a.conditions,
                                                     "--spread-repeats": a.spread_repeats,
                                                     "--probe-only": a.probe_only, "--clock": a.clock})
    result = run_clock_check(a.recipes, a.profile, a.seed, a.budget, conditions, a.spread_repeats,
                             out=a.out or default_record_dir(a.profile), command=command, probe_only=a.probe_only,
                             clock=a.clock)
    print(format_clock_check(result))
    print(f"bench record: {result['path']}")
    return 0


def cmd_ladder(a) -> int:
    from ..profiles import get_profile
    from .ladder import format_ladder, ladder_rows, parse_equal_steps, run_ladder, write_ladder_record

    p = get_profile(a.profile)
    a.corpus = a.corpus or p.corpus
    equal_steps = parse_equal_steps(a.equal_steps, a.root, p.name)  # before anything trains
    results = run_ladder(p, a.seeds or p.seeds, root=a.root, corpus=a.corpus)
    rows = ladder_rows(results, equal_steps=equal_steps)
    print(format_ladder(rows))
    path = write_ladder_record(rows, p.name, a.corpus, root=a.root,
                               extra={"command": ["frontier", "ladder", "--profile", p.name, "--corpus", a.corpus,
                                                  "--seeds", str(a.seeds or p.seeds), "--root", a.root]
                                      + [x for item in a.equal_steps for x in ("--equal-steps", item)]})
    print(f"ladder record: {path}")
    if a.figure:
        from ..figures import save_figure
        from .ladder import ladder_figure, ladder_title

        save_figure(ladder_figure(rows, title=ladder_title(p, a.corpus, a.seeds or p.seeds)), a.figure)
        print(f"figure: {a.figure}")
    return 0


def cmd_ablate(a) -> int:
    from ..profiles import get_profile
    from .ablation import run_ablation
    from .sweep import format_sweep

    p = get_profile(a.profile)
    a.corpus = a.corpus or p.corpus
    rec = run_ablation(a.recipe, p, seeds=range(a.seeds or p.seeds), steps=a.steps, removes=a.remove or None,
                       corpus=a.corpus, root=a.root)
    print(format_sweep(rec))
    print(f"sweep record: {rec['path']}")
    return 0


def cmd_bench_costs(a) -> int:
    """`frontier bench --costs [RECIPES]`: the steps rule's cost table, measured here beside the committed one."""
    from .bench_records import cli_command, default_record_dir
    from .costs import format_cost_bench, run_cost_bench

    from .experiments import BATCH_SWEEPS, SIZE_SWEEPS

    command = cli_command("bench", a.recipes, {"--costs": True, "--profile": a.profile, "--repeats": a.repeats,
                                               "--device": a.device, "--write-table": a.write_table,
                                               "--sizes": a.sizes})
    if a.batches is not None:
        command += ["--batches", *map(str, a.batches)]
    if any(b < 1 for b in a.batches or []):
        raise UserError(f"--batches {' '.join(map(str, a.batches))}: a batch size is a positive number of sequences",
                        "pass sizes such as --batches 8 32")
    batches = ([dict(batch_size=b) for b in a.batches] or BATCH_SWEEPS.get(a.profile, [])) if a.batches is not None else []
    sizes = (SIZE_SWEEPS.get(a.profile, []) if a.sizes else []) + batches
    if (a.sizes or a.batches is not None) and not sizes:
        raise UserError(f"profile {a.profile!r} has no {'model sizes' if a.sizes else 'batch sizes'} to screen",
                        "run `frontier bench --costs` without --sizes/--batches, or choose the cpu or smoke profile")
    result = run_cost_bench(a.recipes or None, a.profile, repeats=a.repeats, device=a.device,
                            out=a.out or default_record_dir(a.profile), command=command, write=a.write_table,
                            sizes=sizes or None)
    print(format_cost_bench(result))
    print(f"bench record: {result['path']}" + ("; the committed cost table rewritten" if a.write_table else ""))
    return 0


def cmd_bench_table(a) -> int:
    import torch

    from ..profiles import get_profile
    from .bench_records import cli_command, default_record_dir
    from .bench_table import format_table_bench, run_table_bench

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


# ----------------------------------------------------------------------------- parsers

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
        s.add_argument("--steps", type=positive_int, default=steps[0], help=f"{steps[1]} (default {steps[0]})")
    if repeats:
        s.add_argument("--repeats", type=positive_int, default=3, help="alternation rounds (default 3)")
    s.add_argument("--out", metavar="PATH", help="the JSON record: a new .json file, or a folder to add one to "
                                                 "(default runs/bench/PROFILE/, a new timestamped file)")
    s.set_defaults(func=func)
    return s


def register(sub) -> None:
    """Add the study commands to `sub` (the `frontier` parser's subcommands), and the record flags to its `kernels`
    command."""
    from ..devices import DEVICES
    from .compare import ALPHA, KEEP_ALPHA, noise_rule
    from .count_model import ORDERS as COUNT_ORDERS
    from .ladder import latest_ladder_record

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
                                   + noise_rule(latest_ladder_record("cpu", "docstrings")))
    s.add_argument("runs", nargs="+", metavar="RUN_DIR")
    s.add_argument("--by", default="run", help="how to group (default run: recipe + config hash + step limit + "
                                               "process count; coarser: "
                                               "recipe, config_hash, profile, recipe+budget, label, or a record field)")
    s.add_argument("--metric", default="val_bpb", help="record field to compare, with its direction (default val_bpb, "
                                                       "lower is better; e.g. tokens_per_s, higher is better)")
    s.add_argument("--paired", action="store_true", help="pair each group's runs with the first group's by seed "
                                                         "(each seed once in each group) and use a paired t-test")
    s.add_argument("--alpha", type=float, default=ALPHA, help=f"call a difference better or worse at p below this "
                   f"(default {ALPHA:g}; the rule that keeps a learning change asks {KEEP_ALPHA:g} over 5 paired seeds)")
    s.set_defaults(func=cmd_compare)

    s = sub.add_parser("replay", help="check that the current code reproduces run records",
                       description="Replay the first steps of each run and compare with its record (frontier/study/replay.py): "
                                   "the rule by which the book reuses a record written by other code. Exit 1 if any "
                                   "is not reproduced. Each verdict is written beside its record as "
                                   "replay-TRAININGHASH.json, which a later replay or the book reads back instead of "
                                   "replaying again (a verdict is a record: commit it with the run, or pass "
                                   "--no-write).")
    s.add_argument("runs", nargs="+", metavar="RUN_DIR")
    s.add_argument("--data", help="dataset folder (default: the one each run trained on)")
    s.add_argument("--device", default="auto", choices=DEVICES)
    s.add_argument("--no-write", action="store_true", help="check only: leave the run folders as they are")
    s.set_defaults(func=cmd_replay)

    s = sub.add_parser("retrain", help="train a recorded run again, whole, and compare its scores with the record's",
                       description="Train the run in RUN_DIR again from its start with the record's config and seed "
                                   "(a steps-rule budget buys the same steps on any machine), score it, and write "
                                   "both records' steps and scores side by side as a bench record of kind retrain "
                                   "(frontier/study/retrain.py).")
    s.add_argument("run", metavar="RUN_DIR")
    s.add_argument("--out", required=True, help="a new folder for the retrained run (never the record's own)")
    s.add_argument("--data", help="dataset folder (default: the one the run trained on, or its named corpus here)")
    s.add_argument("--threads", type=positive_int, help="torch threads for the run (default: torch's)")
    s.add_argument("--record-dir", help="where the bench record goes (default runs/bench/PROFILE)")
    s.add_argument("--device", default="auto", choices=DEVICES)
    s.set_defaults(func=cmd_retrain)

    s = sub.add_parser("book", help="re-run the notebooks with papermill", description="Execute the chapters with a profile's parameters.")
    s.add_argument("--profile", default="smoke", help="the chapters' scale: smoke (default: the suite's check), cpu "
                   "(the committed book; runs/bench/cpu/book-cpu-*.json say how long it took), gpu, trn2")
    s.add_argument("--chapters", help="comma-separated chapter numbers, e.g. 01,02 (default: all)")
    s.add_argument("--out", help="output folder (default build/book/PROFILE)")
    s.add_argument("--in-place", action="store_true", help="refresh the committed notebooks, figures and run records")
    s.add_argument("--data", metavar="DIR", help="a prepared data folder every chapter trains and scores on (e.g. the "
                                                 "competition's web text for trn2; default: the profile's corpus)")
    s.set_defaults(func=cmd_book)

    s = _bench_parser(sub, "bench", cmd_bench, "time recipes side by side",
                      "Build each recipe once, warm up, then time them in alternation.",
                      profile="whose shapes and data (default cpu)", steps=(10, "timed steps per round"))
    s.add_argument("recipes", nargs="*", metavar="RECIPE", help="recipes to compare; RECIPE@IMPL runs its fused ops "
                   "by IMPL (reference, interpreter, nki), e.g. baseline baseline@interpreter (with --costs: the "
                   "recipes to measure, default every recipe)")
    s.add_argument("--costs", action="store_true", help="measure each recipe's step cost in reference seconds (the "
                   "steps rule's table, frontier.train.cost) and print it beside the committed table")
    s.add_argument("--write-table", action="store_true", help="with --costs: write the measured costs into the "
                   "committed table (frontier/train/costs.json)")
    s.add_argument("--sizes", action="store_true", help="with --costs: each recipe at the model sizes chapter 01 "
                   "screens (frontier.study.experiments.SIZE_SWEEPS) instead of at its own, so that their runs buy steps from "
                   "the table")
    s.add_argument("--batches", nargs="*", type=int, metavar="N", help="with --costs: each recipe at these batch "
                   "sizes (sequences a step; bare: those screened at the budget, frontier.study.experiments.BATCH_SWEEPS), "
                   "so that their runs buy steps from the table")
    s.add_argument("--device", default="auto", choices=DEVICES)
    s.add_argument("--data", help="dataset folder (default: the profile's corpus)")
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

    s = _bench_parser(sub, "bench-ngram", cmd_bench_ngram, "time the n-gram tables' counting: NumPy against "
                      "torch", "Count a profile's train shards into fresh n-gram tables, the NumPy counting "
                      "(what count_tokens runs on the CPU) and the torch counting in alternation, and check "
                      "that both give the same tables, every buffer.", profile=_TABLES_PROFILE)
    s.add_argument("--recipe", default="ngram", help="whose n-gram config (default ngram)")
    s.add_argument("--check-bits", type=int, default=None, metavar="N",
                   help="fingerprint bits per hashed context, overriding the recipe's (e.g. 31)")
    s.add_argument("--windows-per-call", type=positive_int, default=128,
                   help="windows per observe call, as count_tokens cuts them (default 128)")
    s.add_argument("--data", metavar="DIR", help="a prepared data folder (default: the profile's corpus)")
    s.add_argument("--no-reference", action="store_true", help="time the NumPy counting alone (no torch reference)")

    s = _bench_parser(sub, "ngram-orders", cmd_ngram_orders, "the n-gram model alone against its longest context, "
                      "per kind of table", "Count the train shards into tables with and without check bits, from "
                      "half or all of the text, for each smoothing, and score the validation split by the longest "
                      "context alone at every length (frontier.study.ngram_orders).", profile=_TABLES_PROFILE,
                      repeats=False)
    s.add_argument("--recipe", default="ngram-only", help="whose n-gram config (default ngram-only)")
    s.add_argument("--data", metavar="DIR", help="a prepared data folder (default: the profile's corpus)")

    s = _bench_parser(sub, "compressors", cmd_compressors, "classical compressors on the held-out splits, given "
                      "the training text", "xz, PPMd orders 6 and 16 (pyppmd or 7z), bzip2 and gzip: bits per byte "
                      "on validation and test (where the data has one), given the training text as context "
                      "(8 x (compressed(train + split) - compressed(train)) / split bytes), and on the split alone "
                      "(frontier.study.compressors).", profile="whose corpus (default cpu)", repeats=False)
    s.add_argument("--data", metavar="DIR", help="a prepared data folder (default: the profile's corpus)")

    s = _bench_parser(sub, "count-model", cmd_count_model, "the exact count model alone against PPMd, static and "
                      "adaptive", "Count the training split with exact contexts (every length up to the longest "
                      "order + 1, timed: tokens a second), fit the learned escapes on folds of training documents, and "
                      "score validation and test statically (training counts alone) and adaptively (each token scored, "
                      "then counted), beside the newest compressor record of the same data "
                      "(frontier.study.count_model).", profile="whose corpus (default cpu)", repeats=False)
    s.add_argument("--orders", default=",".join(map(str, COUNT_ORDERS)),
                   help=f"comma-separated longest context lengths in tokens (default {','.join(map(str, COUNT_ORDERS))})")
    s.add_argument("--data", metavar="DIR", help="a prepared data folder (default: the profile's corpus)")
    s.add_argument("--counting", action="store_true", help="only time counting the training split (3 rounds, the "
                   "longest order; a record of kind count-model-counting), on a machine with nothing else running")
    s.add_argument("--mix", metavar="RUN_DIR", help="also mix a trained run's network with the count model at the "
                   "longest order, the weight fitted on validation (a screen; a record of kind count-model-mix)")

    s = _bench_parser(sub, "bench-versions", cmd_bench_versions, "time recipes under several versions of the code, "
                      "side by side", "Each VERSION (a checkout folder, or a commit checked out into a temporary "
                      "worktree) runs its own `frontier bench` in a fresh process; executions alternate A B C A B C; "
                      "medians of tokens/s and ratios to the first version (default record folder "
                      "runs/PROFILE/bench/).", profile="whose shapes (default cpu)",
                      steps=(10, "timed steps per bench round"))
    s.add_argument("versions", nargs="+", metavar="VERSION", help="checkout folders or commits, the first the yardstick")
    s.add_argument("--recipes", required=True, help="comma-separated recipes, e.g. baseline,compile,ngram-sized")
    s.add_argument("--rounds", type=positive_int, default=2, help="alternating executions of each version (default 2)")
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
    s.add_argument("--budget", type=positive_float, metavar="SECONDS", help="reference seconds (default: the "
                                                                             "profile's)")
    s.add_argument("--conditions", default="2-threads,1-thread,loaded",
                   help="which, comma-separated (default 2-threads,1-thread,loaded)")
    s.add_argument("--clock", choices=("steps", "reference"), default="steps",
                   help="the budget's rule to check: steps (the profiles' rule, default) or reference")
    s.add_argument("--spread-repeats", type=positive_int, default=20, help="timings of the probe for its spread "
                                                                             "(default 20)")
    s.add_argument("--out", metavar="PATH", help="the JSON record: a new .json file, or a folder to add one to "
                                                 "(default runs/bench/PROFILE/)")
    s.set_defaults(func=cmd_clock_check)

    s = sub.add_parser("ladder", help="train (or reuse) every rung of the ladder and tabulate the gains",
                       description="Train or reuse each rung's recipe (baseline, compile, bigram, ngram, ema, ngram-momentum, ngram-wide, final) "
                                   "for seeds 0..N-1 under ROOT/PROFILE/, print val_bpb per rung (with its steps) and "
                                   "judge each rung by the project's rule: a speed rung (compile) by its tokens/s and "
                                   "the steps it buys, a learning rung by its gain over the rung below paired by seed, "
                                   "at equal steps (--equal-steps, or its own runs where every seed trained the "
                                   "steps of the rung below) and at equal budget; keep the table as a ladder "
                                   "record in ROOT/PROFILE/ladder/.")
    s.add_argument("--profile", default="cpu", help="profile (default cpu)")
    s.add_argument("--corpus", choices=CORPORA,
                   help="the corpus (default: the profile's, `frontier profiles`; prepared at its vocabulary)")
    s.add_argument("--seeds", type=positive_int, default=None, help="seeds per rung (default: the profile's)")
    s.add_argument("--root", default="runs", help="where the run folders live (default runs)")
    s.add_argument("--equal-steps", action="append", default=[], metavar="RUNG=SWEEP:VARIANT[:removes]",
                   help="a learning rung's gain at equal steps, read from the newest sweep record SWEEP in "
                        "ROOT/PROFILE/sweeps/: its row VARIANT paired with the sweep's base (`removes`: the variant is "
                        "the base without the rung's change); repeatable, e.g. "
                        "--equal-steps \"bigram=ablation-ngram-wide-400-docstrings:- bigram table:removes\" (README, \"Reproduce "
                        "a number\")")
    s.add_argument("--figure", metavar="PNG", help="also draw the ladder's figure into PNG (e.g. figures/ladder_cpu.png)")
    s.set_defaults(func=cmd_ladder)

    s = sub.add_parser("ablate", help="leave-one-out: a recipe with each of its learning changes removed in turn",
                       description="Train or reuse RECIPE and, for each of its learning changes (bigram table, n-gram "
                                   "mix, wider n-gram tables, weight average, attention gate) and for all of them at once (the baseline), "
                                   "the recipe without it, for seeds 0..N-1, at --steps N (equal steps) or at the "
                                   "profile's budget; print each part's paired gain, p and verdict, and keep the "
                                   "table as a sweep record in ROOT/PROFILE/sweeps/ (ablation-RECIPE-STEPS or ablation-RECIPE-budget, "
                                   "RECIPE the recipe's own name (final: ngram-wide), and -CORPUS on a corpus other "
                                   "than the embedded one: ablation-ngram-wide-400-docstrings).")
    s.add_argument("--recipe", default="final", help="the recipe to take apart (default final)")
    s.add_argument("--profile", default="cpu", help="profile (default cpu)")
    s.add_argument("--steps", type=positive_int, default=None,
                   help="equal steps: train exactly N steps (default: the profile's budget)")
    s.add_argument("--remove", action="append", default=[], metavar="PART",
                   help="only this part (bigram, ngram, wider, average, gate, or all: the baseline); repeatable "
                        "(default: each part, then all)")
    s.add_argument("--corpus", choices=CORPORA,
                   help="the corpus (default: the profile's, `frontier profiles`; prepared at its vocabulary)")
    s.add_argument("--seeds", type=positive_int, default=None, help="seeds (default: the profile's)")
    s.add_argument("--root", default="runs", help="where the run folders live (default runs)")
    s.set_defaults(func=cmd_ablate)

    s = sub.choices["kernels"]
    s.add_argument("--census", metavar="PROFILE", help="run every kernel once in the interpreter at PROFILE's shapes: "
                   "its counted HBM bytes, DMAs, FLOPs, per-engine work, and its error against the reference "
                   "(a JSON record; trn2's shapes take minutes)")
    s.add_argument("--ops", help="with --census: only these ops (comma-separated)")
    s.add_argument("--accuracy", metavar="PROFILE", help="every NKI kernel in the interpreter against float64, fp32 "
                   "and bf16, at PROFILE's widths, and on a smoke checkpoint's activations after 150 steps (a JSON "
                   "record; trn2's widths take a few minutes)")
    s.add_argument("--tokens", type=positive_int, help="with --accuracy: positions at the activation "
                   f"kernels (default {ACCURACY_TOKENS})")
    s.add_argument("--roofline", metavar="PROFILE", help="predict one training step on a NeuronCore-v3 at PROFILE's "
                   "shapes, PyTorch reference against the NKI kernels, by a cost model from counted FLOPs and HBM "
                   "bytes (a JSON record; trn2's shapes take about ten minutes in the interpreter)")
    s.add_argument("--layers", type=positive_int, help="with --roofline: another depth")
    s.add_argument("--width", type=positive_int, help="with --roofline: another width (heads of the profile's size)")
    s.add_argument("--out", metavar="PATH", help="with --census, --accuracy or --roofline: the JSON record, a new .json file or a folder "
                   "(default runs/bench/PROFILE/)")
    s.set_defaults(kernel_record=cmd_kernel_record)

"""`frontier` / `python -m frontier`: the command line. It only wires the package's modules together.

The core commands live here (prepare, train, eval, recipes, profiles, kernels); the study commands (bench, compare,
replay, ladder, ablate, book, card, ...) register from `frontier.study.cli`, which the core commands never import.
Bad input ends in one line, `error: <problem>; <fix>`, and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .data.corpus import CORPORA
from .errors import UserError
from .flags import (Parser, add_setting_flags, positive_float, positive_int, resumed_run, train_config,
                    train_settings)

# The commands whose parsers need nothing from frontier.study (`kernels` carries the study's record flags).
STUDY_FREE = ("prepare", "train", "eval", "recipes", "profiles")


def _load_dataset(data: str | None, profile):
    """The dataset folder `data`, whatever its vocabulary; without one, the profile's corpus as `profile` trains on
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
                 seed=a.seed, shrink_vocab=shrink, corpus_name=a.corpus or ("embedded" if a.text else profile.corpus),
                 corpus_bytes=None if a.text else profile.corpus_bytes, characters=rule,
                 test_fraction=a.test_fraction, accept_corpus_hash=a.accept_corpus_hash)
    m = ds.manifest
    test = f", test {m['test']['tokens']:,} tokens, test bytes {m['test']['bytes']:,}" if ds.has_test else ""
    print(f"dataset: {ds.folder} (vocabulary {ds.vocab_size}, train {m['train']['tokens']:,} tokens, "
          f"val {m['val']['tokens']:,} tokens, val bytes {m['val']['bytes']:,}{test})")
    return 0


def cmd_train(a) -> int:
    """One process, or data parallelism: with N > 1 processes (--nproc, the profile's `nproc`, or a resumed run's
    `world_size`) this process launches torchrun and waits (`frontier.train.distributed.launch`); under torchrun each
    rank trains its share of every batch and rank 0 speaks for the job."""
    from . import records
    from .data.dataset import run_dataset
    from .devices import select_device
    from .kernels import default_for
    from .recipes import variant_label
    from .train import distributed
    from .train.trainer import resume, train

    if a.resume:
        rec, resumed = resumed_run(a)
        data, profile, nproc = a.data or run_dataset(rec["data"]).folder, None, a.nproc or rec.get("world_size", 1)
    else:
        if not a.recipe:
            raise UserError("train needs --recipe NAME (or --resume RUN_DIR)", "see `frontier recipes` for the names")
        a.profile, a.seed = a.profile or "cpu", 0 if a.seed is None else a.seed  # a new run's defaults
        recipe, profile, ema, ngram, optim = train_settings(a)  # bad names fail before any data is read
        data, nproc = a.data, a.nproc or profile.nproc

    def default_run_dir(cfg) -> Path:
        return Path("build") / "runs" / cfg.profile / f"{cfg.recipe}-s{a.seed}-{time.strftime('%Y%m%d-%H%M%S')}"

    if nproc > 1 and not distributed.launched():  # the launcher: check what can be checked here, then torchrun
        dataset = _load_dataset(data, profile)  # prepared once, before the ranks open it
        cfg = resumed if a.resume else train_config(a, dataset.vocab_size, a.kernels or "reference")  # bad input fails
        distributed.check_batch(cfg.train.batch_size, nproc)
        run_dir = Path(a.resume or a.out or default_run_dir(cfg))
        argv = list(a.argv) + ([] if a.resume or a.out else ["--out", str(run_dir)])
        return distributed.launch(argv, nproc, run_dir)

    device = select_device(a.device)
    dist, device = distributed.init(device, a.dist_timeout)
    if dist.enabled and a.nproc and a.nproc != dist.world_size:
        raise UserError(f"--nproc {a.nproc} but torchrun started {dist.world_size} processes",
                        "drop --nproc under torchrun, or pass torchrun's --nproc-per-node")
    dataset = dist.main_first(lambda: _load_dataset(data, profile))  # rank 0 prepares, the others open
    if a.resume:
        cfg, run_dir, seed, label = resumed, Path(a.resume), rec["seed"], None
    else:
        label = variant_label(recipe.name, ema, ngram, optim)  # a variant of the recipe: its label names the setting
        # the model takes the data's vocabulary
        cfg, seed = train_config(a, dataset.vocab_size, a.kernels or default_for(device)), a.seed
        run_dir = Path(a.out) if a.out else Path(dist.share(str(default_run_dir(cfg))))  # rank 0's folder
    if dist.is_main:
        procs = (f"; {dist.world_size} processes ({dist.backend}), {dist.rank_batch(cfg.train.batch_size)} of the "
                 f"batch's {cfg.train.batch_size} rows each" if dist.enabled else "")
        print(f"train: {cfg.recipe} / {cfg.profile} on {device.backend} ({device.dtype_policy}), kernels "
              f"{cfg.train.kernels}, {cfg.train.clock} clock; "
              f"{'steps ' + str(a.steps) if a.steps else f'budget {cfg.train.budget_s:g}s'}{procs}; run folder "
              f"{run_dir}", flush=True)
    common = dict(strict=a.strict, progress=not a.no_progress, command=sys.argv, dist=dist)
    if a.resume:
        rec = resume(run_dir, dataset, device, **common)
    else:
        rec = train(cfg, dataset, run_dir, device, seed=seed, steps=a.steps, label=label, **common)
    if not dist.is_main:  # rank 0 reports for the job
        return 0
    from .figures import loss_curve_figure, save_figure

    save_figure(loss_curve_figure([rec]), run_dir / "loss.png")
    print(f"run folder: {run_dir}\nloss curve: {run_dir / 'loss.png'}")
    print("\n".join(records.summary_lines(rec)))
    return 0


def cmd_eval(a) -> int:
    from . import records
    from .devices import select_device
    from .train.evaluate import evaluate_run

    dataset = None
    if a.data:
        from .data.dataset import Dataset

        dataset = Dataset(a.data)
    dev = select_device(a.device)
    score = evaluate_run(a.run, dataset, dev, weights=a.weights, adaptive=a.adaptive)
    rec = records.load_record(a.run)
    print(f"run {a.run}: {rec.get('recipe')} seed {rec.get('seed')}, trained {rec.get('steps'):,} steps"
          + (f", weights {a.weights}" if a.weights else "") + (f"\nSUPERSEDED: {records.superseded(rec)}"
                                                                 if records.superseded(rec) else ""))
    if a.record:
        command = ["frontier", "eval", "--run", str(a.run), *(["--weights", a.weights] if a.weights else []),
                   *(["--data", str(a.data)] if a.data else []), *(["--adaptive"] if a.adaptive else []), "--record",
                   "--device", a.device]
        path = records.write_evaluation_record(a.run, rec, score, dev, a.weights, a.adaptive, dataset, command)
        print(f"evaluation record: {path}")
    print(f"val_loss={score['val_loss']:.6f} val_tokens={score['val_tokens']} val_bytes={score['val_bytes']} "
          f"({score['bpb_convention']})")
    if a.adaptive:
        print(f"val_bpb_adaptive={score['val_bpb_adaptive']:.6f} val_loss_adaptive={score['val_loss_adaptive']:.6f} "
              "(adaptive: each validation window scored, then counted into the n-gram tables; not the "
              "competition's score)")
    print(f"val_bpb={score['val_bpb']:.6f}")
    return 0


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
              f"seq {p.seq_len} x batch {p.batch_size}, budget {p.budget_s:g}s ({p.clock} clock), corpus {p.corpus}"
              + (f", {p.nproc} processes" if p.nproc > 1 else ""))
    return 0


def cmd_kernels(a) -> int:
    from .devices import select_device
    from .kernels import status
    from .recipes import resolve

    record = getattr(a, "kernel_record", None)  # --census, --accuracy, --roofline (frontier.study.cli)
    if record is not None and (code := record(a)) is not None:
        return code
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


# ----------------------------------------------------------------------------- parser


def build_parser(study: bool = True) -> argparse.ArgumentParser:
    """The parser of every command; `study` False: the core commands' alone (nothing of frontier.study loaded)."""
    from .devices import DEVICES

    p = Parser(prog="frontier", description="Train, evaluate and compare the write-up's recipes.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)

    s = sub.add_parser("prepare", help="build a dataset folder (tokenizer, shards, manifest)",
                       description="Build a dataset folder from a named corpus (the profile's) or your own text. The "
                                   "vocabulary belongs to the data: `train --data` builds the model with it. By "
                                   "default it is the profile's; when the text is too small for that, prepare uses "
                                   "the largest size that works and says so (except for trn2, whose vocabulary is "
                                   "fixed). An explicit --vocab-size the text is too small for is an error naming "
                                   "that largest size. When the text has more distinct characters than half the "
                                   "pieces left after the 256 byte pieces, the rarest are spelled in UTF-8 byte "
                                   "pieces (still lossless; recorded in the manifest).")
    s.add_argument("--out", required=True, help="the dataset folder to create (must not exist or be empty)")
    s.add_argument("--text", action="append", metavar="PATH", help="file or folder of .txt/.md/.jsonl documents (repeatable); default: the profile's named corpus")
    s.add_argument("--corpus", choices=CORPORA,
                   help="without --text, the named corpus (default: the profile's, `frontier profiles`): docstrings "
                        "(six pinned packages' long docstrings, ~19 MB, a test split; docs/corpus.md), embedded (the "
                        "standard library's prose, ~1.7 MB) or stdlib-source (its source code)")
    s.add_argument("--val-text", action="append", metavar="PATH", help="documents for the validation split (repeatable); default: a deterministic split of --text")
    s.add_argument("--val-fraction", type=float, default=0.05, help="share of documents held out when there is no --val-text (default 0.05)")
    s.add_argument("--test-fraction", type=float, metavar="SHARE",
                   help="share of documents held out as a test split, with the near-duplicate audit (default: the "
                        "corpus's: 0.05 for docstrings, none for embedded, stdlib-source and --text)")
    s.add_argument("--accept-corpus-hash", metavar="SHA256", help="accept a pinned corpus (docstrings) read with this "
                   "content hash instead of the pinned one")
    s.add_argument("--profile", default="cpu", help="whose corpus and vocabulary are the defaults (default cpu)")
    s.add_argument("--vocab-size", type=int, help="tokenizer vocabulary, exactly (default: the profile's, stepped down "
                                                  "to the largest the text allows)")
    s.add_argument("--seed", type=int, default=0, help="seed of the document split")
    s.add_argument("--char-coverage", type=float, metavar="SHARE",
                   help="give a piece of its own only to the most frequent characters that cover this share of the "
                        "text (e.g. 0.9995; the rest are spelled in byte pieces; default 1.0: every character)")
    s.add_argument("--char-share", type=float, metavar="SHARE", help="at most this share of the pieces left after the "
                   "256 byte pieces go to single characters (default 0.5)")
    s.set_defaults(func=cmd_prepare)

    s = sub.add_parser("train", help="train a recipe within a budget", description="Train a recipe; the last line is val_bpb=<value>.")
    s.add_argument("--recipe", help="recipe name (see `frontier recipes`; 'final' is the ladder's last rung), or 'best'")
    s.add_argument("--profile", help="scale: smoke, cpu, gpu, trn2 (default cpu)")
    s.add_argument("--data", help="dataset folder from `frontier prepare`; the model takes its vocabulary (default: "
                                  "the profile's corpus at its vocabulary: `frontier profiles`)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--budget", type=positive_float, metavar="SECONDS", help="charged seconds (default: the profile's)")
    g.add_argument("--steps", type=positive_int, metavar="N", help="train exactly N steps instead of a budget")
    s.add_argument("--device", default="auto", choices=DEVICES)
    s.add_argument("--seed", type=int, help="the run's seed (default 0)")
    s.add_argument("--out", metavar="RUN_DIR", help="run folder (default build/runs/PROFILE/RECIPE-sSEED-TIME, "
                   "which git ignores; a record to commit goes under runs/: runs/README.md)")
    s.add_argument("--resume", metavar="RUN_DIR", help="continue an interrupted run in its own folder, with its own "
                   "recipe, profile, seed, steps or budget, and settings (--data, --device, --nproc may point "
                   "elsewhere)")
    s.add_argument("--strict", action="store_true", help="make silent slow paths errors (e.g. recompiling after warm-up)")
    s.add_argument("--kernels", choices=("reference", "interpreter", "nki"),
                   help="what runs the fused ops (RMSNorm, RoPE, MLP, head + cross-entropy, Newton-Schulz, AdamW): "
                        "PyTorch, the NKI kernels in the interpreter (slow, for verification), or the NKI kernels on "
                        "Neuron (default: nki on a Neuron device, reference elsewhere); see `frontier kernels`")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument("--clock", choices=("wall", "reference", "steps"),
                   help="how the budget is charged: wall, seconds of wall time (the competition's); reference, "
                        "seconds of the reference machine, from a speed probe timed during the run; steps, the budget "
                        "bought as steps before the run at the recipe's committed step cost (default: the profile's: "
                        "steps for smoke and cpu, wall for gpu and trn2; recorded in the config)")
    d = s.add_argument_group("data parallelism", "N processes on this machine share every batch: the profile's "
                             "batch_size stays the global batch, each process takes batch_size / N rows of it, "
                             "gradients are averaged (all-reduce), rank 0's clock decides when to stop and rank 0 "
                             "writes the record. It trains the same as one process (the config and its hash do "
                             "not change); the record keeps world_size. Under torchrun (`torchrun "
                             "--nproc-per-node N -m frontier train ...`) the ranks need no flag.")
    d.add_argument("--nproc", type=positive_int, metavar="N",
                   help="processes: N > 1 launches torchrun (standalone) with N ranks; backend gloo on the CPU, "
                        "nccl on CUDA, neuron on Trainium (default: the profile's, 1 except trn2: 4, one per "
                        "logical NeuronCore of a Trn2 chip; with --resume: the run's)")
    d.add_argument("--dist-timeout", type=positive_float, metavar="SECONDS",
                   help="how long a collective waits for a rank before the job fails (default 120)")
    add_setting_flags(s)
    s.set_defaults(func=cmd_train)

    s = sub.add_parser("eval", help="re-score a run's checkpoint", description="Evaluate a run's checkpoint on the validation split.")
    s.add_argument("--run", required=True, metavar="RUN_DIR")
    s.add_argument("--weights", choices=("live", "ema"), help="for a run with an EMA: the live weights (val_bpb_live) "
                   "or the EMA alone (val_bpb_ema); default: the weights its val_bpb scores")
    s.add_argument("--data", help="dataset folder (default: the one the run trained on)")
    s.add_argument("--adaptive", action="store_true",
                   help="also val_bpb_adaptive: score each validation window, then count it into the n-gram tables, "
                        "as a compressor adapts (not the competition's score; the tables are restored afterwards)")
    s.add_argument("--record", action="store_true",
                   help="also keep the scores as an evaluation record beside the run (RUN_DIR/eval-TIME.json: steps, "
                        "weights, data, code, hardware)")
    s.add_argument("--device", default="auto", choices=DEVICES)
    s.set_defaults(func=cmd_eval)

    sub.add_parser("recipes", help="list the recipes").set_defaults(func=cmd_recipes)
    sub.add_parser("profiles", help="list the profiles").set_defaults(func=cmd_profiles)
    s = sub.add_parser("kernels", help="list the fused ops, their implementations, and which can run here")
    s.add_argument("--device", default="auto", choices=DEVICES, help="judge the nki implementation for this device")
    s.set_defaults(func=cmd_kernels)
    if study:  # the one place the command line reaches the study tools
        from .study.cli import register

        register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    from .train import distributed
    from .train.compile import RecompileError
    from .train.run import RunStopped

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(study=not argv or argv[0] not in STUDY_FREE).parse_args(argv)
    args.argv = argv  # what was asked for (the launcher passes it on)
    quiet = distributed.env_rank() != 0  # under torchrun, rank 0 speaks for the job (the others raise the same)
    try:
        code = args.func(args)
        distributed.close(wait=True)  # every rank meets before any tears down (no-op outside torchrun)
        return code
    except UserError as e:
        if not (quiet and getattr(e, "everywhere", False)):
            msg = e.for_cli()
            print(f"error: {msg}" if not quiet else f"error: rank {distributed.env_rank()}: {msg}", file=sys.stderr)
        return 2
    except RunStopped as e:
        if not quiet:
            print(f"\n{e.status}: {e.for_cli()}", file=sys.stderr)
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
